"""The paper's rule-application study end to end on the embedded models (issue 33, acceptance):
in a fresh project folder, `workbench sweep` runs ablations/rule_application_demo.yaml's study
(two application tasks, hearsay and diversity_1, base vs Claude wording) with a `judge:` (an
embedded model, local/smollm2, by log-likelihood), so the explanations are generated and
judged; a blind sheet of each task is made and filled from a committed fixture of grades;
`workbench grade add` adds them; `workbench grade report` prints the calibrated comparisons
with their intervals and the test named; MLflow holds them (read with MLflow's own client).

The fixture (tests/data/rule_application_e2e/grades.csv, see its README) keys each grade by
(task, variant, row index): the sheet hides the variant, so the test looks each sheet item
up through the sheet's key (item -> trial, row) and the trial's folder (trial -> variant).

Ten rows per variant: the fewest a calibrated interval takes (`ppi.MIN_HAND` hand-graded
rows per variant), on 40 explanations of 150 tokens and 80 judge calls. A few minutes on an
idle machine; much longer on a loaded one (hence its own timeout).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli, workbench_env

pytestmark = [pytest.mark.data, pytest.mark.slow, pytest.mark.model]

DATA = Path(__file__).resolve().parents[2] / "data" / "rule_application_e2e"
SWEEP = "rule_application_e2e"
TASKS = ("hearsay", "diversity_1")
CRITERIA = ("correctness", "analysis")


def fixture_grades() -> dict[tuple[str, str, str], dict[str, str]]:
    """(task, variant, row index) -> {criterion: "1"/"0"}."""
    with (DATA / "grades.csv").open(newline="", encoding="utf-8") as f:
        return {
            (r["task"], r["variant"], r["index"]): {c: r[c] for c in CRITERIA}
            for r in csv.DictReader(f)
        }


def variant_of(trial_dir: Path) -> str:
    """The sweep's variant name of a trial (its format level), from its folder."""
    label = json.loads((trial_dir / "summary.json").read_text(encoding="utf-8"))["variant"]
    return "format=claude" if "format=claude" in label.split(",") else "format=base"


def fill_sheet(root: Path, task: str, grades: dict[tuple[str, str, str], dict[str, str]]) -> int:
    """Fill sheet_<task>.csv from the fixture, through the sheet's key; the rows filled."""
    sheet = root / f"sheet_{task}.csv"
    key = json.loads((root / "grades" / "sheets" / f"sheet_{task}.json").read_text())
    items = {i["item"]: i for i in key["items"]}
    with sheet.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    fields = list(rows[0])
    for r in rows:
        item = items[r["item"]]
        variant = variant_of(root / "runs" / item["trial_id"])
        r.update(grades[(task, variant, item["index"])])
    with sheet.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


@pytest.mark.timeout(3600)
def test_the_rule_application_study_runs_end_to_end(tmp_path: Path, lb_dir: Path) -> None:
    import mlflow

    env = workbench_env(tmp_path, lb_dir, "e2e")
    for name in ("spec.yaml", "hearsay_rubric.yaml", "diversity_1_rubric.yaml"):
        shutil.copy(DATA / name, tmp_path / name)
    out = tmp_path / "printed"
    out.mkdir()

    swept = run_cli(["sweep", "spec.yaml"], env, tmp_path, timeout=3000)
    (out / "sweep.txt").write_text(swept.stdout)
    assert swept.returncode == 0, swept.stderr[-3000:]
    # judged, not yet graded: judge scores only, labelled, with the next commands
    assert "judge local/smollm2 (loglik) on 4 generate trial(s)" in swept.stdout
    assert (
        "no hand grades yet: every number below is a judge score (not calibrated)" in swept.stdout
    )
    assert f"workbench grade sheet {SWEEP} --task hearsay --out sheet_hearsay.csv" in swept.stdout
    assert "judge local/smollm2 (loglik): " in swept.stdout  # its share of the cost line

    grades = fixture_grades()
    for task in TASKS:
        made = run_cli(
            ["grade", "sheet", SWEEP, "--task", task, "--out", f"sheet_{task}.csv"], env, tmp_path
        )
        assert made.returncode == 0, made.stderr
        assert fill_sheet(tmp_path, task, grades) == 20  # both variants' 10 rows, shuffled
        added = run_cli(["grade", "add", f"sheet_{task}.csv", "--grader", "fixture"], env, tmp_path)
        (out / f"add_{task}.txt").write_text(added.stdout)
        assert added.returncode == 0, added.stderr
        assert f"MLflow: hand grades and calibrated estimates of sweep {SWEEP}" in added.stdout

    report = run_cli(["grade", "report", SWEEP], env, tmp_path)
    (out / "report.txt").write_text(report.stdout)
    assert report.returncode == 0, report.stderr
    text = report.stdout
    for task in TASKS:
        assert f"{task} (local/smollm2), judge " in text
        for c in CRITERIA:  # each criterion's comparison, decided or not, with its interval
            assert f"{task} (local/smollm2), {c}: format=base vs format=claude: " in text
    assert "PPI++ (power-tuned lambda), paired rows" in text  # the test, by name, in the legend
    assert "p corr: Holm over the report's 4 comparisons" in text  # 2 tasks x 2 criteria
    assert "judge: the judge score (not calibrated), never correctness or analysis" in text
    lines = [ln for ln in text.splitlines() if ln.lstrip().startswith(CRITERIA)]
    with_interval = [ln for ln in lines if "format=base" in ln and ln.count("[") >= 2]
    assert len(with_interval) >= 4, text  # 2 tasks x 2 criteria: calibrated and hand-only CIs

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name(f"e2e/{SWEEP}")
    runs = client.search_runs([exp.experiment_id])
    parent = next(r for r in runs if "workbench.trial_id" not in r.data.tags)
    metrics = parent.data.metrics
    for task in TASKS:
        head = f"calibrated.{task}.local/smollm2.format_base_vs_format_claude"
        for c in CRITERIA:
            assert f"{head}.{c}.estimate" in metrics, sorted(metrics)
            assert metrics[f"{head}.{c}.ci_low"] <= metrics[f"{head}.{c}.ci_high"]
    assert "calibrated.json" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    trial_runs = [r for r in runs if "workbench.trial_id" in r.data.tags]
    assert len(trial_runs) == 4
    for run in trial_runs:
        m = run.data.metrics
        assert m["hand_grade.correctness.n"] == 10 and m["calibrated.analysis.n_hand"] == 10
        assert "calibrated.correctness.estimate" in m
        assert any(k.startswith("judge_score.correctness.") for k in m)
