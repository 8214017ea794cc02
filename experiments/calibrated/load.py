"""One arm's `ArmFrame` per criterion, read from runs/<trial>/ and grades/."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np

from experiments.calibrated.frames import (
    UNSCORED,
    Arm,
    ArmFrame,
    _judge_rows,
    generation_sha256,
    read_predictions,
)
from experiments.calibrated.hand import Grade, current_grades, prefix_of_sheets


def load_frame(
    arm: Arm,
    criterion: str,
    judge_id: str,
    runs_root: Path,
    grades: Sequence[Grade],
    grades_root: Path,
    together: Collection[str] = (),
) -> ArmFrame:
    """`arm`'s rows for `criterion`: judge scores from `judge_id`'s run, hand grades from
    `grades`. A judge score or grade of a generation that changed is dropped and counted.
    `together`: the trial ids graded on one sheet with this one (the comparison's arms),
    over which the graded rows must be a prefix of the sheet's order."""
    trial_dir = runs_root / arm.trial_id
    rows = read_predictions(trial_dir)
    indices = tuple(p.index for p in rows)
    hashes = {p.index: generation_sha256(p.generation) for p in rows if p.generation is not None}
    raw: dict[str, float | None] = {}
    stale_judge = 0
    for d in _judge_rows(trial_dir, judge_id):
        if str(d.get("criterion")) != criterion:
            continue
        index = str(d.get("index"))
        if hashes.get(index) != d.get("generation_sha256"):
            stale_judge += 1
            continue
        score = d.get("score")
        raw[index] = float(score) if isinstance(score, int | float) else None
    now = current_grades(grades, arm.trial_id, criterion, hashes)
    judge_raw = tuple(raw.get(i) for i in indices)
    ok, note = prefix_of_sheets(grades_root, now.fresh, set(together) | {arm.trial_id})
    return ArmFrame(
        arm=arm,
        criterion=criterion,
        indices=indices,
        prompt_hashes=tuple(p.prompt_hash or None for p in rows),
        judge=np.array([UNSCORED if s is None else s for s in judge_raw], dtype=float),
        hand=np.array([now.grades.get(i, np.nan) for i in indices], dtype=float),
        judge_raw=judge_raw,
        n_unscored=sum(s is None for s in judge_raw),
        stale_judge=stale_judge,
        stale_hand=now.stale,
        random_subset=ok,
        subset_note=note,
    )
