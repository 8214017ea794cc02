"""Which backend serves a model (`experiments.llm.backends`) and the log-likelihood seam
(`LM.loglikelihood`): one table instead of prefix tests, one method instead of a branch."""

from __future__ import annotations

from typing import Any

import pytest

from experiments.llm.backends import DEFAULT_MODEL, backend_for, is_local, local_name
from experiments.llm.gateway import LiteLLMModel
from experiments.llm.types import ModelError


def test_the_backend_table() -> None:
    assert backend_for("local/smollm2", None) == "local"
    assert backend_for("local/smollm2", "http://h/v1") == "local"  # local wins
    assert backend_for("openai/smollm2", "http://h/v1") == "served"
    assert backend_for("openai/gpt-4o-mini", None) == "api"
    assert backend_for("openai/gpt-4o-mini", "") == "api"
    assert is_local(DEFAULT_MODEL) and local_name(DEFAULT_MODEL) == "smollm2"
    assert not is_local("openai/local") and not is_local("localhost/x")


def test_loglikelihood_goes_to_the_backend_that_serves_the_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, Any, str]] = []

    def served(lm: Any, prompt: str, conts: Any) -> list[float]:
        calls.append(("served", lm.name, prompt))
        return [-1.0] * len(conts)

    monkeypatch.setattr("experiments.llm.served.served_label_logprobs", served)
    assert LiteLLMModel("openai/x", api_base="http://h/v1").loglikelihood("p", [" a"]) == [-1.0]
    assert calls == [("served", "openai/x", "p")]
    # a hosted API has none: the one clear line, before any call
    with pytest.raises(ModelError, match="use --scoring generate"):
        LiteLLMModel("openai/x").loglikelihood("q", [" a", " b"])
    assert len(calls) == 1
