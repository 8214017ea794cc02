"""Defaults of the `LM` protocol for a model that is no backend of the table: a test's
scripted model, a simulation (`experiments.testing`). It names itself and answers; the rest
is as a local or hosted model's, so its trial ids are the ones it always had."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.llm.identity import plain_loglik_identity
from experiments.llm.types import LOCAL_LOGLIK_ADVICE, LoglikNorm, Mode


class LMDefaults:
    """The `LM` members a model that is no backend of the table (a test's scripted model, a
    simulation) has by default: chat mode, its calls in the prompts' order, its
    log-likelihood identity as a local or hosted model's (no server in it), its sums cached
    at once."""

    name: str
    mode: Mode = "chat"
    caches_loglik_at_once: bool = True

    def loglik_identity(
        self, how: LoglikNorm | None = None, continuations: Sequence[str] | None = None
    ) -> dict[str, Any]:
        return plain_loglik_identity(self.name, how, continuations)

    def loglik_advice(self) -> str:
        return LOCAL_LOGLIK_ADVICE

    def call_order(self, prompts: Sequence[str]) -> list[int]:
        return list(range(len(prompts)))
