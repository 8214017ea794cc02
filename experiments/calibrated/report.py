"""The calibrated report of a sweep (found as `workbench report` finds it) or of a set of
trials: one `CalibratedCell` per (task, model), on the pairs the sweep's plan compares."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments import settings
from experiments.calibrated.compare import cell_parts, corrected_cells
from experiments.calibrated.frames import Arm, CalibratedError, choose_judge
from experiments.calibrated.load import load_frames
from experiments.calibrated.records import CalibratedReport
from experiments.criteria import CRITERIA
from experiments.grading.store import load_grades, load_sheet_keys

if TYPE_CHECKING:
    from experiments.tracking import Tracker

BEST_VS_WORST_NOTE = (
    "the sweep compares best vs worst (or eliminates among k variants), a pair picked by the "
    "scores with no calibrated form: every pair of its variants is compared here instead"
)


@dataclass(frozen=True)
class SweepArms:
    """A sweep's trials as arms, and per (task, model) the pairs its plan compares."""

    name: str
    arms: tuple[Arm, ...]
    pairs: Mapping[tuple[str, str], tuple[tuple[str, str], ...]]
    note: str | None


def sweep_arms(tracker: Tracker, ref: str) -> SweepArms:
    """The sweep `ref` names (`Tracker.sweep_report`), its trials and its planned pairs (the
    comparisons it reported: declared pairs or all pairs; best vs worst: all pairs, said)."""
    info, doc = tracker.sweep_report(ref)
    rows = doc.get("trial_rows") or tracker.sweep_trials(info["run_id"])
    arms = tuple(
        Arm(str(r["trial_id"]), str(r["task"]), str(r["model"]), str(r["variant"]))
        for r in rows
        if r.get("trial_id")
    )
    return SweepArms(str(info["sweep"]), arms, *_pairs(doc.get("comparisons") or [], arms))


def _pairs(
    comparisons: Sequence[Mapping[str, Any]], arms: Sequence[Arm]
) -> tuple[dict[tuple[str, str], tuple[tuple[str, str], ...]], str | None]:
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    range_test = False
    for c in comparisons:
        # a range row (best vs worst of k, or a sequential elimination) has `k`; tested, its
        # a and b are the variants the scores picked, not a planned pair
        if c.get("a") == "best" or c.get("k") is not None:
            range_test = True
            continue
        key = (str(c["task"]), str(c["model"]))
        pair = (str(c["a"]), str(c["b"]))
        if pair not in out.setdefault(key, []):
            out[key].append(pair)
    note = None
    if range_test or not comparisons:
        note = BEST_VS_WORST_NOTE if range_test else None
        for key in {(a.task, a.model) for a in arms}:
            if key not in out:
                variants = list(dict.fromkeys(a.variant for a in arms if (a.task, a.model) == key))
                out[key] = list(combinations(variants, 2))
    return {k: tuple(v) for k, v in out.items()}, note


PER_TASK = "per task"
"""The report's judge id when its cells were read with different ones (each names its own)."""


def calibrated_report(
    name: str,
    arms: Sequence[Arm],
    pairs: Mapping[tuple[str, str], Sequence[tuple[str, str]]],
    *,
    judge: str | None = None,
    task: str | None = None,
    model: str | None = None,
    criteria: Sequence[str] = CRITERIA,
    pairs_note: str | None = None,
    runs_root: Path | None = None,
    grades_root: Path | None = None,
    level: float = 0.95,
    judge_per_cell: bool = False,
) -> CalibratedReport:
    """The calibrated comparison of `arms` (trials under `runs_root`) on `pairs` per (task,
    model), with hand grades from `grades_root` and the judge run `judge` (None: the one
    the trials have; `judge_per_cell`: the one each (task, model)'s trials have, as a
    rubric, so a judge id, is per task). Holm runs over every valid comparison of the
    report together, as the sweep's own table corrects over all its tests."""
    runs_root = runs_root or settings.runs_dir()
    grades_root = grades_root or settings.grades_dir()
    chosen = [
        a for a in arms if (task is None or a.task == task) and (model is None or a.model == model)
    ]
    if not chosen:
        what = ", ".join(f"{k} {v}" for k, v in (("task", task), ("model", model)) if v)
        raise CalibratedError(f"{name}: no trial of {what or 'it'} (its trials: {_listing(arms)})")
    judge_id = (
        None if judge_per_cell else choose_judge([runs_root / a.trial_id for a in chosen], judge)
    )
    grades = load_grades(grades_root)
    keys = load_sheet_keys(grades_root)
    parts = []
    for key in dict.fromkeys((a.task, a.model) for a in chosen):
        mine = [a for a in chosen if (a.task, a.model) == key]
        cell_judge = judge_id or choose_judge([runs_root / a.trial_id for a in mine], judge)
        frames = load_frames(mine, criteria, cell_judge, runs_root, grades, keys)
        parts.append(
            cell_parts(
                key[0],
                key[1],
                cell_judge,
                frames,
                [a.variant for a in mine],
                list(pairs.get(key, ())),
                criteria,
                pairs_note=pairs_note,
                level=level,
            )
        )
    cells = corrected_cells(parts)
    judges = {c.judge_id for c in cells}
    shown = judge_id or (judges.pop() if len(judges) == 1 else PER_TASK)
    return CalibratedReport(name, shown, tuple(cells))


@dataclass(frozen=True)
class CalibrationData:
    """How many of a sweep's trials have a finished judge run, and how many hand grades."""

    judged: int
    graded: int

    @property
    def any(self) -> bool:
        return bool(self.judged or self.graded)


def calibration_data(
    trial_ids: Sequence[str], runs_root: Path | None = None, grades_root: Path | None = None
) -> CalibrationData:
    """Whether `workbench grade report` has something to show for these trials (what
    `workbench report` points at); an unreadable grade store counts as no grades."""
    # start-up: the judge store only when a report asks
    from experiments.judge.store import judge_ids
    from promptlib.errors import WorkbenchError

    runs_root = runs_root or settings.runs_dir()
    wanted = set(trial_ids)
    judged = sum(bool(judge_ids(runs_root / t)) for t in wanted)
    try:
        graded = sum(g.trial_id in wanted for g in load_grades(grades_root))
    except WorkbenchError:
        graded = 0
    return CalibrationData(judged, graded)


def _listing(arms: Sequence[Arm]) -> str:
    cells = sorted({f"{a.task} ({a.model})" for a in arms})
    return ", ".join(cells) or "none"
