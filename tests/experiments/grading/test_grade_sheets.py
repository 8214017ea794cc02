"""Blind, shuffled, seeded grade sheets; filled sheets checked whole before one atomic append;
partial sheets, re-grades kept, the same file twice counted once, stale answers refused."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from experiments.grading.add import GradeSheetError, add_grades
from experiments.grading.agreement import grader_agreement
from experiments.grading.sheets import SheetError, make_sheet
from experiments.grading.store import (
    current_grades,
    graded_at_random,
    load_grades,
    load_sheet_key,
)
from experiments.trials.run import TrialResult
from promptlib import Catalog
from tests.experiments.grading.sheet_trials import MODEL, VARIANTS, make_trials

pytestmark = pytest.mark.data


@pytest.fixture
def setup(catalog: Catalog, tmp_path: Path) -> dict[str, Any]:
    runs, grades = tmp_path / "runs", tmp_path / "grades"
    trials = make_trials(catalog, runs)
    return {"catalog": catalog, "runs": runs, "grades": grades, "trials": trials, "tmp": tmp_path}


def _sheet(s: dict[str, Any], name: str = "s1", seed: int = 7, **kw: Any) -> Path:
    out = s["tmp"] / "out" / f"{name}.csv"
    out.parent.mkdir(exist_ok=True)
    dirs = [s["runs"] / t.trial_id for t in s["trials"]]
    make_sheet(dirs, s["catalog"], seed=seed, out=out, root=s["grades"], **kw)
    return out


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open(encoding="utf-8", newline="")))


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


def _add(s: dict[str, Any], path: Path, grader: str = "ann") -> Any:
    return add_grades(path, grader, root=s["grades"], runs_root=s["runs"])


# ---- blindness ---------------------------------------------------------------------------------
def test_a_sheet_never_reveals_the_variant(setup: dict[str, Any]) -> None:
    trials: list[TrialResult] = setup["trials"]
    out = _sheet(setup)
    text = out.read_text(encoding="utf-8") + out.with_name("s1.guide.md").read_text()
    forbidden = [*VARIANTS, "claude", MODEL, "scripted", str(setup["runs"]), str(setup["tmp"])]
    for t in trials:
        forbidden += [t.trial_id, t.trial_id[:8], t.variant_id[:8], t.spec.variant.label]
    # the prompts as rendered (they differ between the variants): their instructions never show
    from promptlib.render import compile_prompt

    task = setup["catalog"].task("hearsay")
    for t in trials:
        compiled = compile_prompt(t.spec.variant, task)
        first = compiled.render(task.rows("test")[0])
        forbidden.append(first[:60])
    leaks = [f for f in forbidden if f and f.lower() in text.lower()]
    assert leaks == []
    rows = _rows(out)
    assert set(rows[0]) == {"sheet", "item", "input", "reference_answer", "answer",
                            "correctness", "analysis", "notes"}  # fmt: skip
    # the order does not follow the trials: both trials' items are interleaved
    key = load_sheet_key("s1", setup["grades"])
    assert key is not None and len(key.items) == 2 * len(trials[0].predictions)
    owners = [i.trial_id for i in key.items]
    assert owners != sorted(owners) and owners != sorted(owners, reverse=True)
    # the input is the row's own text from the data, the answer its generation
    gens = {(t.trial_id, p.index): p.generation for t in trials for p in t.predictions}
    data = {r["index"]: r["text"] for r in task.rows("test")}
    for row, it in zip(rows, key.items, strict=True):
        assert row["item"] == it.item and row["answer"] == gens[(it.trial_id, it.index)]
        assert row["input"] == data[it.index]


def test_the_order_is_seeded(setup: dict[str, Any]) -> None:
    def order(name: str, seed: int) -> list[tuple[str, str]]:
        _sheet(setup, name, seed)
        key = load_sheet_key(name, setup["grades"])
        assert key is not None
        return [(i.trial_id, i.index) for i in key.items]

    a, again, other = order("a", 1), order("b", 1), order("c", 2)
    assert a == again and a != other and sorted(a) == sorted(other)
    # the order of the trials given does not matter
    out = setup["tmp"] / "out" / "d.csv"
    dirs = [setup["runs"] / t.trial_id for t in reversed(setup["trials"])]
    make_sheet(dirs, setup["catalog"], seed=1, out=out, root=setup["grades"])
    key = load_sheet_key("d", setup["grades"])
    assert key is not None and [(i.trial_id, i.index) for i in key.items] == a


def test_limit_takes_the_top_of_the_shuffle_and_names_are_not_reused(
    setup: dict[str, Any],
) -> None:
    _sheet(setup, "full", 3)
    _sheet(setup, "cut", 3, limit=4)
    full, cut = load_sheet_key("full", setup["grades"]), load_sheet_key("cut", setup["grades"])
    assert full is not None and cut is not None
    assert [(i.trial_id, i.index) for i in cut.items] == [
        (i.trial_id, i.index) for i in full.items[:4]
    ]
    with pytest.raises(SheetError, match="exists already"):
        _sheet(setup, "cut", 4)


# ---- adding grades -----------------------------------------------------------------------------
def test_partial_sheet_regrade_and_idempotence(setup: dict[str, Any]) -> None:
    out = _sheet(setup)
    rows = _rows(out)
    for r in rows[:3]:  # graded from the top: three items, both criteria
        r["correctness"], r["analysis"] = "1", "0"
    rows[3]["correctness"] = "Incorrect"  # one criterion only
    filled = _write(setup["tmp"] / "filled.csv", rows)
    first = _add(setup, filled)
    assert (first.written, first.unchanged, first.graded_items, first.prefix) == (7, 0, 4, 3)
    again = _add(setup, filled)  # the same file twice: counted once
    assert (again.written, again.unchanged) == (0, 7)
    assert len(load_grades(setup["grades"])) == 7
    rows[0]["correctness"] = "0"  # a re-grade by the same grader
    _add(setup, _write(setup["tmp"] / "filled2.csv", rows))
    rows[0]["correctness"] = "1"
    _add(setup, _write(setup["tmp"] / "filled3.csv", rows), grader="bob")
    stored = load_grades(setup["grades"])
    key = load_sheet_key("s1", setup["grades"])
    assert key is not None
    it = key.by_item()[rows[0]["item"]]
    mine = [g for g in stored if (g.trial_id, g.index, g.criterion) == (it.trial_id, it.index,
                                                                         "correctness")]  # fmt: skip
    assert [(g.grader, g.grade) for g in mine] == [("ann", 1), ("ann", 0), ("bob", 1)]
    now = current_grades(stored, it.trial_id, runs_root=setup["runs"])
    assert now[(it.index, "correctness")] == 0.5  # ann's latest 0, bob's 1
    assert now[(it.index, "analysis")] == 0.0
    sub = graded_at_random([t.trial_id for t in setup["trials"]], "analysis",
                           root=setup["grades"], runs_root=setup["runs"])  # fmt: skip
    assert sub.valid and len(sub.rows) == 3


BAD_CELLS = [
    ("correctness", "maybe", "column correctness: 'maybe' is not a grade"),
    ("analysis", "2", "column analysis: '2' is not a grade"),
    ("item", "999", "column item: '999' is not an item of sheet"),
    ("answer", "edited", "column answer: not the answer the sheet showed"),
]


@pytest.mark.parametrize(("column", "value", "message"), BAD_CELLS)
def test_bad_cells_are_refused_by_line_and_column_and_nothing_is_written(
    setup: dict[str, Any], column: str, value: str, message: str
) -> None:
    out = _sheet(setup)
    rows = _rows(out)
    for r in rows:
        r["correctness"] = r["analysis"] = "1"
    rows[2][column] = value
    filled = _write(setup["tmp"] / "bad.csv", rows)
    with pytest.raises(GradeSheetError) as err:
        _add(setup, filled)
    assert "line 4" in str(err.value) and message in str(err.value)
    assert load_grades(setup["grades"]) == []


def test_unknown_sheet_and_missing_grader_are_refused(setup: dict[str, Any]) -> None:
    rows = _rows(_sheet(setup))
    for r in rows:
        r["sheet"] = "nosuch"
    with pytest.raises(GradeSheetError, match="unknown sheet 'nosuch'"):
        _add(setup, _write(setup["tmp"] / "x.csv", rows))
    with pytest.raises(GradeSheetError, match="--grader"):
        _add(setup, _sheet(setup, "s2"), grader="  ")


def test_a_stale_generation_is_refused(setup: dict[str, Any], catalog: Catalog) -> None:
    """The trial was rerun (a new answer) after the sheet was made: its grade is refused."""
    out = _sheet(setup)
    rows = _rows(out)
    rows[0]["correctness"] = "1"
    key = load_sheet_key("s1", setup["grades"])
    assert key is not None
    it = key.by_item()[rows[0]["item"]]
    preds = setup["runs"] / it.trial_id / "predictions.jsonl"
    lines = [json.loads(x) for x in preds.read_text().splitlines()]
    for p in lines:
        if str(p["index"]) == it.index:
            p["generation"] = "A different answer."
    preds.write_text("".join(json.dumps(p) + "\n" for p in lines))
    with pytest.raises(GradeSheetError) as err:
        _add(setup, _write(setup["tmp"] / "f.csv", rows))
    assert "line 2" in str(err.value) and "rerun since the sheet was made" in str(err.value)
    assert load_grades(setup["grades"]) == []


def test_grades_of_a_changed_generation_stop_counting(setup: dict[str, Any]) -> None:
    rows = _rows(_sheet(setup))
    rows[0]["correctness"] = "1"
    _add(setup, _write(setup["tmp"] / "f.csv", rows))
    g = load_grades(setup["grades"])[0]
    assert current_grades([g], g.trial_id, runs_root=setup["runs"]) == {
        (g.index, "correctness"): 1.0
    }
    assert current_grades([g], g.trial_id, generations={g.index: "0" * 64}) == {}


def test_grading_out_of_order_is_not_a_random_subset(setup: dict[str, Any]) -> None:
    rows = _rows(_sheet(setup))
    rows[0]["correctness"] = rows[2]["correctness"] = "1"  # item 2 skipped
    _add(setup, _write(setup["tmp"] / "f.csv", rows))
    sub = graded_at_random([t.trial_id for t in setup["trials"]], "correctness",
                           root=setup["grades"], runs_root=setup["runs"])  # fmt: skip
    assert not sub.valid and "out of order" in sub.reason
    assert sub.n_graded == 2 and len(sub.rows) == 1


def test_a_grader_is_one_grader_whatever_the_case_or_spacing(setup: dict[str, Any]) -> None:
    """'Ann Lee' re-grading as 'ann  lee' is a re-grade (her latest grade counts), not a
    second grader averaged with the first (was: 0.5) nor a second grader to agree with."""
    rows = _rows(_sheet(setup))
    rows[0]["correctness"] = "1"
    _add(setup, _write(setup["tmp"] / "f1.csv", rows), grader="Ann Lee")
    again = _add(setup, _write(setup["tmp"] / "f2.csv", rows), grader="ANN LEE")
    assert (again.written, again.unchanged) == (0, 1)  # the same grade again: not re-added
    rows[0]["correctness"] = "0"
    _add(setup, _write(setup["tmp"] / "f3.csv", rows), grader="ann  lee")
    stored = load_grades(setup["grades"])
    assert [g.grade for g in stored] == [1, 0]
    g = stored[-1]
    assert current_grades(stored, g.trial_id, runs_root=setup["runs"]) == {
        (g.index, "correctness"): 0.0
    }
    assert grader_agreement(stored) == []
