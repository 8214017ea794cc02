"""Statistics for comparing prompt variants, exact about what they test.

- `paired_permutation_test`: approximate randomisation on the task's own metric. Under the
  null hypothesis the two variants' predictions are exchangeable per example, so each
  example's pair (A_i, B_i) is swapped with probability 1/2. Accuracy and balanced accuracy
  are weighted sums of per-example correctness (the weight of example i is 1/n, or
  1/(K * n_class(i))), so a swap flips the sign of that example's weighted difference and
  the test reduces to a sign-flip test over the examples where A and B differ in correctness.
  That makes it exact (all 2^d sign patterns) when d is small, and a vectorised Monte Carlo
  otherwise, with p = (b + 1) / (R + 1).
- `bootstrap_ci`: percentile-free BCa intervals (scipy) for a metric and for differences.
- Across tasks: the paper's paired t-test and the Wilcoxon signed-rank test.
- `holm` and `benjamini_hochberg` corrections across the comparisons of a sweep.
- `minimum_detectable_effect` at 80% power for a comparison's n.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

Alternative = Literal["two-sided", "greater", "less"]
MetricName = Literal["accuracy", "balanced_accuracy"]
Labels = Sequence[Any] | NDArray[Any]


@dataclass(frozen=True)
class PermutationResult:
    """Result of a paired permutation test; `statistic` is metric(A) - metric(B)."""

    statistic: float
    p_value: float
    metric: str
    n: int
    n_discordant: int
    n_resamples: int
    exact: bool
    alternative: str
    test: str = "paired permutation test (per-example swaps of A and B)"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _weights(y_true: NDArray[Any], metric: str) -> NDArray[np.float64]:
    n = len(y_true)
    if metric == "accuracy":
        return np.full(n, 1.0 / n)
    if metric == "balanced_accuracy":
        classes, inverse, counts = np.unique(y_true, return_inverse=True, return_counts=True)
        return 1.0 / (len(classes) * counts[inverse])
    raise ValueError(f"metric must be 'accuracy' or 'balanced_accuracy', not {metric!r}")


def _as_array(x: Labels) -> NDArray[Any]:
    return np.asarray([("\0none" if v is None else v) for v in x], dtype=object).astype(str)


def paired_permutation_test(
    y_true: Labels,
    pred_a: Labels,
    pred_b: Labels,
    metric: MetricName | Callable[[NDArray[Any], NDArray[Any]], float] = "balanced_accuracy",
    n_resamples: int = 10_000,
    seed: int | None = 0,
    alternative: Alternative = "two-sided",
    exact_threshold: int = 16,
) -> PermutationResult:
    """Test H0: variants A and B are exchangeable per example, on `metric`.

    Exact over all 2^d swap patterns of the d examples where A and B differ in correctness
    when d <= `exact_threshold` or 2^d <= `n_resamples`; otherwise Monte Carlo with
    `n_resamples` random swap patterns, p = (b + 1) / (R + 1). A `None` prediction (an
    invalid or failed output) counts as wrong. A callable metric is supported by a slower,
    unvectorised loop.
    """
    y = _as_array(y_true)
    a = _as_array(pred_a)
    b = _as_array(pred_b)
    if not (len(y) == len(a) == len(b)) or len(y) == 0:
        raise ValueError("y_true, pred_a and pred_b must be non-empty and of equal length")
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be two-sided, greater or less, not {alternative!r}")
    rng = np.random.default_rng(seed)
    if callable(metric):
        return _generic(y, a, b, metric, n_resamples, rng, alternative)

    w = _weights(y, metric)
    delta = (a == y).astype(np.float64) - (b == y).astype(np.float64)
    contrib = (w * delta)[delta != 0]  # only discordant examples can change the statistic
    observed = float(contrib.sum())
    d = len(contrib)
    exact = d <= exact_threshold or (d < 63 and 2**d <= n_resamples)
    if d == 0:
        return PermutationResult(0.0, 1.0, metric, len(y), 0, 1, True, alternative)
    if exact:
        patterns = ((np.arange(2**d)[:, None] >> np.arange(d)) & 1).astype(np.float64)
        null = observed - 2.0 * (patterns @ contrib)
        p = _tail(null, observed, alternative) / len(null)
        return PermutationResult(
            observed, float(p), metric, len(y), d, len(null), True, alternative
        )
    null = _monte_carlo(contrib, observed, n_resamples, rng)
    p = (_tail(null, observed, alternative) + 1) / (n_resamples + 1)
    return PermutationResult(observed, float(p), metric, len(y), d, n_resamples, False, alternative)


def _monte_carlo(
    contrib: NDArray[np.float64], observed: float, n_resamples: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """Statistics of random swap patterns: observed - 2 * sum of swapped contributions."""
    d = len(contrib)
    out = np.empty(n_resamples)
    chunk = max(1, min(n_resamples, 4_000_000 // max(d, 1)))
    nbytes = (d + 7) // 8
    for start in range(0, n_resamples, chunk):
        r = min(chunk, n_resamples - start)
        raw = rng.integers(0, 256, size=(r, nbytes), dtype=np.uint8)
        bits = np.unpackbits(raw, axis=1, count=d)
        out[start : start + r] = observed - 2.0 * (bits @ contrib)
    return out


def _tail(null: NDArray[np.float64], observed: float, alternative: str) -> int:
    # Statistics are sums of a few distinct weights, so ties with the observed value are
    # common; a tolerance well above float64 rounding counts them as ties.
    eps = 1e-9
    if alternative == "greater":
        return int(np.count_nonzero(null >= observed - eps))
    if alternative == "less":
        return int(np.count_nonzero(null <= observed + eps))
    return int(np.count_nonzero(np.abs(null) >= abs(observed) - eps))


def _generic(
    y: NDArray[Any],
    a: NDArray[Any],
    b: NDArray[Any],
    metric: Callable[[NDArray[Any], NDArray[Any]], float],
    n_resamples: int,
    rng: np.random.Generator,
    alternative: Alternative,
) -> PermutationResult:
    observed = float(metric(y, a) - metric(y, b))
    differ = np.flatnonzero(a != b)
    null = np.empty(n_resamples)
    for r in range(n_resamples):
        swap = differ[rng.random(len(differ)) < 0.5]
        a2, b2 = a.copy(), b.copy()
        a2[swap], b2[swap] = b[swap], a[swap]
        null[r] = metric(y, a2) - metric(y, b2)
    p = (_tail(null, observed, alternative) + 1) / (n_resamples + 1)
    name = getattr(metric, "__name__", "custom")
    return PermutationResult(
        observed, float(p), name, len(y), len(differ), n_resamples, False, alternative
    )


# ---- confidence intervals ------------------------------------------------------------------
@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    level: float
    n_resamples: int
    method: str = "bootstrap BCa over examples"


def _metric_vectorised(
    y_idx: NDArray[np.int64], correct: NDArray[Any], n_classes: int, metric: str
) -> NDArray[np.float64]:
    """Metric over the last axis of (..., n) arrays of class indices and correctness."""
    if metric == "accuracy":
        return np.asarray(correct.mean(axis=-1), dtype=np.float64)
    recalls = []
    for k in range(n_classes):
        in_k = y_idx == k
        count = in_k.sum(axis=-1)
        hits = (in_k & (correct > 0)).sum(axis=-1)
        recalls.append(np.where(count > 0, hits / np.maximum(count, 1), np.nan))
    return np.asarray(np.nanmean(np.stack(recalls), axis=0), dtype=np.float64)


def bootstrap_ci(
    y_true: Labels,
    pred_a: Labels,
    pred_b: Labels | None = None,
    metric: MetricName = "balanced_accuracy",
    n_resamples: int = 2000,
    level: float = 0.95,
    seed: int | None = 0,
) -> Interval:
    """BCa bootstrap CI of metric(A), or of metric(A) - metric(B) when B is given (paired)."""
    from scipy.stats import bootstrap

    y = _as_array(y_true)
    classes, y_idx = np.unique(y, return_inverse=True)
    ca = (_as_array(pred_a) == y).astype(np.int8)
    cb = (_as_array(pred_b) == y).astype(np.int8) if pred_b is not None else None
    k = len(classes)

    def stat(*arrays: NDArray[Any], axis: int = -1) -> NDArray[np.float64]:
        yi = arrays[0]
        value = _metric_vectorised(yi, arrays[1], k, metric)
        if len(arrays) == 3:
            value = value - _metric_vectorised(yi, arrays[2], k, metric)
        return value

    data = (y_idx, ca) if cb is None else (y_idx, ca, cb)
    estimate = float(stat(*data))
    constant = np.all(ca == ca[0]) if cb is None else np.all(ca == cb)
    if constant:  # every resample gives the same value: the interval is that point
        return Interval(estimate, estimate, estimate, level, 0, "degenerate (no variation)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BCa on a near-degenerate sample: handled below
        res = bootstrap(
            data,
            stat,
            paired=True,
            vectorized=True,
            n_resamples=n_resamples,
            confidence_level=level,
            method="BCa",
            random_state=np.random.default_rng(seed),
        )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if np.isnan(low) or np.isnan(high):  # degenerate (e.g. all correct): fall back to percentile
        dist = res.bootstrap_distribution
        low, high = (float(q) for q in np.quantile(dist, [(1 - level) / 2, (1 + level) / 2]))
    return Interval(estimate, low, high, level, n_resamples)


# ---- across tasks --------------------------------------------------------------------------
@dataclass(frozen=True)
class AcrossTasks:
    test: str
    statistic: float
    p_value: float
    n_tasks: int
    mean_difference: float


def paired_t_across_tasks(scores_a: Sequence[float], scores_b: Sequence[float]) -> AcrossTasks:
    """The paper's test: a paired t-test over per-task scores (e.g. tasks in a category)."""
    from scipy.stats import ttest_rel

    r = ttest_rel(scores_a, scores_b)
    diff = float(np.mean(np.subtract(scores_a, scores_b)))
    return AcrossTasks(
        "paired t-test over tasks", float(r.statistic), float(r.pvalue), len(scores_a), diff
    )


def wilcoxon_across_tasks(scores_a: Sequence[float], scores_b: Sequence[float]) -> AcrossTasks:
    """Wilcoxon signed-rank test over per-task scores (no normality assumption)."""
    from scipy.stats import wilcoxon

    r = wilcoxon(scores_a, scores_b)
    diff = float(np.mean(np.subtract(scores_a, scores_b)))
    return AcrossTasks(
        "Wilcoxon signed-rank over tasks", float(r.statistic), float(r.pvalue), len(scores_a), diff
    )


# ---- multiple comparisons -----------------------------------------------------------------
def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (family-wise error), in the input order."""
    p = np.asarray(p_values, dtype=float)
    m = len(p)
    order = np.argsort(p)
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return out.tolist()


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (false discovery rate), in the input order."""
    from scipy.stats import false_discovery_control

    if len(p_values) == 0:
        return []
    return [float(x) for x in false_discovery_control(np.asarray(p_values, dtype=float))]


# ---- power ---------------------------------------------------------------------------------
def minimum_detectable_effect(
    y_true: Labels,
    pred_a: Labels,
    pred_b: Labels,
    metric: MetricName = "balanced_accuracy",
    alpha: float = 0.05,
    power: float = 0.8,
) -> float:
    """Smallest metric difference a two-sided paired test of this n detects with `power`.

    Normal approximation of the paired difference: MDE = (z_{1-alpha/2} + z_power) * SE, with
    SE = sd(n * w_i * delta_i) / sqrt(n) from the observed per-example differences. When A
    and B never disagree, the worst case for one discordant pair in two is used.
    """
    from scipy.stats import norm

    y = _as_array(y_true)
    n = len(y)
    w = _weights(y, metric)
    delta = (_as_array(pred_a) == y).astype(float) - (_as_array(pred_b) == y).astype(float)
    d = n * w * delta
    sd = float(np.std(d, ddof=1)) if n > 1 and np.any(delta != 0) else float(np.sqrt(0.5))
    z = float(norm.ppf(1 - alpha / 2) + norm.ppf(power))
    return float(z * sd / np.sqrt(n))
