"""Intervals for the official metrics whose coverage was measured, and flagged where it fails.

Why not the bootstrap: percentile-type bootstraps of balanced accuracy under-cover near the
ceiling (a review measured 0.75 for a nominal 95% at n = 100 with 10 minority rows, recall
0.9): a class whose rows are all right resamples to "all right" every time. A posterior
interval keeps the uncertainty of a perfect class.

Method (`metric_interval`), for the accuracy-type metrics (``accuracy``,
``balanced_accuracy`` and the 0/1-per-row metrics ``sara_numeric_within_10pct``,
``citation_open_contains``, ``definition_extraction_stemmed_match``):

- One variant: every group's hit rate gets a Jeffreys Beta(hits + 1/2, misses + 1/2)
  posterior. The groups are the answer classes for balanced accuracy (the metric is the mean
  of the per-class recalls) and all rows for the others. Next to a bound (a group with at
  most one miss or at most one hit) the group's lower tail is drawn from Beta(hits, misses +
  1) and its upper tail from Beta(hits + 1, misses), the Clopper-Pearson bounds (as in the
  modified Jeffreys interval of Brown, Cai & DasGupta 2001): near the ceiling the Jeffreys
  bounds covered 0.80-0.88.
- Paired difference metric(A) - metric(B): every group's rows fall into four cells (both
  right, A only, B only, both wrong), with a Jeffreys Dirichlet(1/2, 1/2, 1/2, 1/2) prior;
  the difference of the group's hit rates is p(A only) - p(B only), and the metric's
  difference is their (class-)mean. When the "B only" rows of all groups together number
  at most one, every group's lower tail draws with shapes (A only, B only + w_g) instead of
  (+ 1/2, + 1/2), w_g the group's metric weight (1/G for balanced accuracy), i.e. ONE
  imaginary "B only" row in total (`pooled_extra`); likewise the upper tail for "A only":
  the Clopper-Pearson-type analogue, exact in shape for one group. (One imaginary row per
  nearly empty group put G of them into a G-class interval: 5 classes x 40 rows covered
  1.000 and missed effects an exact permutation test found.)
- The interval is the equal-tailed one of `n_draws` draws of the weighted sum over groups.
  From three groups on (`CENTRE_FROM`) every group's draws are first centred on its observed
  rate: the prior pulls each posterior mean towards 1/2, and over 5-10 classes those pulls
  add up while the spread shrinks (the uncentred interval covered 0.86-0.89 there); with
  one or two groups the pull helps, so it stays.
- Clusters (rows that cannot vary apart, e.g. identical prompts): a group's counts are the
  row shares of each cell times the group's effective size n_eff = (sum m)^2 / sum m^2 over
  its clusters' row counts m (Kish). That is exact when a cluster's rows share one outcome
  (identical prompts get identical answers) and conservative when they merely correlate;
  with no clusters n_eff is the row count and the counts are the row counts. Clusters that
  hold rows of several classes (a document's rows, `by_column`) also tie the classes
  together: every n_eff is then divided by the metric's design effect under shared
  outcomes (`_design_effect`; per-class Kish alone covered about 0.85 there), and the flag
  also reads the measured spanning design nearest to the data's
  (`coverage_table.spanning_cell`).
- The point estimate is the official metric (``stats.metric_fn``) over all rows; the
  interval is clipped to the metric's range and widened, if needed, to contain it.

The F1 metrics (``ssla_f1``, ``successor_liability_f1``) fall back to
`experiments.analysis.stats.bootstrap_ci` (its default bias-corrected percentile interval, 2,000
resamples; clusters are passed on when that function takes them, else the interval is
flagged); their coverage was measured the same way (`benchmarks/coverage.py`, part f1),
true F1 0.52-0.66 (the interior table) and 0.88-0.975 (read, as "+ceiling", when an arm's
F1 exceeds F1_NEAR); an F1 above F1_MEASURED_MAX is flagged as off the measured grid.

Every interval is flagged from measured coverage, not from a rule: the table that
`benchmarks/coverage.py` measured and the lookup that reads it (`coverage_flag`) are in
`experiments.analysis.coverage_table`.
"""

from __future__ import annotations

import inspect
from collections.abc import Hashable, Sequence
from dataclasses import fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from experiments.analysis import clusters as clustering
from experiments.analysis import stats
from experiments.analysis.coverage_table import (
    COVERAGE_SOURCE,
    F1_MEASURED_MAX,
    F1_NEAR,
    NEAR_BOUND,
    Family,
    Kind,
    coverage_flag,
)
from experiments.analysis.stats import Interval, Labels

FloatArray = NDArray[np.float64]
Tails = tuple[FloatArray, FloatArray, FloatArray, FloatArray]  # lower, upper, centre, scale

ROW_HIT_METRICS = (
    "sara_numeric_within_10pct",
    "citation_open_contains",
    "definition_extraction_stemmed_match",
    "exact_match",  # a user task's (`workbench task new`): one hit per row, like accuracy
)
ACCURACY_TYPE = ("accuracy", "balanced_accuracy", *ROW_HIT_METRICS)
F1_METRICS = ("ssla_f1", "successor_liability_f1")
PRIOR = 0.5  # Jeffreys; chosen over the uniform prior by benchmarks/coverage.py
N_DRAWS = 4000
F1_RESAMPLES = 2000  # bootstrap resamples of the F1 fallback (the coverage was measured so)
CENTRE_FROM = 3  # groups (answer classes) from which the draws are centred on the estimate
CENTRED_NOTE = ", each group's draws centred on its observed rate and scaled to its sampling sd"


# ---- interval draws (vectorised over leading axes; the benchmark calls these) ----------------
def single_tails(
    hits: FloatArray,
    misses: FloatArray,
    rng: np.random.Generator,
    n_draws: int = N_DRAWS,
    prior: float = PRIOR,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(lower-tail draws, upper-tail draws, centre, scale) of every group's hit rate.

    Both tails are Jeffreys Beta(hits + a, misses + a) draws, except next to a bound: a group
    with at most one miss or at most one hit draws its lower tail from Beta(hits, misses + 1)
    and its upper tail from Beta(hits + 1, misses) (0 or 1 when a count is 0), whose
    quantiles are the exact Clopper-Pearson bounds (as in the modified Jeffreys interval,
    Brown, Cai & DasGupta 2001: the Jeffreys bounds there are too tight; near the ceiling
    the unmodified interval covered 0.80-0.88). `centre` is the Jeffreys posterior mean and
    `scale` sqrt((n + 2a + 1) / n), the ratio of the sampling sd of hits / n to the
    posterior sd, which `combine` uses from CENTRE_FROM groups on.
    """
    shape = (*hits.shape, n_draws)
    jeff = rng.beta((hits + prior)[..., None], (misses + prior)[..., None], size=shape)
    low, high = jeff, jeff
    near = (misses <= 1) | (hits <= 1)
    if np.any(near):
        h, m, k = hits[near][:, None], misses[near][:, None], int(np.sum(near))
        low, high = low.copy(), high.copy()
        cp_low = rng.beta(np.maximum(h, 1e-9), m + 1, (k, n_draws))
        cp_high = rng.beta(h + 1, np.maximum(m, 1e-9), (k, n_draws))
        low[near] = np.where(h > 0, cp_low, 0.0)
        high[near] = np.where(m > 0, cp_high, 1.0)
    n = hits + misses
    centre = (hits + prior) / (n + 2 * prior)
    scale = np.sqrt((n + 2 * prior + 1) / np.maximum(n, 1e-9))
    return np.asarray(low), np.asarray(high), np.asarray(centre), np.asarray(scale)


def pooled_extra(counts: FloatArray, weights: FloatArray) -> FloatArray:
    """Imaginary discordant rows per group for the Clopper-Pearson-type tail, pooled.

    `counts` (..., G) are the effective "B only" (or "A only") counts of every group. When
    their total over the groups is at most one row, the metric sits next to its bound and
    the tail gets ONE imaginary row in total, shared over the groups by the metric's weights
    (1/G each for balanced accuracy): with one group that is the Clopper-Pearson shape
    (count + 1). Otherwise 0 (plain Jeffreys). Giving every nearly empty group its own
    imaginary row (as before) put G imaginary rows into a G-class interval: with 5 classes x
    40 rows it covered 1.000 and missed effects an exact permutation test found in 71% of
    runs.
    """
    near = np.sum(counts, axis=-1, keepdims=True) <= 1 + 1e-9
    return np.asarray(np.where(near, np.broadcast_to(weights, counts.shape), 0.0))


def paired_tails(
    a_only: FloatArray,
    b_only: FloatArray,
    rest: FloatArray,
    rng: np.random.Generator,
    n_draws: int = N_DRAWS,
    prior: float = PRIOR,
    extra_low: FloatArray | None = None,
    extra_high: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(lower-tail draws, upper-tail draws, centre, scale) of every group's p(A only) - p(B only).

    Per group a Dirichlet(a_only + a, b_only + a, both right + a, both wrong + a) posterior;
    the two concordant cells enter only through their sum, so `rest` is their count and its
    gamma shape is rest + 2a (a Dirichlet aggregates that way). Next to a bound, as for one
    variant: a group with `extra_low` > 0 draws its lower tail with shapes
    (a_only, b_only + extra_low), one with `extra_high` > 0 its upper tail with
    (a_only + extra_high, b_only) (the Clopper-Pearson-type shapes; a posterior concentrated
    at an empty discordant cell made the interval too short there). The extras come from
    `pooled_extra` over all groups (one imaginary row in total); None treats every element
    as a group of its own (extra 1 where its count is at most 1). `centre` is the posterior
    mean, `scale` sqrt((n + 4a + 1) / n) (sampling over posterior sd, as for one variant).
    """

    def gamma(k: FloatArray) -> FloatArray:
        k = np.maximum(k, 1e-9)[..., None]
        return np.asarray(rng.standard_gamma(np.broadcast_to(k, (*k.shape[:-1], n_draws))))

    if extra_low is None:
        extra_low = np.where(b_only <= 1 + 1e-9, 1.0, 0.0)
    if extra_high is None:
        extra_high = np.where(a_only <= 1 + 1e-9, 1.0, 0.0)
    g1 = gamma(a_only + prior)
    g2 = gamma(b_only + prior)
    g3 = gamma(rest + 2 * prior)
    d = np.asarray((g1 - g2) / (g1 + g2 + g3), dtype=np.float64)
    low, high = d, d.copy()
    for extra, up in ((extra_low, False), (extra_high, True)):
        near = np.asarray(extra) > 0
        if not np.any(near):
            continue
        add = np.asarray(extra)[near]
        h1 = gamma(a_only[near] + (add if up else 0.0))
        h2 = gamma(b_only[near] + (0.0 if up else add))
        h3 = gamma(rest[near] + 2 * prior)
        h1 = np.where((a_only[near] > 0)[:, None] | up, h1, 0.0)
        h2 = np.where((b_only[near] > 0)[:, None] | (not up), h2, 0.0)
        part = (h1 - h2) / (h1 + h2 + h3)
        if up:
            high[near] = part
        else:
            low[near] = part
    n = a_only + b_only + rest
    centre = (a_only - b_only) / (n + 4 * prior)
    scale = np.sqrt((n + 4 * prior + 1) / np.maximum(n, 1e-9))
    return low, high, np.asarray(centre), np.asarray(scale)


def combine(
    low_draws: FloatArray,
    high_draws: FloatArray,
    centre: FloatArray,
    scale: FloatArray,
    weights: FloatArray,
    estimate: FloatArray | float,
    level: float,
    bounds: tuple[float, float],
    centred: bool,
) -> tuple[FloatArray, FloatArray]:
    """The interval of sum_g w_g p_g from per-group draws (..., G, D).

    Without `centred` the equal-tailed quantiles of sum_g w_g draw_g. With it (from
    CENTRE_FROM groups on) of estimate + sum_g w_g scale_g (draw_g - centre_g): the prior
    pulls every group's posterior mean towards 1/2 and its spread below the sampling spread
    (variance over n + 2a + 1, not n), and over many classes those small biases add up
    while the total spread shrinks (with 5-10 classes the uncentred interval covered
    0.86-0.89). With one or two groups the pull helps (centred, 10 + 10 rows at recall 0.5
    covered 0.90), so it stays. Clipped to the metric's range, widened to hold the estimate.
    """
    alpha = (1 - level) / 2
    if centred:
        k = scale[..., None]
        lo = np.einsum("...gd,g->...d", k * (low_draws - centre[..., None]), weights)
        hi = np.einsum("...gd,g->...d", k * (high_draws - centre[..., None]), weights)
        lo = lo + np.asarray(estimate)[..., None]
        hi = hi + np.asarray(estimate)[..., None]
    else:
        lo = np.einsum("...gd,g->...d", low_draws, weights)
        hi = np.einsum("...gd,g->...d", high_draws, weights)
    low = np.clip(np.minimum(np.quantile(lo, alpha, axis=-1), estimate), *bounds)
    high = np.clip(np.maximum(np.quantile(hi, 1 - alpha, axis=-1), estimate), *bounds)
    return np.asarray(low), np.asarray(high)


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
    y, *preds = stats.check_inputs(y_true, inputs)
    n = len(y)
    ids = clustering.checked(clusters, n)
    n_clusters = int(ids.max()) + 1
    score = stats.metric_fn(metric)
    scores = [float(score(y, p)) for p in preds]
    estimate = scores[0] - (scores[1] if len(scores) == 2 else 0.0)
    kind: Kind = "paired" if len(preds) == 2 else "single"
    if metric not in ACCURACY_TYPE:
        return _fallback(y, preds, metric, level, ids, seed, kind, scores)
    hits = _row_hits(metric, y, preds, scores)
    if hits is None:
        return _fallback(y, preds, metric, level, ids, seed, kind, scores)

    family: Family = "balanced" if metric == "balanced_accuracy" else "rows"
    groups = stats.class_index(y, metric) if family == "balanced" else np.zeros(n, dtype=np.intp)
    n_groups = int(groups.max()) + 1
    weights = np.full(n_groups, 1.0 / n_groups)
    n_eff = effective_sizes(groups, ids * n_groups + groups)  # a cluster split by class
    spanning, span_rows = _spanning(groups, ids)
    rng = np.random.default_rng(seed)
    tails, bounds, cells, deff, n_eff = _posterior_tails(
        kind, groups, ids, hits, n_eff, weights, spanning, rng, n_draws
    )
    centred = n_groups >= CENTRE_FROM
    low, high = combine(*tails, weights, estimate, level, bounds, centred)
    method = _method(cells, family, n, n_clusters, deff, spanning, level, n_draws, centred)
    # one answer class: balanced accuracy is that class's hit rate, a single proportion
    lookup: Family = "rows" if n_groups == 1 else family
    rates = np.stack([_shares(groups, hits[:, j], n_groups) for j in range(hits.shape[1])])
    near = bool(np.any(rates > NEAR_BOUND) or np.any(rates < 1 - NEAR_BOUND))
    unreliable, note = coverage_flag(lookup, kind, n_eff, level, spanning, near, span_rows)
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


def _posterior_tails(
    kind: Kind,
    groups: NDArray[np.intp],
    ids: NDArray[np.intp],
    hits: NDArray[np.bool_],
    n_eff: FloatArray,
    weights: FloatArray,
    spanning: int,
    rng: np.random.Generator,
    n_draws: int,
) -> tuple[Tails, tuple[float, float], str, float, FloatArray]:
    """(tails, bounds, cells, design effect, effective sizes) of one variant or a difference.

    The effective sizes come back divided by the design effect (`_design_effect`).
    """
    n_groups = len(weights)
    if kind == "single":
        share = _shares(groups, hits[:, 0], n_groups)
        deff = _design_effect(groups, ids, n_groups, _single_sd(share, n_eff), spanning)
        n_eff = n_eff / deff
        tails = single_tails(share * n_eff, (1 - share) * n_eff, rng, n_draws)
        bounds = (0.0, 1.0)
        cells = (
            "per-group Jeffreys Beta(hits + 1/2, misses + 1/2) posteriors, Clopper-Pearson "
            "tails for a group with at most one miss (lower) or one hit (upper)"
        )
    else:
        a_only = _shares(groups, hits[:, 0] & ~hits[:, 1], n_groups)
        b_only = _shares(groups, hits[:, 1] & ~hits[:, 0], n_groups)
        deff = _design_effect(groups, ids, n_groups, _paired_sd(a_only, b_only, n_eff), spanning)
        n_eff = n_eff / deff
        rest = 1 - a_only - b_only
        a_n, b_n = a_only * n_eff, b_only * n_eff
        tails = paired_tails(
            a_n, b_n, rest * n_eff, rng, n_draws,
            extra_low=pooled_extra(b_n, weights), extra_high=pooled_extra(a_n, weights),
        )  # fmt: skip
        bounds = (-1.0, 1.0)
        cells = (
            "per-group Jeffreys Dirichlet(1/2 each) posteriors over both right / A only / "
            "B only / both wrong, difference = p(A only) - p(B only)"
        )
    return tails, bounds, cells, deff, n_eff


def _method(
    cells: str,
    family: Family,
    n: int,
    n_clusters: int,
    deff: float,
    spanning: int,
    level: float,
    n_draws: int,
    centred: bool,
) -> str:
    """The interval's `method` text: the posteriors, the groups, how rows were counted."""
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
    if deff > 1:
        counted += (
            f"; {spanning} clusters span answer classes, so every class's effective size is "
            f"divided by their design effect {deff:.2f} (outcomes shared across a cluster)"
        )
    return (
        f"Bayesian: {cells} ({grouping}; {counted}), equal-tailed {level:.0%} interval "
        f"of {n_draws} draws{CENTRED_NOTE if centred else ''}, "
        "widened to contain the estimate"
    )


def _spanning(groups: NDArray[np.intp], ids: NDArray[np.intp]) -> tuple[int, float]:
    """(clusters holding rows of more than one group, median rows per group in them)."""
    pairs, rows = np.unique(np.stack([ids, groups]), axis=1, return_counts=True)
    _, first, per_cluster = np.unique(pairs[0], return_index=True, return_counts=True)
    span = per_cluster > 1
    if not np.any(span):
        return 0, 0.0
    totals = np.add.reduceat(rows, first)  # pairs are sorted by cluster id
    return int(np.sum(span)), float(np.median(totals[span] / per_cluster[span]))


def _single_sd(share: FloatArray, n_eff: FloatArray) -> FloatArray:
    """Per-row sd of a group's hit, from the Jeffreys-smoothed rate (never 0)."""
    p = (share * n_eff + PRIOR) / (n_eff + 2 * PRIOR)
    return np.asarray(np.sqrt(p * (1 - p)))


def _paired_sd(a_only: FloatArray, b_only: FloatArray, n_eff: FloatArray) -> FloatArray:
    """Per-row sd of a group's hit(A) - hit(B), from Jeffreys-smoothed cell shares."""
    pa = (a_only * n_eff + PRIOR) / (n_eff + 4 * PRIOR)
    pb = (b_only * n_eff + PRIOR) / (n_eff + 4 * PRIOR)
    return np.asarray(np.sqrt(pa + pb - (pa - pb) ** 2))


def _design_effect(
    groups: NDArray[np.intp], ids: NDArray[np.intp], n_groups: int, sd: FloatArray, spanning: int
) -> float:
    """Variance inflation of the class-mean metric when clusters span classes.

    Per-class Kish sizes treat classes as independent. If a cluster's rows share their
    outcome (as identical prompts, or one document's rows under shared difficulty, do),
    the metric's variance is sum_c (sum_g a_cg sd_g)^2, a_cg = rows of cluster c in class g
    / (G n_g), instead of sum_c sum_g a_cg^2 sd_g^2; their ratio (>= 1) is the factor by
    which every class's effective size is divided. 1 when no cluster spans classes.
    """
    if spanning == 0 or n_groups == 1:
        return 1.0
    counts = np.zeros((int(ids.max()) + 1, n_groups))
    np.add.at(counts, (ids, groups), 1.0)
    a = counts / (n_groups * counts.sum(axis=0))
    num = float(np.sum((a @ sd) ** 2))
    den = float(np.sum((a**2) @ (sd**2)))
    return max(1.0, num / den) if den > 0 else 1.0


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
    scores: Sequence[float],
) -> Interval:
    """`stats.bootstrap_ci` (clusters passed on when it takes them), flagged from the table.

    An arm's F1 above F1_NEAR reads the table with the high-F1 scenarios (F1 0.88-0.975,
    where the bootstrap under-covers at small n); above F1_MEASURED_MAX it is off the grid.
    """
    estimate = scores[0] - (scores[1] if len(scores) == 2 else 0.0)
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
    top = max(scores)
    if metric in F1_METRICS and top > F1_MEASURED_MAX + 1e-12:
        unreliable = True
        measured = (
            f"unreliable: F1 {top:.3f} lies above the highest F1 where coverage was measured "
            f"({F1_MEASURED_MAX}), off the measured grid ({COVERAGE_SOURCE}); its coverage is "
            "unknown"
        )
    elif metric in F1_METRICS:
        unreliable, measured = coverage_flag("f1", kind, n_eff, level, near=top > F1_NEAR)
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
