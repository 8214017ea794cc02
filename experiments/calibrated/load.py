"""The `ArmFrame`s of one (task, model), read from runs/<trial>/ and grades/.

Each trial's rows and its judge run are read once, and which hand-graded rows are a random
subset (`grading.store.graded_at_random`) is worked out once per criterion for the cell's
trials together, however many arms and criteria the cell has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from experiments.calibrated.frames import NO_JUDGE, UNSCORED, Arm, ArmFrame, read_predictions
from experiments.calibrated.hand import ArmGrades, arm_grades
from experiments.grading.store import HandGrade, SheetKey, generation_sha256, graded_at_random
from experiments.judge.store import JudgeScore, load_judge_scores
from experiments.trials.record import Prediction


def load_frames(
    arms: Sequence[Arm],
    criteria: Sequence[str],
    judge_id: str,
    runs_root: Path,
    grades: Sequence[HandGrade],
    keys: Mapping[str, SheetKey],
    others: Sequence[Arm] = (),
) -> dict[tuple[str, str], ArmFrame]:
    """(variant, criterion) -> the arm's frame, for the `arms` of one (task, model).

    Judge scores: `judge_id`'s finished run (`judge.store.load_judge_scores`; a trial without
    it is an error naming the trial). Hand grades: `calibrated.hand`, the graded rows kept
    where they are a prefix of a sheet's order among these trials. A judge score or grade of
    a generation that changed since is dropped and counted, and so is a row with no
    generation (its call failed: nothing can grade it). `others`: more trials of the
    (task, model) graded on the same sheets (their rows are read, not framed)."""
    preds: dict[str, list[Prediction]] = {}
    hashes: dict[str, dict[str, str]] = {}
    scores: dict[str, dict[tuple[str, str], JudgeScore]] = {}
    for a in [*arms, *others]:
        if a.trial_id in preds:
            continue
        trial_dir = runs_root / a.trial_id
        preds[a.trial_id] = read_predictions(trial_dir)
        hashes[a.trial_id] = {
            p.index: generation_sha256(p.generation)
            for p in preds[a.trial_id]
            if p.generation is not None
        }
    for a in arms:
        scores[a.trial_id] = (
            {} if judge_id == NO_JUDGE else load_judge_scores(runs_root / a.trial_id, judge_id)
        )
    together = list(preds)
    out: dict[tuple[str, str], ArmFrame] = {}
    for c in criteria:
        subset = graded_at_random(together, c, grades=grades, keys=keys, generations=hashes)
        for a in arms:
            hand = arm_grades(grades, a.trial_id, c, hashes[a.trial_id], subset)
            out[(a.variant, c)] = _frame(
                a, c, preds[a.trial_id], hashes[a.trial_id], scores[a.trial_id], hand
            )
    return out


def _frame(
    arm: Arm,
    criterion: str,
    rows: Sequence[Prediction],
    hashes: Mapping[str, str],
    scores: Mapping[tuple[str, str], JudgeScore],
    hand: ArmGrades,
) -> ArmFrame:
    # a row whose call failed has no generation: never judged nor on a sheet, so no grade
    # can reach it (its inclusion probability is 0, not n/N): left out and counted
    answered = [p for p in rows if p.generation is not None]
    unanswered = len(rows) - len(answered)
    rows = answered
    indices = tuple(p.index for p in rows)
    raw: dict[str, float | None] = {}
    stale_judge = 0
    for (index, c), s in scores.items():
        if c != criterion:
            continue
        if hashes.get(index) != s.generation_sha256:
            stale_judge += 1
            continue
        raw[index] = None if s.score is None else float(s.score)
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
        n_unanswered=unanswered,
    )
