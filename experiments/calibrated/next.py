"""`workbench grade next`: which rows to grade next for the comparison at hand, written as a
new blind sheet, and when to stop.

Uniform sampling: the next rows are the next ungraded rows of a sheet's seeded random order
(the sheet of the pair's trials with the most of their rows), restricted to the pair's
trials, and go on a new blind sheet in that order (`grading.sheets.make_sheet`, its key
recording them), graded with `workbench grade add`. Graded top to bottom, the new sheet's
rows and the first sheet's graded prefix together are a longer prefix of the first sheet's
order: a random subset, what every PPI interval here assumes.

Why not active: benchmarks/ppi_coverage.py (--part active, 2,000 reps per cell, null and
effect, n 200-400, 10-20% graded, judge bias 0.10) compared grading with probability
proportional to the judge stratum's residual sd (Neyman allocation with the TRUE sd, inverse-
probability weighted: the best case) with uniform grading: from 1% wider to 2% narrower,
coverage 0.942-0.960; grading the rows the judge is least sure of first without weights lost
coverage (0.764 at n = 200, 20% graded, with an effect). So uniform (`SAMPLING`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experiments import settings
from experiments.calibrated.compare import _pair
from experiments.calibrated.frames import Arm, CalibratedError, choose_judge
from experiments.calibrated.load import load_frames
from experiments.calibrated.records import CalibratedComparison
from experiments.grading.store import (
    SheetKey,
    load_grades,
    load_sheet_keys,
    trial_generation_shas,
)
from promptlib.tasks import Catalog

SAMPLING = "uniform"
SAMPLING_NOTE = (
    "uniform: the next rows of the sheet's seeded random order (benchmarks/ppi_coverage.py "
    "--part active: inverse-probability-weighted active grading, even with the true residual "
    "sd, changed the interval's width by -2% to +1% at equal coverage; grading the rows the "
    "judge is least sure of first without weights lost coverage, 0.764 at n = 200)"
)


@dataclass(frozen=True)
class NextItem:
    """A row to grade: its place in the first sheet's order, and its trial row."""

    sheet: str
    item: str
    position: int
    trial_id: str = ""
    index: str = ""


@dataclass(frozen=True)
class NextItems:
    """The comparison at hand, whether to stop, and the next items to grade (in their
    sheet's order); `line` says it in a sentence."""

    comparison: CalibratedComparison
    target: float | None
    stop: bool
    more_needed: int | None
    items: tuple[NextItem, ...]
    line: str
    sheet_csv: str | None = None
    guide: str | None = None
    sheet: str | None = None  # the new blind sheet's name
    sampling: str = SAMPLING
    sampling_note: str = SAMPLING_NOTE

    @property
    def n_items(self) -> int:
        return len(self.items)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["comparison"] = self.comparison.to_dict()
        return d


def next_items(
    arms: Sequence[Arm],
    pair: tuple[str, str],
    criterion: str,
    *,
    judge: str | None = None,
    target: float | None = None,
    k: int = 20,
    runs_root: Path | None = None,
    grades_root: Path | None = None,
    level: float = 0.95,
    catalog: Catalog | None = None,
    out: Path | None = None,
) -> NextItems:
    """For `pair` (variants of one task and model among `arms`) on `criterion`: stop when
    the calibrated interval is valid and no wider than `target` on each side, else the next
    `k` ungraded rows of the sheet's order, written as a new blind sheet at `out` (default:
    <sheet>-next-<j>.csv in the working folder) when `catalog` is given."""
    runs_root = runs_root or settings.runs_dir()
    grades_root = grades_root or settings.grades_dir()
    by_variant: Mapping[str, Arm] = {a.variant: a for a in arms}
    missing = [v for v in pair if v not in by_variant]
    if missing:
        raise CalibratedError(
            f"--pair: no trial of variant(s) {', '.join(missing)} (variants: "
            f"{', '.join(by_variant)}); give two of them as A,B"
        )
    a, b = by_variant[pair[0]], by_variant[pair[1]]
    judge_id = choose_judge([runs_root / x.trial_id for x in (a, b)], judge)
    grades, keys = load_grades(grades_root), load_sheet_keys(grades_root)
    others = [x for x in arms if x not in (a, b)]
    frames = load_frames([a, b], [criterion], judge_id, runs_root, grades, keys, others)
    fa, fb = frames[(a.variant, criterion)], frames[(b.variant, criterion)]
    row, estimate = _pair(fa, fb, level)
    half = None if row.low is None or row.high is None else (row.high - row.low) / 2
    if row.valid and half is not None and target is not None and half <= target:
        line = (
            f"{criterion}: {a.variant} − {b.variant} = {row.estimate:+.3f} ± {half:.3f}, within "
            f"the target ±{target}: narrow enough, stop grading"
        )
        return NextItems(row, target, True, 0, (), line)
    need = row.hand_needed
    if row.valid and target is not None:
        # start-up: the statistics only when a target is asked for
        from experiments.analysis.stats import ppi

        # the reported difference's own result: rows paired by index, clusters by prompt
        need = ppi.hand_grades_needed(estimate.result, target_half_width=target)
    pair_ids = (a.trial_id, b.trial_id)
    base = _base_sheet(keys, criterion, pair_ids)
    if base is None:
        raise CalibratedError(
            f"no sheet holds rows of {a.variant} and {b.variant} on {criterion}: write one with "
            "'workbench grade sheet' (its order is the random order to grade in)"
        )
    current = {
        (t, i): h for t in pair_ids for i, h in (trial_generation_shas(t, runs_root) or {}).items()
    }
    graded = {
        (g.trial_id, g.index)
        for g in grades
        if g.criterion == criterion and current.get((g.trial_id, g.index)) == g.generation_sha256
    }
    todo = [
        NextItem(base.sheet, it.item, it.position, it.trial_id, it.index)
        for it in sorted(base.items, key=lambda i: i.position)
        if it.trial_id in pair_ids
        and (it.trial_id, it.index) not in graded
        and current.get((it.trial_id, it.index)) == it.generation_sha256
    ]
    if not todo:
        raise CalibratedError(
            f"sheet {base.sheet} has no ungraded row of {a.variant} and {b.variant} left: "
            "write a sheet of more rows with 'workbench grade sheet'"
        )
    items = tuple(todo[:k])
    now = "no valid interval yet" if half is None else f"now ± {half:.3f}"
    goal = f"about {need} more grades" if need is not None else "more grades"
    line = (
        f"{criterion}: {a.variant} vs {b.variant} ({now}): {goal} "
        + (f"to reach ±{target}" if target is not None else "for a valid interval")
        + f"; the next {len(items)} rows of sheet {base.sheet}'s random order (positions "
        f"{items[0].position}-{items[-1].position})"
    )
    if catalog is None:
        return NextItems(row, target, False, need, items, line)
    # start-up: the sheet writer only when a sheet is written
    from experiments.grading.sheets import make_sheet

    path = out or _next_path(base.sheet, keys)
    made = make_sheet(
        [runs_root / a.trial_id, runs_root / b.trial_id],
        catalog,
        seed=base.seed,
        out=path,
        criteria=(criterion,),
        root=grades_root,
        order=[(it.trial_id, it.index) for it in items],
    )
    line += (
        f": written as the blind sheet {made.sheet}; grade it top to bottom, then "
        f"'workbench grade add {made.csv_path} --grader NAME'"
    )
    return NextItems(
        row, target, False, need, items, line, str(made.csv_path), str(made.guide_path),
        made.sheet,
    )  # fmt: skip


def _base_sheet(
    keys: Mapping[str, SheetKey], criterion: str, trial_ids: Sequence[str]
) -> SheetKey | None:
    """The sheet whose order the next rows continue: of those grading `criterion`, the one
    with the most rows of `trial_ids` (a `grade next` sheet holds fewer), the oldest on a
    tie."""
    found = [
        (sum(i.trial_id in trial_ids for i in key.items), key)
        for key in keys.values()
        if criterion in key.criteria
    ]
    found = [(n, key) for n, key in found if n > 0]
    if not found:
        return None
    return max(found, key=lambda nk: (nk[0], _neg(nk[1].created_at), _neg(nk[1].sheet)))[1]


def _neg(text: str) -> tuple[int, ...]:
    return tuple(-ord(ch) for ch in text)


def _next_path(sheet: str, keys: Mapping[str, SheetKey]) -> Path:
    j = 1
    while f"{sheet}-next-{j}" in keys or Path(f"{sheet}-next-{j}.csv").exists():
        j += 1
    return Path(f"{sheet}-next-{j}.csv")
