"""The paired permutation test of two variants, and the tail count every test shares.

`paired_permutation_test`: approximate randomisation. Under H0 the two variants'
predictions are exchangeable per row, so each row's pair (A_i, B_i) is swapped with
probability 1/2. Only rows where A and B differ can change the statistic: exact over all
2^d swap patterns when d is small, else Monte Carlo with p = (b + 1) / (R + 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from experiments.analysis.clusters import checked, sums
from experiments.analysis.stats.decomposition import checked_decomposition
from experiments.analysis.stats.metrics import (
    Alternative,
    FloatArray,
    Labels,
    Metric,
    _check_alternative,
    check_inputs,
    name_of_metric,
    resolve_metric,
)

_EPS = 1e-9  # ties: statistics are sums of a few distinct values; rounding is far below this


def _tail(null: FloatArray, observed: float, alternative: str) -> int:
    # Statistics are sums of a few distinct weights, so ties with the observed value are
    # common; a tolerance well above float64 rounding counts them as ties.
    if alternative == "greater":
        return int(np.count_nonzero(null >= observed - _EPS))
    if alternative == "less":
        return int(np.count_nonzero(null <= observed + _EPS))
    return int(np.count_nonzero(np.abs(null) >= abs(observed) - _EPS))


@dataclass(frozen=True)
class PermutationResult:
    """Result of a paired permutation test; `statistic` is metric(A) - metric(B).

    `n` counts rows, `n_clusters` the units swapped (clusters of rows that cannot vary
    apart, `experiments.analysis.clusters`; equal to `n` when every row is its own), and
    `n_discordant` the units where A and B differ."""

    statistic: float
    p_value: float
    metric: str
    n: int
    n_discordant: int
    n_resamples: int
    exact: bool
    alternative: str
    test: str = "paired permutation test (per-example swaps of A and B)"
    n_clusters: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


PAIRED_TEST = "paired permutation test (per-example swaps of A and B)"
PAIRED_CLUSTER_TEST = "paired permutation test (swaps of A and B per cluster of rows)"


def _cluster_ids(clusters: Any, n: int) -> tuple[NDArray[np.intp], int]:

    ids = checked(clusters, n)
    return ids, (int(ids.max()) + 1 if n else 0)


def paired_permutation_test(
    y_true: Labels,
    pred_a: Labels,
    pred_b: Labels,
    metric: Metric = "balanced_accuracy",
    n_resamples: int = 10_000,
    seed: int | None = 0,
    alternative: Alternative = "two-sided",
    exact_threshold: int = 16,
    clusters: Sequence[Any] | NDArray[Any] | None = None,
) -> PermutationResult:
    """Test H0: variants A and B are exchangeable per unit, on `metric`.

    `metric` is a name from `metric_names()` or a callable ``(y_true, y_pred) -> float``
    (called with the values as given: ints, bools or strings); the statistic is exactly
    ``metric(y, A) - metric(y, B)`` over every row, as the table reports it. Rows are paired
    by position: align them by row index before calling.

    The unit swapped is a row, or with `clusters` (one key per row) a whole cluster: rows
    that cannot vary apart (identical prompts get identical answers, so LegalBench's repeated
    texts are one observation each) are swapped together, which keeps the test's size at
    alpha where row swaps reject up to three times too often. Exact over all 2^d swap
    patterns of the d units where A and B differ (in the metric's per-row statistics) when
    d <= `exact_threshold` or 2^d <= `n_resamples`; otherwise Monte Carlo with `n_resamples`
    random swap patterns, p = (b + 1) / (R + 1). A callable metric is supported by a slower
    loop that swaps the raw predictions and recomputes it.
    """
    y, a, b = check_inputs(y_true, [pred_a, pred_b])
    _check_alternative(alternative)
    n = len(y)
    ids, n_units = _cluster_ids(clusters, n)
    test = PAIRED_TEST if n_units == n else PAIRED_CLUSTER_TEST
    score = resolve_metric(metric)
    name = name_of_metric(metric)
    score_a, score_b = float(score(y, a)), float(score(y, b))
    observed = score_a - score_b
    rng = np.random.default_rng(seed)
    dec = checked_decomposition(metric, y, [a, b], [score_a, score_b])

    def result(p: float, d: int, r: int, exact: bool) -> PermutationResult:
        return PermutationResult(observed, p, name, n, d, r, exact, alternative, test, n_units)

    if dec is None:
        return _paired_generic(y, a, b, score, observed, n_resamples, rng, alternative, ids, result)

    stats = dec.stats
    diff = sums(stats[:, 1, :] - stats[:, 0, :], ids, n_units)  # B - A per unit
    discordant = np.any(np.abs(diff) > 1e-15, axis=1)
    d = int(discordant.sum())
    if d == 0:
        return result(1.0, 0, 1, True)
    diff = diff[discordant]
    totals = stats.sum(axis=0)  # (2, m)
    exact = d <= exact_threshold or (d < 63 and 2**d <= n_resamples)

    def null_of(shift: FloatArray) -> FloatArray:
        # shift = (sum over swapped units of B - A), shape (..., m)
        return dec.combine(totals[0] + shift) - dec.combine(totals[1] - shift)

    if exact:
        patterns = ((np.arange(2**d)[:, None] >> np.arange(d)) & 1).astype(np.float64)
        null = null_of(patterns @ diff)
        p = _tail(null, observed, alternative) / len(null)
        return result(float(p), d, len(null), True)
    null = null_of(_swap_shifts(diff, n_resamples, rng))
    p = (_tail(null, observed, alternative) + 1) / (n_resamples + 1)
    return result(float(p), d, n_resamples, False)


def _swap_shifts(diff: FloatArray, n_resamples: int, rng: np.random.Generator) -> FloatArray:
    """Sum of `diff` rows over random swap patterns (each row swapped with probability 1/2)."""
    d, m = diff.shape
    out = np.empty((n_resamples, m))
    chunk = max(1, min(n_resamples, 4_000_000 // max(d, 1)))
    nbytes = (d + 7) // 8
    for start in range(0, n_resamples, chunk):
        r = min(chunk, n_resamples - start)
        raw = rng.integers(0, 256, size=(r, nbytes), dtype=np.uint8)
        bits = np.unpackbits(raw, axis=1, count=d)
        out[start : start + r] = bits @ diff
    return out


def _paired_generic(
    y: NDArray[Any],
    a: NDArray[Any],
    b: NDArray[Any],
    score: Callable[[Any, Any], float],
    observed: float,
    n_resamples: int,
    rng: np.random.Generator,
    alternative: Alternative,
    ids: NDArray[np.intp],
    result: Callable[[float, int, int, bool], PermutationResult],
) -> PermutationResult:
    """Swap whole units where A and B differ, recomputing the callable every resample."""
    n_units = int(ids.max()) + 1
    unit_differs = np.zeros(n_units, dtype=bool)
    unit_differs[ids[a != b]] = True
    differ = np.flatnonzero(unit_differs)
    if len(differ) == 0:
        return result(1.0, 0, 1, True)
    null = np.empty(n_resamples)
    for r in range(n_resamples):
        swapped = np.zeros(n_units, dtype=bool)
        swapped[differ[rng.random(len(differ)) < 0.5]] = True
        swap = swapped[ids]
        a2, b2 = a.copy(), b.copy()
        a2[swap], b2[swap] = b[swap], a[swap]
        null[r] = score(y, a2) - score(y, b2)
    p = (_tail(null, observed, alternative) + 1) / (n_resamples + 1)
    return result(float(p), len(differ), n_resamples, False)
