"""A sweep's cost (`experiments.sweeps.cost.Cost`): a call of unknown price makes the total
unknown, never a partial sum that reads as the price; a run that made no call costs 0."""

from __future__ import annotations

import pytest

from experiments.sweeps.cost import Cost


def test_a_call_of_unknown_price_makes_the_total_unknown() -> None:
    # review finding: model A's batch price known, model B's not -> "cost $A" alone
    total = Cost()
    total.add(10, 0, (), 0.5)
    total.add(10, 0, (), None)
    assert total.summary(20, "fixed")["cost_usd"] is None
    merged = Cost()
    merged.merge(total)
    assert merged.summary(20, "fixed")["cost_usd"] is None


def test_runs_that_made_no_call_add_nothing() -> None:
    total = Cost()
    total.add(4, 0, (), 0.25)
    total.add(0, 4, (), 0.0)  # all from the cache: `TrialResult.spent` is 0
    total.add(0, 4, (), None)  # read back from MLflow
    assert total.summary(12, "fixed")["cost_usd"] == pytest.approx(0.25)


def test_a_sequential_grid_counts_only_the_variants_it_runs() -> None:
    """Review finding: with 4 variants and one listed pair, a sequential run that used every
    row printed "50% of the grid" (the grid counted variants it never runs); the dry run
    counted only the pair's. Both now count the same grid."""
    from types import SimpleNamespace as NS

    from experiments.sweeps.driver import _cost

    spec = NS(comparisons=(("a", "b"),))
    plan = [NS(planned=NS(rows=[{}] * 100), variant=NS(name=n)) for n in "abcd"]
    used = Cost()
    used.add(200, 0, (), 0.0)
    summary = _cost(spec, plan, NS(cost=Cost(), resumed_rows=0), NS(cost=used))  # type: ignore[arg-type]
    assert summary["grid_calls"] == 200 and summary["share_of_grid"] == 1.0
    fixed = _cost(spec, plan, NS(cost=used, resumed_rows=0), None)  # type: ignore[arg-type]
    assert fixed["grid_calls"] == 400
