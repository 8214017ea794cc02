"""The statistics: calibrated under the null, in agreement with scipy, and exact when small."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from experiments import stats


def _exchangeable(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y = rng.integers(0, 2, n)
    p_correct = rng.uniform(0.5, 0.9, n)  # per-example difficulty, shared by A and B
    a = np.where(rng.random(n) < p_correct, y, 1 - y)
    b = np.where(rng.random(n) < p_correct, y, 1 - y)
    return y, a, b


@pytest.mark.slow
@pytest.mark.parametrize("metric", ["accuracy", "balanced_accuracy"])
def test_null_rejection_rate_is_nominal(metric: str) -> None:
    rng = np.random.default_rng(2024)
    sims = 1000
    rejections = 0
    for s in range(sims):
        y, a, b = _exchangeable(rng, 120)
        r = stats.paired_permutation_test(y, a, b, metric=metric, n_resamples=999, seed=s)  # type: ignore[arg-type]
        rejections += r.p_value <= 0.05
    rate = rejections / sims
    assert 0.03 <= rate <= 0.07, f"rejection rate {rate:.3f} at alpha=0.05 over {sims} sims"


def test_power_against_a_real_difference() -> None:
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 300)
    a = np.where(rng.random(300) < 0.85, y, 1 - y)
    b = np.where(rng.random(300) < 0.65, y, 1 - y)
    r = stats.paired_permutation_test(y, a, b, metric="accuracy", seed=0)
    assert r.statistic > 0.1 and r.p_value < 0.001


def test_agrees_with_scipy_permutation_test_on_accuracy() -> None:
    from scipy.stats import permutation_test

    rng = np.random.default_rng(7)
    for _ in range(4):
        y = rng.integers(0, 3, 150)
        a = np.where(rng.random(150) < 0.7, y, (y + 1) % 3)
        b = np.where(rng.random(150) < 0.62, y, (y + 2) % 3)
        ours = stats.paired_permutation_test(y, a, b, metric="accuracy", n_resamples=20_000, seed=1)
        ca, cb = (a == y).astype(float), (b == y).astype(float)
        ref = permutation_test(
            (ca, cb),
            lambda x, z, axis: np.mean(x, axis=axis) - np.mean(z, axis=axis),
            permutation_type="samples",
            n_resamples=20_000,
            vectorized=True,
            random_state=2,
        )
        assert ours.statistic == pytest.approx(ref.statistic)
        # both Monte Carlo with R=20,000: allow 4 standard errors of the difference
        se = np.sqrt(2 * max(ref.pvalue, 1e-3) * (1 - ref.pvalue) / 20_000)
        assert abs(ours.p_value - ref.pvalue) <= 4 * se + 1e-4


def test_exact_when_few_examples_differ() -> None:
    y = np.array([1, 1, 1, 0, 0, 0, 1, 0])
    a = np.array([1, 1, 1, 0, 0, 0, 1, 0])
    b = np.array([0, 0, 1, 0, 0, 1, 1, 0])  # three discordant examples, all favour A
    r = stats.paired_permutation_test(y, a, b, metric="accuracy")
    assert r.exact and r.n_discordant == 3
    # by hand: of 2^3 sign patterns, only all-A and all-B reach |stat| = 3/8
    assert r.statistic == pytest.approx(3 / 8)
    assert r.p_value == pytest.approx(2 / 8)
    one_sided = stats.paired_permutation_test(y, a, b, metric="accuracy", alternative="greater")
    assert one_sided.p_value == pytest.approx(1 / 8)


def test_balanced_accuracy_statistic_matches_sklearn() -> None:
    from sklearn.metrics import balanced_accuracy_score

    rng = np.random.default_rng(3)
    y = rng.choice(["Yes", "No", "Maybe"], 80, p=[0.6, 0.3, 0.1])
    a = rng.choice(["Yes", "No", "Maybe"], 80)
    b = rng.choice(["Yes", "No", "Maybe"], 80)
    r = stats.paired_permutation_test(y, a, b, n_resamples=500)
    expected = balanced_accuracy_score(y, a) - balanced_accuracy_score(y, b)
    assert r.statistic == pytest.approx(expected)


def test_monte_carlo_is_seeded_and_never_zero() -> None:
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 500)
    a = y.copy()
    b = 1 - y
    r1 = stats.paired_permutation_test(y, a, b, n_resamples=999, seed=9)
    r2 = stats.paired_permutation_test(y, a, b, n_resamples=999, seed=9)
    assert r1 == r2 and not r1.exact
    assert r1.p_value == pytest.approx(1 / 1000)  # (b + 1) / (R + 1), never 0


def test_generic_metric_callable_agrees_with_fast_path() -> None:
    rng = np.random.default_rng(11)
    y, a, b = _exchangeable(rng, 60)

    def accuracy(t: np.ndarray, p: np.ndarray) -> float:
        return float(np.mean(t == p))

    slow = stats.paired_permutation_test(y, a, b, metric=accuracy, n_resamples=3000, seed=0)
    fast = stats.paired_permutation_test(y, a, b, metric="accuracy", n_resamples=3000, seed=0)
    assert slow.statistic == pytest.approx(fast.statistic)
    assert abs(slow.p_value - fast.p_value) < 0.06


def test_corrections_by_hand() -> None:
    p = [0.01, 0.04, 0.03, 0.20]
    # Holm: sorted 0.01*4, 0.03*3, 0.04*2, 0.20*1 -> 0.04, 0.09, 0.09 (monotone), 0.20
    assert stats.holm(p) == pytest.approx([0.04, 0.09, 0.09, 0.20])
    # BH: sorted p*m/rank = 0.04, 0.06, 0.0533, 0.20 -> step-up minima 0.04, 0.0533, 0.0533, 0.2
    assert stats.benjamini_hochberg(p) == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.20])


def test_bootstrap_ci_covers_the_estimate_and_differences() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    a = np.where(rng.random(200) < 0.8, y, 1 - y)
    b = np.where(rng.random(200) < 0.6, y, 1 - y)
    ci = stats.bootstrap_ci(y, a, metric="balanced_accuracy")
    assert ci.low < ci.estimate < ci.high and 0.6 < ci.estimate < 0.95
    diff = stats.bootstrap_ci(y, a, b, metric="accuracy")
    assert diff.low > 0 and diff.high < 0.45


def test_across_tasks_and_mde() -> None:
    a = [0.71, 0.65, 0.80, 0.55, 0.90, 0.62]
    b = [0.60, 0.61, 0.70, 0.50, 0.85, 0.66]
    t = stats.paired_t_across_tasks(a, b)
    w = stats.wilcoxon_across_tasks(a, b)
    assert t.n_tasks == w.n_tasks == 6 and 0 < t.p_value < 1 and 0 < w.p_value <= 1
    rng = np.random.default_rng(0)
    small = stats.minimum_detectable_effect(*_exchangeable(rng, 50))
    large = stats.minimum_detectable_effect(*_exchangeable(rng, 2000))
    assert small > large > 0  # more examples detect smaller differences


def test_exact_enumeration_matches_brute_force_on_balanced_accuracy() -> None:
    from sklearn.metrics import balanced_accuracy_score

    y = np.array(["a", "a", "b", "b", "b", "c", "a", "c"])
    a = np.array(["a", "b", "b", "c", "b", "c", "a", "a"])
    b = np.array(["b", "a", "b", "b", "a", "a", "c", "c"])
    obs = balanced_accuracy_score(y, a) - balanced_accuracy_score(y, b)
    count = total = 0
    for swaps in itertools.product([0, 1], repeat=len(y)):
        m = np.array(swaps, dtype=bool)
        a2, b2 = np.where(m, b, a), np.where(m, a, b)
        s = balanced_accuracy_score(y, a2) - balanced_accuracy_score(y, b2)
        count += abs(s) >= abs(obs) - 1e-12
        total += 1
    r = stats.paired_permutation_test(y, a, b)
    assert r.exact and r.p_value == pytest.approx(count / total)
