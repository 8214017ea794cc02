"""A sequential comparison's looks, each with its interval, for the sweep's HTML report.

The document keeps only the rows seen at each look (``looks``) and the interval at the stop;
a reader of a sequential design also wants the interval over the looks (how it narrowed, and
where it stopped). `looks_of` recomputes it: the same sequence or test the loop ran (same
metric, share of alpha, clusters, budget, plan and seed, from the row and its `Population`),
fed the arms' rows in the design's order and looked at the same rows. The last look is the
row's interval exactly (the tests check it).

- A listed pair: its `PairedSequence`, every look.
- An elimination (``best_vs_worst``, ``all_pairs``): the best-vs-worst pair's own sequence
  (at alpha over the k (k - 1) / 2 pairs), on the looks at which both were in contention;
  the other pairs' looks are not shown (the row's ``rows_per_arm`` and ``eliminated`` say
  where each arm stopped).

What the intervals mean differs by method, and `note_of` says it in words the page shows:
the anytime sequence's intervals hold at every look at once; the group design's are repeated
confidence intervals at the planned looks' boundaries (normal theory, approximate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from experiments.analysis.sequential import PairedSequence, Planned, planned_looks
from experiments.analysis.sequential.betting import Core
from experiments.analysis.sequential.group import GroupCore
from experiments.sweeps.sequential_result import Population, SequentialComparison
from experiments.trials.record import TrialRecord


@dataclass(frozen=True)
class Look:
    """One look: the rows both arms had, the estimate of A - B and the interval there."""

    n: int
    estimate: float | None
    low: float | None
    high: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "estimate": self.estimate, "low": self.low, "high": self.high}


ANYTIME_NOTE = (
    "anytime-valid: each look's interval is the betting confidence sequence there "
    "(intersected over the looks), and all of them hold at once, however often one looked "
    "and wherever the comparison stopped"
)
GROUP_NOTE = (
    "group-sequential: each look's interval is the repeated confidence interval at that "
    "planned look's boundary (Jennison & Turnbull; normal theory, approximate), so they hold "
    "jointly over the planned looks; the decisions A and B come from the permutation test, "
    "not from these intervals"
)
EQUIVALENT_NOTE = (
    "; the last look's interval is the two one-sided tests' (what 'equivalent' rests on)"
)
ELIMINATION_NOTE = (
    "elimination: the looks are the best-vs-worst pair's own sequence (at alpha over the "
    "k(k-1)/2 pairs), at the looks both arms were in contention; the other pairs are not "
    "shown (rows_per_arm and eliminated say where each arm stopped)"
)


def note_of(row: SequentialComparison) -> str:
    """What the row's per-look intervals mean, for the page."""
    text = GROUP_NOTE if row.method == "group" else ANYTIME_NOTE
    if row.method == "group" and row.decision == "equivalent":
        text += EQUIVALENT_NOTE
    if row.elimination is not None:
        text = f"{ELIMINATION_NOTE}; {text}"
    return text


def _hits(record: TrialRecord, order: Sequence[str], n: int) -> list[bool] | None:
    """The record's hits on the first `n` planned rows in the design's order (an invalid or
    failed reply is a miss, as in the loop); None when one of those rows is not in it."""
    by_index = {p.index: bool(p.correct) for p in record.rows}
    out = []
    for i in order[:n]:
        if i not in by_index:
            return None
        out.append(by_index[i])
    return out


def looks_of(
    row: SequentialComparison, a: TrialRecord | None, b: TrialRecord | None
) -> tuple[Look, ...]:
    """The row's looks with the interval at each (see the module); () when it cannot be
    recomputed: no `Population` (a row read back from a document), an arm's record missing,
    or a row of the looks missing from it."""
    pop = row.population
    looks = [n for n in row.looks if n <= row.n]
    if pop is None or a is None or b is None or not looks:
        return ()
    hits_a, hits_b = _hits(a, pop.order, looks[-1]), _hits(b, pop.order, looks[-1])
    if hits_a is None or hits_b is None:
        return ()
    if row.elimination is not None:
        return _elimination_looks(row, pop, hits_a, hits_b, looks)
    plan = (
        Planned(planned_looks(row.batch, row.budget), seed=pop.seed)
        if row.method == "group"
        else None
    )
    seq = PairedSequence(
        row.metric, pop.answers, alpha=row.alpha, delta=row.delta,
        clusters=list(pop.clusters) if pop.clusters is not None else None,
        plan=plan, budget=row.budget,
    )  # fmt: skip
    out, start = [], 0
    for n in looks:
        look = seq.update(hits_a[start:n], hits_b[start:n])
        out.append(Look(look.n_rows, look.estimate, look.lower, look.upper))
        start = n
        if look.decision != "continue":
            break
    return tuple(out)


def _elimination_looks(
    row: SequentialComparison,
    pop: Population,
    hits_a: list[bool],
    hits_b: list[bool],
    looks: list[int],
) -> tuple[Look, ...]:
    """The best-vs-worst pair's sequence as `EliminationCore` ran it: at alpha over the pairs,
    in the arms' order (i < j: d = hit_i - hit_j), turned to best - worst."""
    arms = list(row.rows_per_arm)
    if row.a not in arms or row.b not in arms:
        return ()
    k = len(arms)
    level = row.alpha / (k * (k - 1) // 2)
    flip = arms.index(row.a) > arms.index(row.b)
    first, second = (hits_b, hits_a) if flip else (hits_a, hits_b)
    clusters = list(pop.clusters) if pop.clusters is not None else None
    core: Core | GroupCore
    if row.method == "group":
        core = GroupCore(
            row.metric, pop.answers, planned_looks(row.batch, row.budget), level, 1,
            clusters=clusters, seed=pop.seed,
        )  # fmt: skip
    else:
        core = Core(row.metric, pop.answers, level, 1, clusters, row.budget)
    out, start = [], 0
    for n in looks:
        d = np.asarray(first[start:n], dtype=np.int64) - np.asarray(second[start:n], dtype=np.int64)
        core.add(d[None, :], np.ones(1, dtype=bool))
        est, lo, hi = (
            core.look(np.ones(1, dtype=bool)) if isinstance(core, GroupCore) else core.look()
        )
        e, low, high = float(est[0]), float(lo[0]), float(hi[0])
        if flip:
            e, low, high = -e, -high, -low
        out.append(Look(n, e, low, high))
        start = n
    return tuple(out)


def _record_of(
    ordered: Sequence[TrialRecord], model: str, task: str, variant: str | None
) -> TrialRecord | None:
    for rec in ordered:
        if (rec.model, rec.task, rec.variant) == (model, task, variant):
            return rec
    return None


def sequential_section(
    rows: Sequence[SequentialComparison], ordered: Sequence[TrialRecord]
) -> list[dict[str, Any]]:
    """The report's ``sequential`` list: each row's document form, its looks with the
    interval at each, and what those intervals mean (``note``). Depends on the records'
    contents only, not on their order or their rows' order."""
    out = []
    for row in rows:
        a = _record_of(ordered, row.model, row.task, row.a)
        b = _record_of(ordered, row.model, row.task, row.b)
        looks = looks_of(row, a, b)
        note = note_of(row)
        if not looks:
            note = (
                "the looks' intervals could not be recomputed (the planned rows or an arm's "
                "rows are not at hand); the row's interval at the stop is shown"
            )
        out.append({"row": row.to_dict(), "looks": [x.to_dict() for x in looks], "note": note})
    return out
