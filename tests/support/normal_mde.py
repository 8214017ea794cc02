"""The old normal-approximation MDE, kept only as a reference for the tests (and for
`benchmarks/power.py`, which measures it next to the product's).

The product's minimum detectable effect is `experiments.analysis.power.minimum_detectable_effect`
(simulated, calibrated); this one was `experiments.analysis.stats.minimum_detectable_effect` and is
renamed so the two are never confused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from experiments.analysis.clusters import sums
from experiments.analysis.stats import (
    Labels,
    Metric,
    check_inputs,
    checked_decomposition,
    resolve_metric,
)
from experiments.analysis.stats.bootstrap import _influence, _jackknife_influence
from experiments.analysis.stats.paired import _cluster_ids


def normal_approximation_mde(
    y_true: Labels,
    pred_a: Labels,
    pred_b: Labels,
    metric: Metric = "balanced_accuracy",
    alpha: float = 0.05,
    power: float = 0.8,
    clusters: Sequence[Any] | NDArray[Any] | None = None,
) -> float:
    """Smallest metric difference a two-sided paired test of this n detects with `power`,
    by the normal approximation (see `analysis.power` for the simulated, calibrated one).

    MDE = (z_{1-alpha/2} + z_power) * SE, with SE = sqrt(C) * sd(u_c) from the per-unit
    contributions u_c to metric(A) - metric(B) (a unit is a row, or a cluster of rows with
    `clusters`, its contributions summed): w_i * (hit_A - hit_B) for the accuracy-type
    metrics (w_i = 1/n or 1/(K n_class)), the linearised (delta-method) contribution for the
    F1 metrics, and jackknife pseudo-values for a callable. When A and B never disagree, the
    worst case for one discordant pair in two is used (sd of C * u_c = sqrt(0.5)).
    """
    from scipy.stats import norm

    y, a, b = check_inputs(y_true, [pred_a, pred_b])
    n = len(y)
    ids, n_units = _cluster_ids(clusters, n)
    score = resolve_metric(metric)
    scores = [float(score(y, a)), float(score(y, b))]
    dec = checked_decomposition(metric, y, [a, b], scores)
    sign = np.array([1.0, -1.0])
    if dec is not None:
        contrib = sums(_influence(dec, np.zeros(n, dtype=np.intp), sign), ids, n_units)
        disagree = bool(np.any(dec.stats[:, 0, :] != dec.stats[:, 1, :]))
    else:
        contrib = _jackknife_influence(y, [a, b], score, ids) / n_units
        disagree = bool(np.any(a != b))
    # worst case when they never disagree: one discordant pair in two
    sd = (
        float(np.std(n_units * contrib, ddof=1))
        if n_units > 1 and disagree
        else float(np.sqrt(0.5))
    )
    z = float(norm.ppf(1 - alpha / 2) + norm.ppf(power))
    return float(z * sd / np.sqrt(n_units))
