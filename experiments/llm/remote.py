"""The two litellm backends: a served model (an OpenAI-compatible server the user names with
an api_base) and a hosted API's. They differ in log-likelihood: a server's echoed prompt
log-probabilities, checked (`served.served_label_logprobs`), against none from a hosted API."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.llm import served
from experiments.llm.backends import DEFAULT_MODEL
from experiments.llm.gateway import LiteLLMModel
from experiments.llm.identity import plain_loglik_identity, served_loglik_identity
from experiments.llm.types import LoglikNorm, ModelError


class ServedModel(LiteLLMModel):
    """A model behind an OpenAI-compatible server (vLLM, llama.cpp's server) at `api_base`."""

    @classmethod
    def require_loglik(cls, model: str, api_base: str | None) -> None:
        """A served model can: its server's echo is checked on the first call."""

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """From the server's echoed prompt log-probabilities, checked
        (`served.served_label_logprobs`)."""
        return served.served_label_logprobs(self, prompt, continuations)

    def loglik_identity(
        self, how: LoglikNorm | None = None, continuations: Sequence[str] | None = None
    ) -> dict[str, Any]:
        """The server and the alignment check its sums passed are part of it
        (`identity.served_loglik_identity`)."""
        return served_loglik_identity(self.name, self.api_base or "", how, continuations)


class ApiModel(LiteLLMModel):
    """A hosted provider's model (no api_base): generation only."""

    @classmethod
    def require_loglik(cls, model: str, api_base: str | None) -> None:
        raise no_loglik(model)

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        raise no_loglik(self.name)

    def loglik_identity(
        self, how: LoglikNorm | None = None, continuations: Sequence[str] | None = None
    ) -> dict[str, Any]:
        return plain_loglik_identity(self.name, how, continuations)


def no_loglik(model: str) -> ModelError:
    """The one line that refuses log-likelihood scoring of a hosted API's model."""
    return ModelError(
        f"log-likelihood scoring (--scoring loglik or loglik-norm) needs a local model "
        f"(e.g. {DEFAULT_MODEL}) or a served one with --api-base, not {model!r}: remote "
        "APIs do not expose prompt log-probabilities uniformly; use --scoring generate"
    )
