"""A sequential sweep's comparisons as typed, frozen records (`SequentialComparison`), each
with one JSON form (`to_dict`): a row of the ``sequential`` section of the sweep's document.

`to_dict` gives the row key for key and in the same order as before the record existed (a
pair's ``rows_per_arm`` after its ``status``, an elimination's before it; ``k`` and the
elimination's keys only for an elimination; ``recommendation`` once it is decided), so no
byte of comparisons.json, comparisons.csv or the MLflow logs changed when it was introduced.
The rows read back from MLflow (`workbench report`) are those dicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from experiments.analysis.decision import KEY, Recommendation


@dataclass(frozen=True)
class Eliminated:
    """A variant successive elimination dropped: the rows it had, and the variant that beat it."""

    variant: str
    rows: int
    by: str

    def to_dict(self) -> dict[str, Any]:
        return {"variant": self.variant, "rows": self.rows, "by": self.by}


@dataclass(frozen=True)
class EliminationOutcome:
    """What only an elimination (``best_vs_worst``, ``all_pairs``) has: its k variants, those
    it eliminated in order, whether the best is identified (one arm left) and those left."""

    k: int
    eliminated: tuple[Eliminated, ...]
    best_identified: bool
    in_contention: tuple[str, ...]


@dataclass(frozen=True)
class Population:
    """What a comparison's sequence ran over, kept so its looks can be recomputed
    (`experiments.sweeps.looks`): the planned rows' indices, answers and clusters in the
    design's order, and the design's seed (the group test's null paths). Never serialised:
    the document's rows are unchanged by it."""

    order: tuple[str, ...]
    answers: tuple[str, ...]
    clusters: tuple[int, ...] | None
    seed: int


@dataclass(frozen=True)
class SequentialComparison:
    """One (model, task)'s sequential comparison, stopped: a listed pair's confidence sequence
    or the task's successive elimination (A: the best arm, B: the worst).

    `decision` is None when a failed row stopped it (`status` says which); `estimate` and
    the interval are A - B on the `n` rows the decision is over; `looks` the rows at each
    look; `alpha` this comparison's share of `family_alpha` (Bonferroni)."""

    model: str
    task: str
    a: str | None
    b: str | None
    comparison: str  # "pair", or the elimination's keyword
    method: str  # the design's method ("betting", "group")
    sequence: str  # the sequence's or the test's name, as the report states it
    metric: str
    alpha: float
    family_alpha: float
    delta: float | None  # the equivalence margin (a pair's; None for an elimination)
    batch: int
    budget: int
    planned: int
    looks: tuple[int, ...]
    n: int
    decision: str | None
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    clustered_by: str
    n_clusters: int
    score_a: float | None
    score_b: float | None
    status: str
    rows_per_arm: Mapping[str, int]
    elimination: EliminationOutcome | None = None
    recommendation: Recommendation | None = None  # `analysis.decision.for_sequential`
    design: str = "sequential"
    # the planned rows the sequence ran over (None: a row read back from a document)
    population: Population | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The document's row: today's keys, in today's order."""
        out: dict[str, Any] = {
            "model": self.model,
            "task": self.task,
            "a": self.a,
            "b": self.b,
            "design": self.design,
            "comparison": self.comparison,
            "method": self.method,
            "sequence": self.sequence,
            "metric": self.metric,
            "alpha": self.alpha,
            "family_alpha": self.family_alpha,
            "delta": self.delta,
            "batch": self.batch,
            "budget": self.budget,
            "planned": self.planned,
        }
        el = self.elimination
        if el is not None:
            out["k"] = el.k
        out |= {
            "looks": list(self.looks),
            "n": self.n,
            "decision": self.decision,
            "estimate": self.estimate,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "clustered_by": self.clustered_by,
            "n_clusters": self.n_clusters,
            "score_a": self.score_a,
            "score_b": self.score_b,
        }
        if el is not None:
            out["eliminated"] = [e.to_dict() for e in el.eliminated]
            out["best_identified"] = el.best_identified
            out["in_contention"] = list(el.in_contention)
            out["rows_per_arm"] = dict(self.rows_per_arm)
            out["status"] = self.status
        else:
            out["status"] = self.status
            out["rows_per_arm"] = dict(self.rows_per_arm)
        if self.recommendation is not None:
            out[KEY] = self.recommendation.to_dict()
        return out


def eliminated(rows: Sequence[tuple[str, int, str]]) -> tuple[Eliminated, ...]:
    """`Elimination.eliminated`'s (variant, rows, by) tuples as records."""
    return tuple(Eliminated(v, int(r), by) for v, r, by in rows)
