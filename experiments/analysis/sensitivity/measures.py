"""Per (task, model) measures: spread with its range test, MaxP, AvgP, PromptSensiScore and the
share of prompt-dependent rows, each with a cluster-bootstrap interval (`task_measures`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from experiments.analysis import stats
from experiments.analysis.align import stat_inputs
from experiments.analysis.sensitivity.coverage import (
    COVERAGE_FLOOR,
    coverage_cell_text,
    measured_coverage,
)
from experiments.analysis.sensitivity.groups import (
    CI_MEASURES,
    LEVEL,
    N_RESAMPLES,
    TIE_TOL,
    FloatArray,
    Group,
    _strata,
)


@dataclass(frozen=True)
class _Units:
    """The resampling units of a group: clusters, each in the stratum of its first row."""

    ids: NDArray[np.intp]  # cluster of each row
    strata: NDArray[np.intp]  # stratum of each cluster
    sizes: FloatArray  # rows per cluster
    mixed: int  # clusters whose rows are in more than one stratum


def _units(group: Group) -> _Units:
    ids = group.cluster_ids()
    row_strata = _strata(group)
    n_c = group.n_clusters
    first = np.full(n_c, len(ids), dtype=np.intp)
    np.minimum.at(first, ids, np.arange(len(ids), dtype=np.intp))  # each cluster's first row
    first_stratum = row_strata[first]
    bad = row_strata != first_stratum[ids]
    _, strata = np.unique(first_stratum, return_inverse=True)
    return _Units(
        ids=ids,
        strata=np.asarray(strata, dtype=np.intp).ravel(),
        sizes=np.bincount(ids, minlength=n_c).astype(np.float64),
        mixed=len(np.unique(ids[bad])),
    )


def _resample_counts(
    group: Group, n_resamples: int, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray]:
    """Row counts (r, n) and cluster counts (r, C) of r cluster-bootstrap resamples: within
    each stratum (answer class for class-based metrics) as many clusters drawn with
    replacement as it has, every row of a drawn cluster taken with it. With every row its
    own cluster this is the stratified row bootstrap `stats.resample_counts` draws."""
    u = _units(group)
    sizes = np.bincount(u.strata)
    kc = np.asarray(stats.resample_counts(u.strata, sizes, n_resamples, rng), dtype=np.float64)
    return kc[:, u.ids], kc


def _variant_scores(group: Group, counts: FloatArray) -> FloatArray:
    """(r, v) official metric of every variant under r row-count vectors (resamples).

    A cluster resample changes the number of rows (and of rows per class), so the per-row
    weights of the mean-type metrics (1/n, or 1/(K n_k) for balanced accuracy) are rescaled
    to each resample's own counts: the metric of the resample, not of a fixed n."""
    y = np.asarray(group.answers, dtype=object)
    preds = [np.asarray(g, dtype=object) for g in group.generations]
    fn = stats.metric_fn(group.stat_metric)
    observed = [fn(y, p) for p in preds]
    dec = stats.checked_decomposition(group.stat_metric, y, preds, observed)
    if dec is not None:
        n, v, m = dec.stats.shape
        if dec.linear:  # a weighted mean of per-row values: renormalise per stratum
            strata = _strata(group)
            out = np.zeros((len(counts), v))
            for c in range(int(strata.max()) + 1 if n else 0):
                rows = strata == c
                share = counts[:, rows].sum(axis=1) / rows.sum()  # resample / sample rows
                part = counts[:, rows] @ dec.stats[rows, :, 0]
                out += part / np.where(share > 0, share, 1.0)[:, None]
            return out
        totals = (counts @ dec.stats.reshape(n, v * m)).reshape(len(counts), v, m)
        return np.asarray(dec.combine(totals), dtype=np.float64)  # F1: a ratio of totals
    out = np.empty((len(counts), len(preds)))  # a metric without a decomposition: recompute
    for b, c in enumerate(counts):
        idx = np.repeat(np.arange(len(y)), c.astype(int))
        out[b] = [fn(y[idx], p[idx]) for p in preds]
    return out


def _sensi(correct: FloatArray) -> tuple[float, float]:
    """PromptSensiScore and share of prompt-dependent rows of a (rows, variants) 0/1 array."""
    k = correct.shape[1]
    m = correct.sum(axis=1)
    per_row = m * (k - m) / (k * (k - 1) / 2)
    dependent = (m > 0) & (m < k)
    return float(per_row.mean()), float(dependent.mean())


def _ci(values: FloatArray, level: float = LEVEL) -> list[float]:
    a = (1 - level) / 2
    lo, hi = np.quantile(values, [a, 1 - a])
    return [float(lo), float(hi)]


def _recentred_ci(estimate: float, boot: FloatArray, level: float = LEVEL) -> list[float]:
    """Percentile interval moved so the bootstrap median sits on the estimate (clipped to
    [0, 1]): keeps the bootstrap's width, centred on the estimate."""
    lo, hi = _ci(boot, level)
    shift = float(np.median(boot)) - estimate
    return [max(0.0, lo - shift), min(1.0, hi - shift)]


def _basic_ci(estimate: float, boot: FloatArray, level: float = LEVEL) -> list[float]:
    """Basic (reverse percentile) interval 2 est - q(1-a), 2 est - q(a), clipped to [0, 1]."""
    lo, hi = _ci(boot, level)
    return [max(0.0, 2 * estimate - hi), min(1.0, 2 * estimate - lo)]


def _t_se_ci(estimate: float, se: float, df: float, level: float = LEVEL) -> list[float]:
    """estimate +- t(df) se, clipped to [0, 1]."""
    from scipy.stats import t as t_dist

    half = float(t_dist.ppf(1 - (1 - level) / 2, max(df, 1.0))) * se
    return [max(0.0, estimate - half), min(1.0, estimate + half)]


def _wilson_ci(p: float, n_eff: float, level: float = LEVEL) -> list[float]:
    """Wilson score interval of a proportion at an effective sample size."""
    from scipy.stats import norm

    if n_eff <= 0:
        return [0.0, 1.0]
    z = float(norm.ppf(1 - (1 - level) / 2))
    centre = (p + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
    half = z / (1 + z * z / n_eff) * math.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff**2))
    return [max(0.0, centre - half), min(1.0, centre + half)]


def _bc_ci(estimate: float, boot: FloatArray, level: float = LEVEL) -> list[float]:
    """Bias-corrected percentile interval (Efron's BC; z0 from the estimate's mid-rank among
    the resamples, ties counted half)."""
    from scipy.stats import norm

    b = len(boot)
    below = float(np.sum(boot < estimate - TIE_TOL)) + 0.5 * float(
        np.sum(np.abs(boot - estimate) <= TIE_TOL)
    )
    z0 = float(norm.ppf(min(max(below / b, 1 / (b + 1)), b / (b + 1))))
    z = float(norm.ppf(1 - (1 - level) / 2))
    lo, hi = np.quantile(boot, [norm.cdf(2 * z0 - z), norm.cdf(2 * z0 + z)])
    return [float(lo), float(hi)]


def _student_ci(values: FloatArray, u: _Units, kc: FloatArray, level: float = LEVEL) -> list[float]:
    """Studentized (bootstrap-t) interval of the row mean of per-row `values`, clusters as
    units: t* = (mean* - mean) / se*, se the linearised cluster standard error computed the
    same way in the sample and in every resample (kc: (r, C) cluster counts)."""
    sizes = u.sizes
    totals = np.bincount(u.ids, weights=values, minlength=len(sizes))
    c = len(sizes)
    n = float(sizes.sum())
    est = float(totals.sum() / n)
    factor = c / max(c - 1, 1)
    se = math.sqrt(factor * float(((totals - est * sizes) ** 2).sum())) / n
    if se <= 0:
        return [est, est]
    n_b = kc @ sizes
    m_b = (kc @ totals) / n_b
    ss_b = kc @ totals**2 - 2 * m_b * (kc @ (totals * sizes)) + m_b**2 * (kc @ sizes**2)
    se_b = np.sqrt(factor * np.maximum(ss_b, 0.0)) / n_b
    t_b = np.where(se_b > 0, (m_b - est) / np.where(se_b > 0, se_b, 1.0), 0.0)
    a = (1 - level) / 2
    q_lo, q_hi = np.quantile(t_b, [a, 1 - a])
    return [max(0.0, est - float(q_hi) * se), min(1.0, est - float(q_lo) * se)]


def _cluster_mean_se(values: FloatArray, u: _Units) -> tuple[float, float]:
    """Standard error of the row mean of per-row `values` with clusters as the sampled units
    (stratified linearisation: each stratum's cluster residuals T_c - mean * size_c, with the
    C_h / (C_h - 1) small-sample factor), and its degrees of freedom (clusters - strata)."""
    n = float(len(values))
    mean = float(values.mean())
    totals = np.bincount(u.ids, weights=values, minlength=len(u.sizes))  # per cluster
    resid = totals - mean * u.sizes
    var = 0.0
    for h in range(int(u.strata.max()) + 1 if len(u.strata) else 0):
        e = resid[u.strata == h]
        if len(e) > 1:
            var += len(e) / (len(e) - 1) * float(((e - e.mean()) ** 2).sum())
    return math.sqrt(var) / n, float(len(u.sizes) - (int(u.strata.max()) + 1))


# interval per measure (chosen from benchmarks/sensitivity_coverage.py's table; see
# CI_COVERAGE). Other choices stay callable so that benchmark can measure them too.
CI_METHODS: dict[str, str] = {
    "avgp": "boot_t",
    "sensitiscore": "t",
    "share_prompt_dependent": "wilson",
}
CI_METHOD_TEXT = {
    "percentile": "percentile cluster bootstrap",
    "basic": "basic (reverse percentile) cluster bootstrap",
    "recentred": "recentred percentile cluster bootstrap",
    "t": "t interval with the cluster-robust standard error (df = clusters - strata)",
    "wilson": "Wilson score interval at the effective size n^2 / sum(cluster size^2)",
    "boot_t": "estimate +- t(clusters - strata) x bootstrap SD x sqrt(C / (C - 1))",
    "student": "studentized cluster bootstrap (bootstrap-t, linearised cluster SE)",
    "bc": "bias-corrected percentile cluster bootstrap",
}


def _measure_ci(
    method: str,
    estimate: float,
    boot: FloatArray,
    per_row: FloatArray | None,
    u: _Units,
    kc: FloatArray,
) -> list[float]:
    """A measure's interval by `method` (see CI_METHOD_TEXT)."""
    n_c = len(u.sizes)
    if method == "percentile":
        return _ci(boot)
    if method == "bc":
        return _bc_ci(estimate, boot)
    if method == "basic":
        return _basic_ci(estimate, boot)
    if method == "recentred":
        return _recentred_ci(estimate, boot)
    if method == "boot_t":
        df = n_c - (int(u.strata.max()) + 1)
        se = float(boot.std(ddof=1)) * math.sqrt(n_c / max(n_c - 1, 1))
        return _t_se_ci(estimate, se, df)
    if per_row is None:
        raise ValueError(f"interval {method!r} needs per-row values (a mean over rows)")
    if method == "t":
        se, dof = _cluster_mean_se(per_row, u)
        return _t_se_ci(estimate, se, dof)
    if method == "student":
        return _student_ci(per_row, u, kc)
    if method == "wilson":
        n = float(len(per_row))
        return _wilson_ci(estimate, n * n / float((u.sizes**2).sum()))
    raise ValueError(f"unknown interval method {method!r}")


def _range_test(group: Group, n_resamples: int, seed: int) -> stats.RangeResult:
    """The range permutation test of the spread, called exactly as the sweep's comparisons
    call it (`analysis.compare.best_vs_worst`): the variants in the order they were given
    (the sweep's plan order), the inputs `align.stat_inputs` builds, the user's seed, the same
    clusters; so one report never carries two p-values for one test."""

    order = [v for v in group.given_order if v in group.variants] or list(group.variants)
    gens = [list(group.generations[group.variants.index(v)]) for v in order]
    y, preds = stat_inputs(group.stat_metric, list(group.answers), gens)
    return stats.range_permutation_test(
        y, preds, metric=group.stat_metric, n_resamples=n_resamples, seed=seed,
        clusters=group.cluster_ids(),
    )  # fmt: skip


def task_measures(
    group: Group,
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    test_seed: int | None = None,
    ci_methods: dict[str, str] | None = None,
    range_test: bool = True,
) -> tuple[dict[str, Any], FloatArray, FloatArray]:
    """Spread, MaxP, AvgP, PromptSensiScore, prompt-dependent share of one (task, model), with
    CIs; also the bootstrap row counts and per-variant scores (reused by the meta-analysis).

    The bootstrap resamples clusters of rows (`_resample_counts`); `test_seed` (default:
    `seed`) seeds the range test, `ci_methods` overrides `CI_METHODS` (for the coverage
    benchmark), `range_test=False` skips the test (p-value None; for simulations).

    Long because the document has a field per measure and per CI; the code is one pass.
    """
    methods = {**CI_METHODS, **(ci_methods or {})}
    rng = np.random.default_rng(seed)
    counts, kc = _resample_counts(group, n_resamples, rng)
    u = _units(group)
    observed = _checked_scores(group)
    boot = _variant_scores(group, counts)
    test = (
        _range_test(group, n_resamples, seed if test_seed is None else test_seed)
        if (range_test)
        else None
    )
    sensi, share = _sensi(group.correct)
    k = group.correct.shape[1]
    m = group.correct.sum(axis=1)
    per_row = m * (k - m) / (k * (k - 1) / 2)
    dependent = ((m > 0) & (m < k)).astype(float)
    n = len(group.indices)
    drawn = counts.sum(axis=1)  # rows in each resample (clusters vary in size)
    bs_sensi = counts @ per_row / drawn
    bs_share = counts @ dependent / drawn
    values: dict[str, tuple[float, FloatArray | None, FloatArray | None]] = {
        "spread": (float(observed.max() - observed.min()), None, None),
        "maxp": (float(observed.max()), None, None),
        "avgp": (float(observed.mean()), boot.mean(axis=1), None),
        "sensitiscore": (sensi, bs_sensi, per_row),
        "share_prompt_dependent": (share, bs_share, dependent),
    }
    stratified = group.stat_metric in stats.STRATIFIED_METRICS
    out: dict[str, Any] = {
        "task": group.task,
        "model": group.model,
        "metric": group.metric,
        "n_rows": n,
        "n_clusters": group.n_clusters,
        "clustering": group.cluster_how,
        "n_variants": k,
        "variants": list(group.variants),
        "scores": {v: float(s) for v, s in zip(group.variants, observed, strict=True)},
        # every variant tied at the top (bottom), not the first in input order
        "best": [
            v
            for v, s in zip(group.variants, observed, strict=True)
            if s >= observed.max() - TIE_TOL
        ],
        "worst": [
            v
            for v, s in zip(group.variants, observed, strict=True)
            if s <= observed.min() + TIE_TOL
        ],
        "spread_p_value": None if test is None else test.p_value,
        "spread_test": None if test is None else test.test,
        "n_resamples": n_resamples,
        "ci_measures": list(CI_MEASURES),
        "ci_methods": {name: CI_METHOD_TEXT[methods[name]] for name in CI_MEASURES},
        "ci_method": f"cluster bootstrap over clusters of identical prompts ({n_resamples} "
        "resamples, all variants of a cluster together"
        + (", stratified by answer class)" if stratified else ")")
        + "; per measure: "
        + "; ".join(f"{name}: {CI_METHOD_TEXT[methods[name]]}" for name in CI_MEASURES),
    }
    for name, (est, dist, rows) in values.items():
        out[name] = est
        if name in CI_MEASURES and dist is not None:
            out[f"{name}_ci"] = _measure_ci(
                methods[name], est, np.asarray(dist, dtype=np.float64), rows, u, kc
            )
    out.update(_coverage_fields(group, u))
    return out, counts, boot


def _checked_scores(group: Group) -> FloatArray:
    """Each variant's score recomputed from the generations; refuses a group whose trials
    report other scores."""
    observed: FloatArray = _variant_scores(group, np.ones((1, len(group.indices))))[0]
    if len(group.scores) == len(observed) and not np.allclose(
        observed, group.scores, rtol=0, atol=1e-9
    ):
        raise AssertionError(
            f"{group.task} ({group.model}): scores recomputed from the generations "
            f"{observed.tolist()} are not the trials' scores {list(group.scores)}; refusing "
            "to report the sensitivity of another quantity"
        )
    return observed


def _coverage_fields(group: Group, u: _Units) -> dict[str, Any]:
    """`task_measures`' ci_coverage, ci_unreliable and note (measured coverage of its CIs)."""
    out: dict[str, Any] = {}
    coverage = {name: measured_coverage(name, group) for name in CI_MEASURES}
    out["ci_coverage"] = coverage
    low = {name: c for name, c in coverage.items() if c is None or c < COVERAGE_FLOOR}
    out["ci_unreliable"] = bool(low)
    notes = [
        "spread and MaxP carry no CI (a bootstrap of a max or of max - min does not cover); "
        "the spread's inference is the range permutation test's p-value"
    ]
    if low:
        notes.append(
            "CIs unreliable: measured 95% coverage "
            + ", ".join(
                f"{name} {'not measured for this design' if c is None else f'{c:.3f}'}"
                for name, c in low.items()
            )
            + f" (< {COVERAGE_FLOOR}; {coverage_cell_text(group)}; "
            "benchmarks/sensitivity_coverage.py)"
        )
    if u.mixed:
        notes.append(
            f"{u.mixed} cluster(s) mix answer classes; each is resampled in the stratum of "
            "its first row"
        )
    out["note"] = "; ".join(notes)
    return out
