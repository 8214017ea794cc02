"""Served-model helpers only the tests use (moved out of `experiments.llm.served`)."""

from __future__ import annotations

from typing import Any

from experiments.llm.served import echoed_continuation


def continuation_logprob(logprobs: Any, prompt: str, continuation: str, server: str) -> float:
    """Sum of the log-probabilities of the tokens of `continuation` in an echoed completion
    (`echoed_continuation`, checked)."""
    return echoed_continuation(logprobs, prompt, continuation, server).logprob
