"""Statistics for comparing prompt variants, exact about what they test.

Every test runs on the metric the table reports. A metric is a name (``"accuracy"``, or any
official LegalBench metric in `experiments.metrics.METRICS`: ``balanced_accuracy``,
``sara_numeric_within_10pct``, ``citation_open_contains``,
``definition_extraction_stemmed_match``, ``ssla_f1``, ``successor_liability_f1``) or a
callable ``(y_true, y_pred) -> float``. `metric_fn` resolves a name to such a callable; the
statistics a test reports are differences of exactly those scores. ``"accuracy"`` is the
share of rows whose normalised prediction equals the normalised answer (not an official
LegalBench metric; the sweeps use it on per-row correctness).

A prediction of ``None`` (a failed or invalid output) is scored by an official metric as an
empty generation, which earns nothing: it is a wrong answer for the accuracy-type metrics,
names nothing for the F1 metrics. A callable receives ``None`` as it is.

Official metrics are sums over rows of small per-row statistics, combined at the end: a
weighted hit (accuracy, balanced accuracy, the share-of-rows metrics) or the (tp, fp, fn)
counts of the F1 metrics. The tests use that to run vectorised; each decomposition is
checked at run time against the official score and, should it ever disagree, the test falls
back to recomputing the official metric for every resample (slow, but never wrong).

- `paired_permutation_test`: approximate randomisation. Under H0 the two variants'
  predictions are exchangeable per row, so each row's pair (A_i, B_i) is swapped with
  probability 1/2. Only rows where A and B differ can change the statistic: exact over all
  2^d swap patterns when d is small, else Monte Carlo with p = (b + 1) / (R + 1).
- `range_permutation_test`: the valid best-vs-worst test for k variants. Under H0 the k
  variants' predictions are exchangeable within each row; the statistic is max - min of the
  metric over the variants, and each resample permutes, independently per row, which variant
  got which prediction.
- `post_selection_pair_test`: the paper's test (best and worst chosen by observed score, then
  tested as a pre-planned pair); kept under its own name because it is anti-conservative.
- `bootstrap_ci`: stratified (within answer class, for balanced accuracy), paired
  bias-corrected percentile intervals with a small-sample correction, flagged `unreliable`
  (a class under 10 rows) or `degenerate` (zero width) where they cannot be trusted.
- Across tasks: `across_tasks("t" | "wilcoxon" | "permutation", ...)`, which reports
  degenerate inputs (fewer than two tasks, all differences zero or identical for t, tasks
  without a score) with ``p_value=None`` and a note instead of a meaningless p-value.
- `holm` and `benjamini_hochberg` corrections (p-values outside [0, 1] or NaN are refused).
- `minimum_detectable_effect` at 80% power for a comparison's n.
- Building blocks shared with `analysis.sensitivity`: `checked_decomposition` (a metric as
  per-row sums, a `Decomposition`), `class_index` (answer classes) and `resample_counts`
  (stratified bootstrap row counts).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from experiments.analysis.clusters import checked, sums
from experiments.metrics import (
    METRICS,
    normalize,
    ssla_counts,
    successor_liability_counts,
)

Alternative = Literal["two-sided", "greater", "less"]
MetricName = Literal["accuracy", "balanced_accuracy"]  # the fast names; any `Metric` is accepted
Labels = Sequence[Any] | NDArray[Any]
MetricCallable = Callable[[NDArray[Any], NDArray[Any]], float]
Metric = str | MetricCallable
IntervalMethod = Literal["bc", "bca", "percentile", "studentized"]
AcrossTest = Literal["t", "wilcoxon", "permutation"]

FloatArray = NDArray[np.float64]
_EPS = 1e-9  # ties: statistics are sums of a few distinct values; rounding is far below this
_ROW_HIT_METRICS = (
    "sara_numeric_within_10pct",
    "citation_open_contains",
    "definition_extraction_stemmed_match",
    "exact_match",  # a user task's (`workbench task new`): one hit per row, like accuracy
)
_F1_METRICS = ("ssla_f1", "successor_liability_f1")
STRATIFIED_METRICS = ("balanced_accuracy",)
MIN_CLASS_ROWS = 10  # an interval on a class smaller than this is flagged unreliable


# ---- metrics ---------------------------------------------------------------------------------
def metric_names() -> tuple[str, ...]:
    """Every metric name the tests accept: ``accuracy`` and the official LegalBench metrics."""

    return ("accuracy", *METRICS)


def _text(p: Any) -> str:
    return "" if p is None else str(p)


def metric_fn(name: str) -> Callable[[Labels, Labels], float]:
    """The callable ``(y_true, y_pred) -> float`` for a metric name, as the table scores it.

    Official metrics are `experiments.metrics.METRICS[name](generations, answers)`; a ``None``
    prediction is scored as an empty generation. ``accuracy`` is normalised exact match.
    """

    if name == "accuracy":

        def accuracy(y_true: Labels, y_pred: Labels) -> float:
            if len(y_true) != len(y_pred) or len(y_true) == 0:
                raise ValueError("y_true and y_pred must be non-empty and of equal length")
            hits = [
                normalize(_text(p)) == normalize(t) for t, p in zip(y_true, y_pred, strict=True)
            ]
            return float(np.mean(hits))

        return accuracy
    if name not in METRICS:
        raise ValueError(
            f"unknown metric {name!r}; use one of {', '.join(metric_names())} "
            "or a callable (y_true, y_pred) -> float"
        )
    official = METRICS[name]

    def score(y_true: Labels, y_pred: Labels) -> float:
        return float(official([_text(p) for p in y_pred], [str(t) for t in y_true]))

    score.__name__ = name
    return score


def name_of_metric(metric: Metric) -> str:
    """The name results report for a metric: the name itself, or the callable's __name__."""
    return metric if isinstance(metric, str) else getattr(metric, "__name__", "custom")


def resolve_metric(metric: Metric) -> Callable[[Any, Any], float]:
    """The scoring callable for a metric name (`metric_fn`) or the callable itself."""
    if isinstance(metric, str):
        return metric_fn(metric)
    if callable(metric):
        return metric
    raise TypeError(
        f"metric must be a name or a callable (y_true, y_pred) -> float, not {metric!r}"
    )


def _objects(x: Labels) -> NDArray[Any]:
    """The caller's values as an array of their own type: ints stay ints, bools bools and
    strings strings (a callable metric such as sklearn's sees what was passed); mixed types,
    None or anything numpy would convert (1 and "a" to "1" and "a") stay Python objects."""
    if isinstance(x, np.ndarray) and x.ndim == 2 and 1 in x.shape:
        x = x.ravel()  # a column or row vector: one value per row
    if isinstance(x, np.ndarray) and x.ndim == 1:
        return x
    values = list(x)
    if values and all(v is not None for v in values):
        arr = np.asarray(values)
        same_type = all(type(v) is type(values[0]) for v in values)
        if same_type and arr.ndim == 1 and arr.dtype != object and arr.tolist() == values:
            return arr
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _common(arrays: Sequence[NDArray[Any]]) -> list[NDArray[Any]]:
    """Arrays whose elements can be exchanged without truncation or conversion: strings
    widened to one length, differing kinds as Python objects."""
    kinds = {a.dtype.kind for a in arrays}
    if len(kinds) == 1 and kinds <= {"U", "S"}:
        width = np.result_type(*arrays)
        return [a.astype(width) for a in arrays]
    if len({a.dtype for a in arrays}) == 1:
        return list(arrays)
    return [_as_object(a) for a in arrays]


def _as_object(a: NDArray[Any]) -> NDArray[Any]:
    out = np.empty(len(a), dtype=object)
    out[:] = a.tolist()
    return out


def check_inputs(y_true: Labels, predictions: Sequence[Labels]) -> tuple[NDArray[Any], ...]:
    """(y, *predictions) as arrays that pair up row by row; raises on empty, None or unequal."""
    y = _objects(y_true)
    if len(y) == 0:
        raise ValueError("y_true must not be empty")
    if y.dtype == object and any(v is None for v in y):
        raise ValueError("y_true contains None: every row needs an answer")
    preds = tuple(_common([_objects(p) for p in predictions])) if predictions else ()
    for p in preds:
        if len(p) != len(y):
            raise ValueError(
                f"y_true has {len(y)} rows but a prediction sequence has {len(p)}; "
                "they must pair up row by row"
            )
    return (y, *preds)


def _check_alternative(alternative: str) -> None:
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be two-sided, greater or less, not {alternative!r}")


# ---- per-row decomposition of the official metrics --------------------------------------------
@dataclass(frozen=True)
class Decomposition:
    """Per-row additive statistics of each variant and the function that combines totals.

    From `checked_decomposition`; `experiments.analysis.sensitivity` resamples with it too.

    ``stats`` has shape (n, v, m) for v variants; the metric of variant j is
    ``combine(stats[:, j, :].sum(axis=0))``. `linear` means m == 1 and combine is the identity.
    """

    stats: FloatArray
    combine: Callable[[FloatArray], FloatArray]
    linear: bool


def _identity(totals: FloatArray) -> FloatArray:
    return np.asarray(totals[..., 0], dtype=np.float64)


def _f1_totals(totals: FloatArray) -> FloatArray:
    tp, fp, fn = totals[..., 0], totals[..., 1], totals[..., 2]
    denom = 2 * tp + fp + fn
    out = np.zeros(np.shape(denom), dtype=np.float64)
    np.divide(2 * tp, denom, out=out, where=denom != 0)
    return out


def normalized_labels(values: Sequence[Any]) -> list[str]:
    """Each value as the official metrics compare it (`normalize`, None as "")."""
    memo: dict[str, str] = {}
    out = []
    for v in values:
        s = _text(v)
        if s not in memo:
            memo[s] = normalize(s)
        out.append(memo[s])
    return out


def class_index(y: NDArray[Any], metric: Metric) -> NDArray[np.intp]:
    """Answer class of each row (normalised answers for names, as the metric sees them).

    The strata of a stratified resample (`resample_counts`), so every class keeps its size.
    """
    keys = normalized_labels(list(y)) if isinstance(metric, str) else [str(v) for v in y]
    _, inverse = np.unique(np.asarray(keys, dtype=object).astype(str), return_inverse=True)
    return np.asarray(inverse, dtype=np.intp)


def _decompose(
    metric: Metric, y: NDArray[Any], preds: Sequence[NDArray[Any]]
) -> Decomposition | None:
    """Per-row statistics for a named metric; None for a callable (no decomposition known)."""
    if not isinstance(metric, str):
        return None

    n, v = len(y), len(preds)
    if metric in ("accuracy", "balanced_accuracy"):
        yn = np.asarray(normalized_labels(list(y)), dtype=object)
        hits = np.stack(
            [np.asarray(normalized_labels(list(p)), dtype=object) == yn for p in preds], axis=1
        ).astype(np.float64)
        if metric == "accuracy":
            w = np.full(n, 1.0 / n)
        else:
            _, inverse, counts = np.unique(yn.astype(str), return_inverse=True, return_counts=True)
            w = 1.0 / (len(counts) * counts[inverse])
        return Decomposition((w[:, None] * hits)[:, :, None], _identity, True)
    if metric in _ROW_HIT_METRICS:
        official = METRICS[metric]
        memo: dict[tuple[str, str], float] = {}
        stats = np.empty((n, v, 1))
        for j, p in enumerate(preds):
            for i in range(n):
                key = (_text(p[i]), str(y[i]))
                if key not in memo:
                    memo[key] = float(official([key[0]], [key[1]]))
                stats[i, j, 0] = memo[key] / n
        return Decomposition(stats, _identity, True)
    if metric in _F1_METRICS:
        count = ssla_counts if metric == "ssla_f1" else successor_liability_counts
        stats = np.empty((n, v, 3))
        for j, p in enumerate(preds):
            for i in range(n):
                stats[i, j] = count(_text(p[i]), str(y[i]))
        return Decomposition(stats, _f1_totals, False)
    resolve_metric(metric)  # raises the unknown-name error
    return None


def checked_decomposition(
    metric: Metric, y: NDArray[Any], preds: Sequence[NDArray[Any]], scores: Sequence[float]
) -> Decomposition | None:
    """The decomposition, if it reproduces every official score; else None (generic path).

    `scores` are the official scores of `preds`: a decomposition that disagrees with any of
    them is not returned, and the caller recomputes the official metric per resample instead.
    """
    dec = _decompose(metric, y, preds)
    if dec is None:
        return None
    values = dec.combine(dec.stats.sum(axis=0))
    if not np.allclose(values, scores, rtol=0.0, atol=1e-9):
        return None
    return dec


def _tail(null: FloatArray, observed: float, alternative: str) -> int:
    # Statistics are sums of a few distinct weights, so ties with the observed value are
    # common; a tolerance well above float64 rounding counts them as ties.
    if alternative == "greater":
        return int(np.count_nonzero(null >= observed - _EPS))
    if alternative == "less":
        return int(np.count_nonzero(null <= observed + _EPS))
    return int(np.count_nonzero(np.abs(null) >= abs(observed) - _EPS))


# ---- paired permutation test -----------------------------------------------------------------
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


# ---- k variants: range test and the paper's post-selection pair test -------------------------
@dataclass(frozen=True)
class RangeResult:
    """Result of `range_permutation_test`; `statistic` is max - min of `scores`."""

    statistic: float
    p_value: float
    scores: tuple[float, ...]
    k: int
    n: int
    n_resamples: int
    metric: str
    test: str
    alternative: str
    n_discordant: int = 0  # units (rows or clusters) whose variants' statistics differ
    best: int = 0  # index of the highest-scoring variant (first on ties)
    worst: int = 0  # index of the lowest-scoring variant other than best (first on ties)
    n_clusters: int = 0  # units permuted: clusters of rows (= n when every row is its own)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


RANGE_TEST = "range permutation test (per-row permutation of the k variants' predictions)"
RANGE_CLUSTER_TEST = (
    "range permutation test (per-cluster permutation of the k variants' predictions)"
)
POST_SELECTION_TEST = "post-selection, anti-conservative (as in the paper)"


def _permutations(k: int) -> NDArray[np.intp]:
    return np.asarray(list(itertools.permutations(range(k))), dtype=np.intp)


def _row_permutations(
    r: int, d: int, k: int, rng: np.random.Generator, table: NDArray[np.intp] | None
) -> NDArray[np.intp]:
    """(r, d, k) independent uniform permutations of range(k), one per (resample, row)."""
    if table is not None:
        return table[rng.integers(0, len(table), size=(r, d))]
    return np.argsort(rng.random((r, d, k)), axis=-1)


def _variants(predictions: Sequence[Labels], test: str) -> Sequence[Labels]:
    """The k variants' predictions (rows of a 2-d array are variants); `test` needs k >= 2."""
    if isinstance(predictions, np.ndarray) and predictions.ndim == 2:
        predictions = list(predictions)
    if len(predictions) < 2:
        raise ValueError(f"{test} needs at least 2 variants, got {len(predictions)}")
    return predictions


def _scored_variants(
    y_true: Labels, predictions: Sequence[Labels], metric: Metric
) -> tuple[NDArray[Any], list[NDArray[Any]], Callable[[Any, Any], float], tuple[float, ...]]:
    """The checked answers and predictions, the metric's callable, and each variant's score."""
    y, *preds = check_inputs(y_true, predictions)
    score = resolve_metric(metric)
    return y, preds, score, tuple(float(score(y, p)) for p in preds)


def range_permutation_test(
    y_true: Labels,
    predictions: Sequence[Labels],
    metric: Metric = "balanced_accuracy",
    n_resamples: int = 1000,
    seed: int | None = 0,
    alternative: Alternative = "greater",
    clusters: Sequence[Any] | NDArray[Any] | None = None,
) -> RangeResult:
    """Test H0: the k variants' predictions are exchangeable within each unit, on `metric`.

    A unit is a row, or with `clusters` (one key per row) a cluster of rows that cannot vary
    apart: a resample gives all of a cluster's rows the same permutation of the variants.

    The statistic is max - min over the variants of the metric (exactly as `metric_fn`
    scores them). Each of the `n_resamples` resamples permutes, independently for every row,
    which variant got which prediction; p = (b + 1) / (R + 1), so it is valid for the
    best-vs-worst comparison however the best and worst were picked.

    `alternative="greater"` (the default) asks whether the variants differ by more than
    chance: a large range is the only direction that is evidence against H0 when "which
    variant is best" was not fixed in advance. ``"less"`` asks whether they are *closer*
    than chance (rarely wanted); ``"two-sided"`` doubles the smaller one-sided p (capped at 1).

    Vectorised for every named metric (per-row statistics gathered under random per-row
    permutations; rows where all variants agree are left out, since permuting them changes
    nothing); a callable metric runs a loop that recomputes it for every variant and resample.
    """
    predictions = _variants(predictions, "a range test")
    k = len(predictions)
    _check_alternative(alternative)
    if n_resamples < 1:
        raise ValueError("n_resamples must be at least 1")
    # the variants in a canonical order (by their predictions) before the resamples are drawn,
    # so a fixed seed gives one p-value whatever order the spec listed them in (found by the
    # shuffle check of benchmarks/format_null.py: 0.065 vs 0.050 with the levels reversed)
    order = sorted(range(k), key=lambda j: [str(x) for x in predictions[j]])
    y, preds, score, canonical = _scored_variants(y_true, [predictions[j] for j in order], metric)
    scores = tuple(canonical[order.index(j)] for j in range(k))
    name = name_of_metric(metric)
    observed = max(scores) - min(scores)
    rng = np.random.default_rng(seed)
    ids, n_units = _cluster_ids(clusters, len(y))
    dec = checked_decomposition(metric, y, preds, canonical)
    if dec is not None:
        if n_units < len(y):
            dec = Decomposition(sums(dec.stats, ids, n_units), dec.combine, dec.linear)
        null, n_disc = _range_null_decomposed(dec, n_resamples, rng)
    else:
        null, n_disc = _range_null_generic(y, preds, score, n_resamples, rng, ids)
    greater = (_tail(null, observed, "greater") + 1) / (n_resamples + 1)
    less = (_tail(null, observed, "less") + 1) / (n_resamples + 1)
    p = {"greater": greater, "less": less, "two-sided": min(1.0, 2 * min(greater, less))}[
        alternative
    ]
    return RangeResult(
        statistic=observed,
        p_value=float(p),
        scores=scores,
        k=k,
        n=len(y),
        n_resamples=n_resamples,
        metric=name,
        test=RANGE_TEST if n_units == len(y) else RANGE_CLUSTER_TEST,
        alternative=alternative,
        n_discordant=n_disc,
        best=_best(scores),
        worst=_worst(scores),
        n_clusters=n_units,
    )


def _best(scores: Sequence[float]) -> int:
    return int(np.argmax(scores))


def _worst(scores: Sequence[float]) -> int:
    """The lowest-scoring variant other than `_best`: when every draw ties, best and worst
    still name two different draws (the range is 0 either way)."""
    best = _best(scores)
    others = [j for j in range(len(scores)) if j != best]
    return others[int(np.argmin([scores[j] for j in others]))]


def _range_null_decomposed(
    dec: Decomposition,
    n_resamples: int,
    rng: np.random.Generator,
    how: Literal["auto", "grouped", "gather"] = "auto",
) -> tuple[FloatArray, int]:
    """Null distribution of max - min under independent per-row permutations.

    Rows where all variants agree are left out (permuting them changes nothing). A row's
    permuted statistics are a uniform draw among the distinct arrangements of its multiset of
    per-variant values, so rows with the same multiset form a group whose arrangement counts
    are multinomial: "grouped" draws those counts (fast when there are few groups, as for
    accuracy-type metrics: at most K classes x (k - 1) hit counts); "gather" draws one
    permutation per row and resample.
    """
    stats = dec.stats
    _, k, m = stats.shape
    discordant = np.any(stats != stats[:, :1, :], axis=(1, 2))
    base = stats[~discordant].sum(axis=0)  # (k, m): the same for every resample
    sd = stats[discordant]
    d = len(sd)
    if d == 0:
        values = dec.combine(base)
        return np.full(n_resamples, float(values.max() - values.min())), 0
    table = _permutations(k) if k <= 6 else None
    if table is not None and how != "gather":
        keys = _multiset_keys(sd)
        if how == "grouped" or len(keys) * len(table) * 4 < d * k * m:
            groups = _arrangement_groups(keys, table)
            return _range_null_grouped(dec, base, groups, n_resamples, rng), d
    out = np.empty(n_resamples)
    rows = np.arange(d)
    if table is not None:
        # every row's k! permuted statistics, so a resample is a gather of one per row
        per_row = sd[:, table, :].reshape(d * len(table), k * m)  # (d * k!, k * m)
        offsets = rows * len(table)
    chunk = max(1, min(n_resamples, 4_000_000 // (d * k * m)))
    for start in range(0, n_resamples, chunk):
        r = min(chunk, n_resamples - start)
        if table is not None:
            pick = rng.integers(0, len(table), size=(r, d)) + offsets
            totals = per_row[pick].sum(axis=1).reshape(r, k, m)
        else:
            perm = _row_permutations(r, d, k, rng, None)
            totals = sd[rows[None, :, None], perm].sum(axis=1)  # (r, k, m)
        values = dec.combine(totals + base)
        out[start : start + r] = values.max(axis=1) - values.min(axis=1)
    return out, d


def _multiset_keys(sd: FloatArray) -> dict[tuple[tuple[float, ...], ...], int]:
    """Rows counted by their multiset of per-variant statistics (sorted (k, m) tuples)."""
    counts: dict[tuple[tuple[float, ...], ...], int] = {}
    for row in sd.tolist():
        key = tuple(sorted(tuple(v) for v in row))
        counts[key] = counts.get(key, 0) + 1
    return counts


def _arrangement_groups(
    keys: dict[tuple[tuple[float, ...], ...], int], table: NDArray[np.intp]
) -> list[tuple[int, FloatArray]]:
    """(rows, distinct arrangements (A, k * m)) for every multiset of row statistics."""
    out = []
    for key, size in keys.items():
        canonical = np.asarray(key, dtype=np.float64)  # (k, m)
        k, m = canonical.shape
        arrangements = np.unique(canonical[table].reshape(len(table), k * m), axis=0)
        out.append((size, arrangements))
    return out


def _range_null_grouped(
    dec: Decomposition,
    base: FloatArray,
    groups: list[tuple[int, FloatArray]],
    n_resamples: int,
    rng: np.random.Generator,
) -> FloatArray:
    k, m = base.shape
    totals = np.broadcast_to(base.reshape(1, k * m), (n_resamples, k * m)).copy()
    for size, arrangements in groups:
        a = len(arrangements)
        counts = rng.multinomial(size, np.full(a, 1.0 / a), size=n_resamples)
        totals += counts @ arrangements
    values = dec.combine(totals.reshape(n_resamples, k, m))
    return np.asarray(values.max(axis=1) - values.min(axis=1), dtype=np.float64)


def _range_null_generic(
    y: NDArray[Any],
    preds: Sequence[NDArray[Any]],
    score: Callable[[Any, Any], float],
    n_resamples: int,
    rng: np.random.Generator,
    ids: NDArray[np.intp],
) -> tuple[FloatArray, int]:
    """Per-unit permutations of the raw predictions, recomputing the callable each time."""
    k = len(preds)
    matrix = np.stack(_common(list(preds)), axis=1)  # (n, k)
    n_units = int(ids.max()) + 1
    unit_differs = np.zeros(n_units, dtype=bool)
    for row, unit in zip(matrix, ids, strict=True):
        if not unit_differs[unit] and len({repr(v) for v in row}) > 1:
            unit_differs[unit] = True
    units = np.flatnonzero(unit_differs)
    rows = np.flatnonzero(unit_differs[ids])
    slot = np.full(n_units, -1)
    slot[units] = np.arange(len(units))
    table = _permutations(k) if k <= 6 else None
    out = np.empty(n_resamples)
    for r in range(n_resamples):
        perm = _row_permutations(1, len(units), k, rng, table)[0][slot[ids[rows]]]
        shuffled = matrix.copy()
        shuffled[rows] = matrix[rows[:, None], perm]
        values = [score(y, shuffled[:, j]) for j in range(k)]
        out[r] = max(values) - min(values)
    return out, len(units)


@dataclass(frozen=True)
class PostSelectionResult(PermutationResult):
    """The paper's best-vs-worst test: `best` and `worst` index the k variants."""

    best: int = 0
    worst: int = 0
    scores: tuple[float, ...] = field(default_factory=tuple)


def post_selection_pair_test(
    y_true: Labels,
    predictions: Sequence[Labels],
    metric: Metric = "balanced_accuracy",
    n_resamples: int = 10_000,
    seed: int | None = 0,
    alternative: Alternative = "two-sided",
    clusters: Sequence[Any] | NDArray[Any] | None = None,
) -> PostSelectionResult:
    """The paper's test: pick the best and worst variant by observed score, then run
    `paired_permutation_test` on that pair as if it had been chosen in advance.

    Anti-conservative: under H0 with 5 interchangeable variants (n = 100) it rejects about
    a quarter of the time at alpha = 0.05 (see benchmarks/stats_validity.py). Kept to
    reproduce the paper; use `range_permutation_test` for a valid answer.
    """
    predictions = _variants(predictions, "a best-vs-worst test")
    y, preds, _, scores = _scored_variants(y_true, predictions, metric)
    best, worst = _best(scores), _worst(scores)
    res = paired_permutation_test(
        y, preds[best], preds[worst], metric, n_resamples, seed, alternative, clusters=clusters
    )
    return PostSelectionResult(
        **{**asdict(res), "test": POST_SELECTION_TEST},
        best=best,
        worst=worst,
        scores=scores,
    )


# ---- confidence intervals ------------------------------------------------------------------
@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    level: float
    n_resamples: int
    method: str = "bootstrap"
    unreliable: bool = False  # the smallest class (or the sample) has fewer than 10 rows
    degenerate: bool = False  # zero width: no resample moved the statistic
    note: str = ""


def bootstrap_ci(
    y_true: Labels,
    pred_a: Labels,
    pred_b: Labels | None = None,
    metric: Metric = "balanced_accuracy",
    n_resamples: int = 2000,
    level: float = 0.95,
    seed: int | None = 0,
    stratify: bool | None = None,
    interval: IntervalMethod = "bc",
    small_sample: bool = True,
    clusters: Sequence[Any] | NDArray[Any] | None = None,
) -> Interval:
    """Bootstrap CI of metric(A), or of metric(A) - metric(B) when B is given (paired).

    Resampling. For balanced accuracy (`stratify=None` means: stratify for the class-based
    metrics) rows are resampled *within each answer class*, keeping the class counts of the
    sample, which is what balanced accuracy conditions on; so no resample ever lacks a class.
    Other metrics resample rows as one stratum. A and B are always resampled together (the
    same rows: paired).

    Interval. The bias-corrected percentile ("bc", the default; Efron's BC): quantiles of
    the bootstrap distribution at levels shifted by z0, the normal score of the estimate's
    mid-rank among the resamples (mid-rank because ties are common in these discrete
    distributions). With `small_sample` (default) two corrections for small classes apply to
    every `interval`: each class's resampling deviations are scaled by sqrt(n_c / (n_c - 1))
    (the bootstrap's variance is otherwise (n_c - 1) / n_c of the unbiased one; named
    metrics only) and the normal quantiles behind the levels are replaced by Student t
    quantiles with Welch-Satterthwaite degrees of freedom over the classes ("expanded"
    intervals, after Hesterberg). Also available: "bca" (adds the acceleration, from per-row
    influence values centred within classes), "percentile", and "studentized" (bootstrap-t
    with the stratified linearised standard error; linear metrics only, others fall back to
    percentile).

    Why BC: 95% coverage measured with 90/10 classes at n = 200 (20 minority rows), for one
    variant and for a paired difference, in three recall scenarios
    (benchmarks/stats_validity.py): without the small-sample corrections every method
    covered about 0.92 for a paired difference; with them, percentile fell to 0.92 for one
    variant with recalls near 1 (the skew points the wrong way), BCa over-corrected (0.975-0.98
    for one variant, 0.92-0.93 for a paired difference), studentized over-covered one variant
    (0.98); BC was the only one at or above 0.93 throughout: with 3000 simulations per cell,
    0.944-0.957 for one variant and 0.936-0.944 for a paired difference (the tightest case).
    At n = 50 (5 minority rows) no method covers (about 0.82-0.83): such intervals are
    flagged `unreliable`.

    The result is flagged `unreliable` when the smallest class (or, unstratified, the whole
    sample) has fewer than 10 rows, and `degenerate` when it has zero width (every resample
    gave the estimate: a sample with no variation, not certainty); `note` says why.

    Long because this docstring is the method's documentation (and the measured coverage
    behind BC); the code is one resampling procedure of about 85 lines, its clustering and
    its limits by method in `_cluster_strata` and `_boot_limits`.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, not {level}")
    if interval not in ("bc", "bca", "percentile", "studentized"):
        raise ValueError(f"interval must be bc, bca, percentile or studentized, not {interval!r}")
    inputs = [pred_a] if pred_b is None else [pred_a, pred_b]
    y, *preds = check_inputs(y_true, inputs)
    score = resolve_metric(metric)
    scores = [float(score(y, p)) for p in preds]
    estimate = scores[0] - (scores[1] if len(scores) == 2 else 0.0)
    if stratify is None:
        stratify = isinstance(metric, str) and metric in STRATIFIED_METRICS
    elif not stratify and metric == "balanced_accuracy":
        raise ValueError(
            "balanced accuracy is bootstrapped within classes (a resample without a class "
            "has no balanced accuracy); leave stratify=None or True"
        )
    strata = class_index(y, metric) if stratify else np.zeros(len(y), dtype=np.intp)
    ids, n_units = _cluster_ids(clusters, len(y))
    rng = np.random.default_rng(seed)
    dec = checked_decomposition(metric, y, preds, scores)
    sign = np.array([1.0, -1.0])[: len(preds)]
    notes: list[str] = []
    if n_units < len(y):
        # whole clusters are resampled (within the answer class of their first row); balanced
        # accuracy then becomes a ratio of per-class totals, since class sizes vary
        unit_strata, mixed = _cluster_strata(strata, ids, n_units)
        if mixed:
            notes.append(
                f"{mixed} rows are in clusters that mix answer classes (each cluster is "
                "resampled within its most common class)"
            )
        if dec is not None:
            dec = _cluster_decomposition(dec, metric, strata, ids, n_units)
        strata = unit_strata
    sizes = np.bincount(strata)
    smallest = int(sizes.min())

    if dec is not None:
        boot = _bootstrap_decomposed(dec, strata, sizes, n_resamples, rng, sign, small_sample)
        influence = _influence(dec, strata, sign)
    else:
        boot = _bootstrap_generic(y, preds, score, strata, n_resamples, rng, ids)
        influence = _jackknife_influence(y, preds, score, ids)
    unit = "class" if stratify else "sample"
    rows = "rows" if n_units == len(y) else "clusters"
    unreliable = smallest < MIN_CLASS_ROWS
    if unreliable:
        notes.append(
            f"unreliable: the smallest {unit} has {smallest} {rows} (< {MIN_CLASS_ROWS}); "
            "the bootstrap cannot see how that class's score would vary"
        )
    resampling = "stratified by answer class, " if stratify else ""
    paired = "paired " if len(preds) == 2 else ""
    unit_text = "rows" if n_units == len(y) else f"{n_units} clusters of {len(y)} rows"
    method = f"bootstrap ({resampling}{paired}{unit_text}), "
    if np.ptp(boot) <= 1e-12:
        notes.append(
            f"degenerate: every resample gave {estimate:.4g} (no variation in the sample, "
            "e.g. all rows right or A and B agreeing on every row); a zero-width interval "
            "is not certainty"
        )
        return Interval(
            estimate, estimate, estimate, level, n_resamples, method + "degenerate",
            unreliable, True, "; ".join(notes),
        )  # fmt: skip

    low, high, how = _boot_limits(
        boot, estimate, influence, dec, strata, sizes, level=level, n_resamples=n_resamples,
        rng=rng, sign=sign, interval=interval, small_sample=small_sample, notes=notes,
    )  # fmt: skip
    method += how
    if isinstance(metric, str):  # every named metric lies in [0, 1]; a difference in [-1, 1]
        bound = (-1.0 if len(preds) == 2 else 0.0, 1.0)
        low, high = max(low, bound[0]), min(high, bound[1])
    degenerate = high - low <= 1e-12
    if degenerate:
        notes.append("degenerate: zero-width interval; not certainty")
    return Interval(
        estimate, low, high, level, n_resamples, method, unreliable, degenerate, "; ".join(notes)
    )


def _cluster_strata(
    strata: NDArray[np.intp], ids: NDArray[np.intp], n_units: int
) -> tuple[NDArray[np.intp], int]:
    """Each cluster's stratum, its most common answer class (ties: the lowest class), so the
    strata do not depend on row order; and the number of rows in clusters that mix classes."""
    k = int(strata.max()) + 1
    tally = np.zeros((n_units, k))
    np.add.at(tally, (ids, strata), 1.0)
    unit_strata = np.asarray(tally.argmax(axis=1), dtype=np.intp)
    mixed_units = np.count_nonzero(tally, axis=1) > 1
    return unit_strata, int(np.count_nonzero(mixed_units[ids]))


def _boot_limits(
    boot: FloatArray,
    estimate: float,
    influence: FloatArray,
    dec: Decomposition | None,
    strata: NDArray[np.intp],
    sizes: NDArray[np.intp],
    *,
    level: float,
    n_resamples: int,
    rng: np.random.Generator,
    sign: FloatArray,
    interval: IntervalMethod,
    small_sample: bool,
    notes: list[str],
) -> tuple[float, float, str]:
    """`bootstrap_ci`'s (low, high) by `interval` from the resamples `boot`, and the method's
    name (appended to the resampling's); a fallback adds a note to `notes`."""
    from scipy.stats import norm  # start-up: scipy.stats is slow to import
    from scipy.stats import t as t_dist  # start-up: as above

    alpha = (1 - level) / 2
    z_lo, z_hi = float(norm.ppf(alpha)), float(norm.ppf(1 - alpha))
    if small_sample:
        df = _satterthwaite(influence, strata, sizes)
        z_lo, z_hi = float(t_dist.ppf(alpha, df)), float(t_dist.ppf(1 - alpha, df))
        rescaled = "; class variances rescaled" if dec is not None else ""
        method_suffix = f", expanded (t with {df:.0f} df{rescaled})"
    else:
        method_suffix = ""
    percentile = [float(norm.cdf(z_lo)), float(norm.cdf(z_hi))]
    if interval == "studentized" and dec is not None and dec.linear:
        low, high = _studentized(dec, strata, sizes, boot, estimate, level, n_resamples, rng, sign)
        method = "studentized (bootstrap-t)"
    elif interval in ("bc", "bca"):
        # bias correction from the mid-rank of the estimate (ties are common here)
        below = float(
            np.mean(boot < estimate - _EPS) + 0.5 * np.mean(np.abs(boot - estimate) <= _EPS)
        )
        ss = float(np.sum(influence**2))
        accel = 0.0
        if interval == "bca" and ss > 0:
            accel = float(np.sum(influence**3) / (6 * ss**1.5))
        if 0 < below < 1:
            z0 = float(norm.ppf(below))
            qs = [float(norm.cdf(z0 + (z0 + z) / (1 - accel * (z0 + z)))) for z in (z_lo, z_hi)]
            low, high = (float(q) for q in np.quantile(boot, qs))
            method = "BCa" if interval == "bca" else "bias-corrected percentile (BC)"
        else:
            low, high = (float(q) for q in np.quantile(boot, percentile))
            method = "percentile (no bias correction: the estimate is outside the resamples)"
            notes.append("bias correction undefined (every resample on one side): percentile")
    else:
        low, high = (float(q) for q in np.quantile(boot, percentile))
        method = "percentile"
    return low, high, method + method_suffix


def _satterthwaite(
    influence: FloatArray, strata: NDArray[np.intp], sizes: NDArray[np.intp]
) -> float:
    """Welch-Satterthwaite degrees of freedom of a stratified sum, from influence values."""
    v = np.bincount(strata, weights=influence**2, minlength=len(sizes))
    denom = float(np.sum(v**2 / np.maximum(sizes - 1, 1)))
    return float(np.sum(v) ** 2 / denom) if denom > 0 else float(max(int(sizes.sum()) - 1, 1))


def resample_counts(
    strata: NDArray[np.intp], sizes: NDArray[np.intp], r: int, rng: np.random.Generator
) -> FloatArray:
    """(r, n) counts of each row in r resamples: every stratum's rows drawn with replacement,
    as many as it has (so every class keeps its size and none is ever missing).

    `strata` is each row's stratum (`class_index`, or zeros for one stratum) and `sizes` its
    row count per stratum (``np.bincount(strata)``).
    """
    counts = np.zeros((r, len(strata)))
    for c, size in enumerate(sizes):
        rows = np.flatnonzero(strata == c)
        size = int(size)
        picks = rng.integers(0, size, size=(r, size)) + (np.arange(r) * size)[:, None]
        counts[:, rows] = np.bincount(picks.ravel(), minlength=r * size).reshape(r, size)
    return counts


def _bootstrap_decomposed(
    dec: Decomposition,
    strata: NDArray[np.intp],
    sizes: NDArray[np.intp],
    n_resamples: int,
    rng: np.random.Generator,
    sign: FloatArray,
    rescale: bool,
) -> FloatArray:
    n, v, m = dec.stats.shape
    flat = dec.stats.reshape(n, v * m)
    out = np.empty(n_resamples)
    chunk = max(1, min(n_resamples, 4_000_000 // n))
    for start in range(0, n_resamples, chunk):
        r = min(chunk, n_resamples - start)
        counts = resample_counts(strata, sizes, r, rng)
        if rescale:  # unbiased class variances: deviations scaled by sqrt(n_c / (n_c - 1))
            f = np.sqrt(sizes / np.maximum(sizes - 1, 1))[strata]
            counts = 1 + f * (counts - 1)
        totals = (counts @ flat).reshape(r, v, m)
        out[start : start + r] = dec.combine(totals) @ sign
    return out


def _gradient(combine: Callable[[FloatArray], FloatArray], totals: FloatArray) -> FloatArray:
    """Numerical gradient of combine at totals (m,), by central differences."""
    m = len(totals)
    g = np.empty(m)
    for j in range(m):
        h = 1e-6 * max(1.0, abs(float(totals[j])))
        e = np.zeros(m)
        e[j] = h
        g[j] = float(combine(totals + e) - combine(totals - e)) / (2 * h)
    return g


def _influence(dec: Decomposition, strata: NDArray[np.intp], sign: FloatArray) -> FloatArray:
    """Per-row influence values of the statistic (linearised), centred within strata."""
    stats = dec.stats
    n, v, _ = stats.shape
    contrib = np.zeros(n)
    for j in range(v):
        g = _gradient(dec.combine, stats[:, j, :].sum(axis=0))
        contrib += sign[j] * (stats[:, j, :] @ g)
    means = np.bincount(strata, weights=contrib) / np.bincount(strata)
    return np.asarray(contrib - means[strata], dtype=np.float64)


def _jackknife_influence(
    y: NDArray[Any],
    preds: Sequence[NDArray[Any]],
    score: Callable[[Any, Any], float],
    ids: NDArray[np.intp] | None = None,
) -> FloatArray:
    """Jackknife influence of each unit (a row, or a cluster of rows when `ids` is given)."""
    n = len(y)
    units = np.arange(n) if ids is None else ids
    n_units = int(units.max()) + 1 if n else 0
    if n_units < 3:
        return np.zeros(n_units)
    values = np.empty(n_units)
    for c in range(n_units):
        keep = units != c
        values[c] = score(y[keep], preds[0][keep]) - (
            score(y[keep], preds[1][keep]) if len(preds) == 2 else 0.0
        )
    return np.asarray((n_units - 1) * (values.mean() - values), dtype=np.float64)


def _cluster_decomposition(
    dec: Decomposition,
    metric: Metric,
    strata: NDArray[np.intp],
    ids: NDArray[np.intp],
    n_units: int,
) -> Decomposition:
    """Per-cluster totals of a decomposition. Balanced accuracy's fixed per-row weights
    1/(K n_c) hold only while class sizes are fixed, so it becomes per-class (hits, rows)
    totals combined as the mean per-class recall: a cluster resample changes class sizes."""

    if isinstance(metric, str) and metric in STRATIFIED_METRICS:
        n, v, _ = dec.stats.shape
        k = int(strata.max()) + 1
        hits = (dec.stats[:, :, 0] > 0).astype(np.float64)  # (n, v)
        onehot = np.eye(k)[strata]  # (n, k)
        stats = np.empty((n, v, 2 * k))
        stats[:, :, 0::2] = hits[:, :, None] * onehot[:, None, :]
        stats[:, :, 1::2] = onehot[:, None, :]
        return Decomposition(sums(stats, ids, n_units), _mean_recall, False)
    if dec.linear:
        # accuracy and the share-of-rows metrics: value_i / n per row, so a resample with
        # another number of rows is (sum of values) / (rows drawn), a ratio
        n, v, _ = dec.stats.shape
        stats = np.empty((n, v, 2))
        stats[:, :, 0] = dec.stats[:, :, 0] * n
        stats[:, :, 1] = 1.0
        return Decomposition(sums(stats, ids, n_units), _ratio, False)
    return Decomposition(sums(dec.stats, ids, n_units), dec.combine, dec.linear)


def _ratio(totals: FloatArray) -> FloatArray:
    values, rows = totals[..., 0], totals[..., 1]
    return np.asarray(
        np.divide(values, rows, out=np.zeros(np.shape(values)), where=rows > 0), dtype=np.float64
    )


def _mean_recall(totals: FloatArray) -> FloatArray:
    hits, rows = totals[..., 0::2], totals[..., 1::2]
    recall = np.divide(hits, rows, out=np.zeros(np.shape(hits)), where=rows > 0)
    present = np.maximum((rows > 0).sum(axis=-1), 1)
    return np.asarray(recall.sum(axis=-1) / present, dtype=np.float64)


def _bootstrap_generic(
    y: NDArray[Any],
    preds: Sequence[NDArray[Any]],
    score: Callable[[Any, Any], float],
    strata: NDArray[np.intp],
    n_resamples: int,
    rng: np.random.Generator,
    ids: NDArray[np.intp] | None = None,
) -> FloatArray:
    """Resample units (rows, or clusters when `ids` groups rows) within strata of units."""
    n_units = len(strata)
    by_row = ids is None or n_units == len(y)
    members = [] if by_row else [np.flatnonzero(ids == c) for c in range(n_units)]
    groups = [np.flatnonzero(strata == c) for c in range(int(strata.max()) + 1)]
    out = np.empty(n_resamples)
    for r in range(n_resamples):
        units = np.concatenate([g[rng.integers(0, len(g), len(g))] for g in groups])
        idx = units if by_row else np.concatenate([members[u] for u in units])
        value = score(y[idx], preds[0][idx])
        if len(preds) == 2:
            value -= score(y[idx], preds[1][idx])
        out[r] = value
    return out


def _studentized(
    dec: Decomposition,
    strata: NDArray[np.intp],
    sizes: NDArray[np.intp],
    boot: FloatArray,
    estimate: float,
    level: float,
    n_resamples: int,
    rng: np.random.Generator,
    sign: FloatArray,
) -> tuple[float, float]:
    """Bootstrap-t for a linear statistic sum_i x_i with strata: se^2 = sum_c n_c var_c(x)."""
    x = dec.stats[:, :, 0] @ sign  # per-row contribution to the statistic

    def se(counts: FloatArray) -> FloatArray:
        s1 = np.stack([counts[:, strata == c] @ x[strata == c] for c in range(len(sizes))], 1)
        s2 = np.stack([counts[:, strata == c] @ x[strata == c] ** 2 for c in range(len(sizes))], 1)
        var = s2 / sizes - (s1 / sizes) ** 2
        return np.asarray(np.sqrt(np.maximum(var * sizes**2 / np.maximum(sizes - 1, 1), 0).sum(1)))

    se_hat = float(se(np.ones((1, len(x))))[0])
    counts = resample_counts(strata, sizes, n_resamples, rng)
    theta = counts @ x
    s = se(counts)
    ok = s > 0
    t = (theta[ok] - estimate) / s[ok]
    alpha = (1 - level) / 2
    if len(t) < 2 or se_hat == 0:
        low, high = np.quantile(boot, [alpha, 1 - alpha])
        return float(low), float(high)
    t_lo, t_hi = np.quantile(t, [alpha, 1 - alpha])
    return float(estimate - t_hi * se_hat), float(estimate - t_lo * se_hat)


# ---- across tasks --------------------------------------------------------------------------
@dataclass(frozen=True)
class AcrossTasks:
    """An across-task test on per-task scores; `p_value` is None when the input is degenerate."""

    test: str
    statistic: float | None
    p_value: float | None
    n_tasks: int
    mean_difference: float | None
    note: str = ""


ACROSS_TESTS: dict[str, str] = {
    "t": "paired t-test over tasks",
    "wilcoxon": "Wilcoxon signed-rank over tasks",
    "permutation": "sign-flip permutation test over tasks (mean difference)",
}


def _task_differences(
    test: str, scores_a: Sequence[float | None], scores_b: Sequence[float | None]
) -> tuple[FloatArray, AcrossTasks | None]:
    """Per-task differences, or a degenerate result saying why no test is possible."""
    name = ACROSS_TESTS[test]
    if len(scores_a) != len(scores_b):
        raise ValueError(
            f"scores_a has {len(scores_a)} tasks and scores_b {len(scores_b)}; "
            "they must pair up task by task"
        )
    a = np.array([np.nan if s is None else float(s) for s in scores_a], dtype=float)
    b = np.array([np.nan if s is None else float(s) for s in scores_b], dtype=float)
    n = len(a)
    missing = np.flatnonzero(np.isnan(a) | np.isnan(b))
    if len(missing):
        note = (
            f"{len(missing)} of {n} tasks have no score (positions {missing.tolist()}); "
            "no across-task test on a partial set"
        )
        return a - b, AcrossTasks(name, None, None, n, None, note)
    d = a - b
    mean = float(d.mean()) if n else None
    if n < 2:
        return d, AcrossTasks(name, None, None, n, mean, f"fewer than 2 tasks ({n}): no test")
    if np.all(np.abs(d) <= 1e-12):
        note = "every per-task difference is zero: the variants tie on every task, no test"
        return d, AcrossTasks(name, None, None, n, mean, note)
    return d, None


def _identical(d: FloatArray) -> bool:
    return bool(np.ptp(d) <= 1e-12)


def paired_t_across_tasks(
    scores_a: Sequence[float | None], scores_b: Sequence[float | None]
) -> AcrossTasks:
    """The paper's test: a paired t-test over per-task scores (e.g. tasks in a category).

    Degenerate inputs give ``p_value=None`` with a note: fewer than 2 tasks, a task without
    a score, all differences zero, or all differences identical (zero variance: t is
    undefined, and float rounding would otherwise turn it into p ~ 1e-31).
    """
    from scipy.stats import t as t_dist

    d, degenerate = _task_differences("t", scores_a, scores_b)
    if degenerate is not None:
        return degenerate
    n = len(d)
    mean = float(d.mean())
    if _identical(d):
        note = (
            f"every per-task difference equals {mean:.4g}: zero variance, so the t statistic "
            "is undefined; use the sign-flip permutation or Wilcoxon test"
        )
        return AcrossTasks(ACROSS_TESTS["t"], None, None, n, mean, note)
    se = float(d.std(ddof=1)) / math.sqrt(n)
    stat = mean / se
    p = float(2 * t_dist.sf(abs(stat), n - 1))
    return AcrossTasks(ACROSS_TESTS["t"], stat, min(1.0, p), n, mean)


def _cannot_reach(
    name: str, n: int, mean: float, smallest: float, alpha: float, why: str
) -> AcrossTasks | None:
    """A result without a p-value when the test's smallest attainable p is not below alpha:
    printing p = 0.0625 for 4 tasks that all agree reads like a result, but no outcome of
    the test could have been significant."""
    if smallest < alpha:
        return None
    note = (
        f"cannot reach p < {alpha:g} with {n} tasks: the smallest p-value this test can give "
        f"is {smallest:.4g} ({why}); add tasks or use the paired t-test"
    )
    return AcrossTasks(name, None, None, n, mean, note)


def _signed_rank_exact(d: FloatArray) -> tuple[float, float, float]:
    """(W+, exact two-sided p, smallest attainable p) of the signed-rank statistic over all
    2^n sign patterns, with average ranks for tied |d| (no zeros in `d`)."""
    from scipy.stats import rankdata

    n = len(d)
    ranks = rankdata(np.abs(d))
    w_plus = float(ranks[d > 0].sum())
    signs = (np.arange(2**n)[:, None] >> np.arange(n)) & 1  # 1 = positive
    null = signs @ ranks
    centre = float(ranks.sum()) / 2
    dev = np.abs(null - centre)
    p = float(np.count_nonzero(dev >= abs(w_plus - centre) - _EPS) / len(null))
    smallest = float(np.count_nonzero(dev >= dev.max() - _EPS) / len(null))
    return w_plus, p, smallest


def wilcoxon_across_tasks(
    scores_a: Sequence[float | None],
    scores_b: Sequence[float | None],
    alpha: float = 0.05,
    exact_threshold: int = 16,
) -> AcrossTasks:
    """Wilcoxon signed-rank test over per-task scores (no normality assumption).

    Tasks whose difference is zero carry no sign: they are dropped (Wilcoxon's own rule),
    `n_tasks` counts the tasks the test used and the note names the dropped ones. Exact
    over all 2^n sign patterns (average ranks for ties) when n <= `exact_threshold`, else
    scipy's normal approximation. Degenerate inputs (fewer than 2 tasks, a task without a
    score, all differences zero) and too few tasks to reach `alpha` give ``p_value=None``
    with a note.
    """
    from scipy.stats import wilcoxon

    name = ACROSS_TESTS["wilcoxon"]
    d, degenerate = _task_differences("wilcoxon", scores_a, scores_b)
    if degenerate is not None:
        return degenerate
    # differences within float rounding of each other are ties, not distinct ranks
    d = np.round(d, 12)
    zero = np.flatnonzero(np.abs(d) <= 1e-12)
    used = d[np.abs(d) > 1e-12]
    notes = []
    if len(zero):
        notes.append(
            f"{len(zero)} of {len(d)} tasks tie (zero difference, positions "
            f"{zero.tolist()}) and are dropped by the signed-rank test; n_tasks counts the "
            f"{len(used)} it used, mean_difference is over all {len(d)}"
        )
    n = len(used)
    mean = float(d.mean())
    if n < 2:
        return AcrossTasks(
            name, None, None, n, mean, "; ".join([*notes, f"fewer than 2 untied tasks ({n})"])
        )
    if n <= exact_threshold:
        stat, p, smallest = _signed_rank_exact(used)
        notes.append(f"exact over {2**n} sign patterns")
    else:
        from scipy.stats import rankdata

        r = wilcoxon(used)
        # W+ (the sum of the ranks of the positive differences), as on the exact path
        stat = float(rankdata(np.abs(used))[used > 0].sum())
        p, smallest = float(r.pvalue), 0.0
        notes.append("normal approximation")
    if _identical(used):
        notes.append("all differences identical (tied ranks)")
    cannot = _cannot_reach(name, n, mean, smallest, alpha, f"2^{n} sign patterns")
    if cannot is not None:
        return replace(cannot, note="; ".join([*notes, cannot.note]))
    return AcrossTasks(name, stat, min(1.0, p), n, mean, "; ".join(notes))


def permutation_across_tasks(
    scores_a: Sequence[float | None],
    scores_b: Sequence[float | None],
    n_resamples: int = 10_000,
    seed: int | None = 0,
    exact_threshold: int = 16,
    alpha: float = 0.05,
) -> AcrossTasks:
    """Sign-flip permutation test of the mean per-task difference (two-sided).

    Under H0 each task's difference is symmetric about 0, so its sign is flipped with
    probability 1/2. Exact over all 2^n sign patterns when n <= `exact_threshold`, else Monte
    Carlo with p = (b + 1) / (R + 1). Degenerate inputs as for the t-test; identical non-zero
    differences are fine here (p = 2 / 2^n exactly). With too few tasks for any sign pattern
    to give p < `alpha` (5 or fewer), no p-value: a note says so.
    """
    name = ACROSS_TESTS["permutation"]
    d, degenerate = _task_differences("permutation", scores_a, scores_b)
    if degenerate is not None:
        return degenerate
    n = len(d)
    observed = float(d.mean())
    if n <= exact_threshold:
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
        null = signs @ d / n
        p = _tail(null, observed, "two-sided") / len(null)
        smallest = _tail(null, float(np.abs(null).max()), "two-sided") / len(null)
        how = f"exact over {2**n} sign patterns"
        cannot = _cannot_reach(name, n, observed, smallest, alpha, how)
        if cannot is not None:
            return cannot
    else:
        rng = np.random.default_rng(seed)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(n_resamples, n))
        null = signs @ d / n
        p = (_tail(null, observed, "two-sided") + 1) / (n_resamples + 1)
        how = f"{n_resamples} random sign patterns"
    note = how + ("; all differences identical" if _identical(d) else "")
    return AcrossTasks(name, observed, float(p), n, observed, note)


def across_tasks(
    test: AcrossTest,
    scores_a: Sequence[float | None],
    scores_b: Sequence[float | None],
    alpha: float = 0.05,
) -> AcrossTasks:
    """One across-task test, chosen by name; the result's `test` says which one ran.

    ``None`` (or NaN) marks a task without a score: the result then has no p-value and its
    note lists those tasks (they are not dropped silently).
    """
    if test == "t":
        return paired_t_across_tasks(scores_a, scores_b)
    if test == "wilcoxon":
        return wilcoxon_across_tasks(scores_a, scores_b, alpha=alpha)
    if test == "permutation":
        return permutation_across_tasks(scores_a, scores_b, alpha=alpha)
    raise ValueError(f"across-task test must be t, wilcoxon or permutation, not {test!r}")


# ---- multiple comparisons -----------------------------------------------------------------
def _check_p_values(p_values: Sequence[float]) -> FloatArray:
    try:
        p = np.asarray(p_values, dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"p-values must be numbers in [0, 1]: {e}") from None
    if p.ndim != 1:
        raise ValueError("p-values must be a flat sequence of numbers in [0, 1]")
    bad = np.flatnonzero(~((p >= 0) & (p <= 1)))  # NaN fails both comparisons
    if len(bad):
        shown = ", ".join(f"{p_values[i]!r} at position {i}" for i in bad[:5])
        raise ValueError(
            f"p-values must be numbers in [0, 1] (not NaN or None); got {shown}"
            + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        )
    return p


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (family-wise error), in the input order.

    Raises ValueError on NaN, None or a p-value outside [0, 1].
    """
    p = _check_p_values(p_values)
    m = len(p)
    order = np.argsort(p)
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return [float(x) for x in out]


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (false discovery rate), in the input order.

    Raises ValueError on NaN, None or a p-value outside [0, 1].
    """
    from scipy.stats import false_discovery_control

    p = _check_p_values(p_values)
    if len(p) == 0:
        return []
    return [float(x) for x in false_discovery_control(p)]


# ---- power ---------------------------------------------------------------------------------
def minimum_detectable_effect(
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
