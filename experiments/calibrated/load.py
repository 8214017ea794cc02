"""One arm's `ArmFrame` per criterion, read from runs/<trial>/ and grades/."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import numpy as np

from experiments.calibrated.frames import (
    UNSCORED,
    Arm,
    ArmFrame,
    _judge_rows,
    read_predictions,
)
from experiments.calibrated.hand import arm_grades
from experiments.grading.store import HandGrade, SheetKey, generation_sha256


def load_frame(
    arm: Arm,
    criterion: str,
    judge_id: str,
    runs_root: Path,
    grades: Sequence[HandGrade],
    keys: Mapping[str, SheetKey],
    together: Collection[str] = (),
) -> ArmFrame:
    """`arm`'s rows for `criterion`: judge scores from `judge_id`'s run, hand grades from
    `grades` (`calibrated.hand`). A judge score or grade of a generation that changed is
    dropped and counted. `together`: the trial ids graded on one sheet with this one (its
    (task, model)'s), over which the graded rows must be a prefix of the sheet's order."""
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
    hand = arm_grades(grades, keys, arm.trial_id, criterion, hashes, together, runs_root)
    judge_raw = tuple(raw.get(i) for i in indices)
    return ArmFrame(
        arm=arm,
        criterion=criterion,
        indices=indices,
        prompt_hashes=tuple(p.prompt_hash or None for p in rows),
        judge=np.array([UNSCORED if s is None else s for s in judge_raw], dtype=float),
        hand=np.array([hand.grades.get(i, np.nan) for i in indices], dtype=float),
        judge_raw=judge_raw,
        n_unscored=sum(s is None for s in judge_raw),
        stale_judge=stale_judge,
        stale_hand=hand.stale,
        random_subset=hand.not_random == 0,
        subset_note=hand.note,
    )
