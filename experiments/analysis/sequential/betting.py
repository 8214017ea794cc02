"""The confidence sequence itself: betting on block means of a linear metric's row terms.

See the package docstring for why it is valid; this module is the arithmetic, vectorised
over S sequences that share the same planned rows (one comparison, or a simulation's many).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from experiments.analysis import stats
from experiments.metrics import base_metric
from promptlib.errors import WorkbenchError

GRID = 401  # candidate means: a step of 0.005 on the [-1, 1] difference scale
# c: bets are truncated at c/m and c/(1 - m). Chosen from {0.5, 0.75, 0.9} on tuning seed 777
# (accuracy and balanced accuracy, 80/20 classes, 0 / 1x / 2x the MDE), never on the
# benchmark's evaluation seeds; 0.75 was within 6% of 0.9 in rows used and further from ruin.
# Rechecked on seed 777 with best-of-k added, over {0.75, 0.9, 0.95}: within 6% in calls
TRUNCATION = 0.75
LINEAR = ("accuracy", "balanced_accuracy")
ONE_STRATUM = (
    "sara_numeric_within_10pct",
    "citation_open_contains",
    "definition_extraction_stemmed_match",
    "exact_match",  # a user task's (`workbench task new`): one hit per row, like these
)
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.intp]


class NotSequential(WorkbenchError):
    """The metric has no valid confidence sequence here (F1): use the fixed design."""


def check_metric(metric: str) -> None:
    """Raise unless the metric is a weighted mean of per-row hits."""
    metric = base_metric(metric)  # a rule-conclusion metric is its official metric's kind
    if metric in LINEAR or metric in ONE_STRATUM:
        return
    if metric in stats.metric_names():
        raise NotSequential(
            f"metric {metric!r} is not a mean of per-row terms, so no confidence sequence "
            "covers it; compare these variants with the fixed design (every planned row)"
        )
    raise WorkbenchError(
        f"unknown metric {metric!r} for a sequential comparison; use one of "
        f"{', '.join((*LINEAR, *ONE_STRATUM))}"
    )


def strata(metric: str, answers: Sequence[str]) -> tuple[IntArray, FloatArray]:
    """Each row's stratum (answer class) and each stratum's weight in the metric."""
    check_metric(metric)
    metric = base_metric(metric)
    if not answers:
        raise WorkbenchError("a sequential comparison needs at least one planned row")
    if metric in ONE_STRATUM:
        return np.zeros(len(answers), dtype=np.intp), np.ones(1)
    labels = np.asarray(stats.normalized_labels(list(answers)), dtype=str)
    _, cls, counts = np.unique(labels, return_inverse=True, return_counts=True)
    if metric == "balanced_accuracy":
        weights = np.full(len(counts), 1.0 / len(counts))
    else:
        weights = counts / counts.sum()
    return np.asarray(cls, dtype=np.intp), weights.astype(np.float64)


def unit_ends(clusters: Sequence[int] | IntArray | None, n: int) -> BoolArray:
    """Where each unit (a cluster's rows, together in the order; or a row) ends. Raises when
    a cluster's rows are not together (order them with `row_order(..., clusters=...)`)."""
    if clusters is None:
        return np.ones(n, dtype=bool)
    ids = np.asarray(clusters)
    if len(ids) != n:
        raise WorkbenchError(f"{len(ids)} cluster ids for {n} planned rows; give one per row")
    ends = np.ones(n, dtype=bool)
    ends[:-1] = ids[1:] != ids[:-1]
    runs = ids[ends]
    if len(np.unique(runs)) != len(runs):
        raise WorkbenchError(
            "a cluster's rows are not together in the planned order: a sequential design "
            "bets on whole clusters; order the rows with row_order(..., clusters=...)"
        )
    return ends


def cluster_weights(
    cls: IntArray, k: int, clusters: Sequence[int] | IntArray | None
) -> tuple[FloatArray, FloatArray, float]:
    """Per row, its weight in a block's class mean and whether it opens its cluster's rows of
    its class; and the bound of the block statistic. A block's class-c term is the mean over
    its clusters of (the cluster's class-c rows / the class's mean rows per cluster) x their
    mean difference: over a random cluster its expectation is the class's row-level recall
    difference, so a repeated text counts as many rows as it has, as the metric counts it
    (a plain mean over the block's rows would weight a block of many copies like one of a
    single text). Every term lies within +-bound = the largest such size ratio; rows are
    their own clusters: weights 1, bound 1, the row means."""
    n = len(cls)
    if clusters is None:
        return np.ones(n), np.ones(n), 1.0
    ids = np.asarray(clusters)
    first = np.zeros(n)
    sizes: dict[tuple[int, int], int] = {}
    for i in range(n):
        key = (int(ids[i]), int(cls[i]))
        if key not in sizes:
            first[i] = 1.0
        sizes[key] = sizes.get(key, 0) + 1
    rows = np.bincount(cls, minlength=k).astype(np.float64)
    groups = np.zeros(k)
    for _, c in sizes:
        groups[c] += 1.0
    mean_size = np.divide(rows, groups, out=np.ones(k), where=groups > 0)
    scale = 1.0 / mean_size[cls]
    bound = max(size / mean_size[c] for (_, c), size in sizes.items())
    return scale, first, float(max(bound, 1.0))


def block_ends(cls: IntArray, n_strata: int, units: BoolArray | None = None) -> BoolArray:
    """Where each block ends: a block is the shortest run of whole units (clusters of
    repeated texts, or rows), in order, that holds every stratum; the rows after the last
    such run join the last block. A block never splits a cluster, so under the permutation
    null (A's and B's replies exchangeable per cluster) the blocks' signs are independent."""
    ends = np.zeros(len(cls), dtype=bool)
    seen: set[int] = set()
    for i, c in enumerate(cls):
        seen.add(int(c))
        if len(seen) == n_strata and (units is None or units[i]):
            ends[i] = True
            seen = set()
    if seen and ends.any():
        ends[np.flatnonzero(ends)[-1]] = False
    ends[-1] = True
    return ends


class Betting:
    """The betting CS (aGRAPA bets) of the mean of observations in [0, 1], S at once."""

    def __init__(self, n_seq: int, alpha: float, horizon: int | None = None) -> None:
        self.horizon = horizon  # observations up to the budget, when known: caps the bets
        self.m = np.linspace(0.0, 1.0, GRID)
        self.log_level = float(np.log(1.0 / alpha))
        self.n = np.zeros(n_seq)
        self.sum_x = np.zeros(n_seq)
        self.sum_sq = np.zeros(n_seq)
        self.log_k = np.zeros((n_seq, GRID))
        self.rejected = np.zeros((n_seq, GRID), dtype=bool)
        with np.errstate(divide="ignore"):
            self.cap_up = TRUNCATION / self.m
            self.cap_down = TRUNCATION / (1.0 - self.m)

    def add(self, x: FloatArray, mask: BoolArray) -> None:
        """One observation for every sequence where `mask` holds (the others skip it).

        The bet on candidate mean m is predictable: it uses only earlier observations,
        lambda = (mu - m) / (sigma^2 + (mu - m)^2) with the regularised running mean mu and
        variance sigma^2 (one pseudo-observation of mean 1/2, variance 1/4), truncated to
        [-c/(1 - m), c/m] so every factor 1 + lambda (x - m) stays >= 1 - c > 0.
        """
        t = self.n + 1.0
        var_prev = (0.25 + self.sum_sq) / t
        gap = ((0.5 + self.sum_x) / t)[:, None] - self.m[None, :]
        lam = np.clip(gap / (var_prev[:, None] + gap**2), -self.cap_down, self.cap_up)
        if self.horizon is not None:  # tuned to the budget: no larger than the fixed-n bet
            tuned = np.sqrt(2.0 * self.log_level / (np.maximum(var_prev, 1e-3) * self.horizon))
            lam = np.sign(lam) * np.minimum(np.abs(lam), tuned[:, None])
        lam *= mask[:, None]
        self.log_k += np.log1p(lam * (x[:, None] - self.m[None, :]))
        n_new = np.where(mask, t, self.n)
        sum_new = np.where(mask, self.sum_x + x, self.sum_x)
        mean_new = (0.5 + sum_new) / (n_new + 1.0)
        self.sum_sq = np.where(mask, self.sum_sq + (x - mean_new) ** 2, self.sum_sq)
        self.n, self.sum_x = n_new, sum_new

    def look(self) -> tuple[FloatArray, FloatArray]:
        """Update the running intersection; the CS's (lower, upper) on the [-1, 1] scale.

        Each end is the grid point just outside the accepted set, so the grid only widens.
        """
        self.rejected |= self.log_k >= self.log_level
        accepted = ~self.rejected
        g = np.arange(GRID)
        first = np.where(accepted, g, GRID).min(axis=1)
        last = np.where(accepted, g, -1).max(axis=1)
        empty = first == GRID  # the CS fell between two grid points: keep the best one's cell
        best = np.argmin(self.log_k, axis=1)
        first = np.where(empty, best, first)
        last = np.where(empty, best, last)
        lo = self.m[np.maximum(first - 1, 0)]
        hi = self.m[np.minimum(last + 1, GRID - 1)]
        return 2.0 * lo - 1.0, 2.0 * hi - 1.0


class Core:
    """S paired comparisons over the same planned rows, in order (vectorised)."""

    def __init__(
        self,
        metric: str,
        answers: Sequence[str],
        alpha: float,
        n_seq: int,
        clusters: Sequence[int] | IntArray | None = None,
        budget: int | None = None,
    ) -> None:
        if not 0.0 < alpha < 1.0:
            raise WorkbenchError(f"alpha must lie strictly between 0 and 1, not {alpha}")
        self.cls, self.weights = strata(metric, answers)
        self.n_planned = len(self.cls)
        k = len(self.weights)
        units = unit_ends(clusters, self.n_planned)
        self.ends = block_ends(self.cls, k, units)
        self.scale, self.first, self.bound = cluster_weights(self.cls, k, clusters)
        # the bets are tuned to the blocks the budget can complete (every planned row when
        # no budget is given): a bet no larger than the fixed-horizon one keeps power at
        # effects near the fixed design's MDE (validity does not depend on it)
        cap = self.n_planned if budget is None else min(budget, self.n_planned)
        self.cs = Betting(n_seq, alpha, max(1, int(self.ends[:cap].sum())))
        self.sum_d = np.zeros((n_seq, k))
        self.seen = np.zeros((n_seq, k))
        self.block_d = np.zeros((n_seq, k))
        self.block_n = np.zeros((n_seq, k))
        self.pos = np.zeros(n_seq, dtype=np.int64)  # rows seen by each sequence

    def add(self, d: NDArray[np.int64], mask: BoolArray | None = None) -> None:
        """The next rows' differences hit_A - hit_B, shape (S, b), where `mask` holds."""
        n_seq, b = d.shape
        on = np.ones(n_seq, dtype=bool) if mask is None else mask
        if np.any(self.pos[on] + b > self.n_planned):
            raise WorkbenchError(
                f"more rows than planned ({self.n_planned}): a sequential comparison "
                "sees each planned row once"
            )
        for j in range(b):
            rows = np.minimum(self.pos + j, self.n_planned - 1)
            c = self.cls[rows]
            for s_idx in np.unique(c[on]):
                m = on & (c == s_idx)
                self.sum_d[m, s_idx] += d[m, j]
                self.seen[m, s_idx] += 1
                self.block_d[m, s_idx] += d[m, j] * self.scale[rows[m]]
                self.block_n[m, s_idx] += self.first[rows[m]]
            end = on & self.ends[rows]
            if np.any(end):
                means = self.block_d / np.maximum(self.block_n, 1.0)
                self.cs.add((means @ self.weights / self.bound + 1.0) / 2.0, end)
                self.block_d[end] = 0.0
                self.block_n[end] = 0.0
        self.pos = np.where(on, self.pos + b, self.pos)

    def look(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(estimate, lower, upper) of metric(A) - metric(B) for every sequence."""
        lo, hi = self.cs.look()
        lo = np.maximum(lo * self.bound, -1.0)
        hi = np.minimum(hi * self.bound, 1.0)
        seen = self.seen > 0
        means = np.divide(self.sum_d, self.seen, out=np.zeros_like(self.sum_d), where=seen)
        # A class not seen yet has no estimate (not 0): the seen classes' weights are
        # renormalised until every class has a row, then the metric's own weights apply.
        w = seen * self.weights
        total = w.sum(axis=1)
        partial = np.divide(
            (means * w).sum(axis=1), total, out=np.zeros_like(total), where=total > 0
        )
        return np.where(seen.all(axis=1), means @ self.weights, partial), lo, hi
