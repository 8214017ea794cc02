"""A reduced end-to-end check of size and power (the full run: benchmarks/known_effect.py).

Bands are wider than the benchmark's targets because fewer simulations are run: with 150
simulations the Monte Carlo standard error of a 5% rate is 1.8 points, of a 60% rate 4 points.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.testing.validation import simulate
from promptlib import Catalog

pytestmark = [pytest.mark.data, pytest.mark.slow]


def test_no_effect_rejects_at_about_alpha(catalog: Catalog, tmp_path: Path) -> None:
    r = simulate(catalog, n_sims=150, p_a=0.7, p_b=0.7, seed=11, workdir=tmp_path)
    assert r.rate <= 0.10, r
    assert abs(r.mean_statistic) < 0.03, r


def test_known_effect_is_detected_at_the_predicted_power(catalog: Catalog, tmp_path: Path) -> None:
    r = simulate(catalog, n_sims=100, p_a=0.75, p_b=0.60, seed=12, workdir=tmp_path)
    assert 0.3 < r.predicted_power < 0.9, r  # the effect is neither trivial nor hopeless
    assert abs(r.rate - r.predicted_power) <= 0.15, r
    assert 0.10 < r.mean_statistic < 0.20, r  # the tested statistic estimates the effect
