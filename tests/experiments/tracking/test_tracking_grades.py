"""Review rev3 (issue 19): hand grades reach an MLflow run so that a store failing part-way is
visible and repaired. The grade metrics, the grades.json artifact and the `grades_sha` tag are
separate writes; a failure between them used to leave a stray score on a run that still
matched the ungraded folder, and every later `workbench run` reused it."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from experiments.llm.scripted import LMDefaults
from tests.experiments.trials.test_grading import _data

pytestmark = pytest.mark.data


class ProseLM(LMDefaults):
    """A model answering every rule_qa question with one sentence (no network)."""

    name = "scripted/prose"
    mode = "completion"
    concurrency = 1

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Any) -> Any:
        from experiments.llm.types import Completion

        return Completion(f"Answer {len(prompt)}.", tokens_in=len(prompt) // 4, tokens_out=2)


@pytest.fixture
def graded_setup(lb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A tracked, ungraded rule_qa trial and a filled grade CSV for it."""
    from experiments.tracking import Tracker, load_config
    from experiments.trials.grading import export_csv, save_keeping_grades
    from experiments.trials.run import run_trial
    from experiments.trials.spec import TrialSpec, resolve_trial
    from promptlib import Catalog, LocalSource, parse_spec

    catalog = Catalog(LocalSource(_data(tmp_path, lb_dir)))
    cfg = tmp_path / "mlflow.yaml"
    cfg.write_text(
        f"tracking_uri: sqlite:///{tmp_path}/mlflow.db\nartifact_location: {tmp_path}/art\n"
        "experiment_prefix: g\nprompt_registry: false\n"
    )
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("WORKBENCH_MLFLOW_CONFIG", str(cfg))
    monkeypatch.setenv("WORKBENCH_RUNS_DIR", str(tmp_path / "runs"))
    config = load_config(cfg)
    tracker = Tracker(config)
    lm = ProseLM()
    spec = TrialSpec(task="rule_qa", variant=parse_spec("base"), model=lm.name)
    resolved = resolve_trial(spec, catalog, lm, hand_graded=True)
    result = run_trial(resolved, catalog, lm)
    save_keeping_grades(result)
    run_id = tracker.log_run(result, resolved.compiled, resolved.rows)["mlflow_run_id"]
    out = tmp_path / "grades.csv"
    export_csv(tmp_path / "runs" / result.trial_id, catalog, out)
    rows = list(csv.DictReader(out.open(encoding="utf-8", newline="")))
    for n, row in enumerate(rows):
        row["grade"] = "1" if n % 2 == 0 else "0"
    with out.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return {
        "config": config, "tracker": tracker, "result": result, "resolved": resolved,
        "run_id": run_id, "csv": out, "trial_dir": tmp_path / "runs" / result.trial_id,
    }  # fmt: skip


def _fail_on_grades_artifact(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store takes the grade metrics, then refuses the grades.json artifact."""
    import mlflow

    real = mlflow.MlflowClient.log_dict

    def log_dict(self: Any, run_id: str, dictionary: Any, artifact_file: str, *a: Any) -> Any:
        if artifact_file == "grades.json":
            raise OSError(28, "No space left on device (injected)")
        return real(self, run_id, dictionary, artifact_file, *a)

    monkeypatch.setattr(mlflow.MlflowClient, "log_dict", log_dict)


@pytest.mark.parametrize("repair", ["grade import again", "workbench run again"])
def test_grades_cut_short_in_the_store_are_visible_and_repaired(
    graded_setup: dict[str, Any], monkeypatch: pytest.MonkeyPatch, repair: str
) -> None:
    import mlflow

    from experiments.names import GRADES_PENDING, GRADES_SHA
    from experiments.tracking import TrackingError, reusable_run
    from experiments.tracking.grades import import_grades

    s = graded_setup
    client = s["tracker"].client
    real = mlflow.MlflowClient.log_dict
    _fail_on_grades_artifact(monkeypatch)
    with pytest.raises(TrackingError) as err:
        import_grades(s["csv"], track=True)
    assert "\n" not in str(err.value) and "import again" in str(err.value)
    monkeypatch.setattr(mlflow.MlflowClient, "log_dict", real)
    assert not (s["trial_dir"] / "grades.json").exists()  # disk: ungraded
    run = client.get_run(s["run_id"])
    assert "human_graded_accuracy" in run.data.metrics  # written before the failure
    # ... but the run says its grades are half-written: it matches no trial folder
    assert run.data.tags.get(GRADES_SHA, "").startswith(GRADES_PENDING)
    assert reusable_run(s["result"], s["config"]) is None

    if repair == "grade import again":
        summary = import_grades(s["csv"], track=True)
        assert summary["mlflow_run_id"] == s["run_id"]
        run = client.get_run(s["run_id"])
        assert not run.data.tags[GRADES_SHA].startswith(GRADES_PENDING)
        assert run.data.tags["workbench.graded"] == "true"
        assert run.data.metrics["human_graded_accuracy"] == summary["score"]
        # disk and MLflow agree: a rerun now reuses the run as it is
        again = reusable_run(s["result"], s["config"])
        assert again is not None and again["mlflow_run_id"] == s["run_id"]
    else:
        # the rerun logs the trial as the folder has it (ungraded) and drops the stray run
        again = s["tracker"].log_run(s["result"], s["resolved"].compiled, s["resolved"].rows)
        assert not again["mlflow_reused"] and again["mlflow_run_id"] != s["run_id"]
        fresh = client.get_run(again["mlflow_run_id"])
        assert "human_graded_accuracy" not in fresh.data.metrics
        assert client.get_run(s["run_id"]).info.lifecycle_stage == "deleted"


def test_a_sweep_table_shows_no_score_from_half_written_grades(
    graded_setup: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review rev4: `sweep_trials` read the `score` metric without the grade tags, so a
    grade write cut short (score in, `grades_sha` still `pending:`) showed as a score."""
    import mlflow

    from experiments.names import GRADES_PENDING, GRADES_SHA, SWEEP_ID
    from experiments.tracking.grades import import_grades
    from experiments.trials.grading import current_grades, grade_metrics

    s = graded_setup
    tracker, client = s["tracker"], s["tracker"].client
    import_grades(s["csv"], track=False)  # the folder's grades.json, on no run yet
    grades = current_grades(s["result"])
    assert grades is not None
    # a sweep whose child run is this trial
    exp = client.create_experiment("g/sweep/grades")
    parent = client.create_run(exp, tags={SWEEP_ID: "grades"}).info.run_id
    child = tracker.log_trial(parent, s["result"], s["resolved"].compiled, s["resolved"].rows,
                              "base")  # fmt: skip
    (row,) = tracker.sweep_trials(parent)
    assert row["score"] is None  # hand-graded, not graded yet

    real = mlflow.MlflowClient.log_dict
    _fail_on_grades_artifact(monkeypatch)
    with pytest.raises(OSError):
        tracker._put_grades(child, s["result"].spec.task, grade_metrics(grades), grades)
    run = client.get_run(child)
    assert run.data.metrics["score"] == grades["score"]  # the stray score is on the run
    assert run.data.tags[GRADES_SHA].startswith(GRADES_PENDING)
    (row,) = tracker.sweep_trials(parent)
    assert row["score"] is None, "a half-written grade import shows as a score"
    note = row["score_note"]
    assert "grades_sha pending" in note and s["result"].trial_id[:12] in note

    monkeypatch.setattr(mlflow.MlflowClient, "log_dict", real)
    tracker._put_grades(
        child, s["result"].spec.task, grade_metrics(grades), grades
    )  # the write completed
    (row,) = tracker.sweep_trials(parent)
    assert row["score"] == grades["score"] and row["score_note"] is None
    # a run marked hand-graded and not graded shows no score either, and says why
    client.set_tag(child, "workbench.graded", "false")
    (row,) = tracker.sweep_trials(parent)
    assert row["score"] is None and "not graded yet" in row["score_note"]
