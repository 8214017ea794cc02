"""What a sweep cost: model calls made against the full grid's, cache hits, tokens and price.

Every sweep prints and logs it (issue 22, point 4): `Cost` sums what this invocation's runs
sent (a row answered from the response cache is a hit, not a call); the full grid is every
planned variant on every planned row, the calls a fixed design with an empty cache makes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from experiments.trials.record import Prediction


@dataclass
class Cost:
    """Model calls made, rows answered from the cache, tokens and price, summed."""

    model_calls: int = 0
    cache_hits: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float | None = None  # USD; None: no call had a known price
    unpriced: bool = False  # a call of unknown price was made: the total is unknown
    uncounted_rows: int = 0
    """Rows sent whose tokens nobody counted: a log-likelihood row records 0 tokens (its
    evaluation returns label log-probabilities, no usage), which a total must not pass off
    as free."""

    def add(
        self,
        calls: int,
        hits: int,
        preds: Sequence[Prediction],
        cost: float | None,
        *,
        counted: bool = True,
    ) -> None:
        """A run's calls, hits and the price of its calls (`TrialResult.spent`, not the
        cached rows'); tokens of the rows it sent (not the cached ones). `counted`: False
        for a log-likelihood trial, whose rows carry no token counts."""
        self.model_calls += calls
        self.cache_hits += hits
        sent = [p for p in preds if not p.cache_hit]
        if counted:
            self.tokens_in += sum(p.tokens_in for p in sent)
            self.tokens_out += sum(p.tokens_out for p in sent)
        else:
            self.uncounted_rows += len(sent)
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost
        elif calls:
            self.unpriced = True

    def merge(self, other: Cost) -> None:
        self.add(other.model_calls, other.cache_hits, (), other.cost)
        self.unpriced |= other.unpriced
        self.uncounted_rows += other.uncounted_rows
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out

    def summary(self, grid_calls: int, design: str) -> dict[str, Any]:
        """The sweep's cost as printed and logged: calls made against the full grid's."""
        evaluated = self.model_calls + self.cache_hits
        return {
            "design": design,
            "model_calls": self.model_calls,
            "cache_hits": self.cache_hits,
            "rows_evaluated": evaluated,
            "grid_calls": grid_calls,
            "share_of_grid": round(evaluated / grid_calls, 4) if grid_calls else None,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "tokens_uncounted_rows": self.uncounted_rows,
            "cost_usd": None if self.unpriced else self.cost,
        }
