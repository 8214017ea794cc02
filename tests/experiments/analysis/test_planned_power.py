"""experiments/analysis/planned_power.py: the MDE80 `workbench plan` prints before any call.

The check that matters: under the stated assumption, data drawn at a true difference equal to
the planned MDE are rejected by the real test (`stats.paired_permutation_test`) 80% of the
time. The generating model is rebuilt here from the assumption alone (its own quadrature and
root finding, not planned_power's), so a wrong fit, a wrong effect model or a wrong target
in planned_power fails it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.optimize import brentq
from scipy.special import expit

from experiments.analysis import stats
from experiments.analysis.planned_power import (
    Assumption,
    check_assumption,
    family_alpha,
    planned_mde,
)
from promptlib.errors import WorkbenchError

_X, _W = np.polynomial.hermite_e.hermegauss(60)
_W = _W / _W.sum()


def _latent(p: float, rho: float) -> tuple[float, float]:
    """(location, spread) of a logit-normal row difficulty shared by both arms whose mean
    recall is p and whose hits correlate rho (phi) between arms."""

    def loc(s: float) -> float:
        return float(brentq(lambda v: _W @ expit(v + s * _X) - p, -40, 40))

    if rho == 0:
        return loc(0.0), 0.0
    both = p * p + rho * p * (1 - p)
    s = float(brentq(lambda s: _W @ expit(loc(s) + s * _X) ** 2 - both, 1e-6, 8.0))
    return loc(s), s


def _shift(loc: float, s: float, delta: float) -> float:
    """The logit shift (A up, B down) whose true difference in recall, in every class, is
    delta: then balanced accuracy and accuracy differ by delta too."""
    return float(
        brentq(lambda e: _W @ (expit(loc + s * _X + e) - expit(loc + s * _X - e)) - delta, 0, 30)
    )


def _power_at_mde(
    y: NDArray[Any],
    units: NDArray[np.int64],
    alpha: float,
    assumption: Assumption,
    draws: int,
    seed: int,
) -> tuple[float, float]:
    """(planned MDE, share of fresh draws at that true difference the real test rejects)."""
    m = planned_mde(
        list(y),
        "balanced_accuracy",
        alpha=alpha,
        clusters=list(units),
        n_resamples=1000,
        assumption=assumption,
    )
    assert m.value is not None, m.note
    loc, s = _latent(assumption.accuracy, assumption.correlation)
    e = _shift(loc, s, m.value)
    labels = sorted(set(y))
    wrong = np.array([labels[(labels.index(v) + 1) % len(labels)] for v in y], dtype=object)
    n_units = int(units.max()) + 1
    rng = np.random.default_rng(seed)
    hits = 0
    for k in range(draws):
        z = rng.standard_normal(n_units)  # a unit's (text's) difficulty, shared by A and B
        a_right = (rng.random(n_units) < expit(loc + s * z + e))[units]
        b_right = (rng.random(n_units) < expit(loc + s * z - e))[units]
        a = np.where(a_right, y, wrong)
        b = np.where(b_right, y, wrong)
        res = stats.paired_permutation_test(y, a, b, n_resamples=1000, seed=k, clusters=units)
        hits += res.p_value <= alpha
    return m.value, hits / draws


def _rows(*counts: int) -> NDArray[Any]:
    return np.array([c for i, n in enumerate(counts) for c in [f"c{i}"] * n], dtype=object)


@pytest.mark.slow
def test_power_at_the_planned_mde_is_80_percent() -> None:
    """Six cells (~20 s): n = 30, 80 and 200 rows of two classes at alpha 0.05, n = 120 at
    the Holm level of a family of 6 (alpha 0.0083, 1,000 Monte Carlo resamples), three
    classes with independent arms, and 60 texts repeated 1-3 times (clusters). 600 draws
    each. Measured with these seeds: 0.780, 0.798, 0.800, 0.810, 0.817, 0.788; 0.799
    pooled. Each cell must be within 0.80 +- 0.055 (about 3.4 binomial SE) and the pool
    within 0.80 +- 0.025 (about 3.1 SE)."""
    rng = np.random.default_rng(5)
    sizes = rng.integers(1, 4, 60)
    texts = np.repeat(np.arange(60), sizes)
    cells = [
        (_rows(10, 20), None, 0.05, Assumption(0.7, 0.5)),
        (_rows(20, 60), None, 0.05, Assumption(0.7, 0.5)),
        (_rows(60, 140), None, 0.05, Assumption(0.6, 0.3)),
        (_rows(40, 80), None, family_alpha(0.05, 6), Assumption(0.7, 0.5)),
        (_rows(15, 25, 40), None, 0.05, Assumption(0.5, 0.0)),
        (np.where(texts < 20, "c0", "c1").astype(object), texts, 0.05, Assumption(0.7, 0.3)),
    ]
    rates = []
    for i, (y, units, alpha, a) in enumerate(cells):
        ids = np.arange(len(y)) if units is None else units
        _, rate = _power_at_mde(y, ids, alpha, a, draws=600, seed=100 + i)
        rates.append(rate)
    assert all(abs(r - 0.8) <= 0.055 for r in rates), rates
    assert abs(float(np.mean(rates)) - 0.8) <= 0.025, rates


@pytest.mark.slow
def test_more_rows_detect_less_and_the_correction_needs_more() -> None:
    values = [
        planned_mde(list(_rows(n // 3, n - n // 3)), "balanced_accuracy").value
        for n in (30, 90, 300)
    ]
    assert all(v is not None for v in values)
    assert values[0] > values[1] > values[2] > 0  # type: ignore[operator]
    y = list(_rows(40, 80))
    plain = planned_mde(y, "balanced_accuracy").value
    corrected = planned_mde(y, "balanced_accuracy", alpha=family_alpha(0.05, 6)).value
    assert plain is not None and corrected is not None and corrected > plain
    # arms that agree more disagree less: a smaller difference is detectable
    closer = planned_mde(y, "balanced_accuracy", assumption=Assumption(0.7, 0.6)).value
    apart = planned_mde(y, "balanced_accuracy", assumption=Assumption(0.7, 0.0)).value
    assert closer is not None and apart is not None and closer < apart


def test_repeated_texts_count_once() -> None:
    """20 texts each asked 3 times are 20 units, not 60: the MDE is that of 20 rows."""
    y = list(_rows(30, 30))
    texts = [i // 3 for i in range(60)]
    clustered = planned_mde(y, "balanced_accuracy", clusters=texts)
    assert clustered.n_units == 20 and clustered.n == 60
    alone = planned_mde(list(_rows(10, 10)), "balanced_accuracy").value
    assert clustered.value == pytest.approx(alone, rel=0.02)
    assert planned_mde(y, "balanced_accuracy").value < clustered.value  # type: ignore[operator]


def test_what_it_cannot_plan_says_why() -> None:
    f1 = planned_mde(["a b", "c"] * 10, "ssla_f1")
    assert f1.value is None and "no planned MDE" in f1.note
    manual = planned_mde(["x"] * 10, "manual")
    assert manual.value is None and "manual" in manual.note
    tiny = planned_mde(["Yes", "No", "Yes"], "balanced_accuracy", alpha=0.001)
    assert tiny.value is None and "cannot reach" in tiny.note


def test_an_assumption_out_of_range_is_refused() -> None:
    with pytest.raises(WorkbenchError, match="--correlation must be"):
        check_assumption(Assumption(0.7, 0.9))
    with pytest.raises(WorkbenchError, match="--accuracy must be"):
        check_assumption(Assumption(1.0, 0.5))
    assert Assumption(0.7, 0.5).both_right == pytest.approx(0.49 + 0.5 * 0.21)
