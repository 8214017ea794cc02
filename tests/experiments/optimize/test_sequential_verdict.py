"""optimize's held-out verdict as a sequential comparison (issue 22): it stops when clear."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiments.llm.scripted import LMDefaults
from experiments.llm.types import Completion, Decoding
from experiments.optimize.config import OptimizeConfig
from experiments.optimize.dev import split_dev_heldout
from experiments.optimize.optimize import optimize
from experiments.output import optimize_report
from experiments.tracking import Tracker, load_config
from promptlib import Catalog, compile_prompt
from promptlib.errors import WorkbenchError
from promptlib.variants import PromptVariant

pytestmark = pytest.mark.data


class BaseIsWrong(LMDefaults):
    """Right on every row, except with the base prompt, which is always wrong."""

    name = "scripted/base-is-wrong"
    mode = "completion"
    concurrency = 1

    def __init__(self, catalog: Catalog) -> None:
        task = catalog.task("hearsay")
        self.base = compile_prompt(PromptVariant(), task, "test").template().split("{{")[0]
        self.rows = task.rows("test")
        self.prompts: list[str] = []

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        self.prompts.append(prompt)
        query = prompt.rsplit("Q:", 1)[-1]
        answer = next(r["answer"] for r in self.rows if r["text"] in query)
        if prompt.startswith(self.base):
            answer = "No" if answer == "Yes" else "Yes"
        return Completion(" " + answer)


def test_the_sequential_verdict_stops_once_the_interval_excludes_zero(
    catalog: Catalog, tmp_path: Path
) -> None:
    cfg_file = tmp_path / "mlflow.yaml"
    cfg_file.write_text(
        f"tracking_uri: sqlite:///{tmp_path}/mlflow.db\nartifact_location: {tmp_path}/art\n"
        "experiment_prefix: t\nprompt_registry: false\n"
    )
    lm = BaseIsWrong(catalog)
    cfg = OptimizeConfig(
        task="hearsay", model=lm.name, n_trials=4, storage=f"sqlite:///{tmp_path}/o.db",
        sampler="random", seed=1, heldout_design="sequential", heldout_batch=5,
    )  # fmt: skip
    before = len(lm.prompts)
    report = optimize(cfg, catalog, lm, Tracker(load_config(cfg_file)))
    seq = report.sequential
    assert seq is not None and report.p_value is None
    held = len(split_dev_heldout(catalog.task("hearsay")).heldout)
    assert seq["decision"] == "A" and seq["ci_low"] > 0 and seq["n"] < held
    assert seq["looks"] == list(range(5, seq["n"] + 1, 5)) and seq["sequence"]
    assert report.heldout["n"] == seq["n"] and report.heldout["score"] == 1.0
    assert report.base_heldout["score"] == 0.0
    # the verdict sent each of its rows once per prompt: the search's calls, then 2 x n
    assert len(lm.prompts) - before - report.search_model_calls == 2 * seq["n"]
    text = optimize_report(report.to_dict())
    assert "sequential" in text and "p = " not in text
    # cost: the calls made against the full grid's, printed and on the study's parent run
    cost = report.cost
    assert cost is not None and cost["verdict_calls"] == 2 * seq["n"]
    assert cost["grid_calls"] == report.n_trials * report.n_dev + 2 * held
    assert cost["model_calls"] == report.search_model_calls + 2 * seq["n"] < cost["grid_calls"]
    assert f"of the full grid's {cost['grid_calls']}" in text
    tracker = Tracker(load_config(cfg_file))
    exp = tracker.client.get_experiment_by_name(f"t/optimize/{report.study}")
    parents = [
        r for r in tracker.client.search_runs([exp.experiment_id])
        if r.data.metrics.get("cost.grid_calls") == cost["grid_calls"]
    ]  # fmt: skip
    assert parents and parents[0].data.metrics["cost.model_calls"] == cost["model_calls"]


def test_a_bad_verdict_design_is_refused() -> None:
    with pytest.raises(WorkbenchError, match="--verdict must be fixed or sequential"):
        OptimizeConfig(task="hearsay", model="m", heldout_design="adaptive")
    with pytest.raises(WorkbenchError, match="--verdict-batch must be an integer from 1 to 100000"):
        OptimizeConfig(task="hearsay", model="m", heldout_batch=0)
