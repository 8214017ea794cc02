"""What a model server says it serves: part of the model's identity, where the server says it.

The same URL may serve other weights tomorrow (a vLLM or llama.cpp server restarted with
another model under the same name): its answers are another model's. `reported(model, base)`
asks the server once per process (``GET {base}/models``, the OpenAI-compatible list vLLM,
llama.cpp's server and others answer) and keeps the stable fields of the entry it serves
`model` as: its id, root and parent (the weights' path or name), owner, context length and
llama.cpp's ``meta`` (parameters, vocabulary, file size). Fields that change on every reply
(``created``, permissions) are left out, so the same server gives the same identity.

A server that does not say (no such endpoint, a key needed, down, an answer of another shape,
several models and none named so) adds nothing: the identity is then the one it always was.
No key is sent, and nothing from the reply is shown in an error. Only a served model is
asked (an api_base, or a base URL from the environment): a hosted provider's list is every
model it has, and changes with them.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from experiments.llm.answer_env import env_base
from experiments.llm.backends import is_local
from experiments.llm.calls import _ssl_settings

STABLE_FIELDS = ("id", "root", "parent", "owned_by", "max_model_len", "meta")
TIMEOUT = 5.0
"""Seconds to wait for the list: a server that does not answer in time tells nothing."""
MAX_BYTES = 4 * 1024 * 1024
"""A longer list is not read (a gateway listing every model it routes to)."""

_REPORTED: dict[tuple[str, str], dict[str, Any] | None] = {}
_LOCK = threading.Lock()


def served_base(model: str, api_base: str | None) -> str | None:
    """The server a served model's calls go to: `api_base`, else the base URL its provider's
    variables name (`answer_env.env_base`); None for a local model or a hosted API."""
    if is_local(model) or "/" not in model:
        return None
    return api_base or env_base(model)


def reported(model: str, api_base: str | None) -> dict[str, Any] | None:
    """The stable fields of what the server of `model` says it serves, or None if it does
    not say (once per server and model in this process)."""
    base = served_base(model, api_base)
    if not base:
        return None
    key = (base, model)
    with _LOCK:
        if key in _REPORTED:
            return _REPORTED[key]
    found = _ask(base, model.split("/", 1)[1])
    with _LOCK:
        _REPORTED[key] = found
    return found


def forget() -> None:
    """Ask again next time (a test restarting a server under the same URL)."""
    with _LOCK:
        _REPORTED.clear()


def _ask(base: str, name: str) -> dict[str, Any] | None:
    import httpx

    verify, cert = _ssl_settings()
    url = base.rstrip("/") + "/models"
    try:
        with (
            httpx.Client(verify=verify, cert=cert, timeout=TIMEOUT) as client,
            client.stream("GET", url, headers={"Accept": "application/json"}) as reply,
        ):
            if reply.status_code != 200:
                return None
            body = b""
            for chunk in reply.iter_bytes():
                body += chunk
                if len(body) > MAX_BYTES:
                    return None
        data = json.loads(body).get("data")
    except Exception:  # the server does not say: nothing to add
        return None
    return _entry(data, name)


def _entry(data: Any, name: str) -> dict[str, Any] | None:
    """The stable fields of the entry serving `name`: the one with that id, else the only
    one (llama.cpp's server answers any name with its one model)."""
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, dict)]
    named = [e for e in entries if e.get("id") == name]
    entry = named[0] if named else (entries[0] if len(entries) == 1 else None)
    if entry is None:
        return None
    kept = {k: entry[k] for k in STABLE_FIELDS if entry.get(k) is not None}
    return kept or None
