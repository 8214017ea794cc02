"""The local backend's failures, as they were through litellm's custom provider: a prompt past
the context is a row state never retried; any other llama-cpp-python error is retried with
backoff, then a row error that may be run again."""

from __future__ import annotations

from typing import Any

import pytest

from experiments.llm import get_model
from experiments.llm.types import Decoding


def _local(**kw: Any) -> Any:
    return get_model("local/smollm2", backoff=0.0, max_backoff=0.0, **kw)


def test_a_prompt_past_the_context_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    lm = _local()
    calls: list[str] = []

    def overflow(prompt: str, decoding: Decoding) -> Any:
        calls.append(prompt)
        raise ValueError("Requested tokens (5000) exceed context window of 4096")

    monkeypatch.setattr(lm, "_call", overflow)
    got = lm.complete("p", Decoding())
    assert got.text is None and not got.retryable and got.attempts == 1 and len(calls) == 1
    assert got.error and got.error.startswith("prompt longer than the model's context")


def test_another_error_is_retried_then_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    lm = _local(max_retries=2)
    reply = {"choices": [{"text": " Yes", "finish_reason": "stop"}], "usage": {}}
    reply["usage"] = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    failures = [RuntimeError("llama_decode returned -3"), RuntimeError("again")]

    def flaky(prompt: str, decoding: Decoding) -> Any:
        if failures:
            raise failures.pop(0)
        return reply

    monkeypatch.setattr(lm, "_call", flaky)
    got = lm.complete("p", Decoding())
    assert (got.text, got.tokens_in, got.tokens_out, got.attempts) == (" Yes", 3, 1, 3)
    assert got.cost is None  # it runs here: no price


def test_an_error_left_after_the_retries_is_a_row_error(monkeypatch: pytest.MonkeyPatch) -> None:
    lm = _local(max_retries=1)

    def broken(prompt: str, decoding: Decoding) -> Any:
        raise RuntimeError("llama_decode returned -3")

    monkeypatch.setattr(lm, "_call", broken)
    got = lm.complete("p", Decoding())
    assert got.text is None and got.retryable and got.attempts == 2
    assert got.error == "RuntimeError after 2 attempt(s): llama_decode returned -3"
