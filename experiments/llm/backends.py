"""Which backend serves a model: one table from a model name and api_base, no prefix tests.

Each row names its class by import path, imported only when the row is chosen: a local
model's class (llama.cpp in this process) never imports litellm, the gateway of the served
and API models. Every question about a backend (how it generates, its identity, its price,
whether its cached rows can be trusted, preloading, its default scoring) is a method of its
class: nothing outside `experiments.llm` asks which backend it has
(`tests/test_backend_seam.py`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from experiments.llm.types import LM, BackendClass

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


_BACKENDS: tuple[tuple[Backend, Callable[[str, str | None], bool], str], ...] = (
    # local wins over an api_base
    ("local", lambda model, api_base: is_local(model), "experiments.llm.local_model:LocalModel"),
    ("served", lambda model, api_base: bool(api_base), "experiments.llm.remote:ServedModel"),
    ("api", lambda model, api_base: True, "experiments.llm.remote:ApiModel"),
)
"""(backend, whether it serves a model and api_base, its class as ``module:Class``): the
first row that fits serves the model."""


def backend_for(model: str, api_base: str | None) -> Backend:
    """The backend that serves `model` (with `api_base`, if any): the first row that fits."""
    return next(name for name, fits, _ in _BACKENDS if fits(model, api_base))


def backend_class(model: str, api_base: str | None = None) -> type[BackendClass]:
    """The class of the backend that serves `model` (with `api_base`): its module imported
    now, so a local model's never imports litellm. Name-level questions asked before a model
    exists (its price, default scoring, whether this machine's speed times it) are its
    classmethods."""
    path = next(where for _, fits, where in _BACKENDS if fits(model, api_base))
    module, cls = path.split(":")
    found: type[BackendClass] = getattr(importlib.import_module(module), cls)
    return found


def get_model(name: str, **kwargs: Any) -> LM:
    """The model `name` (with ``api_base`` and the call settings in `kwargs`), built by the
    class of the backend that serves it (`backend_class`)."""
    return backend_class(name, kwargs.get("api_base"))(name, **kwargs)
