"""Language models: which backend serves a model (one table, one class per backend: local
llama.cpp, a served model, a hosted API through litellm), log-likelihood, model identity,
the response cache."""

from experiments.llm.backends import DEFAULT_MODEL, backend_class, backend_for, get_model
from experiments.llm.cache import CacheError, ResponseCache, cache_key
from experiments.llm.gateway import LiteLLMModel
from experiments.llm.loglik import default_scoring
from experiments.llm.types import LM, Completion, ContextTooLong, Decoding, ModelError

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
