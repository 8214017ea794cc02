"""What a person can do about a failed model call: the advice a row's error starts with.

Two failures are the user's to fix, and their raw text hid the fix. A missing key came back
from litellm as a retried ``InternalServerError 500`` whose "Missing credentials. Please pass
an `api_key`, ..." was cut before the variable's name, and ended with the advice to run the
same command again. A server that is down came back as "Connection error." after five
attempts, naming no URL. Here:

- `missing_keys` finds a missing API key before any call, from litellm's own table
  (``litellm.validate_environment``, which reads the environment and sends nothing);
- `advise` turns a failed call's exception into one line that names the variable to set or
  the URL that did not answer and what to check, and says whether a rerun can help.

The advice comes first in the row's error, so a cut keeps it. Only the names of variables
are read here, never a key's value; a provider's own text is shown redacted.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import dataclass

from experiments.llm.answer_env import env_base, provider
from experiments.llm.backends import is_local
from experiments.llm.calls import _litellm, _no_key, _status, _without_traceback
from experiments.secrets import redact, safe_url, secret_name

KEY_SUFFIX = "_API_KEY"
STEM_ALIASES: dict[str, tuple[str, ...]] = {"huggingface": ("HF",)}
"""Prefixes of a provider's credentials that are not its name (Hugging Face's HF_TOKEN)."""
DETAIL_CHARS = 200
"""The most of a provider's own text kept after the advice."""


@dataclass(frozen=True)
class Advice:
    """One line saying what to do, and whether running the same command again can help."""

    text: str
    retryable: bool


def missing_keys(model: str, api_base: str | None = None) -> tuple[str, ...]:
    """The API-key variables `model` needs and the environment lacks, before any call; ()
    when none is missing or litellm cannot tell.

    Only plain API keys (``*_API_KEY``) are checked: a provider that signs in another way
    (Azure's AD token, AWS roles, Vertex's credentials file) or whose missing variable is a
    server (Ollama's base, which has a default) is left to the call. So is a provider with
    a credential already set under another name than litellm's table says (TOGETHER_API_KEY
    for TOGETHERAI_API_KEY, HF_TOKEN, OPENAI_ADMIN_KEY): the call, not this guess, decides.
    """
    if is_local(model) or "/" not in model:
        return ()
    litellm = _litellm()
    try:
        found = litellm.validate_environment(model=model, api_base=api_base)
        names = tuple(str(n) for n in found.get("missing_keys") or ())
    except Exception:  # a provider litellm's table does not know: the call will tell
        return ()
    if not names or not all(n.endswith(KEY_SUFFIX) for n in names):
        return ()
    if _other_credential(model, names):
        return ()
    return names


def _other_credential(model: str, names: tuple[str, ...]) -> bool:
    """Whether a credential-named variable of the provider is set (under a name litellm's
    table does not list)."""
    name = provider(model)
    stems = {n[: -len(KEY_SUFFIX)] for n in names}
    stems |= {re.sub(r"[^A-Za-z0-9]", "", name).upper(), name.split("_")[0].upper()}
    stems |= set(STEM_ALIASES.get(name, ()))
    prefixes = tuple(s + "_" for s in stems)
    # the names first: only a credential's value is looked up, never every variable's
    return any(
        secret_name(var) and var.upper().startswith(prefixes) and os.environ.get(var)
        for var in list(os.environ)
    )


def key_advice(model: str, names: tuple[str, ...], api_base: str | None = None) -> str:
    """The line for a missing key: which variable to set, for which model."""
    where = f"; any value if the server at {safe_url(api_base)} needs none" if api_base else ""
    return (
        f"missing API key: set {' or '.join(names)} (the key for {model}{where}) in the environment"
    )


# litellm's prefix to a provider's text: "litellm.AuthenticationError: AuthenticationError:
# OpenAIException - "
_LITELLM_PREFIX = re.compile(r"^litellm\.\w+: (?:\w+: )?(?:\w+Exception - )?")
_VARIABLE = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:API_KEY|AUTH_TOKEN)\b")


def advise(
    exc: BaseException, model: str, api_base: str | None = None, attempts: int = 1
) -> Advice | None:
    """What to do about `exc`, a model call's last error, or None when there is nothing more
    to say than its own text."""
    if is_local(model):
        return None
    message = _without_traceback(redact(str(exc)))
    if _no_key(exc):
        names = missing_keys(model, api_base) or tuple(dict.fromkeys(_VARIABLE.findall(message)))
        if names:
            return Advice(key_advice(model, names, api_base), retryable=False)
        return Advice(
            f"missing API key: set the key for {model} (its provider's *_API_KEY variable) "
            "in the environment",
            retryable=False,
        )
    if _refused_key(exc):
        names = tuple(dict.fromkeys(_VARIABLE.findall(message)))
        which = " or ".join(names) if names else f"the key for {model}"
        said = _LITELLM_PREFIX.sub("", message)[:DETAIL_CHARS]
        return Advice(
            f"the provider refused the API key (401 Unauthorized): check {which} in the "
            f"environment ({said})",
            retryable=False,
        )
    if _connection_failed(exc):
        return Advice(_connection_advice(exc, model, api_base, attempts), retryable=True)
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions it was raised from or during, outermost first."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen) and len(seen) < 20:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _refused_key(exc: BaseException) -> bool:
    from litellm.exceptions import AuthenticationError

    return isinstance(exc, AuthenticationError) or _status(exc) == 401


def _connection_failed(exc: BaseException) -> bool:
    """No connection to the server: refused, unknown host, or no answer to the connect.
    (litellm wraps these as a 500; the cause chain keeps httpx's error.)"""
    import socket

    import httpx
    import openai

    for e in _chain(exc):
        if isinstance(e, httpx.ConnectError | httpx.ConnectTimeout | ConnectionRefusedError):
            return True
        if isinstance(e, socket.gaierror):
            return True
        if isinstance(e, openai.APIConnectionError) and not isinstance(e, openai.APITimeoutError):
            return True
    return False


def _request_url(exc: BaseException) -> str | None:
    """The URL the failed request went to, from httpx's error in the cause chain (litellm's
    own exception carries a placeholder request)."""
    import httpx

    for e in reversed(_chain(exc)):
        if isinstance(e, httpx.RequestError):
            try:
                return str(e.request.url)
            except RuntimeError:  # an error raised outside a request
                continue
    return None


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else url


_LOOPBACK = ("localhost", "127.0.0.1", "::1", "0.0.0.0")


def _connection_advice(exc: BaseException, model: str, api_base: str | None, attempts: int) -> str:
    """Which URL did not answer, and what to check: the model's server (an api_base, a base
    URL from the environment, a server on this machine) or the network (a hosted API)."""
    base = api_base or env_base(model)
    sent = _request_url(exc)
    if base is None and sent is None:
        try:
            base = _litellm().get_llm_provider(model)[3]
        except Exception:  # an unknown provider: name it instead
            base = None
    url = (base or (_origin(sent) if sent else "")).rstrip("/")
    cause = _without_traceback(redact(str(_chain(exc)[-1])))[:DETAIL_CHARS]
    tried = f"after {attempts} attempt(s)"
    if not url:
        return (
            f"could not connect to {provider(model)}'s server for {model} {tried}: check the "
            f"network connection and any proxy settings (HTTPS_PROXY) ({cause})"
        )
    shown = safe_url(url)
    host = urllib.parse.urlsplit(url).hostname or ""
    if api_base or env_base(model) or host in _LOOPBACK:
        # an OpenAI-compatible server lists its models; another (Ollama's) answers its root
        check = f"{shown}/models" if shown.endswith("/v1") else shown
        return (
            f"could not connect to {shown} (the server for {model}) {tried}: is the server "
            f"running? Check with `curl {check}` ({cause})"
        )
    return (
        f"could not connect to {shown} ({model}) {tried}: check the network connection and "
        f"any proxy settings (HTTPS_PROXY) ({cause})"
    )
