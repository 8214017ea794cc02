"""A sweep spec's ``judge:`` key: checked when the spec loads; after the trials the judge
grades each generate trial, its cost joins the cost line, the judge-only numbers are labelled
as judge scores with the hand grades needed; hand grades added later put the calibrated
numbers on the sweep's MLflow runs (read back with MLflow's own client).

Against the stub server (a model that explains, a judge that writes 1 or 0): seconds.
The embedded models run the same loop in tests/experiments/sweeps/test_rule_application_e2e.py.
"""

from __future__ import annotations

import csv
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from experiments import output
from experiments.sweeps.spec import load_spec
from experiments.testing.stub_server import StubOpenAI
from promptlib import Catalog
from promptlib.errors import WorkbenchError
from tests.conftest import mlflow_store

pytestmark = pytest.mark.data

SPEC = """name: judged
tasks: [hearsay]
requires: [application_prompt.txt, claude_application_prompt.txt]
limit: 14
scoring: generate
fixed: {instruction: application}
axes: {format: [base, claude]}
comparisons: [[format=base, format=claude]]
n_resamples: 200
"""
JUDGE = """judge:
  model: openai/stub
  scoring: generate
  criteria: [correctness, analysis]
"""


def _write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "spec.yaml"
    path.write_text(text)
    return path


# ---- the spec ---------------------------------------------------------------------------------
def test_a_spec_without_judge_has_none_and_its_id_is_its_fields_alone(tmp_path: Path) -> None:
    from experiments import ids

    spec = load_spec(_write(tmp_path, SPEC))
    assert spec.judge is None
    assert spec.id == ids.spec_id(spec.raw) and "judge" not in spec.raw
    judged = load_spec(_write(tmp_path / "j", SPEC + JUDGE))
    assert judged.judge is not None and judged.id != spec.id  # a judge makes its own sweep
    assert judged.judge.criteria == ("correctness", "analysis")
    assert judged.judge.scoring == "generate"


@pytest.mark.parametrize(
    ("judge", "said"),
    [
        ("judge: {scoring: loglik}", "judge.model is required"),
        ("judge: {model: local/smollm2, scorng: loglik}", "unknown field 'scorng'"),
        ("judge: {model: local/smollm2, scoring: vote}", "judge.scoring must be"),
        ("judge: {model: local/smollm2, criteria: [style]}", "unknown criterion 'style'"),
        ("judge: {model: local/smollm2, rubrics: {abercrombie: r.yaml}}", "not one of the spec"),
        (
            "judge: {model: local/smollm2, rubrics: {hearsay: missing.yaml}}",
            "judge.rubrics.hearsay",
        ),
        ("judge: [local/smollm2]", "field 'judge' has the wrong type"),
    ],
)
def test_a_bad_judge_key_names_the_file_and_field(tmp_path: Path, judge: str, said: str) -> None:
    path = _write(tmp_path, SPEC + judge + "\n")
    with pytest.raises(WorkbenchError) as e:  # JudgeSpecError, or the spec's own type check
        load_spec(path)
    assert str(path) in str(e.value) and said in str(e.value)


def test_a_local_judge_defaults_to_loglik_and_a_rubric_file_replaces_the_shipped_one(
    tmp_path: Path,
) -> None:
    rubric = tmp_path / "mine.yaml"
    rubric.write_text(
        "task: hearsay\ninput: '{{text}}'\nrule: the rule\n"
        "criteria: {correctness: right or wrong, analysis: reasons}\n"
    )
    spec = load_spec(
        _write(
            tmp_path, SPEC + f"judge: {{model: local/smollm2, rubrics: {{hearsay: {rubric}}}}}\n"
        )
    )
    assert spec.judge is not None and spec.judge.scoring == "loglik"
    mine = spec.judge.rubrics_of("hearsay")
    assert mine is not None and mine.path == str(rubric)
    shipped = spec.judge.rubrics_of("diversity_1")
    assert shipped is not None and shipped.path.endswith("diversity_1.yaml")
    assert spec.judge.rubrics_of("no_such_task") is None


# ---- the sweep --------------------------------------------------------------------------------
def _reply(prompt: str) -> str:
    """The trials explain (yes/no by the prompt's hash); the judge writes a grade: a biased
    one, 1 on every Claude-format answer's analysis, else by the answer's hash."""
    h = hashlib.sha256(prompt.encode()).digest()[0]
    if prompt.rstrip().endswith("Grade:"):
        return "1" if h % 3 else "0"
    return ("Yes" if h % 2 else "No") + ", because the statement was made out of court to prove it."


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WORKBENCH_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("WORKBENCH_GRADES_DIR", str(tmp_path / "grades"))
    os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")
    return tmp_path


def _tracker(root: Path) -> Any:
    from experiments.tracking import Tracker, TrackingConfig

    return Tracker(
        TrackingConfig(
            tracking_uri=mlflow_store(root),
            artifact_location=(root / "artifacts").as_uri(),
            experiment_prefix="judged",
            prompt_registry=False,
            source="test",
        )
    )


def _fill(sheet: Path, grade: Any) -> None:
    """Fill every row of a sheet: `grade(item, criterion)` -> 1/0."""
    with sheet.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
        fields = list(rows[0])
    for r in rows:
        for c in ("correctness", "analysis"):
            r[c] = str(grade(r["item"], c))
    with sheet.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def test_the_judge_runs_after_the_trials_and_hand_grades_calibrate_it_on_mlflow(
    project: Path, catalog: Catalog
) -> None:
    from experiments.calibrated.refresh import refresh_sweep, refresh_trials
    from experiments.grading.add import add_grades
    from experiments.grading.sheets import make_sheet
    from experiments.llm.gateway import LiteLLMModel
    from experiments.sweeps.driver import run_sweep

    tracker = _tracker(project)
    spec = load_spec(_write(project, SPEC + JUDGE))
    with StubOpenAI(reply_fn=_reply) as stub:
        lm = LiteLLMModel("openai/stub", api_base=stub.url, concurrency=1)
        result = run_sweep(
            spec, catalog, models=(lm.name,), tracker=tracker, lm_factory=lambda _n: lm,
            reports_dir=project / "reports",
        )  # fmt: skip
    judging = result.judge
    assert judging is not None and len(judging.runs) == 2 and not judging.failed
    assert judging.report is not None and judging.n_hand == 0
    # the cost line: the trials', then the judge's, labelled
    line = output.cost_line(result.cost)
    judge_cost = result.cost["judge"]
    assert judge_cost["model_calls"] + judge_cost["cache_hits"] == 56  # 2 trials x 14 rows x 2
    assert f"; judge openai/stub (generate): {judge_cost['model_calls']} judge calls" in line
    # no hand grades: judge scores only, never a criterion's number, and what to run next
    text = output.judge_section(judging, "judged")
    assert "no hand grades yet: every number below is a judge score (not calibrated)" in text
    assert "workbench grade sheet judged --task hearsay --out sheet_hearsay.csv" in text
    assert "hand grades needed" in text and "nan" not in text
    assert result.to_dict()["judge"]["n_hand"] == 0
    # the figures, in the sweep's report folder
    png = project / "reports" / "judged" / result.sweep_id / "calibrated_hearsay_openai_stub.png"
    assert str(png) in judging.figures and png.stat().st_size > 5000
    # the judge's scores on each trial run (judge scores, not correctness)
    client = tracker.client
    children = tracker._children(result.parent_run_id)
    assert len(children) == 2
    for run in children:
        names = set(client.get_run(run.info.run_id).data.metrics)
        assert any(n.startswith("judge_score.correctness.") for n in names), names
        assert "calibrated.correctness.n_hand" in names
        assert "calibrated.correctness.estimate" not in names  # no hand grades: no estimate

    # a blind sheet of the sweep's trials, graded whole, added: the runs get the calibrated numbers
    dirs = [project / "runs" / r.trial_id for r in judging.runs]
    sheet = make_sheet(dirs, catalog, seed=3, out=project / "sheet.csv", task="hearsay")
    _fill(
        sheet.csv_path, lambda item, c: int(hashlib.sha256(f"{item}{c}".encode()).digest()[0] % 2)
    )
    added = add_grades(sheet.csv_path, "ann")
    assert added.written == 2 * sheet.n_items
    done, note = refresh_trials(tracker, [r.trial_id for r in judging.runs])
    assert note is None and len(done) == 1 and done[0].calibrated
    assert done[0].parent_id == result.parent_run_id

    parent = client.get_run(result.parent_run_id).data
    head = "calibrated.hearsay.openai/stub.format_base_vs_format_claude.correctness"
    for measure in ("estimate", "ci_low", "ci_high", "p_value", "p_corrected", "judge_score_diff"):
        assert f"{head}.{measure}" in parent.metrics, sorted(parent.metrics)
    low, high = parent.metrics[f"{head}.ci_low"], parent.metrics[f"{head}.ci_high"]
    assert low <= parent.metrics[f"{head}.estimate"] <= high
    assert "judge_cost.rows_judged" in parent.metrics
    artifacts = {a.path for a in client.list_artifacts(result.parent_run_id)}
    assert "calibrated.json" in artifacts and png.name in artifacts
    for run in children:
        m = client.get_run(run.info.run_id).data.metrics
        assert m["hand_grade.correctness.n"] == 14 and m["calibrated.correctness.n_hand"] == 14
        assert m["calibrated.correctness.ci_low"] <= m["calibrated.correctness.estimate"]
        assert 0 <= m["hand_grade.analysis.mean"] <= 1

    # a second grader on the same rows: the graders' kappa per criterion on the parent
    _fill(
        sheet.csv_path, lambda item, c: int(hashlib.sha256(f"{item}{c}".encode()).digest()[0] % 2)
    )
    add_grades(sheet.csv_path, "bob")
    refresh_sweep(tracker, result.parent_run_id)
    parent = client.get_run(result.parent_run_id).data
    assert parent.metrics["grader_kappa.correctness.ann_vs_bob"] == pytest.approx(1.0)
    assert parent.metrics["grader_kappa.correctness.ann_vs_bob.n"] == 28


def test_trials_with_no_tracked_run_are_said_not_an_error(project: Path) -> None:
    from experiments.calibrated.refresh import refresh_trials

    done, note = refresh_trials(_tracker(project), ["0" * 64])
    assert done == [] and note is not None and note.startswith("not tracked")


def test_an_unjudged_sweep_of_explanations_saves_its_trials_for_grading(
    project: Path, catalog: Catalog
) -> None:
    """Without ``judge:``, a sweep of application prompts still writes runs/<trial id>/ (the
    judge, the sheets and the calibrated report read them): `workbench grade sheet SWEEP`
    and `workbench judge --sweep` work on it afterwards."""
    from experiments.grading.sheets import make_sheet
    from experiments.llm.gateway import LiteLLMModel
    from experiments.sweeps.driver import run_sweep

    tracker = _tracker(project)
    spec = load_spec(_write(project, SPEC))
    assert spec.judge is None
    with StubOpenAI(reply_fn=_reply) as stub:
        lm = LiteLLMModel("openai/stub", api_base=stub.url, concurrency=1)
        result = run_sweep(
            spec, catalog, models=(lm.name,), tracker=tracker, lm_factory=lambda _n: lm,
            reports_dir=project / "reports",
        )  # fmt: skip
    assert result.judge is None
    rows = tracker.sweep_trials(tracker.find_sweep("judged").run.run_id)
    ids = sorted({str(r["trial_id"]) for r in rows})  # as `grade sheet SWEEP` finds them
    assert len(ids) == 2
    dirs = [project / "runs" / i for i in ids]
    assert all((d / "predictions.jsonl").is_file() for d in dirs)
    sheet = make_sheet(dirs, catalog, seed=1, out=project / "s.csv", task="hearsay")
    assert sheet.n_items == 28
