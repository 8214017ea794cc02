"""Language models: the litellm gateway, local GGUF models, log-likelihood, the response cache."""

from experiments.llm.cache import CacheError, ResponseCache, cache_key
from experiments.llm.models import (
    LM,
    Completion,
    ContextTooLong,
    Decoding,
    LiteLLMModel,
    ModelError,
    default_scoring,
    get_model,
)

__all__ = [
    "LM",
    "CacheError",
    "Completion",
    "ContextTooLong",
    "Decoding",
    "LiteLLMModel",
    "ModelError",
    "ResponseCache",
    "cache_key",
    "default_scoring",
    "get_model",
]
