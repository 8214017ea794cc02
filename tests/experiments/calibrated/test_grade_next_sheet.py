"""`workbench grade next` writes the next rows of a sheet's random order as a new blind
sheet (through `grading.sheets.make_sheet`); graded and added, they count as a random subset
with the first sheet's graded prefix, and the next call moves on."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from experiments import output
from experiments.calibrated import calibrated_report
from experiments.calibrated.next import next_items
from experiments.grading.store import load_sheet_key
from experiments.testing.calibrated_sim import CRITERION, SimSet, grade_rows, prepare_set
from promptlib import Catalog

pytestmark = pytest.mark.data


@pytest.fixture
def sim(catalog: Catalog, tmp_path: Path) -> SimSet:
    s = prepare_set(catalog, tmp_path / "set", n=60, p=(0.6, 0.5), biases=(0.1,), seed=7)
    assert grade_rows(s, s.sheet.csv_path, 0, 30) == 30  # 25% of 120 items, top to bottom
    return s


def _next(s: SimSet, catalog: Catalog, out: Path | None, k: int = 10):  # type: ignore[no-untyped-def]
    pair = (s.arms[0].variant, s.arms[1].variant)
    return next_items(
        s.arms, pair, CRITERION, k=k, target=0.01, runs_root=s.runs, grades_root=s.grades,
        catalog=catalog, out=out,
    )  # fmt: skip


def test_next_rows_go_on_a_new_blind_sheet_in_their_order(
    sim: SimSet, catalog: Catalog, tmp_path: Path
) -> None:
    found = _next(sim, catalog, tmp_path / "next1.csv")
    assert not found.stop and found.more_needed and found.sheet == "next1"
    assert [it.position for it in found.items] == list(range(30, 40))
    key = load_sheet_key("next1", sim.grades)
    first = load_sheet_key(sim.sheet.sheet, sim.grades)
    assert key is not None and first is not None and key.criteria == (CRITERION,)
    by_pos = {i.position: i for i in first.items}
    # the key records the rows in the first sheet's order
    assert [(i.trial_id, i.index) for i in key.items] == [
        (by_pos[p].trial_id, by_pos[p].index) for p in range(30, 40)
    ]
    assert [i.position for i in key.items] == list(range(10))
    text = (tmp_path / "next1.csv").read_text()
    rows = list(csv.DictReader(text.splitlines()))
    assert len(rows) == 10 and all(r[CRITERION] == "" for r in rows)
    for arm in sim.arms:  # blind: no trial id, variant or model
        assert arm.trial_id[:8] not in text and arm.variant not in text and arm.model not in text
    shown = output.next_items(found, explain=True)
    assert "written as the blind sheet next1" in shown and "workbench grade add" in shown
    assert "sampling: uniform" in shown
    assert json.loads(output.as_json(found.to_dict()))["sampling"] == "uniform"


def test_graded_next_sheet_counts_as_random_and_the_next_call_moves_on(
    sim: SimSet, catalog: Catalog, tmp_path: Path
) -> None:
    found = _next(sim, catalog, tmp_path / "next1.csv")
    before = calibrated_report(
        "sim", sim.arms, sim.pairs, criteria=(CRITERION,), runs_root=sim.runs,
        grades_root=sim.grades,
    ).cells[0].comparisons[0]  # fmt: skip
    assert grade_rows(sim, tmp_path / "next1.csv", 0, 10) == 10
    after = calibrated_report(
        "sim", sim.arms, sim.pairs, criteria=(CRITERION,), runs_root=sim.runs,
        grades_root=sim.grades,
    ).cells[0].comparisons[0]  # fmt: skip
    assert after.n_hand_a + after.n_hand_b == before.n_hand_a + before.n_hand_b + 10
    assert after.random_subset and after.subset_note is None
    again = _next(sim, catalog, None)
    assert [it.position for it in again.items] == list(range(40, 50))
    assert again.sheet_csv is not None and Path(again.sheet_csv).name.endswith("-next-1.csv")
    Path(again.sheet_csv).unlink()  # written in the working folder
    Path(again.guide or "").unlink()
    assert not {(i.trial_id, i.index) for i in again.items} & {
        (i.trial_id, i.index) for i in found.items
    }


def test_a_sheet_graded_out_of_order_is_still_flagged(
    sim: SimSet, catalog: Catalog, tmp_path: Path
) -> None:
    _next(sim, catalog, tmp_path / "next1.csv")
    grade_rows(sim, tmp_path / "next1.csv", 5, 10)  # skipped the first five
    row = calibrated_report(
        "sim", sim.arms, sim.pairs, criteria=(CRITERION,), runs_root=sim.runs,
        grades_root=sim.grades,
    ).cells[0].comparisons[0]  # fmt: skip
    assert not row.random_subset and row.subset_note


def test_report_points_at_grade_report_only_with_judge_runs_or_grades(
    sim: SimSet, tmp_path: Path
) -> None:
    from experiments.calibrated.report import calibration_data

    ids = [a.trial_id for a in sim.arms]
    found = calibration_data(ids, sim.runs, sim.grades)
    assert (found.judged, found.graded) == (2, 30) and found.any
    line = output.grade_report_pointer("sw", found.judged, found.graded)
    assert line.startswith("open-ended answers (2 trial(s) judged, 30 hand grade(s))")
    assert "'workbench grade report sw'" in line and "\n" not in line
    # trials never judged nor graded: nothing to point at
    none = calibration_data(ids, tmp_path / "empty-runs", tmp_path / "empty-grades")
    assert not none.any
