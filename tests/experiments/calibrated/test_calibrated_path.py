"""The calibrated comparison through the real path, on answers whose truth is set
(`experiments.testing.calibrated_sim`): trials run and saved by the trial runner, the judge
through `judge_trial`, hand grades through a blind sheet (`make_sheet`) whose shuffled order
is graded top to bottom and added with `add_grades`, then `calibrated_report`.

A small grid (n 40 and 200 rows per variant, hand share 0.10 and 0.20 of the sheet, judge
bias toward A 0 and 0.15): where the report says valid the PPI interval covers the true
A − B; the judge-only interval misses it under bias and is labelled a judge score; the
hand-only interval is wider than the PPI one by a measured factor. Seeds are fixed, so the
counts are reproducible; the bounds leave room for Monte Carlo error (30 sets per n).
The full acceptance grid: benchmarks/calibrated_path.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from experiments.testing.calibrated_sim import Outcome, run_set
from promptlib import Catalog

pytestmark = pytest.mark.data

SETS = 30
P = (0.6, 0.6)  # true A − B = 0: a judge biased toward A makes A look better


@pytest.fixture(scope="module")
def outcomes(catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> list[Outcome]:
    root = tmp_path_factory.mktemp("calibrated_path")
    out: list[Outcome] = []
    for n in (40, 200):
        for s in range(SETS):
            out += run_set(
                catalog, root / f"{n}-{s}", n=n, p=P, shares=(0.10, 0.20), biases=(0.0, 0.15),
                seed=1000 * n + s,
            )  # fmt: skip
    return out


def _rate(flags: list[bool | None]) -> float:
    return sum(bool(f) for f in flags) / len(flags)


def _cell(outcomes: list[Outcome], n: int, share: float, bias: float) -> list[Outcome]:
    return [o for o in outcomes if (o.n, o.share, o.bias) == (n, share, bias)]


def test_ppi_covers_where_the_report_says_valid(outcomes: list[Outcome]) -> None:
    valid = [o for o in outcomes if o.covered is not None]
    assert len(valid) >= 4 * SETS  # every n = 200 set has enough grades
    rate = _rate([o.covered for o in valid])
    assert rate >= 0.88, rate  # nominal 0.95
    for share in (0.10, 0.20):
        for bias in (0.0, 0.15):
            cell = _rate([o.covered for o in _cell(outcomes, 200, share, bias)])
            assert cell >= 0.8, (share, bias, cell)


def test_too_few_grades_are_refused_and_said(outcomes: list[Outcome]) -> None:
    """n = 40 at 10-20%: 4-8 graded rows per variant, below the estimator's minimum."""
    small = [o for o in outcomes if o.n == 40]
    assert all(not o.row.valid and o.row.hand_needed for o in small)
    for o in small[:4]:
        assert "not decided: grade" in o.row.decision
        assert f"judge score (not calibrated) A − B = {o.row.judge_estimate:+.3f}" in o.row.decision
        assert "not a correctness result" in o.row.decision


def test_judge_only_intervals_fail_under_bias_and_are_not_correctness(
    outcomes: list[Outcome],
) -> None:
    biased = _rate([o.judge_covered for o in _cell(outcomes, 200, 0.10, 0.15)])
    fair = _rate([o.judge_covered for o in _cell(outcomes, 200, 0.10, 0.0)])
    assert biased <= 0.4, biased  # the PPI interval covers here
    assert fair >= 0.8, fair  # the failure is the bias, not the interval
    for o in _cell(outcomes, 200, 0.20, 0.15)[:3]:
        assert "judge score (not calibrated), never correctness or analysis" in o.text
        assert "judge A − B" in o.text


def test_hand_only_interval_is_wider_by_a_measured_factor(outcomes: list[Outcome]) -> None:
    for share in (0.10, 0.20):
        ratios = [o.hand_over_ppi for o in _cell(outcomes, 200, share, 0.0)]
        factor = float(np.median([r for r in ratios if r is not None]))
        print(f"n=200 share={share}: hand-only width / PPI width, median {factor:.2f}")
        assert factor > 1.0, factor


def test_graded_prefix_counts_as_a_random_subset(outcomes: list[Outcome]) -> None:
    for o in outcomes[:8]:
        assert o.row.random_subset and o.row.subset_note is None
        assert "NOT A RANDOM SUBSET" not in o.text
