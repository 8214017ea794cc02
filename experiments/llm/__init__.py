"""Language models: which backend serves a model (one table, one class per backend: local
llama.cpp, a served model, a hosted API through litellm), log-likelihood, model identity,
the response cache.

The names are imported on first use (`promptlib.lazy`): every `experiments.llm.*` module runs
this file first, and reading a constant (the CLI's defaults, the default model) must not
import the gateway and llama.cpp's bindings (issue 35: start-up costs what the command needs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from promptlib.lazy import lazy_exports

if TYPE_CHECKING:
    from experiments.llm.backends import DEFAULT_MODEL, backend_class, backend_for, get_model
    from experiments.llm.cache import CacheError, ResponseCache, cache_key
    from experiments.llm.gateway import LiteLLMModel
    from experiments.llm.loglik import default_scoring
    from experiments.llm.types import LM, Completion, ContextTooLong, Decoding, ModelError

_HOMES = {
    "DEFAULT_MODEL": "experiments.llm.backends",
    "backend_for": "experiments.llm.backends",
    "backend_class": "experiments.llm.backends",
    "CacheError": "experiments.llm.cache",
    "ResponseCache": "experiments.llm.cache",
    "cache_key": "experiments.llm.cache",
    "LiteLLMModel": "experiments.llm.gateway",
    "get_model": "experiments.llm.backends",
    "default_scoring": "experiments.llm.loglik",
    "LM": "experiments.llm.types",
    "Completion": "experiments.llm.types",
    "ContextTooLong": "experiments.llm.types",
    "Decoding": "experiments.llm.types",
    "ModelError": "experiments.llm.types",
}
"""Where each public name lives: imported from there on first use."""

__all__ = [
    "DEFAULT_MODEL",
    "LM",
    "CacheError",
    "Completion",
    "ContextTooLong",
    "Decoding",
    "LiteLLMModel",
    "ModelError",
    "ResponseCache",
    "backend_class",
    "backend_for",
    "cache_key",
    "default_scoring",
    "get_model",
]

__getattr__, __dir__ = lazy_exports(globals(), _HOMES)
