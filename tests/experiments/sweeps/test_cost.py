"""A sweep's cost (`experiments.sweeps.cost.Cost`): a call of unknown price makes the total
unknown, never a partial sum that reads as the price; a run that made no call costs 0."""

from __future__ import annotations

import pytest

from experiments import output
from experiments.sweeps.cost import Cost
from experiments.trials.record import Prediction


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


def _row(i: int, tokens_in: int, hit: bool = False) -> Prediction:
    return Prediction(str(i), "h", "Yes", "Yes", "Yes", True, tokens_in=tokens_in, cache_hit=hit)


def test_log_likelihood_rows_are_not_counted_as_zero_tokens() -> None:
    """A log-likelihood row records 0 tokens (no usage comes back): the new-user trial's
    sweep printed 'tokens 0 in, 0 out' for 96 evaluated prompts."""
    loglik = Cost()
    loglik.add(3, 1, [_row(0, 0), _row(1, 0), _row(2, 0), _row(3, 0, hit=True)], None,
               counted=False)  # fmt: skip
    summary = loglik.summary(4, "fixed")
    assert summary["tokens_uncounted_rows"] == 3
    line = output.cost_line(summary)
    assert "tokens 0 in" not in line and "tokens not counted (3 log-likelihood rows" in line
    mixed = Cost()
    mixed.add(2, 0, [_row(0, 100), _row(1, 50)], None)
    mixed.merge(loglik)
    line = output.cost_line(mixed.summary(6, "fixed"))
    assert "tokens 150 in, 0 out (not counted: 3 log-likelihood rows)" in line
    generated = Cost()
    generated.add(1, 0, [_row(0, 7)], None)
    assert "tokens 7 in, 0 out; cost" in output.cost_line(generated.summary(1, "fixed"))


def test_a_one_task_sweep_prints_one_across_tasks_line() -> None:
    """A one-task sweep of 4 variants printed six 'fewer than 2 tasks: no test' lines."""
    row = {"model": "m", "a": "x", "b": "y", "test": "paired t-test over tasks",
           "p_value": None, "n_tasks": 1, "mean_difference": 0.2,
           "note": "fewer than 2 tasks (1): no test", "missing_tasks": []}  # fmt: skip
    six = [dict(row, a=f"x{i}") for i in range(6)]
    assert output.across_table(six) == (
        "across tasks: no across-task test (fewer than 2 tasks per comparison)"
    )
    lost = [*six, dict(row, missing_tasks=["proa"])]  # a task without a score is said
    assert "no score for proa" in output.across_table(lost)
