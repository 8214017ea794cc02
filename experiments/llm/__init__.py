"""Language models: the litellm gateway, local GGUF models, log-likelihood, the response cache."""

from experiments.llm.cache import CacheError, ResponseCache, cache_key
from experiments.llm.gateway import LiteLLMModel, get_model
from experiments.llm.loglik import default_scoring
from experiments.llm.types import LM, Completion, ContextTooLong, Decoding, ModelError

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
