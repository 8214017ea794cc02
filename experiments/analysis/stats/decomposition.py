"""The official metrics as sums over rows of small per-row statistics.

Official metrics are sums over rows of small per-row statistics, combined at the end: a
weighted hit (accuracy, balanced accuracy, the share-of-rows metrics) or the (tp, fp, fn)
counts of the F1 metrics. The tests use that to run vectorised; each decomposition is
checked at run time against the official score and, should it ever disagree, the test falls
back to recomputing the official metric for every resample (slow, but never wrong).

Shared with `analysis.sensitivity`: `checked_decomposition` (a metric as per-row sums, a
`Decomposition`) and `class_index` (answer classes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from experiments.analysis.stats.metrics import FloatArray, Metric, _text, resolve_metric
from experiments.metrics import (
    METRICS,
    normalize,
    ssla_counts,
    successor_liability_counts,
)

_ROW_HIT_METRICS = (
    "sara_numeric_within_10pct",
    "citation_open_contains",
    "definition_extraction_stemmed_match",
    "exact_match",  # a user task's (`workbench task new`): one hit per row, like accuracy
)
_F1_METRICS = ("ssla_f1", "successor_liability_f1")


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
