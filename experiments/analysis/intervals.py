"""Intervals for the official metrics whose coverage was measured, and flagged where it fails.

Why not the bootstrap: percentile-type bootstraps of balanced accuracy under-cover near the
ceiling (a review measured 0.75 for a nominal 95% at n = 100 with 10 minority rows, recall
0.9): a class whose rows are all right resamples to "all right" every time. A posterior
interval keeps the uncertainty of a perfect class.

Method (`metric_interval`), for the accuracy-type metrics (``accuracy``,
``balanced_accuracy`` and the 0/1-per-row metrics ``sara_numeric_within_10pct``,
``citation_open_contains``, ``definition_extraction_stemmed_match``):

- One variant: every group's hit rate gets an independent Beta posterior with a Jeffreys
  prior, Beta(hits + 1/2, misses + 1/2). The groups are the answer classes for balanced
  accuracy (the metric is the mean of the per-class recalls) and all rows for the others.
  The interval is the equal-tailed posterior interval of the metric, from `n_draws` draws.
- Paired difference metric(A) - metric(B): every group's rows fall into four cells (both
  right, A only, B only, both wrong), with a Jeffreys Dirichlet(1/2, 1/2, 1/2, 1/2) prior;
  the difference of the group's hit rates is p(A only) - p(B only), and the metric's
  difference is their (class-)mean. Equal-tailed posterior interval from `n_draws` draws.
- Clusters (rows that cannot vary apart, e.g. identical prompts): a group's counts are the
  row shares of each cell times the group's effective size n_eff = (sum m)^2 / sum m^2 over
  its clusters' row counts m (Kish). That is exact when a cluster's rows share one outcome
  (identical prompts get identical answers) and conservative when they merely correlate;
  with no clusters n_eff is the row count and the counts are the row counts.
- The point estimate is the official metric (``stats.metric_fn``) over all rows; the
  interval is widened, if needed, to contain it (a posterior interval can exclude an
  observed 1.0).

The F1 metrics (``ssla_f1``, ``successor_liability_f1``) fall back to
`experiments.analysis.stats.bootstrap_ci` (its default bias-corrected percentile interval, 2,000
resamples; clusters are passed on when that function takes them, else the interval is
flagged); their coverage was measured the same way (`benchmarks/coverage.py`, part f1).

Every interval is flagged from measured coverage, not from a class-size rule: `COVERAGE`
holds the minimum and median coverage that `benchmarks/coverage.py` measured for each grid
cell (n, minority share), the minimum taken over per-class recalls 0.5-0.95 and, for a
paired difference, correlated and independent arms. `metric_interval` looks up the largest
grid cell the data dominate (effective sizes, not row counts) and marks the interval
`unreliable` when that cell's minimum coverage is below `MIN_COVERAGE`; the note says what
was measured. Data smaller than every grid cell are flagged too (nothing was measured).
"""

from __future__ import annotations

import inspect
from collections.abc import Hashable, Sequence
from dataclasses import fields
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from experiments.analysis import clusters as clustering
from experiments.analysis import stats
from experiments.analysis.stats import Interval, Labels

FloatArray = NDArray[np.float64]
Kind = Literal["single", "paired"]
Family = Literal["balanced", "rows", "f1"]

ROW_HIT_METRICS = (
    "sara_numeric_within_10pct",
    "citation_open_contains",
    "definition_extraction_stemmed_match",
)
ACCURACY_TYPE = ("accuracy", "balanced_accuracy", *ROW_HIT_METRICS)
F1_METRICS = ("ssla_f1", "successor_liability_f1")
PRIOR = 0.5  # Jeffreys; chosen over the uniform prior by benchmarks/coverage.py
N_DRAWS = 4000
F1_RESAMPLES = 2000  # bootstrap resamples of the F1 fallback (the coverage was measured so)
MIN_COVERAGE = 0.93  # a 95% interval whose measured coverage falls below this is flagged
MAX_COVERAGE = 0.97  # a median coverage above this is noted as conservative (not flagged)
COVERAGE_SOURCE = "benchmarks/coverage.py"

# ---- measured coverage (pasted from `benchmarks/coverage.py --emit`) ----------------------------
# COVERAGE[(family, kind)][(n, minority share)] = (min, median, worst scenario) of the 95%
# interval's coverage over the recall scenarios (and arm correlations, paired) of that cell.
COVERAGE_SIMS = 2000  # simulations per paired cell (single-variant cells are exact)
COVERAGE: dict[tuple[str, str], dict[tuple[int, float], tuple[float, float, str]]] = {
    ("balanced", "paired"): {
        (20, 0.1): (0.953, 0.999, "A 0.95/0.5 vs B 0.5/0.95, rho 0.0"),
        (20, 0.2): (0.922, 0.984, "A 0.9/0.95 vs B 0.5/0.95, rho 0.0"),
        (20, 0.5): (0.942, 0.971, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (40, 0.1): (0.888, 0.991, "A 0.9/0.95 vs B 0.5/0.95, rho 0.7"),
        (40, 0.2): (0.943, 0.963, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (40, 0.5): (0.941, 0.961, "A 0.7/0.7 vs B 0.5/0.5, rho 0.0"),
        (50, 0.1): (0.928, 0.988, "A 0.9/0.95 vs B 0.5/0.95, rho 0.7"),
        (50, 0.2): (0.94, 0.96, "A 0.9/0.95 vs B 0.5/0.95, rho 0.7"),
        (50, 0.5): (0.937, 0.957, "A 0.9/0.9 vs B 0.7/0.7, rho 0.7"),
        (100, 0.1): (0.921, 0.961, "A 0.9/0.9 vs B 0.7/0.7, rho 0.7"),
        (100, 0.2): (0.939, 0.954, "A 0.9/0.9 vs B 0.7/0.7, rho 0.7"),
        (100, 0.5): (0.942, 0.952, "A 0.9/0.95 vs B 0.5/0.95, rho 0.0"),
        (200, 0.1): (0.938, 0.951, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (200, 0.2): (0.943, 0.951, "A 0.7/0.7 vs B 0.5/0.5, rho 0.7"),
        (200, 0.5): (0.941, 0.951, "A 0.7/0.7 vs B 0.7/0.7, rho 0.0"),
    },
    ("balanced", "single"): {
        (20, 0.1): (0.915, 0.951, "recall 0.95/0.5"),
        (20, 0.2): (0.91, 0.946, "recall 0.5/0.95"),
        (20, 0.5): (0.925, 0.947, "recall 0.95/0.95"),
        (40, 0.1): (0.881, 0.954, "recall 0.5/0.95"),
        (40, 0.2): (0.93, 0.944, "recall 0.7/0.5"),
        (40, 0.5): (0.937, 0.948, "recall 0.7/0.9"),
        (50, 0.1): (0.937, 0.955, "recall 0.5/0.95"),
        (50, 0.2): (0.939, 0.953, "recall 0.7/0.9"),
        (50, 0.5): (0.938, 0.949, "recall 0.5/0.5"),
        (100, 0.1): (0.937, 0.953, "recall 0.7/0.95"),
        (100, 0.2): (0.941, 0.948, "recall 0.9/0.9"),
        (100, 0.5): (0.936, 0.947, "recall 0.9/0.9"),
        (200, 0.1): (0.942, 0.949, "recall 0.9/0.5"),
        (200, 0.2): (0.942, 0.948, "recall 0.9/0.95"),
        (200, 0.5): (0.947, 0.949, "recall 0.7/0.9"),
    },
    ("f1", "paired"): {
        (20, 0.0): (0.953, 0.954, "q 0.9 vs 0.6"),
        (40, 0.0): (0.938, 0.943, "q 0.9 vs 0.6"),
        (50, 0.0): (0.955, 0.955, "q 0.9 vs 0.6"),
        (100, 0.0): (0.943, 0.949, "q 0.9 vs 0.6"),
        (200, 0.0): (0.96, 0.961, "q 0.9 vs 0.9"),
    },
    ("f1", "single"): {
        (20, 0.0): (0.94, 0.946, "q 0.9 (F1 0.663)"),
        (40, 0.0): (0.948, 0.953, "q 0.9 (F1 0.663)"),
        (50, 0.0): (0.948, 0.955, "q 0.6 (F1 0.517)"),
        (100, 0.0): (0.95, 0.958, "q 0.6 (F1 0.517)"),
        (200, 0.0): (0.953, 0.96, "q 0.6 (F1 0.517)"),
    },
    ("rows", "paired"): {
        (20, 0.1): (0.939, 0.959, "A 0.7/0.7 vs B 0.7/0.7, rho 0.7"),
        (20, 0.2): (0.933, 0.963, "A 0.7/0.7 vs B 0.7/0.7, rho 0.0"),
        (20, 0.5): (0.936, 0.957, "A 0.5/0.5 vs B 0.5/0.5, rho 0.7"),
        (40, 0.1): (0.928, 0.953, "A 0.95/0.95 vs B 0.9/0.9, rho 0.7"),
        (40, 0.2): (0.933, 0.951, "A 0.95/0.95 vs B 0.9/0.9, rho 0.0"),
        (40, 0.5): (0.935, 0.954, "A 0.9/0.9 vs B 0.9/0.9, rho 0.0"),
        (50, 0.1): (0.931, 0.952, "A 0.9/0.9 vs B 0.9/0.9, rho 0.0"),
        (50, 0.2): (0.933, 0.957, "A 0.5/0.5 vs B 0.5/0.5, rho 0.7"),
        (50, 0.5): (0.928, 0.954, "A 0.9/0.9 vs B 0.9/0.9, rho 0.0"),
        (100, 0.1): (0.937, 0.95, "A 0.7/0.7 vs B 0.7/0.7, rho 0.7"),
        (100, 0.2): (0.943, 0.952, "A 0.9/0.9 vs B 0.7/0.7, rho 0.7"),
        (100, 0.5): (0.925, 0.949, "A 0.95/0.95 vs B 0.95/0.95, rho 0.0"),
        (200, 0.1): (0.939, 0.948, "A 0.9/0.9 vs B 0.7/0.7, rho 0.7"),
        (200, 0.2): (0.942, 0.95, "A 0.95/0.7 vs B 0.95/0.9, rho 0.0"),
        (200, 0.5): (0.937, 0.951, "A 0.5/0.5 vs B 0.5/0.5, rho 0.7"),
    },
    ("rows", "single"): {
        (20, 0.1): (0.903, 0.961, "recall 0.7/0.9"),
        (20, 0.2): (0.942, 0.963, "recall 0.95/0.7"),
        (20, 0.5): (0.947, 0.968, "recall 0.7/0.7"),
        (40, 0.1): (0.94, 0.951, "recall 0.7/0.95"),
        (40, 0.2): (0.937, 0.96, "recall 0.5/0.7"),
        (40, 0.5): (0.929, 0.948, "recall 0.9/0.95"),
        (50, 0.1): (0.885, 0.945, "recall 0.95/0.95"),
        (50, 0.2): (0.915, 0.956, "recall 0.95/0.9"),
        (50, 0.5): (0.885, 0.954, "recall 0.95/0.95"),
        (100, 0.1): (0.935, 0.949, "recall 0.95/0.95"),
        (100, 0.2): (0.935, 0.951, "recall 0.95/0.95"),
        (100, 0.5): (0.935, 0.962, "recall 0.95/0.95"),
        (200, 0.1): (0.938, 0.954, "recall 0.9/0.95"),
        (200, 0.2): (0.941, 0.954, "recall 0.9/0.9"),
        (200, 0.5): (0.941, 0.958, "recall 0.9/0.9"),
    },
}


# ---- posterior draws (vectorised over leading axes; the benchmark calls these) ---------------
def single_draws(
    hits: FloatArray,
    misses: FloatArray,
    weights: FloatArray,
    rng: np.random.Generator,
    n_draws: int = N_DRAWS,
    prior: float = PRIOR,
) -> FloatArray:
    """Posterior draws (..., n_draws) of sum_g w_g p_g, p_g ~ Beta(hits_g + a, misses_g + a).

    `hits` and `misses` have shape (..., G), effective counts of each group g.
    """
    p = rng.beta(hits[..., None] + prior, misses[..., None] + prior, size=(*hits.shape, n_draws))
    return np.asarray(np.einsum("...gd,g->...d", p, weights), dtype=np.float64)


def paired_draws(
    a_only: FloatArray,
    b_only: FloatArray,
    rest: FloatArray,
    weights: FloatArray,
    rng: np.random.Generator,
    n_draws: int = N_DRAWS,
    prior: float = PRIOR,
) -> FloatArray:
    """Posterior draws (..., n_draws) of sum_g w_g (p_g(A only) - p_g(B only)).

    Per group a Dirichlet(a_only + a, b_only + a, both right + a, both wrong + a) posterior;
    the two concordant cells enter only through their sum, so `rest` is their count and its
    gamma shape is rest + 2a (a Dirichlet aggregates that way).
    """
    shape = (*a_only.shape, n_draws)
    g1 = rng.standard_gamma(np.broadcast_to((a_only + prior)[..., None], shape))
    g2 = rng.standard_gamma(np.broadcast_to((b_only + prior)[..., None], shape))
    g3 = rng.standard_gamma(np.broadcast_to((rest + 2 * prior)[..., None], shape))
    d = (g1 - g2) / (g1 + g2 + g3)
    return np.asarray(np.einsum("...gd,g->...d", d, weights), dtype=np.float64)


def equal_tailed(
    draws: FloatArray, level: float, estimate: FloatArray | float
) -> tuple[FloatArray, FloatArray]:
    """Equal-tailed posterior interval along the last axis, widened to contain `estimate`."""
    alpha = (1 - level) / 2
    low, high = np.quantile(draws, [alpha, 1 - alpha], axis=-1)
    return np.minimum(low, estimate), np.maximum(high, estimate)


# ---- effective counts -----------------------------------------------------------------------
def effective_sizes(groups: NDArray[np.intp], ids: NDArray[np.intp]) -> FloatArray:
    """Kish effective size (sum m)^2 / sum m^2 of every group over its clusters' row counts."""
    n_groups = int(groups.max()) + 1
    out = np.empty(n_groups)
    for g in range(n_groups):
        _, m = np.unique(ids[groups == g], return_counts=True)
        out[g] = float(m.sum()) ** 2 / float(np.sum(m.astype(np.float64) ** 2))
    return out


def _shares(groups: NDArray[np.intp], indicator: NDArray[np.bool_], n_groups: int) -> FloatArray:
    rows = np.bincount(groups, minlength=n_groups).astype(np.float64)
    return np.bincount(groups, weights=indicator.astype(np.float64), minlength=n_groups) / rows


# ---- the measured-coverage lookup -----------------------------------------------------------
def coverage_cell(
    family: Family, kind: Kind, n_eff: FloatArray
) -> tuple[tuple[int, float], tuple[float, float, str]] | None:
    """The largest measured grid cell the data dominate, with its coverage; None if none.

    Balanced accuracy: cells whose minority class and rest are no larger than the data's
    smallest class and the rest (effective sizes), the one with the largest minority class,
    then the largest n. Other metrics: the largest measured n no larger than the effective
    size, worst over the minority shares at that n (their interval ignores classes).
    """
    table = COVERAGE.get((family, kind), {})
    if not table:
        return None
    tol = 1e-6
    total = float(np.sum(n_eff))
    if family == "balanced":
        smallest = float(np.min(n_eff))
        fits = [
            (round(n * s), n, key)
            for key in table
            for n, s in [key]
            if round(n * s) <= smallest + tol and n - round(n * s) <= total - smallest + tol
        ]
        if not fits:
            return None
        _, _, key = max(fits)
        return key, table[key]
    ns = [n for n, _ in table if n <= total + tol]
    if not ns:
        return None
    n_best = max(ns)
    cells = [(table[k], k) for k in table if k[0] == n_best]
    worst, key = min(cells, key=lambda c: c[0][0])
    medians = sorted(c[0][1] for c in cells)
    return key, (worst[0], medians[len(medians) // 2], worst[2])


def coverage_flag(
    family: Family, kind: Kind, n_eff: FloatArray, level: float = 0.95
) -> tuple[bool, str]:
    """(unreliable, note) for an interval on data of these effective group sizes."""
    sizes = ", ".join(f"{v:.1f}" for v in n_eff)
    if abs(level - 0.95) > 1e-9:
        return True, f"unreliable: coverage was measured for 95% intervals only, not {level:.1%}"
    if not COVERAGE.get((family, kind)):
        return True, f"unreliable: no coverage was measured for this interval ({family}, {kind})"
    found = coverage_cell(family, kind, n_eff)
    if found is None:
        return True, (
            f"unreliable: effective sizes ({sizes}) lie below every cell where coverage was "
            f"measured ({COVERAGE_SOURCE}); its coverage is unknown"
        )
    (n, share), (low, median, worst) = found
    where = f"n = {n}" if family != "balanced" else f"n = {n}, minority share {share}"
    measured = (
        f"measured 95% coverage {low:.3f} (worst: {worst}), median {median:.3f}, at {where} "
        f"({COVERAGE_SOURCE}; effective sizes {sizes})"
    )
    if low < MIN_COVERAGE:
        return True, f"unreliable: {measured}, below {MIN_COVERAGE}"
    if median > MAX_COVERAGE:
        return False, f"conservative (wider than needed): {measured}"
    return False, measured


# ---- the public interval --------------------------------------------------------------------
def _interval(**kw: Any) -> Interval:
    names = {f.name for f in fields(Interval)}
    return Interval(**{k: v for k, v in kw.items() if k in names})


def metric_interval(
    y_true: Labels,
    pred_a: Labels,
    pred_b: Labels | None = None,
    metric: str = "balanced_accuracy",
    level: float = 0.95,
    clusters: Sequence[Hashable] | NDArray[Any] | None = None,
    seed: int | None = 0,
    n_draws: int = N_DRAWS,
) -> Interval:
    """Interval of metric(A), or of metric(A) - metric(B) when B is given (paired rows).

    Accuracy-type metrics: Bayesian (Jeffreys Beta per group for one variant, Jeffreys
    Dirichlet over the four paired cells per group for a difference; groups are answer
    classes for balanced accuracy), on effective counts when `clusters` (one key per row)
    ties rows together. F1 metrics: `stats.bootstrap_ci`. Either way `unreliable` and the
    note come from the measured coverage table; the estimate is the official metric.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, not {level}")
    if n_draws < 100:
        raise ValueError(f"n_draws must be at least 100, not {n_draws}")
    inputs = [pred_a] if pred_b is None else [pred_a, pred_b]
    y, *preds = stats._check_inputs(y_true, inputs)
    n = len(y)
    ids = clustering.checked(clusters, n)
    n_clusters = int(ids.max()) + 1
    score = stats.metric_fn(metric)
    scores = [float(score(y, p)) for p in preds]
    estimate = scores[0] - (scores[1] if len(scores) == 2 else 0.0)
    kind: Kind = "paired" if len(preds) == 2 else "single"
    if metric not in ACCURACY_TYPE:
        return _fallback(y, preds, metric, level, ids, seed, kind, estimate)
    hits = _row_hits(metric, y, preds, scores)
    if hits is None:
        return _fallback(y, preds, metric, level, ids, seed, kind, estimate)

    family: Family = "balanced" if metric == "balanced_accuracy" else "rows"
    groups = stats.class_index(y, metric) if family == "balanced" else np.zeros(n, dtype=np.intp)
    n_groups = int(groups.max()) + 1
    weights = np.full(n_groups, 1.0 / n_groups)
    n_eff = effective_sizes(groups, ids * n_groups + groups)  # a cluster split by class
    rng = np.random.default_rng(seed)
    if kind == "single":
        share = _shares(groups, hits[:, 0], n_groups)
        draws = single_draws(share * n_eff, (1 - share) * n_eff, weights, rng, n_draws)
        cells = "per-group Jeffreys Beta(hits + 1/2, misses + 1/2) posteriors"
    else:
        a_only = _shares(groups, hits[:, 0] & ~hits[:, 1], n_groups)
        b_only = _shares(groups, hits[:, 1] & ~hits[:, 0], n_groups)
        rest = 1 - a_only - b_only
        draws = paired_draws(a_only * n_eff, b_only * n_eff, rest * n_eff, weights, rng, n_draws)
        cells = (
            "per-group Jeffreys Dirichlet(1/2 each) posteriors over both right / A only / "
            "B only / both wrong, difference = p(A only) - p(B only)"
        )
    low, high = equal_tailed(draws, level, estimate)
    grouping = (
        "answer classes, metric = mean of class recalls"
        if family == "balanced"
        else ("all rows one group")
    )
    counted = (
        f"{n} rows"
        if n_clusters == n
        else f"{n} rows in {n_clusters} clusters, Kish effective sizes"
    )
    method = (
        f"Bayesian: {cells} ({grouping}; {counted}), equal-tailed {level:.0%} interval "
        f"of {n_draws} posterior draws, widened to contain the estimate"
    )
    # one answer class: balanced accuracy is that class's hit rate, a single proportion
    lookup: Family = "rows" if n_groups == 1 else family
    unreliable, note = coverage_flag(lookup, kind, n_eff, level)
    off = _off_grid(hits, groups, ids, n_groups, family)
    if off:
        unreliable, note = True, "; ".join([f"unreliable: {'; '.join(off)}", note])
    return _interval(
        estimate=estimate,
        low=float(low),
        high=float(high),
        level=level,
        n_resamples=n_draws,
        method=method,
        unreliable=unreliable,
        degenerate=bool(high - low <= 1e-12),
        note=note,
        n_clusters=n_clusters,
    )


GRID_RECALL = 0.95  # the highest per-class hit rate the coverage table was measured at


def _off_grid(
    hits: NDArray[np.bool_],
    groups: NDArray[np.intp],
    ids: NDArray[np.intp],
    n_groups: int,
    family: Family,
) -> list[str]:
    """Why the coverage table does not speak for these data (measured by simulation of
    the generating value, benchmarks/coverage.py and the statistics review): every reason
    is a flag, since the measured coverage there fell below 0.93."""
    out = []
    for j in range(hits.shape[1]):
        rates = np.bincount(groups, weights=hits[:, j], minlength=n_groups) / np.maximum(
            np.bincount(groups, minlength=n_groups), 1
        )
        if np.any(rates > GRID_RECALL) or np.any(rates < 1 - GRID_RECALL):
            out.append(
                f"an observed hit rate beyond {GRID_RECALL:g} (or below {1 - GRID_RECALL:.2g}) "
                "lies off the measured grid: near the ceiling this interval covered as little "
                "as 0.80-0.88"
            )
            break
    if family == "balanced" and n_groups > 2:
        out.append(
            f"{n_groups} answer classes: coverage was measured for two; with 5 or more it "
            "covered 0.85-0.92"
        )
    if family == "balanced" and n_groups > 1:
        spans = np.zeros(int(ids.max()) + 1, dtype=np.intp)
        first = np.full(len(spans), -1)
        for c, g in zip(ids.tolist(), groups.tolist(), strict=True):
            if first[c] == -1:
                first[c] = g
            elif first[c] != g:
                spans[c] = 1
        if spans.any():
            out.append(
                f"{int(spans.sum())} clusters hold rows of several answer classes (their "
                "classes are treated as independent; with outcomes shared across a cluster "
                "this covered about 0.85)"
            )
    return out


def _row_hits(
    metric: str, y: NDArray[Any], preds: Sequence[NDArray[Any]], scores: Sequence[float]
) -> NDArray[np.bool_] | None:
    """(n, v) hit of every row and variant, or None if the metric is not 0/1 per row here.

    From `stats.checked_decomposition`, which reproduces the official scores exactly.
    """
    dec = stats.checked_decomposition(metric, y, preds, scores)
    if dec is None or not dec.linear:
        return None
    values = dec.stats[:, :, 0]
    if metric == "balanced_accuracy":
        return np.asarray(values > 0)
    per_row = values * len(y)
    hits = per_row > 0.5
    if not np.allclose(per_row, hits, atol=1e-9):
        return None
    return np.asarray(hits)


def _fallback(
    y: NDArray[Any],
    preds: Sequence[NDArray[Any]],
    metric: str,
    level: float,
    ids: NDArray[np.intp],
    seed: int | None,
    kind: Kind,
    estimate: float,
) -> Interval:
    """`stats.bootstrap_ci` (clusters passed on when it takes them), flagged from the table."""
    n_clusters = int(ids.max()) + 1
    pred_b = preds[1] if len(preds) == 2 else None
    kwargs: dict[str, Any] = {}
    clustered = n_clusters < len(y)
    ignored = ""
    if clustered:
        if "clusters" in inspect.signature(stats.bootstrap_ci).parameters:
            kwargs["clusters"] = ids
        else:  # this version of stats resamples rows: say so, and flag it
            ignored = (
                f"unreliable: {n_clusters} clusters in {len(y)} rows were ignored "
                "(stats.bootstrap_ci resamples rows only here), so the interval is too narrow"
            )
    ci = stats.bootstrap_ci(
        y, preds[0], pred_b, metric=metric, n_resamples=F1_RESAMPLES, level=level, seed=seed,
        **kwargs,
    )  # fmt: skip
    if abs(ci.estimate - estimate) > 1e-12:
        raise AssertionError("bootstrap_ci's estimate differs from the official metric")
    n_eff = effective_sizes(np.zeros(len(y), dtype=np.intp), ids)
    if metric in F1_METRICS:
        unreliable, measured = coverage_flag("f1", kind, n_eff, level)
    else:
        unreliable, measured = True, f"unreliable: no coverage was measured for {metric}"
    # the flag comes from the measured table; bootstrap_ci's class-size rule is not used
    note = "; ".join(x for x in (ignored, ci.note if ci.degenerate else "", measured) if x)
    unreliable = unreliable or bool(ignored)
    return _interval(
        estimate=ci.estimate,
        low=ci.low,
        high=ci.high,
        level=level,
        n_resamples=ci.n_resamples,
        method=ci.method,
        unreliable=unreliable,
        degenerate=ci.degenerate,
        note=note,
        n_clusters=n_clusters,
    )
