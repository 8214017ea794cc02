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
  are not treated as secrets. Nor are numbers, unless the name is a credential's
  (`credential_name`: ``DB_PASSWORD=20261202`` is one, ``DEFAULT_MAX_TOKENS=4096`` a setting).
- anything shaped like a provider's API key (`KEY_SHAPES`: OpenAI's and Anthropic's ``sk-`` +
  14 or more characters, Groq's ``gsk_``, Hugging Face's ``hf_``, xAI's ``xai-``,
  Replicate's ``r8_``, Google's ``AIza``, GitHub's ``ghp_``/``github_pat_``), cut after the
  first 6 characters past its prefix;
- a bearer token (``Bearer`` then a token with a digit, or of 24 or more characters: legal
  text's "Bearer bonds" is neither) and the credentials of an ``Authorization``,
  ``X-Api-Key`` or ``Api-Key`` header, as ``***``;
- the password of any URL (``scheme://user:***@host``) and the values of its query and
  fragment parameters (``?token=***``), as `safe_url` does;
- the value of every parameter with a secret's name (`secret_name`: ``api_key``, ``key``,
  ``token``, ``access_token``, ``password``, ``secret``, ``sig``, ...) wherever it stands,
  with or without a URL around it: a server that answers 404 echoes its bare path
  (``/v1?api_key=...``), which has no ``//`` to be found by. Both ``name=value`` (also
  percent-encoded, ``name%3Dvalue``) and JSON's ``"name": "value"`` are masked.

Two more views of the same secrets, for what is stored rather than shown:

- `find_secret` says where the first secret in a text is (for files kept byte for byte,
  which cannot be redacted and so must be refused: `experiments.imports.secret_scan` decodes
  archives and JSON before asking it);
- `redact_reply` hides what `find_secret` finds, each as ``***``, in a model's reply before
  it is recorded, and says how many it hid; other URL query values stay (a reply is data).
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD)", re.IGNORECASE)
# a URL, with or without its scheme, up to the next whitespace or double quote or angle
# bracket (a password may hold any other character, so the URL is cut no earlier)
_URL = re.compile(r'(?:\b[A-Za-z][A-Za-z0-9+.\-]*:)?//[^\s"<>]+')
KEY_SHAPES = (
    r"sk-[A-Za-z0-9_\-]{14,}",  # OpenAI, Anthropic (sk-ant-), DeepSeek, OpenRouter (sk-or-)
    r"gsk_[A-Za-z0-9]{20,}",  # Groq
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"xai-[A-Za-z0-9]{20,}",  # xAI
    r"r8_[A-Za-z0-9]{20,}",  # Replicate
    r"AIza[0-9A-Za-z_\-]{30,}",  # Google
    r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{30,}",
)
"""The shapes of API keys recognised without their environment variable (a key of another
machine, quoted in a file or echoed by a server)."""
_KEY = re.compile(r"\b(?:" + "|".join(KEY_SHAPES) + ")")
# what a text must hold for `_KEY` to match, searched first (a stored log has megabytes)
_KEY_PREFIXES = (
    "sk-",
    "gsk_",
    "hf_",
    "xai-",
    "r8_",
    "AIza",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
)
_KEY_PREFIX = re.compile(r"AIza|[A-Za-z0-9]+?[-_]")
# a credential: 8 or more token characters, with a digit or 24 or more of them (so prose,
# "Bearer bonds", is not one)
_CREDENTIAL = r"(?=[A-Za-z0-9._~+/\-]*[0-9]|[A-Za-z0-9._~+/\-]{24})[A-Za-z0-9._~+/\-]{8,}=*"
_BEARER = re.compile(rf"\b(Bearer\s+)({_CREDENTIAL})")
_AUTH_HEADER = re.compile(
    rf"(?i)\b((?:proxy-)?authorization|x-api-key|api-key|x-goog-api-key)"
    rf"(\s*:\s*(?:(?:bearer|basic|token|digest)\s+)?)({_CREDENTIAL})"
)
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


@functools.lru_cache(maxsize=4096)
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


CREDENTIAL_WORDS = frozenset(
    {
        "apikey", "secret", "password", "passwd", "pwd", "credential", "credentials",
        "authorization", "cookie", "jwt", "bearer", "accesstoken", "authtoken", "secretkey",
        "privatekey", "accesskey",
    }
)  # fmt: skip
"""Words that make a field's name a credential's on their own (`credential_name`)."""
KEY_QUALIFIERS = frozenset(
    {
        "api", "secret", "access", "private", "client", "auth", "account", "subscription",
        "service", "master", "signing", "license", "refresh", "id", "bearer", "session", "hf",
        "github", "gh", "oauth", "personal", "security", "app", "user", "admin", "bot",
    }
)  # fmt: skip
"""Words that make a following ``key`` or ``token`` a credential's (``api_key``,
``access_token``, ``HF_TOKEN``): a bare ``key`` or ``token`` is not one in a stored file,
where ``"token": "Yes"`` is a log-probability's token and ``call_key`` a cache key."""
_QUERY_WORDS = frozenset({"key", "token", "sig", "signature", "auth", "code"})
"""Bare names that are a credential's in a URL's query (``?key=...``, ``&sig=...``)."""
# a reference to a secret or a marker where one was: [REDACTED], <your-key>, ${OPENAI_API_KEY},
# {{ env.X }}, os.environ/X, xxxx, ...
_HIDDEN = re.compile(
    r"(?i)\**|<[^<>]*>|\[[A-Za-z _-]*\]|\(?redacted\)?|x{3,}|\.{3}|…|"
    r"\$\{?[A-Za-z_][A-Za-z0-9_.]*\}?|\{\{.*\}\}|os\.environ/[A-Za-z0-9_]+"
)


@functools.lru_cache(maxsize=4096)
def credential_name(name: str) -> bool:
    """Whether a field or parameter named `name` holds a credential, for what is stored
    (`find_secret`, `redact_reply`): stricter than `secret_name`, which masks shown text,
    where hiding too much costs nothing."""
    words = [
        w.lower()
        for part in re.split(r"[_.\-\s]+", name)
        for w in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", part)
    ]
    if any(w in CREDENTIAL_WORDS or w.endswith(("secret", "password", "apikey")) for w in words):
        return True
    pairs = itertools.pairwise(words)
    return any(b in ("key", "token") and a in KEY_QUALIFIERS for a, b in pairs)


def secret_value(value: str) -> bool:
    """Whether `value`, given to a credential's field, is one: not hidden or a reference
    (`***`, ``[REDACTED]``, ``${OPENAI_API_KEY}``), not a flag or a number, at least
    `MIN_SECRET_LENGTH` characters and one token (a sentence is not a credential)."""
    if _HIDDEN.fullmatch(value) or len(value) < MIN_SECRET_LENGTH:
        return False
    if value.strip().lower() in _NOT_SECRETS or any(c.isspace() for c in value):
        return False
    try:
        float(value)
    except ValueError:
        return True
    return False


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
        and (credential_name(name) or not _number(value))
    ]
    # Longest first: a value that contains another one is replaced whole.
    return sorted(found, key=lambda nv: (-len(nv[1]), nv[0]))


def _number(value: str) -> bool:
    """Whether `value` reads as a number: under a name that is not a credential's
    (``DEFAULT_MAX_TOKENS=4096``) it is a setting, and hiding it would hide every 4096 in a
    reply (a numeric answer, scored as ``***``) and refuse imports that mention it."""
    try:
        float(value)
    except ValueError:
        return False
    return True


def _replace_all(pattern: re.Pattern[str], replacement: str, text: str) -> str:
    """`pattern` replaced by `replacement` taken literally (no backslash escapes)."""
    return pattern.sub(lambda _match: replacement, text)


def _cut_key(key: str) -> str:
    """A key of a known shape cut after its prefix and 6 characters: ``sk-abcdef…``."""
    prefix = _KEY_PREFIX.match(key)
    return key[: (prefix.end() if prefix else 0) + 6] + "…"


@dataclass(frozen=True)
class Secret:
    """Where a secret stands in a text, and what it is (never the secret itself)."""

    start: int
    end: int
    what: str  # "the value of OPENAI_API_KEY", "an API key (sk-…)", "a bearer token", ...


def _env_pattern(value: str) -> re.Pattern[str]:
    """A secret environment value, anywhere if 8 characters or more, else as a token."""
    if len(value) >= _ANYWHERE_LENGTH:
        return re.compile(re.escape(value))
    return re.compile(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])")


def _found(text: str) -> Iterator[Iterator[Secret]]:
    """For each kind of secret, its occurrences in `text`, in order (lazily: `find_secret`
    takes the first of each, `redact_reply` all)."""
    for name, value in _secrets():
        if value in text:
            yield _env_values(text, name, value)
    # each kind searched only where its telltale is (a substring test costs little)
    if any(prefix in text for prefix in _KEY_PREFIXES):
        yield (
            Secret(m.start(), m.end(), f"an API key ({_KEY_PREFIX.match(m[0])[0]}…)")  # type: ignore[index]
            for m in _KEY.finditer(text)
        )
    if "Bearer" in text:
        yield (Secret(m.start(2), m.end(2), "a bearer token") for m in _BEARER.finditer(text))
    lowered = text.lower()
    if "authorization" in lowered or "api-key" in lowered:
        yield (
            Secret(m.start(3), m.end(3), f"the credentials of an {m[1]} header")
            for m in _AUTH_HEADER.finditer(text)
        )
    if "@" in text and "//" in text:
        yield _url_passwords(text)
    yield (
        Secret(m.start(3), m.end(3), f"a value of the parameter {m[1]!r}")
        for m in _PARAM.finditer(text)
        if _credential_param(text, m) and secret_value(m[3])
    )
    yield (
        Secret(m.start(5), m.end(5), f"a value of the field {m[3]!r}")
        for m in _QUOTED_PARAM.finditer(text)
        if credential_name(m[3]) and secret_value(m[5])
    )


def _env_values(text: str, name: str, value: str) -> Iterator[Secret]:
    for m in _env_pattern(value).finditer(text):
        yield Secret(m.start(), m.end(), f"the value of {name}")


def _credential_param(text: str, m: re.Match[str]) -> bool:
    """A credential's ``name=value``: by its name, or a bare ``key=``/``token=``... in a URL's
    query (after '?' or '&')."""
    if credential_name(m[1]):
        return True
    return m.start() > 0 and text[m.start() - 1] in "?&" and m[1].lower() in _QUERY_WORDS


def _url_passwords(text: str) -> Iterator[Secret]:
    """The password of each URL's ``user:password@`` (to the last '@', as `safe_url`)."""
    for m in _URL.finditer(text):
        _scheme, slashes, rest = m[0].partition("//")
        userinfo, at, _host = rest.rpartition("@")
        user, colon, password = userinfo.partition(":")
        if at and colon and not re.search(r"[/?#]", user) and not _HIDDEN.fullmatch(password):
            start = m.start() + len(_scheme) + len(slashes) + len(user) + 1
            yield Secret(start, start + len(password), "a password in a URL")


def find_secret(text: str) -> Secret | None:
    """The first secret in `text` that `redact_reply` would hide, else None: for files kept
    byte for byte, which cannot be redacted and so must be refused."""
    firsts = [s for s in (next(kind, None) for kind in _found(text)) if s is not None]
    return min(firsts, key=lambda s: (s.start, -s.end)) if firsts else None


def redact_reply(text: str) -> tuple[str, int]:
    """`text` (a model's reply) with every secret `find_secret` finds replaced by ``***``,
    and how many were hidden. Nothing else changes: a reply is scored and shown as data."""
    spans = sorted((s.start, s.end) for kind in _found(text) for s in kind)
    if not spans:
        return text, 0
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    parts, last = [], 0
    for start, end in merged:
        parts += [text[last:start], "***"]
        last = end
    return "".join(parts) + text[last:], len(merged)


def redact(text: str) -> str:
    """`text` with secret environment values, keys of known shapes, bearer tokens, URL
    passwords and the values of secret-named parameters hidden."""
    for name, value in _secrets():
        if value in text:
            text = _replace_all(_env_pattern(value), f"<{name}>", text)
    text = _KEY.sub(lambda m: _cut_key(m[0]), text)
    text = _BEARER.sub(r"\1***", text)
    text = _AUTH_HEADER.sub(r"\1\2***", text)
    return safe_url(text)
