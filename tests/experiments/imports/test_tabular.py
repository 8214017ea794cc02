"""The jsonl and csv readers: fields, options, statuses, and their one-line refusals."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from experiments.imports import FORMATS, ImportInputError, ReadOptions, reader
from tests.experiments.imports.conftest import write_csv, write_jsonl


def test_jsonl_groups_rows_into_trials_in_file_order(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "r.jsonl", [
        {"row": 1, "variant": "A", "model": "m", "correct": True, "note": "x"},
        {"row": 1, "variant": "B", "model": "m", "correct": "0"},
        {"row": 2, "variant": "A", "model": "m", "prediction": "Yes", "answer": "No"},
        {"row": 2, "variant": "B", "model": "m", "status": "error"},
    ])  # fmt: skip
    trials = reader("jsonl")(p, ReadOptions(task="hearsay"))
    assert [(t.variant, t.task, t.tool) for t in trials] == [
        ("A", "hearsay", "jsonl"), ("B", "hearsay", "jsonl")
    ]  # fmt: skip
    a, b = trials
    assert [(r.row_id, r.correct, r.prediction) for r in a.rows] == [("1", 1.0, None),
                                                                    ("2", None, "Yes")]  # fmt: skip
    assert a.rows[0].extra == {"note": "x"}
    assert [(r.correct, r.status) for r in b.rows] == [(0.0, "ok"), (None, "error")]


def test_csv_reads_the_same_as_jsonl_and_fields_can_be_renamed(tmp_path: Path) -> None:
    rows = [
        {"row": i, "prompt": v, "provider": "p", "correct": c}
        for v, vec in (("A", [1, 0, 1]), ("B", [0, 0, 1]))
        for i, c in enumerate(vec)
    ]
    opts = ReadOptions(variant_from="prompt", model_from="provider")
    via_csv = reader("csv")(write_csv(tmp_path / "r.csv", rows), opts)
    via_jsonl = reader("jsonl")(write_jsonl(tmp_path / "r.jsonl", rows), opts)
    assert [t.rows for t in via_csv] == [t.rows for t in via_jsonl]
    assert [(t.variant, t.model) for t in via_csv] == [("A", "p"), ("B", "p")]


def test_the_plain_formats_are_registered() -> None:
    assert {"jsonl", "csv"} <= set(FORMATS)


@pytest.mark.parametrize(
    ("rows", "opts", "message"),
    [
        ([{"row": 1, "model": "m", "correct": 1}], ReadOptions(), "no 'variant' field"),
        ([{"row": 1, "variant": "A", "model": "m", "correct": 2}], ReadOptions(), "correct = 2"),
        ([{"row": 1, "variant": "A", "model": "m", "epoch": "x", "correct": 1}], ReadOptions(),
         "epoch = 'x'"),
        ([{"row": 1, "variant": "A", "model": "m", "task": "a", "correct": 1}],
         ReadOptions(task="b"), "--task b"),
        ([{"row": 1, "variant": "A", "model": "m", "prediction": "Yes"}], ReadOptions(),
         "no score and no prediction with its answer"),
    ],
)  # fmt: skip
def test_bad_fields_are_one_line_naming_the_file(
    tmp_path: Path, rows: list[dict[str, object]], opts: ReadOptions, message: str
) -> None:
    p = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(ImportInputError) as e:
        reader("jsonl")(p, opts)
    assert message in str(e.value) and str(p) in str(e.value) and "\n" not in str(e.value)


def _within(seconds: float, work: Callable[[], object]) -> object:
    """`work()`'s result, or a failure if it takes longer than `seconds` (it runs on in a
    daemon thread: a quadratic reader would take hours)."""
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert out, f"still reading after {seconds} s"
    return out[0]


@pytest.mark.slow
def test_a_csv_with_many_columns_is_read_in_linear_time(tmp_path: Path) -> None:
    """A results or grades CSV of 200,000 columns (3 MB) is read, or refused for a column
    given twice, in seconds: the header's duplicate check counted each column over the whole
    header (quadratic), and a 10^6-column file did not finish in 5 minutes."""
    from experiments.trials.grading import GradingError, read_graded_csv

    extra = [f"c{i}" for i in range(200_000)]
    head = ",".join(["row", "variant", "model", "task", "correct", *extra])
    cells = ",".join("0" for _ in extra)
    lines = [head] + [f"{i},{v},m,hearsay,{i % 2},{cells}" for v in "AB" for i in range(3)]
    path = tmp_path / "wide.csv"
    path.write_text("\n".join(lines) + "\n")
    trials = _within(60, lambda: reader("csv")(path, ReadOptions()))
    assert isinstance(trials, list) and len(trials) == 2
    graded = tmp_path / "grades.csv"
    graded.write_text(",".join(["index", *extra, "c7"]) + "\n")

    def refusal() -> object:
        try:
            return read_graded_csv(graded)
        except GradingError as e:
            return e

    refused = _within(60, refusal)
    assert isinstance(refused, GradingError) and "'c7'" in str(refused)
