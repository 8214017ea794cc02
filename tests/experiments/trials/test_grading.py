"""rule_qa, graded by hand: a run gives generations and no score; grades go out as a CSV and
come back checked, into the trial's folder and its MLflow run; bad grade files change nothing.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, workbench_env

pytestmark = pytest.mark.data

ROWS = [
    ("0", "What is the rule for hearsay?", "An out-of-court statement offered for its truth."),
    ("1", "What is the mailbox rule?", "An acceptance is effective on dispatch."),
    ("2", "What is res judicata?", "Claim preclusion: a final judgment bars relitigation."),
    ("3", "What is the parol evidence rule?", "It bars prior agreements contradicting a writing."),
]


def _data(root: Path, lb_dir: Path) -> Path:
    """A LegalBench-layout folder with rule_qa's real prompt and four questions."""
    task = root / "data" / "tasks" / "rule_qa"
    task.mkdir(parents=True)
    shutil.copy(lb_dir / "tasks" / "rule_qa" / "base_prompt.txt", task / "base_prompt.txt")
    lines = ["index\ttext\tanswer\tdoctrine"] + [f"{i}\t{q}\t{a}\tx" for i, q, a in ROWS]
    (task / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root / "data"


@pytest.fixture(scope="module")
def trial(lb_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """rule_qa run once through a stub model, tracked in its own MLflow store."""
    from experiments.testing.stub_server import StubOpenAI

    root = tmp_path_factory.mktemp("grading")
    data = _data(root, lb_dir)
    env = workbench_env(root, data, "grd") | {
        "WORKBENCH_RUNS_DIR": str(root / "runs"),
        "OPENAI_API_KEY": "sk-stub",
    }
    with StubOpenAI(reply_fn=lambda prompt: f"Answer {len(prompt)}.") as stub:
        cmd = ["run", "rule_qa", "--model", "openai/stub", "--api-base", stub.url, "--json"]
        first = run_cli(cmd, env, root)
        yield {"root": root, "env": env, "cmd": cmd, "run": first}


def _summary(t: dict[str, Any]) -> dict[str, Any]:
    assert t["run"].returncode == 0, t["run"].stderr
    return dict(json.loads(t["run"].stdout))


def _trial_dir(t: dict[str, Any]) -> Path:
    return Path(t["root"], "runs", _summary(t)["trial_id"])


def _mlflow_run(t: dict[str, Any]) -> Any:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{t['root']}/mlflow.db")
    return client.get_run(_summary(t)["mlflow_run_id"])


def _exported(t: dict[str, Any]) -> list[dict[str, str]]:
    out = t["root"] / "export.csv"
    if not out.exists():
        r = run_cli(
            ["grade", "export", _summary(t)["trial_id"][:10], "-o", str(out)], t["env"], t["root"]
        )
        assert r.returncode == 0, r.stderr
    return list(csv.DictReader(out.open(encoding="utf-8", newline="")))


def _write(path: Path, rows: list[dict[str, str]], columns: list[str] | None = None) -> Path:
    from experiments.trials.grading import COLUMNS

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns or list(COLUMNS), extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


def test_run_gives_generations_and_no_score(trial: dict[str, Any]) -> None:
    s = _summary(trial)
    assert s["status"] == "complete" and s["n"] == len(ROWS) and s["n_errors"] == 0
    assert s["metric"] == "manual" and s["score"] is None and s["score_on_answered"] is None
    preds = (_trial_dir(trial) / "predictions.jsonl").read_text().splitlines()
    gens = [json.loads(x)["generation"] for x in preds]
    assert all(g.startswith("Answer ") for g in gens) and len(set(gens)) > 1
    run = _mlflow_run(trial)
    assert run.info.status == "FINISHED" and "score" not in run.data.metrics
    assert run.data.tags["workbench.graded"] == "false"


def test_export_lists_each_row_with_an_empty_grade(trial: dict[str, Any]) -> None:
    rows = _exported(trial)
    preds = [
        json.loads(x) for x in (_trial_dir(trial) / "predictions.jsonl").read_text().splitlines()
    ]
    assert [r["index"] for r in rows] == [p["index"] for p in preds]
    by_index = {i: (q, a) for i, q, a in ROWS}
    for r, p in zip(rows, preds, strict=True):
        assert (r["question"], r["reference_answer"]) == by_index[r["index"]]
        assert r["generation"] == p["generation"] and r["grade"] == ""
        assert r["trial_id"] == _summary(trial)["trial_id"]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


BAD: dict[str, tuple[Callable[[list[dict[str, str]]], list[dict[str, str]]], str]] = {
    "unknown trial": (
        lambda rows: [{**r, "trial_id": "f" * 64} for r in rows],
        "line 2, column trial_id: unknown trial",
    ),
    "missing row": (lambda rows: rows[:-1], "1 row(s) of trial"),
    "extra row": (
        lambda rows: [*rows, {**rows[0], "index": "99"}],
        "line 6, column index: row '99' is not a row of trial",
    ),
    "duplicate row": (lambda rows: [*rows, rows[0]], "line 6, column index: row '0' appears twice"),
    "bad grade": (
        lambda rows: [{**r, "grade": "maybe" if r is rows[2] else "1"} for r in rows],
        "line 4 (row 2), column grade: 'maybe' is not a grade",
    ),
    "empty grade": (
        lambda rows: [{**r, "grade": "" if r is rows[1] else "0"} for r in rows],
        "line 3 (row 1), column grade: empty",
    ),
    "changed generation": (
        lambda rows: [
            {**r, "generation": r["generation"] + " Edited." if r is rows[1] else r["generation"]}
            for r in rows
        ],
        "line 3 (row 1), column generation: not the trial's current generation",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_grade_file_names_row_and_column_and_writes_nothing(
    trial: dict[str, Any], tmp_path: Path, case: str
) -> None:
    from experiments.tracking.grades import import_grades
    from experiments.trials.grading import GradingError

    change, message = BAD[case]
    rows = [{**r, "grade": "1"} for r in _exported(trial)]
    path = _write(tmp_path / "g.csv", change(rows))
    before = _snapshot(_trial_dir(trial))
    with pytest.raises(GradingError) as err:
        import_grades(path, root=trial["root"] / "runs", track=False)
    assert message in str(err.value) and str(path) in str(err.value)
    assert _snapshot(_trial_dir(trial)) == before


def test_bad_columns_and_cli_exit_code(trial: dict[str, Any], tmp_path: Path) -> None:
    from experiments.trials.grading import COLUMNS

    rows = [{**r, "grade": "1"} for r in _exported(trial)]
    columns = [c for c in COLUMNS if c != "grade"] + ["score"]
    path = _write(tmp_path / "cols.csv", [{**r, "score": "1"} for r in rows], columns)
    before = _snapshot(_trial_dir(trial))
    r = run_cli(["grade", "import", str(path)], trial["env"], trial["root"])
    assert r.returncode == 1 and r.stdout == "" and "Traceback" not in r.stderr
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1
    assert "line 1: missing column(s) grade; unknown column(s) score" in err
    assert _snapshot(_trial_dir(trial)) == before


def test_round_trip_scores_the_trial_and_its_run(trial: dict[str, Any], tmp_path: Path) -> None:
    rows = _exported(trial)
    marks = ["1", "incorrect", "Correct", "0"]  # 2 of 4 correct
    # what a spreadsheet may do to a generation (line endings, trailing blanks) is accepted
    path = _write(
        tmp_path / "graded.csv",
        [
            {**r, "grade": g, "generation": r["generation"].replace("\n", "\r\n") + "  "}
            for r, g in zip(rows, marks, strict=True)
        ],
    )
    r = run_cli(["grade", "import", str(path), "--json"], trial["env"], trial["root"])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["metric"] == "human-graded accuracy" and out["score"] == 0.5 and out["graded"] == 4
    saved = json.loads((_trial_dir(trial) / "summary.json").read_text())
    assert saved["score"] == 0.5 and saved["graded"] == 4 and saved["status"] == "complete"
    grades = json.loads((_trial_dir(trial) / "grades.json").read_text())
    assert [g["grade"] for g in grades["grades"]] == [1, 0, 1, 0]
    run = _mlflow_run(trial)
    assert out["mlflow_run_id"] == run.info.run_id
    assert run.data.metrics["human_graded_accuracy"] == 0.5 and run.data.metrics["n_graded"] == 4
    assert run.data.tags["workbench.graded"] == "true"
    # a rerun of the same trial (answers from the cache) keeps the grades and its one run
    again = run_cli(trial["cmd"], trial["env"], trial["root"])
    assert again.returncode == 0, again.stderr
    s = json.loads(again.stdout)
    assert s["score"] == 0.5 and s["graded"] == 4 and s["mlflow_reused"] is True
    assert (_trial_dir(trial) / "grades.json").is_file()


def test_formula_cells_are_quoted_on_export_and_match_on_import(tmp_path: Path) -> None:
    """A generation such as '=HYPERLINK(...)' is not a formula in Excel, and still matches."""
    from experiments.trials.grading import csv_cell, csv_uncell

    for text in ["=1+1", "+31 6", "-x", "@SUM(A1)", "\tx", "'=x", "''@y", "'plain", "a=b", ""]:
        cell = csv_cell(text)
        assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), text
        assert csv_uncell(cell) == text
    assert csv_cell("Answer 3.") == "Answer 3." and csv_cell("=x") == "'=x"


def test_rerun_never_applies_old_grades_to_new_generations(
    trial: dict[str, Any], tmp_path: Path
) -> None:
    """Graded, then rerun with --no-cache: an incomplete rerun keeps the graded trial as it
    was; a complete one with new generations drops the grades (disk and MLflow), and the old
    grades file is refused, naming the line."""
    import mlflow

    from experiments.testing.stub_server import StubOpenAI

    env, root = trial["env"], trial["root"]
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    with StubOpenAI(reply_fn=lambda prompt: "=Yes, it applies.") as stub:
        cmd = ["run", "rule_qa", "--model", "openai/stub-rerun", "--api-base", stub.url]
        cmd += ["--retries", "0", "--json"]
        first = run_cli(cmd, env, root)
        assert first.returncode == 0, first.stderr
        tid = json.loads(first.stdout)["trial_id"]
        folder = root / "runs" / tid
        out = tmp_path / "export.csv"
        assert run_cli(["grade", "export", tid, "-o", str(out)], env, root).returncode == 0
        rows = list(csv.DictReader(out.open(encoding="utf-8", newline="")))
        assert all(r["generation"] == "'=Yes, it applies." for r in rows)  # not a formula
        graded = _write(tmp_path / "graded.csv", [{**r, "grade": "1"} for r in rows])
        imported = run_cli(["grade", "import", str(graded), "--json"], env, root)
        assert imported.returncode == 0, imported.stderr
        graded_run = json.loads(imported.stdout)["mlflow_run_id"]
        before = _snapshot(folder)
        assert json.loads(before["summary.json"])["score"] == 1.0

        # an incomplete rerun: the graded trial stays as it was, the attempt beside it
        stub.reply_fn = lambda prompt: "No."
        stub.fail_fn = lambda prompt: "mailbox" in prompt
        bad = run_cli([*cmd, "--no-cache"], env, root)
        assert bad.returncode == 1 and "incomplete" in bad.stderr
        s = json.loads(bad.stdout)
        assert (
            s["status"] != "complete"
            and "was not saved over the graded trial" in (s["grades_kept"])
        )
        assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
        attempt = [json.loads(x) for x in Path(s["predictions"]).read_text().splitlines()]
        assert folder not in Path(s["predictions"]).parents
        kept_attempt = {p.name: p.read_bytes() for p in Path(s["predictions"]).parent.iterdir()}
        assert sum(p["error"] is not None for p in attempt) == 1
        exp = client.get_experiment_by_name("grd/run/rule_qa")
        assert exp is not None
        runs = {
            r.info.run_id: r
            for r in client.search_runs([exp.experiment_id], f"tags.`workbench.trial_id` = '{tid}'")
        }
        assert runs[graded_run].info.status == "FINISHED"  # the graded run is kept
        assert runs[graded_run].data.metrics["human_graded_accuracy"] == 1.0
        # the rerun was not logged: no FAILED run beside the graded one (issue 30, defect 15)
        assert list(runs) == [graded_run] and s["mlflow_kept_run_id"] == graded_run

        # a complete rerun with other generations: grades dropped, on disk and in MLflow
        stub.fail_fn = None
        good = run_cli([*cmd, "--no-cache"], env, root)
    assert good.returncode == 0, good.stderr
    s = json.loads(good.stdout)
    assert s["score"] is None and "grades were dropped" in s["grades_dropped"]
    assert "grades.json" not in _snapshot(folder)
    # the kept attempt outlives the rewrite of the trial's folder
    assert _snapshot(root / "runs" / "incomplete-reruns" / tid) == kept_attempt
    runs = {
        r.info.run_id: r
        for r in client.search_runs([exp.experiment_id], f"tags.`workbench.trial_id` = '{tid}'")
    }
    assert list(runs) == [s["mlflow_run_id"]] != [graded_run] and not s["mlflow_reused"]
    new = runs[s["mlflow_run_id"]]
    assert new.info.status == "FINISHED" and new.data.tags["workbench.graded"] == "false"
    assert "human_graded_accuracy" not in new.data.metrics and "score" not in new.data.metrics

    # the grades made on the old generations are refused, naming the line; nothing written
    before = _snapshot(folder)
    refused = run_cli(["grade", "import", str(graded)], env, root)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "line 2 (row 0), column generation: not the trial's current generation" in (
        refused.stderr
    )
    assert _snapshot(folder) == before


@pytest.mark.model
@pytest.mark.slow
def test_rule_qa_on_the_local_model(lb_dir: Path, tmp_path: Path) -> None:
    data = _data(tmp_path, lb_dir)
    env = {
        **os.environ,
        "LEGALBENCH_DIR": str(data),
        "WORKBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "WORKBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "WORKBENCH_NO_TRACK": "1",
    }
    r = run_cli(
        ["run", "rule_qa", "--model", "local/smollm2", "--limit", "2", "--json"], env, tmp_path
    )
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["status"] == "complete" and s["score"] is None and s["n"] == 2
    preds = [json.loads(x) for x in Path(s["predictions"]).read_text().splitlines()]
    assert all(isinstance(p["generation"], str) and p["error"] is None for p in preds)
