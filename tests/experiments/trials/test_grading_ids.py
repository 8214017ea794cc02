"""Review rev3 (issue 19): grade import matches row ids exactly as exported, so ids that differ
only by whitespace ("0" and "0 ", which a split may hold as two rows) import; a cell that a
spreadsheet trimmed or padded is matched when only one row fits, and refused naming the CSV,
the line and what to do when several do. Hand-made trial folders, in-process (fast)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from experiments.tracking.grades import import_grades
from experiments.trials.grading import COLUMNS, GradingError

TRIAL = "cd" * 32
ROWS = {"0": "Out of court.", "0 ": "A civil wrong.", " 12": "Dispatch."}


def _trial(root: Path, rows: dict[str, str] = ROWS) -> Path:
    folder = root / TRIAL
    folder.mkdir(parents=True)
    summary = {
        "trial_id": TRIAL, "task": "rule_qa", "split": "test", "metric": "manual",
        "score": None, "status": "complete", "n": len(rows), "n_errors": 0,
    }  # fmt: skip
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    preds = "".join(
        json.dumps({"index": i, "answer": "x", "generation": g, "parsed": None}) + "\n"
        for i, g in rows.items()
    )
    (folder / "predictions.jsonl").write_text(preds, encoding="utf-8")
    return folder


def _csv(path: Path, cells: dict[str, tuple[str, str]]) -> Path:
    """cells: index cell -> (generation, grade)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(COLUMNS)
    for idx, (gen, grade) in cells.items():
        w.writerow([TRIAL, idx, "q", "a", gen, grade])
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


def test_ids_differing_by_whitespace_import_as_exported(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    folder = _trial(root)
    grades = {"0": "1", "0 ": "0", " 12": "1"}
    path = _csv(tmp_path / "g.csv", {i: (ROWS[i], grades[i]) for i in ROWS})
    summary = import_grades(path, root=root, track=False)
    assert summary["graded"] == 3 and summary["score"] == pytest.approx(2 / 3)
    doc = json.loads((folder / "grades.json").read_text())
    assert {g["index"]: g["grade"] for g in doc["grades"]} == {"0": 1, "0 ": 0, " 12": 1}


def test_a_trimmed_cell_matches_its_only_look_alike(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    _trial(root, {"0": "Out of court.", " 12": "Dispatch."})
    path = _csv(tmp_path / "g.csv", {"0": ("Out of court.", "1"), "12": ("Dispatch.", "0")})
    summary = import_grades(path, root=root, track=False)
    assert summary["graded"] == 2 and summary["score"] == 0.5


@pytest.mark.parametrize(
    ("cells", "needle"),
    [
        # a spreadsheet padded "0" to " 0": "0" or "0 "?
        (
            {
                " 0": ("Out of court.", "1"),
                "0 ": ("A civil wrong.", "0"),
                " 12": ("Dispatch.", "1"),
            },
            "' 0' is none of trial cdcdcdcdcdcd's rows '0', '0 ', which differ only by spaces",
        ),
        (
            {
                "0": ("Out of court.", "1"),
                "0  ": ("A civil wrong.", "0"),
                " 12": ("Dispatch.", "1"),
            },
            "rows '0', '0 ', which differ only by spaces",
        ),
    ],
)
def test_ambiguous_or_unknown_cells_are_refused(
    tmp_path: Path, cells: dict[str, tuple[str, str]], needle: str
) -> None:
    root = tmp_path / "runs"
    folder = _trial(root)
    path = _csv(tmp_path / "g.csv", cells)
    with pytest.raises(GradingError) as err:
        import_grades(path, root=root, track=False)
    msg = str(err.value)
    assert msg.startswith(f"{path}: line ") and "column index" in msg and "\n" not in msg
    assert needle in msg
    assert not (folder / "grades.json").exists()


def test_a_trimmed_duplicate_says_what_happened_and_what_to_do(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    _trial(root)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(COLUMNS)
    w.writerow([TRIAL, "0", "q", "a", "Out of court.", "1"])
    w.writerow([TRIAL, "0", "q", "a", "A civil wrong.", "1"])  # was "0 "
    w.writerow([TRIAL, " 12", "q", "a", "Dispatch.", "1"])
    path = tmp_path / "g.csv"
    path.write_text(buf.getvalue(), encoding="utf-8")
    with pytest.raises(GradingError) as err:
        import_grades(path, root=root, track=False)
    msg = str(err.value)
    assert f"{path}: line 3, column index: row '0' appears twice" in msg
    assert "'0 '" in msg and "workbench grade export" in msg and "\n" not in msg


def test_grade_import_leaves_no_lock_file_in_runs(tmp_path: Path) -> None:
    """runs/ holds only results: the folder lock's file goes when the lock is released, and a
    stale one (a killed process's) neither blocks nor confuses the import."""
    root = tmp_path / "runs"
    _trial(root)
    (root / f".{TRIAL}.lock").write_text("")  # left by a process killed while holding it
    path = _csv(tmp_path / "g.csv", {i: (g, "1") for i, g in ROWS.items()})
    import_grades(path, root=root, track=False)
    assert sorted(p.name for p in root.iterdir()) == [TRIAL]
