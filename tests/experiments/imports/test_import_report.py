"""An import's sample-level HTML report (issue 34, point 1): the rows where the arms disagree,
each with the source tool's own sample id, its input and both outputs; a word diff of the two
prompts where the source recorded them, none where it did not; and a report folder that cannot
be written leaves the import tracked, with its report on the run and a note."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from experiments.imports.arms import NO_TASK
from experiments.imports.records import ImportedRow, ImportedTrial, ReadOptions
from experiments.imports.report import build_import_report
from experiments.imports.run import Tests, _arms, _verdict, import_results, read_all
from tests.experiments.imports.conftest import Workbench, write_jsonl

DATA = Path(__file__).resolve().parents[2] / "data" / "imports"
(LM_RESULTS,) = (DATA / "lmeval").glob("results_*.json")
SOURCES = {
    "inspect": [DATA / "inspect" / "stub_a.eval", DATA / "inspect" / "stub_b.eval"],
    "lm-eval": [LM_RESULTS],
    "promptfoo": [DATA / "promptfoo" / "results.json"],
}
TESTS = Tests(n_resamples=200)
RECORD = {"name": "imp", "import_id": "0" * 64}
CREATED = "2026-12-06T00:00:00+00:00"


def _flip(trial: ImportedTrial, rows: set[str]) -> ImportedTrial:
    """The trial with its correctness (and its answer) turned on `rows`: the fixtures' two
    arms of inspect and lm-eval agree on every row, and the report is about where they do not."""

    def turn(r: ImportedRow) -> ImportedRow:
        if r.row_id not in rows or r.correct is None:
            return r
        other = "No" if r.prediction == "Yes" else "Yes"
        return dataclasses.replace(r, correct=1.0 - r.correct, prediction=other)

    return dataclasses.replace(trial, rows=tuple(turn(r) for r in trial.rows))


def _doc(trials: list[ImportedTrial], **kw: Any) -> dict[str, Any]:
    compared, arms = _arms(trials, TESTS, {"hearsay"})
    verdict = _verdict(str(RECORD["name"]), arms, TESTS, None)
    report = build_import_report(RECORD, compared, arms, verdict, created=CREATED, **kw)
    return report.to_dict()


def _disagreeing(trials: list[ImportedTrial]) -> set[str]:
    a, b = ({r.key: r.correct for r in t.rows} for t in trials)
    return {k for k in a.keys() & b.keys() if a[k] is not None and a[k] != b[k]}


@pytest.mark.parametrize("fmt", sorted(SOURCES))
def test_each_formats_rows_carry_the_tools_sample_ids_inputs_and_a_prompt_diff(
    fmt: str,
) -> None:
    if fmt == "inspect":
        pytest.importorskip("inspect_ai")
    trials = read_all(fmt, SOURCES[fmt], ReadOptions(task="hearsay"))
    assert len(trials) == 2
    if fmt != "promptfoo":  # the fixtures' arms agree everywhere: make them differ on two rows
        trials = [trials[0], _flip(trials[1], {"1", "4"})]
    want = _disagreeing(trials)
    assert want  # the case probed
    doc = _doc(trials)
    assert doc["kind"] == "import" and doc["id"] == RECORD["import_id"]
    (sample,) = doc["samples"]
    assert {r["index"] for r in sample["rows"]} == want == {r["sample_id"] for r in sample["rows"]}
    assert sample["n_disagree"] == len(want) and sample["n_shown"] == len(want)
    by_id = {t.variant: {r.key: r for r in t.rows} for t in trials}
    for row in sample["rows"]:
        a = by_id[sample["a"]][row["index"]]
        b = by_id[sample["b"]][row["index"]]
        assert (row["a"]["output"], row["b"]["output"]) == (a.prediction, b.prediction)
        assert row["a"]["correct"] == (a.correct == 1.0) and row["label"] == a.answer
        assert doc["inputs"]["hearsay"][row["index"]] == a.input_text  # the source's input
        # both arms' prompts are recorded: the diff shows the variant's words, the row masked
        ops = sample["diffs"][row["diff"]]
        assert {"-", "+"} <= {op for op, _ in ops}
        assert any("⟨row input⟩" in text for _, text in ops), ops


def test_an_import_without_prompts_has_no_diff_and_says_so(tmp_path: Path) -> None:
    rows = [
        {"row": f"s{i}", "variant": v, "model": "m", "task": "hearsay", "correct": c,
         "prediction": "Yes" if c else "No", "answer": "Yes"}
        for v, vec in {"A": [1, 0, 1, 1], "B": [1, 1, 0, 1]}.items()
        for i, c in enumerate(vec)
    ]  # fmt: skip
    trials: list[ImportedTrial] = []
    for v in ("A", "B"):
        path = write_jsonl(tmp_path / f"{v}.jsonl", [r for r in rows if r["variant"] == v])
        trials += read_all("jsonl", [path], ReadOptions())
    legal = {"s1": {"index": "s1", "text": "the statement", "answer": "Yes", "slice": "x"},
             "s2": {"index": "s2", "text": "another", "answer": "No"}}  # fmt: skip
    doc = _doc(trials, task_rows=lambda task: legal if task == "hearsay" else None)
    (sample,) = doc["samples"]
    assert [(r["sample_id"], r["outcome"], r["diff"]) for r in sample["rows"]] == [
        ("s1", "b_right", None), ("s2", "a_right", None),
    ]  # fmt: skip
    assert sample["diffs"] == []
    assert "the source files record no prompts for both arms: no prompt diffs" in doc["notes"]
    # s1's LegalBench row has the same answer: its text and slice are shown; s2's has another
    # answer (an id that is only a position): not that row's text
    assert doc["inputs"]["hearsay"] == {"s1": "the statement", "s2": ""}
    assert sample["rows"][0]["slice"] == "x" and sample["rows"][1]["slice"] is None


def test_the_report_is_the_same_whatever_the_order_of_the_files_and_rows() -> None:
    trials = read_all("promptfoo", SOURCES["promptfoo"], ReadOptions(task="hearsay"))
    again = [dataclasses.replace(t, rows=tuple(reversed(t.rows))) for t in reversed(trials)]
    assert json.dumps(_doc(trials)) == json.dumps(_doc(again))
    assert NO_TASK not in json.dumps(_doc(trials))


def _page_doc(html: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json"[^>]*>(.*?)</script>', html, re.S)
    assert m is not None
    data: dict[str, Any] = json.loads(m.group(1))
    return data


@pytest.mark.data
def test_a_tracked_import_writes_its_report_and_logs_it_on_its_run(
    tmp_path: Path, lb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wb = Workbench(tmp_path, lb_dir, monkeypatch)
    out = wb("import", "promptfoo", str(SOURCES["promptfoo"][0]), "--task", "hearsay",
             "--name", "pf", "--n-resamples", "200", "--json")  # fmt: skip
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    page = Path(result["report"]["path"])
    assert page.name == "index.html" and page.parent.name == result["import_id"]
    assert page.parent.parent.name == "pf" and result["report"]["logged"] is True
    doc = _page_doc(page.read_text())
    assert doc["kind"] == "import" and [r["sample_id"] for r in doc["samples"][0]["rows"]]
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    run = result["tracking"]["run_id"]
    assert "index.html" in {f.path for f in client.list_artifacts(run)}
    text = (wb("import", "promptfoo", str(SOURCES["promptfoo"][0]), "--task", "hearsay",
               "--name", "pf", "--n-resamples", "200")).stdout  # fmt: skip
    assert f"report: {page}" in text


@pytest.mark.data
def test_an_unwritable_report_folder_leaves_the_import_tracked_with_a_note(
    tmp_path: Path, lb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Workbench(tmp_path, lb_dir, monkeypatch)  # its own MLflow store
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the reports folder should be")
    result = import_results(
        "promptfoo", SOURCES["promptfoo"], ReadOptions(task="hearsay"), tests=TESTS,
        known_tasks={"hearsay"}, name="pf", reports_dir=blocker / "reports",
    )  # fmt: skip
    assert result.tracking is not None and result.report is not None
    assert result.report["path"] is None and result.report["logged"] is True
    note = str(result.report["note"])
    assert "the report was not written to" in note and "run the import again" in note
    assert blocker.read_text().startswith("a file")  # nothing half-written
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    run = client.get_run(result.tracking["run_id"])
    assert run.info.status == "FINISHED"
    assert "index.html" in {f.path for f in client.list_artifacts(run.info.run_id)}
    assert result.to_dict()["report"]["note"] == note
