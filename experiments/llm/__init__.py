"""Language models: which backend serves a model, the litellm gateway, local GGUF models,
log-likelihood, model identity, the response cache."""

from experiments.llm.backends import DEFAULT_MODEL, backend_for
from experiments.llm.cache import CacheError, ResponseCache, cache_key
from experiments.llm.gateway import LiteLLMModel, get_model
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
    "backend_for",
    "cache_key",
    "default_scoring",
    "get_model",
]
