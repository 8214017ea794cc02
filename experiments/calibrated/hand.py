"""Hand grades as a calibrated estimate reads them (`experiments.grading.store`): each row's
current grade, kept only where the graded rows are a random subset.

A row's grade is `current_grades`' (the mean over graders of each one's latest grade of the
generation the trial holds now); a grade of a changed generation is stale: dropped and
counted. Every PPI interval assumes the graded rows are a random subset; a sheet's order is
a seeded shuffle, so the rows graded top to bottom are one (`graded_at_random`). A row graded
past an ungraded one in its sheet may have been picked: it is left out of the estimate, and
the report says so loudly, with how many.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.grading.store import HandGrade, SheetKey, current_grades, graded_at_random


@dataclass(frozen=True)
class ArmGrades:
    """One trial's usable hand grades on one criterion (index -> grade), and what was not
    used: `stale` grades (of a changed generation), `not_random` rows graded out of their
    sheet's order, with `note` saying so."""

    grades: Mapping[str, float]
    stale: int
    not_random: int
    note: str | None


def arm_grades(
    grades: Sequence[HandGrade],
    keys: Mapping[str, SheetKey],
    trial_id: str,
    criterion: str,
    hashes: Mapping[str, str],
    together: Collection[str],
    runs_root: Path,
) -> ArmGrades:
    """`trial_id`'s grades on `criterion`. `hashes`: index -> its generation's sha256 now;
    `together`: the trials compared with it (the graded rows must be a prefix of each sheet's
    order among them)."""
    mine = [g for g in grades if g.trial_id == trial_id and g.criterion == criterion]
    stale = sum(hashes.get(g.index) != g.generation_sha256 for g in mine)
    now = current_grades(mine, trial_id, generations=hashes)
    rows = {i: v for (i, c), v in now.items() if c == criterion}
    subset = graded_at_random(
        {*together, trial_id}, criterion, grades=grades, keys=keys, runs_root=runs_root
    )
    kept = {i: v for i, v in rows.items() if (trial_id, i) in subset.rows}
    left_out = len(rows) - len(kept)
    note = None
    if left_out:
        note = (
            f"{left_out} of {len(rows)} graded row(s) are not a random subset "
            f"({subset.reason}): left out of the calibrated estimate; grade the sheet in its "
            "order"
        )
    return ArmGrades(kept, stale, left_out, note)
