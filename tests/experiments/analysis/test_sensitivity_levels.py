"""Variance shares when tasks ran different variants (a sweep that skipped what a task cannot
run): an axis whose levels differ between tasks stays within task, never pooled by position,
and a task that is not a full factorial is not attributed to the axes."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.analysis import sensitivity as S
from experiments.analysis.sensitivity.groups import _group
from experiments.analysis.sensitivity.variance import _sums_of_squares
from experiments.trials.record import TrialRecord
from tests.experiments.analysis.test_sensitivity import _trial

WITHIN = S.draw_factor("instruction")  # "instruction (within task)"


def _task(
    task: str, probs: dict[str, float], rng: np.random.Generator, n: int = 40
) -> list[TrialRecord]:
    row = rng.uniform(-0.1, 0.1, n)
    return [
        _trial(task, "m", name, [int(x) for x in rng.random(n) < p + row])
        for name, p in probs.items()
    ]


def _between(trials: list[TrialRecord]) -> float:
    """A task's between-variant sum of squares, by hand: n_rows x sum of squared variant
    effects (variant mean - task mean)."""
    x = np.array([[1.0 if c else 0.0 for c in t.correct] for t in trials]).T  # (rows, variants)
    return float(x.shape[0] * ((x.mean(axis=0) - x.mean()) ** 2).sum())


def test_tasks_with_different_levels_are_never_pooled_by_position() -> None:
    """Task B ran base and description, task C base and reference (each skipped one level):
    pooling their two-level effects by position would pair B's description with C's
    reference. The instruction effect stays within task: its sum of squares is each task's
    own between-variant sum of squares, and the decomposition still adds up."""
    rng = np.random.default_rng(7)
    full = {"instruction=base": 0.5, "instruction=description": 0.7, "instruction=reference": 0.4}
    trials = (
        _task("A", full, rng)
        + _task("B", {"instruction=base": 0.4, "instruction=description": 0.8}, rng)
        + _task("C", {"instruction=base": 0.7, "instruction=reference": 0.3}, rng)
    )
    groups = [_group([t for t in trials if t.task == k]) for k in "ABC"]
    ss = {k: float(v[0]) for k, v in _sums_of_squares(groups).ss.items()}
    assert "instruction" not in ss and "instruction x task" not in ss
    by_task = sum(_between([t for t in trials if t.task == k]) for k in "ABC")
    assert ss[WITHIN] == pytest.approx(by_task, abs=1e-9)
    parts = ss[S.TASK] + ss[S.ROW] + ss[WITHIN] + ss[S.RESIDUAL]
    assert parts == pytest.approx(ss["total"], abs=1e-9)
    rep = S.sensitivity_report(trials, n_resamples=100)
    v = rep.variance_shares["m"]
    assert set(v["shares"]) == {S.TASK, S.ROW, WITHIN, S.RESIDUAL}
    assert v["sum_of_shares"] == pytest.approx(1.0)
    assert (
        "instruction: the tasks ran different levels (A: base, description, reference; "
        in v["note"]
    )
    assert v["coverage"][WITHIN] is None  # never measured: no interval claims it is
    # the pooled effects take, per contrast, only the tasks that ran both levels
    meta = {(m["a"], m["b"]): m["tasks"] for m in rep.meta_analysis}
    assert meta[("instruction=base", "instruction=description")] == ["A", "B"]
    assert meta[("instruction=base", "instruction=reference")] == ["A", "C"]
    assert meta[("instruction=description", "instruction=reference")] == ["A"]


def test_an_axis_one_task_ran_at_one_level_stays_within_task() -> None:
    """format varies on A (base, claude) but B ran only base: no pooled format effect."""
    rng = np.random.default_rng(2)
    trials = _task(
        "A",
        {f"instruction={i},format={f}": 0.4 + 0.2 * (i == "description") + 0.1 * (f == "claude")
         for i in ("base", "description") for f in ("base", "claude")},
        rng,
    ) + _task(
        "B", {"instruction=base,format=base": 0.5, "instruction=description,format=base": 0.6}, rng
    )  # fmt: skip
    v = S.sensitivity_report(trials, n_resamples=100).variance_shares["m"]
    # instruction ran the same two levels on both tasks: pooled as before
    assert {"instruction", "instruction x task", S.draw_factor("format")} <= set(v["shares"])
    assert "format" not in v["shares"] and "format x task" not in v["shares"]
    assert v["sum_of_shares"] == pytest.approx(1.0)


def test_the_same_levels_everywhere_keep_the_pooled_split() -> None:
    """Unchanged for a design where every task ran every variant: main effect and x task."""
    rng = np.random.default_rng(4)
    probs = {"instruction=base": 0.5, "instruction=description": 0.7}
    trials = _task("A", probs, rng) + _task("B", probs, rng)
    v = S.sensitivity_report(trials, n_resamples=100).variance_shares["m"]
    assert {"instruction", "instruction x task"} <= set(v["shares"]) and WITHIN not in v["shares"]
    assert "different levels" not in (v["note"] or "")


def test_a_task_that_is_not_a_full_factorial_is_named_and_not_attributed() -> None:
    """A skipped combination (reference with claude) leaves 3 of the 2 x 2 cells: its
    between-variant part is the unattributed prompt share, and a note says why."""
    rng = np.random.default_rng(5)
    cells = {f"instruction={i},format={f}": 0.3 + 0.3 * (i == "reference") + 0.2 * (f == "claude")
             for i in ("base", "reference") for f in ("base", "claude")}  # fmt: skip
    trials = _task("A", cells, rng) + _task(
        "B", {k: p for k, p in cells.items() if k != "instruction=reference,format=claude"}, rng
    )
    v = S.sensitivity_report(trials, n_resamples=100).variance_shares["m"]
    assert S.UNATTRIBUTED in v["shares"] and v["sum_of_shares"] == pytest.approx(1.0)
    assert "B: its 3 variants are not a full factorial of its axes" in v["note"]
