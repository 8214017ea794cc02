"""The jsonl and csv readers: fields, options, statuses, and their one-line refusals."""

from __future__ import annotations

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
