"""The lm-eval reader's model name, when the results file has no ``model_name``, comes from
the model's type and args, which can carry a key: the key never names a trial."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.imports.lmeval import _model
from experiments.imports.records import ReadOptions


def test_a_key_in_model_args_does_not_reach_the_model_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVIDER_API_KEY", "k3y-value-0123456789")
    config = {"config": {"model": "local-completions",
                         "model_args": "base_url=http://h/v1,api_key=k3y-value-0123456789"}}  # fmt: skip
    name = _model(Path("results.json"), config, {}, ReadOptions())
    assert name.startswith("local-completions(base_url=http://h/v1,")
    assert "k3y-value-0123456789" not in name
