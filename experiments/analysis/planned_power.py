"""The MDE80 a study will have, before any model is called (`workbench plan`).

`analysis.power.minimum_detectable_effect` simulates the paired permutation test as it is run
(two-sided, its resamples, whole clusters swapped) under a model fitted to two arms'
outcomes. Before the run there are no outcomes, so the model's parameters are stated instead
(`Assumption`): in every answer class both arms are right with probability `accuracy`, and
their per-row hits have correlation `correlation` (phi: how often the two prompts succeed
and fail on the same rows; 0 is independent arms). Everything else is the planned data's:
the rows the sweep will evaluate, their answer classes (hence the metric's weight of each
row: 1/(K n_class) for balanced accuracy) and clusters (rows any variant gives the same
prompt), the test's resamples, alpha and, for the corrected MDE, the family the correction
runs over.

The same simulator and search as `power.minimum_detectable_effect` (its `_Simulator` and
`_solve`; the model `power._Model.fixed`), with one difference: the target is the power
itself, not the calibrated internal target. That calibration corrects for an MDE estimated
from one noisy sample; here the parameters are given, not estimated, so the power at the
planned MDE under the assumption is `power` (checked by simulation through the real test in
tests/experiments/analysis/test_planned_power.py).

The corrected MDE is at alpha / m, m the number of tested comparisons the correction runs
over: the level Holm's first step needs, i.e. a comparison's power when it is the only real
difference of the family (Benjamini-Hochberg needs the same then, and less when several
differences are real).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from experiments import bounds
from experiments.analysis import power, stats
from experiments.analysis.align import stat_inputs
from promptlib.errors import WorkbenchError

_FIT_TOL = 1e-3  # how close the fitted model's P(both right) must be to the assumption's


@dataclass(frozen=True)
class Assumption:
    """What the planned MDE assumes of two arms before any data: each arm's recall in every
    answer class under no difference, and the correlation of their per-row hits."""

    accuracy: float = 0.7
    correlation: float = 0.5

    @property
    def both_right(self) -> float:
        """P(A and B both right on a row): p^2 + rho p (1 - p)."""
        p, rho = self.accuracy, self.correlation
        return p * p + rho * p * (1 - p)

    def describe(self) -> str:
        return (
            f"both arms {self.accuracy:.2f} right in every answer class, per-row hits "
            f"correlated {self.correlation:.2f} between arms"
        )


def check_assumption(a: Assumption) -> Assumption:
    """Refuse an assumption outside the bounds the model represents (one line, names the
    option)."""
    bounds.PLAN_ACCURACY.check(a.accuracy, "--accuracy", WorkbenchError)
    bounds.PLAN_CORRELATION.check(a.correlation, "--correlation", WorkbenchError)
    return a


@dataclass(frozen=True)
class PlannedMDE:
    """The smallest true difference in `metric` the test detects with `power` at `alpha`,
    under `assumption`; None with a `note` where it is not simulated or not reachable."""

    value: float | None
    metric: str
    alpha: float
    power: float
    n: int
    n_units: int
    n_resamples: int
    n_sims: int
    assumption: Assumption
    note: str = ""


def planned_mde(
    answers: Sequence[str],
    metric: str,
    *,
    alpha: float = 0.05,
    power_target: float = 0.8,
    clusters: Sequence[int] | None = None,
    n_resamples: int = 1000,
    assumption: Assumption = Assumption(),  # frozen: one shared default is safe
    n_sims: int = 2000,
    seed: int = 0,
) -> PlannedMDE:
    """The planned MDE of a paired comparison of two arms on rows with these `answers` (the
    sweep's rows, in order) and `clusters` (a unit id per row; None: rows are the units).

    The test is `stats.paired_permutation_test` as a sweep runs it: two-sided, `n_resamples`
    resamples, exact over the swap patterns when at most 16 units are discordant.
    """
    n = len(answers)
    ids = None if clusters is None else np.asarray(clusters, dtype=np.int64)
    n_units = n if ids is None or n == 0 else int(ids.max()) + 1
    base: dict[str, Any] = {
        "metric": metric,
        "alpha": alpha,
        "power": power_target,
        "n": n,
        "n_units": n_units,
        "n_resamples": n_resamples,
        "n_sims": n_sims,
        "assumption": assumption,
    }
    if n < 2:
        return PlannedMDE(None, note="fewer than 2 rows: nothing to test", **base)
    unit = "clusters" if n_units < n else "rows"
    if n_units > power.MAX_UNITS:
        return PlannedMDE(None, note=power._too_many(n_units, unit), **base)
    if metric not in stats.metric_names():  # graded by hand: no metric to simulate
        return PlannedMDE(None, note=f"no planned MDE: metric {metric!r} is not computed", **base)
    y, (hits, _) = stat_inputs(metric, list(answers), [list(answers), list(answers)])
    y_arr = np.asarray(y, dtype=object)
    pred = np.asarray(hits, dtype=object)  # both arms right: only the units are read
    u = power._units(metric, y_arr, pred, pred.copy(), ids)
    if isinstance(u, str):
        return PlannedMDE(None, note=u.replace("no simulated MDE", "no planned MDE"), **base)
    k = len(u.classes)
    recall = np.full(k, assumption.accuracy)
    both = np.full(k, assumption.both_right)
    rng = np.random.default_rng(seed)
    model = power._Model.fixed(u, n_sims, recall, both)
    _check_fit(model, assumption)
    sim = power._Simulator(u, n_sims, alpha, n_resamples, 16, rng)
    value, top = power._solve(model, sim, np.ones(k), power_target)
    note = ""
    if value is None:
        note = (
            f"cannot reach p <= {alpha:.3g} with power {power_target:g} on {n_units} {unit}: "
            f"even when A is right and B wrong on almost every unit the simulated power is "
            f"{top:.2f}"
        )
    return PlannedMDE(value, note=note, **base)


def _check_fit(model: Any, a: Assumption) -> None:
    """The latent model must reproduce the assumed P(both right): its spread is bounded, so
    a correlation near 1 at an extreme accuracy may be out of its reach."""
    pa = 1.0 / (1.0 + np.exp(-model.logit_a[0, 0]))
    pb = 1.0 / (1.0 + np.exp(-model.logit_b[0, 0]))
    both = float((pa * pb) @ power._GH_W)
    if abs(both - a.both_right) > _FIT_TOL:
        raise WorkbenchError(
            f"--accuracy {a.accuracy:g} with --correlation {a.correlation:g}: the model of the "
            f"two arms cannot represent this pair (P(both right) {both:.3f}, asked "
            f"{a.both_right:.3f}); lower --correlation"
        )


def family_alpha(alpha: float, family: int) -> float:
    """The level one comparison of a family of `family` tested comparisons needs under the
    correction when it is the only real difference: alpha / m (Holm's first step)."""
    return alpha / max(family, 1)
