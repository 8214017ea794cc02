"""The judge's scores reach the trial's MLflow run (issue 33, point 3): named as judge scores,
never as correctness, with the judge id, rubric hashes and cost; its files as artifacts; no
key in any of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.judge.rubrics import load_rubrics
from experiments.judge.run import judge_trial
from experiments.judge.tracking import log_judge
from experiments.tracking import Tracker
from experiments.tracking.store import TrackingConfig
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec, resolve_trial
from experiments.trials.store import save_trial
from promptlib import Catalog, parse_spec
from tests.conftest import mlflow_store
from tests.experiments.judge.test_judge_run import AnswerLM, JudgeLM

pytestmark = pytest.mark.data


def test_judge_scores_go_on_the_trials_run(catalog: Catalog, tmp_path: Path) -> None:
    tracker = Tracker(
        TrackingConfig(
            tracking_uri=mlflow_store(tmp_path),
            artifact_location=(tmp_path / "artifacts").as_uri(),
            experiment_prefix="judge",
            prompt_registry=False,
            source="test",
        )
    )
    lm = AnswerLM()
    spec = TrialSpec(task="hearsay", variant=parse_spec("demos=none"), model=lm.name, limit=3)
    resolved = resolve_trial(spec, catalog, lm)
    result = run_trial(resolved, catalog, lm)
    trial_dir = save_trial(result, tmp_path / "runs")
    run_id = tracker.log_run(result, resolved.compiled, resolved.rows)["mlflow_run_id"]
    judge = JudgeLM(reply=lambda p: "0" if "criterion, analysis" in p else "1")
    run = judge_trial(trial_dir, judge, load_rubrics("hearsay"), catalog=catalog,
                      scoring="generate")  # fmt: skip
    assert log_judge(tracker, run, trial_dir) == [run_id]
    data = tracker.client.get_run(run_id).data
    j = run.judge_id[:12]
    assert data.metrics[f"judge_score.correctness.{j}"] == 1.0
    assert data.metrics[f"judge_score.analysis.{j}"] == 0.0
    assert data.metrics[f"judge_cost.{j}"] == pytest.approx(0.006)
    assert data.metrics[f"judge_unparsed.{j}"] == 0.0 and data.metrics[f"judge_n.{j}"] == 3.0
    assert not any(k.startswith("correctness") for k in data.metrics)  # never as correctness
    assert data.tags[f"judge.{j}.id"] == run.judge_id
    assert data.tags[f"judge.{j}.rubric.analysis"] == run.rubrics["analysis"]["sha256"]
    files = {a.path for a in tracker.client.list_artifacts(run_id, "judge")}
    assert files == {f"judge/{run.judge_id}.jsonl", f"judge/{run.judge_id}.json"}
    # an untracked trial: nothing to update
    other = TrialSpec(task="hearsay", variant=parse_spec("demos=none"), model=lm.name, limit=2)
    other_dir = save_trial(run_trial(other, catalog, lm), tmp_path / "runs")
    other_run = judge_trial(other_dir, JudgeLM(), load_rubrics("hearsay"), catalog=catalog,
                            scoring="generate")  # fmt: skip
    assert log_judge(tracker, other_run, other_dir) == []


def test_the_stored_judge_identity_has_no_password(catalog: Catalog, tmp_path: Path) -> None:
    class Served(JudgeLM):
        def cache_identity(self) -> dict[str, str]:
            return {"model": self.name, "api_base": "http://user:s3cret@judge.example/v1"}

    lm = AnswerLM()
    spec = TrialSpec(task="hearsay", variant=parse_spec("demos=none"), model=lm.name, limit=2)
    trial_dir = save_trial(run_trial(spec, catalog, lm), tmp_path / "runs")
    run = judge_trial(trial_dir, Served(), load_rubrics("hearsay"), catalog=catalog,
                      scoring="generate")  # fmt: skip
    stored = (trial_dir / "judge" / f"{run.judge_id}.json").read_text()
    assert "s3cret" not in stored and "judge.example" in stored
