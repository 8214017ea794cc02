"""Which backend serves a model: one table from a model name and api_base, no prefix tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

LOCAL_PROVIDER = "local"
DEFAULT_MODEL = "local/smollm2"

Backend = Literal["local", "served", "api"]
"""``local``: a bundled GGUF run in-process by llama.cpp (``local/<name>``); ``served``: a
model behind an OpenAI-compatible server the user names (``api_base``); ``api``: a hosted
provider reached through litellm with no api_base."""


def is_local(model: str) -> bool:
    """Whether `model` names a bundled model run in-process (``local/<name>``)."""
    return model.startswith(LOCAL_PROVIDER + "/")


def local_name(model: str) -> str:
    """The bundled model's own name in ``local/<name>`` (its GGUF's key)."""
    return model.split("/", 1)[1]


_BACKENDS: tuple[tuple[Backend, Callable[[str, str | None], bool]], ...] = (
    ("local", lambda model, api_base: is_local(model)),  # local wins over an api_base
    ("served", lambda model, api_base: bool(api_base)),
    ("api", lambda model, api_base: True),
)


def backend_for(model: str, api_base: str | None) -> Backend:
    """The backend that serves `model` (with `api_base`, if any): the first row that fits."""
    return next(name for name, fits in _BACKENDS if fits(model, api_base))
