"""Secrets never leave the process: redaction of keys and of passwords inside URLs.

Every text the workbench records or prints that may carry a secret (provider error
messages, tracking and storage URLs, database errors) passes through `redact` or `safe_url`.

What `redact` hides:

- the value of every environment variable whose name contains KEY, TOKEN, SECRET, PASSWORD
  or PASSWD, wherever it appears, once it is at least 3 characters long. Values of 8
  characters or more are replaced anywhere in the text; shorter ones only where they stand
  as a token (not inside a longer run of letters and digits), so a 3-character key hides
  ``key=abc`` and ``Bearer abc`` but leaves "abcdef" alone. Values that are plainly flags
  (``true``, ``false``, ``yes``, ``no``, ``on``, ``off``, ``none``, ``null``) are not
  secrets and are left alone (``TOKENIZERS_PARALLELISM=false`` would otherwise redact every
  "false"). Values shorter than 3 characters cannot be told apart from ordinary text and
  are not treated as secrets.
- anything that looks like an OpenAI-style key (``sk-`` + 14 or more characters), cut after
  its first 6 characters;
- the password of any URL (``scheme://user:***@host``) and the values of its query and
  fragment parameters (``?token=***``), as `safe_url` does;
- the value of every parameter with a secret's name (`secret_name`: ``api_key``, ``key``,
  ``token``, ``access_token``, ``password``, ``secret``, ``sig``, ...) wherever it stands,
  with or without a URL around it: a server that answers 404 echoes its bare path
  (``/v1?api_key=...``), which has no ``//`` to be found by. Both ``name=value`` (also
  percent-encoded, ``name%3Dvalue``) and JSON's ``"name": "value"`` are masked.
"""

from __future__ import annotations

import os
import re
import urllib.parse

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD)", re.IGNORECASE)
# a URL, with or without its scheme, up to the next whitespace or double quote or angle
# bracket (a password may hold any other character, so the URL is cut no earlier)
_URL = re.compile(r'(?:\b[A-Za-z][A-Za-z0-9+.\-]*:)?//[^\s"<>]+')
_SK_KEY = re.compile(r"\b(sk-[A-Za-z0-9_\-]{6})[A-Za-z0-9_\-]{8,}")
_NOT_SECRETS = frozenset({"true", "false", "yes", "no", "on", "off", "none", "null"})
MIN_SECRET_LENGTH = 3
_ANYWHERE_LENGTH = 8  # from this length on a value is replaced even inside a longer word

SECRET_WORDS = frozenset(
    {
        "key", "apikey", "token", "secret", "password", "passwd", "pwd", "pass", "sig",
        "signature", "auth", "authorization", "credential", "credentials", "session",
        "sessionid", "jwt", "bearer", "cookie",
    }
)  # fmt: skip
"""Words that make a parameter's name a secret's: ``api_key`` (api, key), ``access_token``,
``X-Amz-Signature``, ``client_secret``; camelCase names (``apiKey``, ``accessToken``) count
by their ending."""
_SECRET_ENDINGS = ("key", "token", "secret", "password", "passwd", "signature")
# name=value or name%3Dvalue: the name a run of name characters (not preceded by one), the
# value up to the next '&', '#', quote, angle bracket or whitespace (a little more than the
# value, never less)
_PARAM = re.compile(r"(?<![A-Za-z0-9_.\-])([A-Za-z0-9_.\-]+)(=|%3[Dd])([^&#\s\"'<>]+)")
# "name": "value" (JSON, also escaped inside a JSON string) or 'name': 'value' (a Python
# dict's repr, as litellm shows a provider's error body): the value up to its closing quote
_QUOTED_PARAM = re.compile(r"""(\\?(["'])([A-Za-z0-9_.\-]+)\\?\2\s*:\s*\\?(["']))(.*?)(?=\\?\4)""")


# already hidden: empty, ***, or `redact`'s <ENV_NAME>
_PLACEHOLDER = re.compile(r"|\*\*\*|<[A-Za-z0-9_]+>")


def secret_name(name: str) -> bool:
    """Whether a parameter named `name` holds a secret (`SECRET_WORDS`)."""
    lowered = name.lower()
    words = [w for w in re.split(r"[_.\-]+", lowered) if w]
    return any(w in SECRET_WORDS or w.endswith(_SECRET_ENDINGS) for w in words)


def mask_secret_params(text: str) -> str:
    """`text` with the value of every secret-named parameter (`secret_name`) as ``***``,
    wherever it stands: ``/v1?api_key=abc&n=1`` -> ``/v1?api_key=***&n=1``."""

    def param(m: re.Match[str]) -> str:
        name, eq, value = m.group(1), m.group(2), m.group(3)
        if not secret_name(name) or _PLACEHOLDER.fullmatch(value):
            return m.group(0)
        return f"{name}{eq}***"

    def quoted_param(m: re.Match[str]) -> str:
        if not secret_name(m.group(3)) or _PLACEHOLDER.fullmatch(m.group(5)):
            return m.group(0)
        return f"{m.group(1)}***"

    return _QUOTED_PARAM.sub(quoted_param, _PARAM.sub(param, text))


def _mask_params(text: str) -> str:
    """`a=1&token=x&flag` -> `a=***&token=***&***`: keys kept, every value (and every bare
    parameter, which may be a key on its own) hidden."""
    parts = []
    for part in text.split("&"):
        key, eq, value = part.partition("=")
        parts.append(f"{key}={'***' if value else ''}" if eq else ("***" if part else ""))
    return "&".join(parts)


def _safe_one(url: str) -> str:
    """One URL without its password and query/fragment values (see `safe_url`)."""
    scheme, slashes, rest = url.partition("//")
    # The userinfo runs to the *last* '@': passwords hold '@', '/', '?' and '#' unescaped.
    userinfo, at, hostpart = rest.rpartition("@")
    if at and (":" in userinfo or not re.search(r"[/?#]", userinfo)):
        user, colon, _password = userinfo.partition(":")
        # without a colon the userinfo is often the secret itself (https://TOKEN@host)
        rest = f"{user}:***@{hostpart}" if colon else f"***@{hostpart}"
    try:
        parts = urllib.parse.urlsplit(f"{scheme}{slashes}{rest}")
    except ValueError:  # e.g. an unclosed IPv6 bracket: hide everything after the host
        return f"{scheme}{slashes}***"
    query = _mask_params(parts.query) if parts.query else ""
    fragment = _mask_params(parts.fragment) if "=" in parts.fragment else parts.fragment
    base, _, _ = f"{scheme}{slashes}{rest}".partition("?")
    base = base.partition("#")[0]
    return base + (f"?{query}" if "?" in rest else "") + (f"#{fragment}" if "#" in rest else "")


def safe_url(url: str) -> str:
    """`url` (or every URL in a text) without its secrets: the password of its userinfo and
    the values of its query and fragment parameters (keys kept), e.g.
    ``postgresql+psycopg2://user:***@host/db?sslkey=***``. Secret-named parameters outside a
    URL (a bare path ``/v1?api_key=...``) are masked too (`mask_secret_params`)."""
    return mask_secret_params(_URL.sub(lambda m: _safe_one(m.group(0)), url))


def _secrets() -> list[tuple[str, str]]:
    """(name, value) of secret-named environment variables, longest value first."""
    found = [
        (name, value)
        for name, value in os.environ.items()
        if _SECRET_NAME.search(name)
        and len(value) >= MIN_SECRET_LENGTH
        and value.strip().lower() not in _NOT_SECRETS
    ]
    # Longest first: a value that contains another one is replaced whole.
    return sorted(found, key=lambda nv: (-len(nv[1]), nv[0]))


def _replace_all(pattern: re.Pattern[str], replacement: str, text: str) -> str:
    """`pattern` replaced by `replacement` taken literally (no backslash escapes)."""
    return pattern.sub(lambda _match: replacement, text)


def secret_in(text: str) -> str | None:
    """What `redact` would call a certain secret in `text` (a secret environment variable's
    name, or "an sk- key"), else None: for files kept byte for byte, which cannot be
    redacted and so must be refused."""
    for name, value in _secrets():
        if len(value) >= _ANYWHERE_LENGTH and value in text:
            return name
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])", text):
            return name
    return "an sk- key" if _SK_KEY.search(text) else None


def redact(text: str) -> str:
    """`text` with secret environment values, sk- keys, URL passwords and the values of
    secret-named parameters hidden."""
    for name, value in _secrets():
        if value not in text:
            continue
        if len(value) >= _ANYWHERE_LENGTH:
            text = text.replace(value, f"<{name}>")
        else:
            pattern = re.compile(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])")
            text = _replace_all(pattern, f"<{name}>", text)
    text = _SK_KEY.sub(r"\1…", text)
    return safe_url(text)
