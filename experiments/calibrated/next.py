"""`workbench grade next`: which rows to grade next for the comparison at hand, and when to
stop.

Uniform sampling: the next rows are the next ungraded items of the sheet's seeded random
order, restricted to the pair's trials, so the graded rows stay a random subset (what every
PPI interval here assumes). An active scheme (grading where the judge is least sure) would
need its inclusion probabilities carried into the estimate; until one is shown to keep
coverage (benchmarks/ppi_coverage.py), the sheet's order is the plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experiments import settings
from experiments.calibrated.compare import compare_pair
from experiments.calibrated.frames import Arm, CalibratedError, choose_judge
from experiments.calibrated.load import load_frame
from experiments.calibrated.records import CalibratedComparison
from experiments.grading.store import load_grades, load_sheet_keys


@dataclass(frozen=True)
class NextItem:
    sheet: str
    item: str
    position: int


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
) -> NextItems:
    """For `pair` (variants of one task and model among `arms`) on `criterion`: stop when
    the calibrated interval is valid and no wider than `target` on each side, else the next
    `k` items of the sheets' orders not yet graded."""
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
    together = {x.trial_id for x in arms}
    fa, fb = (load_frame(x, criterion, judge_id, runs_root, grades, keys, together) for x in (a, b))
    row = compare_pair(fa, fb, level)
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

        d = ppi.ppi_paired_difference(fa.judge, fa.hand, fb.judge, fb.hand, level=level)
        need = ppi.hand_grades_needed(d, target_half_width=target)
    graded = {(g.sheet, g.item) for g in grades if g.criterion == criterion}
    todo: list[NextItem] = []
    for name in sorted(keys):
        key = keys[name]
        if criterion not in key.criteria:
            continue
        for it in sorted(key.items, key=lambda i: i.position):
            if it.trial_id in (a.trial_id, b.trial_id) and (name, it.item) not in graded:
                todo.append(NextItem(name, it.item, it.position))
    if not todo:
        raise CalibratedError(
            f"no sheet holds ungraded rows of {a.variant} and {b.variant}: write one with "
            "'workbench grade sheet' (its order is the random order to grade in)"
        )
    items = tuple(todo[:k])
    now = "no valid interval yet" if half is None else f"now ± {half:.3f}"
    goal = f"about {need} more grades" if need is not None else "more grades"
    line = (
        f"{criterion}: {a.variant} vs {b.variant} ({now}): {goal} "
        + (f"to reach ±{target}" if target is not None else "for a valid interval")
        + f"; grade the next {len(items)} items of sheet {items[0].sheet} in its order "
        f"(positions {items[0].position}-{items[-1].position})"
    )
    return NextItems(row, target, False, need, items, line)
