"""The row-aligned arrays a calibrated estimate takes, read from disk for one trial and one
criterion: every row's judge score, its hand grade (NaN where none), its prompt hash (the
cluster key, as `experiments.analysis.clusters` uses it).

Why here and not in the statistics: what counts as a row's grade is a decision about stored
files (a grade or judge score of a generation that has since changed is dropped, and
counted, never silently used), and the statistics must only ever see numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from experiments.judge.store import judge_ids
from experiments.trials.predictions import PREDICTIONS_FILE, decode_predictions
from experiments.trials.record import Prediction
from promptlib.errors import WorkbenchError

FloatArray = NDArray[np.float64]

#: the judge score a row gets when the judge gave none (its reply unparsed, its call failed,
#: or it was not judged): a fixed value, so the PPI estimate stays unbiased (the hand grades
#: rectify whatever the judge column holds); it only costs precision. Counted per frame.
UNSCORED = 0.5


class CalibratedError(WorkbenchError):
    """The calibrated comparison cannot be made from what is stored (names what to do)."""


@dataclass(frozen=True)
class Arm:
    """One trial of a comparison: its (task, model, variant) and its folder's id."""

    trial_id: str
    task: str
    model: str
    variant: str


@dataclass(frozen=True)
class ArmFrame:
    """One arm's rows for one criterion, aligned by `indices`.

    `judge`: the judge's score per row (`UNSCORED` where it gave none); `hand`: the hand
    grade (mean over graders of each one's latest grade, NaN where none). Scores and grades
    of a generation that has changed since are dropped and counted (`stale_judge`,
    `stale_hand`). `random_subset` False: the hand-graded rows are not a prefix of a sheet's
    shuffled order (e.g. picked by hand), which every interval here assumes; `subset_note`
    says why. Only answered rows are rows here: `n_unanswered` rows whose call failed (no
    generation, so no judge score or hand grade can reach them) are left out."""

    arm: Arm
    criterion: str
    indices: tuple[str, ...]
    prompt_hashes: tuple[str | None, ...]
    judge: FloatArray = field(compare=False, repr=False)
    hand: FloatArray = field(compare=False, repr=False)
    judge_raw: tuple[float | None, ...] = field(compare=False, repr=False)
    n_unscored: int = 0
    stale_judge: int = 0
    stale_hand: int = 0
    random_subset: bool = True
    subset_note: str | None = None
    n_unanswered: int = 0

    @property
    def n_rows(self) -> int:
        return len(self.indices)

    @property
    def n_hand(self) -> int:
        return int(np.sum(~np.isnan(self.hand)))

    def take(self, indices: Sequence[str]) -> ArmFrame:
        """This frame on `indices` (each one of its rows), in that order."""
        where = {i: k for k, i in enumerate(self.indices)}
        pos = np.array([where[i] for i in indices], dtype=np.intp)
        return ArmFrame(
            arm=self.arm,
            criterion=self.criterion,
            indices=tuple(indices),
            prompt_hashes=tuple(self.prompt_hashes[k] for k in pos),
            judge=self.judge[pos],
            hand=self.hand[pos],
            judge_raw=tuple(self.judge_raw[k] for k in pos),
            n_unscored=sum(self.judge_raw[k] is None for k in pos),
            stale_judge=self.stale_judge,
            stale_hand=self.stale_hand,
            random_subset=self.random_subset,
            subset_note=self.subset_note,
            n_unanswered=self.n_unanswered,
        )


def read_predictions(trial_dir: Path) -> list[Prediction]:
    """The trial's rows, or a `CalibratedError` naming the folder."""
    path = trial_dir / PREDICTIONS_FILE
    try:
        return decode_predictions(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError) as e:
        raise CalibratedError(
            f"{path}: cannot read the trial's rows ({e}); rerun the trial "
            "(answered rows come from the cache)"
        ) from None


NO_JUDGE = "none"
"""The judge id of a comparison read with no judge run: hand grades alone (every row's judge
score is missing, a constant, so PPI's fitted lambda is 0: the hand-graded mean)."""


def choose_judge(trial_dirs: Sequence[Path], judge: str | None) -> str:
    """The judge run every trial of a comparison is read with: `judge` (an id or a unique
    prefix of one), else the one finished judge run the trials have (`judge.store.judge_ids`);
    an error that names the choices when there are several; `NO_JUDGE` when there is none
    (hand grades alone)."""
    found = sorted({j for d in trial_dirs for j in judge_ids(d)})
    if judge is not None:
        hits = [j for j in found if j.startswith(judge.strip().lower())]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise CalibratedError(
                f"--judge {judge!r}: no such judge run on these trials (they have: "
                f"{', '.join(j[:12] for j in found) or 'none'}); run 'workbench judge' first"
            )
        raise CalibratedError(f"--judge {judge!r} matches {len(hits)} judge runs: give more of it")
    if not found:  # hand grades alone: every judge score missing, so lambda is 0
        return NO_JUDGE
    if len(found) > 1:
        raise CalibratedError(
            f"these trials have {len(found)} judge runs ({', '.join(j[:12] for j in found)}): "
            "choose one with --judge"
        )
    return found[0]
