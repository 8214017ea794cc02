"""Prompt sensitivity of a sweep: how much each prompt factor moves a legal task.

Pure functions over the sweep's trials (one per task, model and variant; a variant's name
``instruction=reference,seed=0`` carries its axis values). `sensitivity_report` returns a
JSON-able document with, for a sweep that has at least two variants of a (task, model):

- per (task, model): spread (max - min of the task's official metric over the variants, with
  the range permutation test's p-value: the very test `experiments.analysis.compare.best_vs_worst`
  runs, same variant order, inputs, seed and clusters, so one report has one p-value for
  it), MaxP, AvgP (Mizrahi et al.), PromptSensiScore (ProSA: per row, the mean over variant
  pairs of |correct_i - correct_j|, averaged over rows) and the share of rows whose
  correctness depends on the prompt; rows and clusters of identical prompts; each with a 95%
  interval from a cluster bootstrap (clusters of rows some variant gave the same prompt,
  `experiments.analysis.clusters.by_prompts`, resampled whole, all variants together, stratified by
  answer class for balanced accuracy), by the method `CI_METHODS` names, flagged
  ``ci_unreliable`` where its coverage measured by benchmarks/sensitivity_coverage.py
  (`CI_COVERAGE`) is below 0.93 or the design lies outside the measured grid;
- per model, the variance of per-row correctness split into task, row (within task), each
  axis, axis x task, axis x axis, and residual (row x prompt) variance components, each
  factor's sum of squares less the row x prompt noise it carries (`variance_shares`),
  shares summing to 1, each with a cluster-bootstrap interval flagged from the same table;
- per model and axis contrast, a random-effects meta-analysis across tasks of the per-task
  paired effect, with the paper's paired t-test beside it (a task whose effect has zero
  bootstrap variance is kept, its variance floored, with a note);
- with two or more models, rank stability (Kendall tau between model rankings under each pair
  of variants, and how often the best model changes with the prompt).

An incomplete trial is excluded (listed in ``notes`` and ``excluded``), never scored as wrong.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from experiments.analysis import stats
from experiments.analysis.clusters import for_rows
from experiments.analysis.compare import _inputs

FloatArray = NDArray[np.float64]
N_RESAMPLES = 1000
LEVEL = 0.95
RESIDUAL = "residual (row x prompt)"
ROW = "row (within task)"
TASK = "task"
AXIS_X_AXIS = "axis x axis"
UNATTRIBUTED = "prompt (not attributed: unbalanced task)"
DRAW_AXES = ("seed",)  # demonstration draws: exchangeable levels, no pooled direction
MEASURES = ("spread", "maxp", "avgp", "sensitiscore", "share_prompt_dependent")
# measures with a bootstrap CI: a percentile bootstrap of a max (MaxP) or of max - min (spread)
# does not cover (measured 21-24% for MaxP of equal variants, 0% for a spread of 0), so those
# two carry no CI; the spread's inference is the range permutation test's p-value
CI_MEASURES = ("avgp", "sensitiscore", "share_prompt_dependent")
TIE_TOL = 1e-12


def draw_factor(axis: str) -> str:
    """The variance factor of a demonstration-draw axis: its levels mean nothing across tasks
    (draw 0 of one task is not draw 0 of another), so it is never split into a pooled main
    effect and an "x task" part."""
    return f"{axis} (within task)"


def _group_seed(seed: int, *parts: str) -> int:
    """A group's own RNG seed from the user's seed and its identity: no number depends on the
    order of the trials or on which other (task, model)s the sweep holds."""
    import hashlib

    h = hashlib.sha256("\0".join((str(seed), *parts)).encode()).digest()
    return int.from_bytes(h[:8], "big")


@dataclass(frozen=True)
class Trial:
    """One (task, model, variant) as the analysis needs it."""

    task: str
    model: str
    variant: str
    metric: str
    complete: bool
    indices: Sequence[str]
    answers: Sequence[str]
    generations: Sequence[str | None]
    correct: Sequence[bool | None]
    score: float | None = None
    status: str = "complete"
    axes: dict[str, str] = field(default_factory=dict)
    # the hash of each row's rendered prompt (a sweep outcome's `prompt_hashes`); empty (old
    # runs): every row is its own cluster
    prompt_hashes: Sequence[str | None] = ()


def parse_axes(variant: str) -> dict[str, str]:
    """Axis values from a sweep variant's name: ``instruction=reference,seed=0``."""
    if variant in ("", "base"):
        return {}
    out = {}
    for part in variant.split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"variant name {variant!r} is not axis=level pairs")
        out[key.strip()] = value.strip()
    return out


def as_trials(outcomes: Iterable[Any]) -> list[Trial]:
    """`Trial`s from sweep `TrialOutcome`s (or any object with the same attributes)."""
    out = []
    for o in outcomes:
        if isinstance(o, Trial):
            out.append(o)
            continue
        complete = o.status == "complete" and o.score is not None
        out.append(
            Trial(
                task=o.task, model=o.model, variant=o.variant, metric=o.metric,
                complete=complete, indices=list(o.indices), answers=list(o.answers),
                generations=list(o.generations), correct=list(o.correct), score=o.score,
                status=o.status, axes=parse_axes(o.variant),
                prompt_hashes=list(getattr(o, "prompt_hashes", None) or []),
            )
        )  # fmt: skip
    return out


# ---- one (task, model): aligned rows ----------------------------------------------------------
@dataclass(frozen=True)
class Group:
    """A (task, model)'s complete variants on their common rows, in a canonical row order."""

    task: str
    model: str
    metric: str
    variants: tuple[str, ...]
    axes: tuple[dict[str, str], ...]
    indices: tuple[str, ...]
    answers: tuple[str, ...]
    generations: tuple[tuple[str, ...], ...]  # [variant][row]
    correct: NDArray[np.float64]  # (rows, variants) 0/1
    scores: tuple[float, ...]  # the trials' official scores
    notes: tuple[str, ...] = ()  # rows dropped to align the variants
    # cluster id per aligned row (`analysis.clusters.by_prompts` over the variants' prompt
    # hashes); None: every row its own cluster
    clusters: NDArray[np.intp] | None = None
    cluster_how: str = "rows"
    # the variants in the order they were given (the sweep's plan order): the range test
    # takes them in that order, as `experiments.analysis.compare.best_vs_worst` does
    given_order: tuple[str, ...] = ()

    def cluster_ids(self) -> NDArray[np.intp]:
        """Cluster id per row, 0..C-1 (every row its own cluster when none were recorded)."""
        if self.clusters is None:
            return np.arange(len(self.indices), dtype=np.intp)
        return self.clusters

    @property
    def n_clusters(self) -> int:
        ids = self.cluster_ids()
        return int(ids.max()) + 1 if len(ids) else 0


def _row_order(index: str) -> tuple[int, int, str]:
    return (0, int(index), "") if index.isdigit() else (1, 0, index)


def _group(
    trials: Sequence[Trial], cluster_by: str = "prompt", column: dict[str, str] | None = None
) -> Group:
    """Align a (task, model)'s variants on their common rows. Each trial's own score is first
    checked against its generations on all its rows; variants scored on different rows are
    restricted to the common rows with a note saying how many rows each lost. Rows are
    clustered by the variants' prompt hashes (`experiments.analysis.clusters.by_prompts`): rows that
    some variant gave the same prompt cannot vary apart, so every resample takes them
    together."""
    given = tuple(dict.fromkeys(t.variant for t in trials))
    trials = sorted(trials, key=lambda t: t.variant)
    first = trials[0]
    common = set(first.indices)
    for t in trials[1:]:
        common &= set(t.indices)
    indices = tuple(sorted(common, key=_row_order))
    fn = stats.metric_fn(first.metric)
    for t in trials:
        if t.score is None:
            continue
        own = fn(
            np.asarray([str(a) for a in t.answers], dtype=object),
            np.asarray([str(g) for g in t.generations], dtype=object),
        )
        if not math.isclose(float(own), float(t.score), rel_tol=0, abs_tol=1e-9):
            raise AssertionError(
                f"{t.task} ({t.model}) {t.variant}: score recomputed from its generations "
                f"{float(own)} is not the trial's score {t.score}; refusing to report the "
                "sensitivity of another quantity"
            )
    notes: tuple[str, ...] = ()
    if any(len(t.indices) != len(indices) for t in trials):
        notes = (
            f"{first.task} ({first.model}): variants scored on different rows; restricted to "
            f"the {len(indices)} rows all share ("
            + ", ".join(f"{t.variant}: {len(t.indices)} rows, {len(t.indices) - len(indices)} "
                        "dropped" for t in trials)
            + "); each trial's own score was checked on its own rows",
        )  # fmt: skip
    gens, corr = [], []
    answers: tuple[str, ...] = ()
    hashes: list[list[str | None]] = []
    for t in trials:
        pos = {idx: j for j, idx in enumerate(t.indices)}
        gens.append(tuple(str(t.generations[pos[i]]) for i in indices))
        corr.append([1.0 if t.correct[pos[i]] else 0.0 for i in indices])
        if not answers:
            answers = tuple(str(t.answers[pos[i]]) for i in indices)
        if t.prompt_hashes:  # as `compare.clustering`: a row without a hash links nothing
            by_index = dict(zip(t.indices, t.prompt_hashes, strict=False))
            hashes.append([by_index.get(i) or None for i in indices])
    # the sweep's cluster_by, by the comparisons' own rule; None: every row its own cluster
    clustering = None
    if indices and (cluster_by.startswith("column:") or (cluster_by == "prompt" and hashes)):
        clustering = for_rows(hashes, indices, cluster_by, column or {})
    metrics = {t.metric for t in trials}
    if len(metrics) != 1:
        raise ValueError(f"{first.task} ({first.model}): variants scored with {sorted(metrics)}")
    return Group(
        task=first.task,
        model=first.model,
        metric=first.metric,
        variants=tuple(t.variant for t in trials),
        axes=tuple(t.axes or parse_axes(t.variant) for t in trials),
        indices=indices,
        answers=answers,
        generations=tuple(gens),
        correct=np.asarray(corr, dtype=np.float64).T,
        # the trials' own scores, to check the recomputed ones against (same rows only)
        scores=tuple(float(t.score) for t in trials if t.score is not None)
        if all(len(t.indices) == len(indices) for t in trials)
        else (),
        notes=notes,
        clusters=None if clustering is None else clustering.ids,
        cluster_how="rows" if clustering is None else clustering.how,
        given_order=given,
    )


def _strata(group: Group) -> NDArray[np.intp]:
    """Answer class of each row for the class-based metrics (as stats.bootstrap_ci), else one."""
    y = np.asarray(group.answers, dtype=object)
    if group.metric in stats.STRATIFIED_METRICS:
        return stats.class_index(y, group.metric)
    return np.zeros(len(y), dtype=np.intp)


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
    fn = stats.metric_fn(group.metric)
    observed = [fn(y, p) for p in preds]
    dec = stats.checked_decomposition(group.metric, y, preds, observed)
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
    (the sweep's plan order), the inputs `compare._inputs` builds, the user's seed, the same
    clusters; so one report never carries two p-values for one test."""

    order = [v for v in group.given_order if v in group.variants] or list(group.variants)
    gens = [list(group.generations[group.variants.index(v)]) for v in order]
    y, preds = _inputs(group.metric, list(group.answers), gens)
    return stats.range_permutation_test(
        y, preds, metric=group.metric, n_resamples=n_resamples, seed=seed,
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
    """
    methods = {**CI_METHODS, **(ci_methods or {})}
    rng = np.random.default_rng(seed)
    counts, kc = _resample_counts(group, n_resamples, rng)
    u = _units(group)
    observed = _variant_scores(group, np.ones((1, len(group.indices))))[0]
    if len(group.scores) == len(observed) and not np.allclose(
        observed, group.scores, rtol=0, atol=1e-9
    ):
        raise AssertionError(
            f"{group.task} ({group.model}): scores recomputed from the generations "
            f"{observed.tolist()} are not the trials' scores {list(group.scores)}; refusing "
            "to report the sensitivity of another quantity"
        )
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
    stratified = group.metric in stats.STRATIFIED_METRICS
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
    return out, counts, boot


# ---- variance decomposition -------------------------------------------------------------------
def _layout(group: Group) -> tuple[list[str], list[int], NDArray[np.intp] | None]:
    """The task's varying axes, their level counts, and the variant column of each cell of
    the full factorial in C order (None when the variants are not a full factorial)."""
    keys = sorted({k for a in group.axes for k in a})
    varying = [k for k in keys if len({a.get(k) for a in group.axes}) > 1]
    levels = [sorted({str(a.get(k)) for a in group.axes}) for k in varying]
    shape = [len(lv) for lv in levels]
    if math.prod(shape) != len(group.variants):
        return varying, shape, None
    cell = np.full(math.prod(shape), -1, dtype=np.intp)
    for j, a in enumerate(group.axes):
        pos = tuple(lv.index(str(a.get(k))) for k, lv in zip(varying, levels, strict=True))
        cell[np.ravel_multi_index(pos, shape)] = j
    return varying, shape, None if (cell < 0).any() else cell


def _effects(arr: FloatArray) -> dict[frozenset[int], FloatArray]:
    """Balanced-ANOVA effects of every subset of the dims of `arr` (leading batch dim 0).

    The effect of a subset S is sum over T in S of (-1)^|S - T| times the mean of `arr` over
    the dims outside T: the orthogonal decomposition of a full factorial with one observation
    per cell (types I, II and III agree in a balanced design).
    """
    dims = list(range(1, arr.ndim))
    means: dict[frozenset[int], FloatArray] = {}
    for r in range(len(dims) + 1):
        for sub in itertools.combinations(dims, r):
            other = tuple(d for d in dims if d not in sub)
            means[frozenset(sub)] = arr.mean(axis=other, keepdims=True) if other else arr
    effects = {}
    for s in means:
        e = np.zeros_like(means[s])
        for r in range(len(s) + 1):
            for t in itertools.combinations(sorted(s), r):
                e = e + (-1) ** (len(s) - r) * means[frozenset(t)]
        effects[s] = e
    return effects


@dataclass
class _Sums:
    """Sums of squares per factor for a batch of resamples, with what the unbiased variance
    components need: per factor the residual's expected contribution (its noise) and, per
    task, the residual and row mean squares."""

    ss: dict[str, FloatArray]
    noise: dict[str, FloatArray]  # expected contribution of row x prompt noise to ss[f]
    row_noise: FloatArray  # expected contribution of rows and noise to ss[TASK]
    row_component: FloatArray  # sum over tasks of N_t * sigma2_row,t (unbiased)
    residual_component: FloatArray  # sum over tasks of N_t * sigma2_residual,t
    n: FloatArray  # observations (rows x variants) in each resample


def _sums_of_squares(
    groups: Sequence[Group],
    counts: Sequence[FloatArray] | None = None,
    size_sq: Sequence[FloatArray] | None = None,
) -> _Sums:
    """The closed-form ANOVA of per-row correctness across tasks, for a batch of resamples.

    `counts[t]` (batch, rows) weights task t's rows (a cluster bootstrap's counts; the sample
    itself when None), `size_sq[t]` (batch,) is the sum of squared cluster sizes of the
    resample (each drawn copy of a cluster counted apart; default: the sample's clusters
    when `counts` is None, else every row its own cluster). Every
    task's variants cover the same rows, so per task the design is rows x variants; the
    variants of a full factorial are split into axis effects. Sums of squares are weighted
    sums over rows, so a resample never materialises (batch, rows, variants).

    Expected noise. Within task t, the rows' correctness X = row effect + prompt effect +
    e, e with variance s2_t (row x prompt interaction and the Bernoulli noise); rows of one
    cluster are identical. With n_t rows, V_t variants and D_t = sum(size^2) / n_t (1 when
    every row is its own cluster), E[SS_res,t] = (V_t - 1)(n_t - D_t) s2_t, E[SS_f,t] = true
    + df_f D_t s2_t for a prompt factor of df_f degrees of freedom, E[SS_row,t] = (n_t -
    D_t)(V_t s2_row,t + s2_t), and the task means carry D_t (V_t s2_row,t + s2_t) / N_t of
    noise each (N_t = n_t V_t).
    """
    groups = list(groups)
    batch = 1 if counts is None else len(counts[0])
    ss: dict[str, FloatArray] = {}
    noise: dict[str, FloatArray] = {}

    def add(d: dict[str, FloatArray], name: str, value: FloatArray) -> None:
        d[name] = d.get(name, np.zeros(batch)) + value

    sum_x = np.zeros(batch)
    sum_x2 = np.zeros(batch)
    n_tot = np.zeros(batch)
    task_n, task_mean, task_ems = [], [], []
    row_component = np.zeros(batch)
    residual_component = np.zeros(batch)
    main: dict[tuple[str, int], list[tuple[FloatArray, FloatArray, FloatArray]]] = {}
    for t, g in enumerate(groups):
        x = g.correct  # (n, V)
        n_rows, v = x.shape
        w = np.ones((1, n_rows)) if counts is None else counts[t]
        rows_w = w.sum(axis=1)  # n_t
        if size_sq is not None:
            sq = size_sq[t]
        elif counts is None:  # the sample itself: its clusters
            sq = np.full(1, float((np.bincount(g.cluster_ids()) ** 2).sum()))
        else:
            sq = rows_w  # resampled rows, every row its own cluster
        d_t = sq / np.where(rows_w > 0, rows_w, 1.0)
        row_mean = x.mean(axis=1)
        within = ((x - row_mean[:, None]) ** 2).sum(axis=1)
        m_t = (w @ row_mean) / rows_w
        ss_row = v * (w @ row_mean**2 - rows_w * m_t**2)
        col = (w @ x) / rows_w[:, None] - m_t[:, None]  # (batch, V) variant effects
        ss_between = rows_w * (col**2).sum(axis=1)
        ss_res = w @ within - ss_between
        free = rows_w - d_t
        s2 = np.where(free > 0, ss_res / ((v - 1) * np.where(free > 0, free, 1.0)), 0.0)
        ems_row = np.where(free > 0, ss_row / np.where(free > 0, free, 1.0), 0.0)
        n_t = rows_w * v
        add(ss, ROW, ss_row)
        add(ss, RESIDUAL, ss_res)
        row_component += n_t * (ems_row - s2) / v
        residual_component += n_t * s2
        sum_x += w @ x.sum(axis=1)
        sum_x2 += w @ (x**2).sum(axis=1)
        n_tot += n_t
        task_n.append(n_t)
        task_mean.append(m_t)
        task_ems.append(d_t * ems_row)
        varying, shape, cell = _layout(g)
        if cell is None:  # not a full factorial: the between-variant part is not attributed
            add(ss, UNATTRIBUTED, ss_between)
            add(noise, UNATTRIBUTED, (v - 1) * d_t * s2)
            continue
        arr = col[:, cell].reshape(batch, *shape)
        for sub, e in _effects(arr).items():
            if not sub:
                continue
            value = rows_w * (e**2).reshape(batch, -1).sum(axis=1) * (v / (e[0].size or 1))
            df = math.prod(shape[d - 1] - 1 for d in sub)
            if len(sub) == 1 and varying[min(sub) - 1] in DRAW_AXES:
                name = draw_factor(varying[min(sub) - 1])  # never pooled across tasks
                add(ss, name, value)
                add(noise, name, df * d_t * s2)
            elif len(sub) == 1:
                (d,) = sub
                main.setdefault((varying[d - 1], shape[d - 1]), []).append(
                    (n_t, e.reshape(batch, -1), d_t * s2)
                )
            else:
                add(ss, AXIS_X_AXIS, value)
                add(noise, AXIS_X_AXIS, df * d_t * s2)
    # pool each axis's within-task main effects (same number of levels) into a common effect
    for (axis, levels), items in main.items():
        weight = np.sum([n for n, _, _ in items], axis=0)
        common = np.sum([n[:, None] * e for n, e, _ in items], axis=0) / weight[:, None]
        add(ss, axis, weight / levels * (common**2).sum(axis=1))
        add(
            ss,
            f"{axis} x task",
            np.sum([n / levels * ((e - common) ** 2).sum(axis=1) for n, e, _ in items], axis=0),
        )
        add(noise, axis, (levels - 1) * np.sum([n / weight * z for n, _, z in items], axis=0))
        add(
            noise,
            f"{axis} x task",
            (levels - 1) * np.sum([(1 - n / weight) * z for n, _, z in items], axis=0),
        )
    grand = sum_x / n_tot
    ss["total"] = sum_x2 - n_tot * grand**2
    ss[TASK] = np.sum([n * (m - grand) ** 2 for n, m in zip(task_n, task_mean, strict=True)], 0)
    row_noise = np.sum([e * (1 - n / n_tot) for n, e in zip(task_n, task_ems, strict=True)], axis=0)
    return _Sums(ss, noise, row_noise, row_component, residual_component, n_tot)


def _components(sums: _Sums) -> tuple[dict[str, FloatArray], dict[str, FloatArray]]:
    """Unbiased variance components per observation (the ANOVA / omega-squared estimators:
    each factor's sum of squares less the residual's expected contribution, over the number
    of observations), truncated at 0, and the untruncated ones."""
    n = sums.n
    raw: dict[str, FloatArray] = {TASK: (sums.ss[TASK] - sums.row_noise) / n}
    raw[ROW] = sums.row_component / n
    for f, v in sums.ss.items():
        if f in (TASK, ROW, RESIDUAL, "total"):
            continue
        raw[f] = (v - sums.noise.get(f, 0.0)) / n
    raw[RESIDUAL] = sums.residual_component / n
    return {f: np.maximum(v, 0.0) for f, v in raw.items()}, raw


def variance_shares(
    groups: Sequence[Group],
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    ci_method: str | None = None,
) -> dict[str, Any]:
    """Shares of the variance of per-row correctness (0/1) of one model's trials.

    A linear probability model with factors task, row within task, each axis, axis x task,
    demonstration draws within task, axis x axis and residual (row x prompt); every task's
    variants are evaluated on the same rows, so each task's design is balanced and the sums
    of squares are the closed-form ANOVA ones (checked against statsmodels' anova_lm in the
    tests). A raw share SS_f / SS_total would carry about df_f x MS_residual of row x prompt
    noise (with no prompt effect at all, the draws of a 3 x 6 x 40 grid read 0.8%), so each
    factor's share is its variance component: (SS_f - its expected noise) / N, the noise
    estimated from the residual mean square (ANOVA / omega-squared estimators, cluster design
    effect included: `_sums_of_squares`); rows are random (the row component is
    (MS_row - MS_res) / V), prompts and tasks fixed. A negative component is set to 0 (named
    in ``truncated``; the untruncated values are in ``components_raw``) and shares are
    component / sum of components.

    CI: cluster bootstrap (clusters of identical prompts resampled within each task,
    stratified by answer class for class-based metrics, all variants together), the same
    estimator on each resample; the interval method is `SHARE_CI_METHOD` (chosen by
    benchmarks/sensitivity_coverage.py; `ci_method` overrides it).
    """
    if not groups:
        raise ValueError("no complete (task, model) with at least 2 variants")

    def method_of(factor: str) -> str:
        return ci_method or SHARE_CI_METHODS.get(share_kind(factor) or "", SHARE_CI_METHOD)

    groups = sorted(groups, key=lambda g: g.task)
    # one RNG per task, seeded from its identity: the order of the tasks changes no number
    rngs = [
        np.random.default_rng(_group_seed(seed, "shares", g.task, g.model, *g.variants))
        for g in groups
    ]
    point_sums = _sums_of_squares(groups)
    comp, raw = _components(point_sums)
    total = float(point_sums.ss["total"][0])
    factors = list(comp)
    units = [_units(g) for g in groups]
    common: dict[str, Any] = {
        "total_sum_of_squares": total,
        "n_observations": int(sum(g.correct.size for g in groups)),
        "tasks": [g.task for g in groups],
        "n_rows": {g.task: len(g.indices) for g in groups},
        "n_clusters": {g.task: g.n_clusters for g in groups},
        "n_resamples": n_resamples,
    }
    comp_total = float(sum(float(v[0]) for v in comp.values()))
    if total <= 0 or comp_total <= 0:  # nothing to share out
        return {
            "shares": {f: None for f in factors},
            "ci": {f: None for f in factors},
            "sum_of_shares": None,
            "components": {f: None for f in factors},
            "components_raw": {f: None for f in factors},
            "truncated": [],
            "unreliable": True,
            "unreliable_factors": [],
            "coverage": {f: None for f in factors},
            "ci_method": {f: method_of(f) for f in factors},
            **common,
            "method": "no variance: per-row correctness is the same everywhere, so no share"
            if total <= 0
            else "no variance component above zero: nothing to share out",
            "note": "no variance: every observation has the same correctness; shares undefined"
            if total <= 0
            else "no variance: no component is estimated above its expected noise (too few "
            "clusters, or rows that never differ beyond noise); shares undefined",
        }
    shares = {f: float(comp[f][0]) / comp_total for f in factors}
    boot: dict[str, list[float]] = {f: [] for f in factors}
    chunk = 200
    for start in range(0, n_resamples, chunk):
        r = min(chunk, n_resamples - start)
        row_counts, sq = [], []
        for u, rng in zip(units, rngs, strict=True):
            kc = stats.resample_counts(u.strata, np.bincount(u.strata), r, rng)
            row_counts.append(np.asarray(kc, dtype=np.float64)[:, u.ids])
            sq.append(np.asarray(kc, dtype=np.float64) @ u.sizes**2)
        c, _ = _components(_sums_of_squares(groups, row_counts, sq))
        tot = np.sum([c.get(f, np.zeros(r)) for f in factors], axis=0)
        for f in factors:
            boot[f].extend((c.get(f, np.zeros(r)) / np.where(tot > 0, tot, 1.0)).tolist())
    ci = {f: _share_ci(method_of(f), shares[f], np.asarray(boot[f])) for f in factors}
    methods = {f: method_of(f) for f in factors}
    truncated = [f for f in factors if float(raw[f][0]) < 0]
    coverage = {f: measured_share_coverage(groups, f) for f in factors}
    low = {f: c for f, c in coverage.items() if c is None or c < COVERAGE_FLOOR}
    unreliable = bool(low)
    notes = []
    if truncated:
        notes.append(
            "negative variance component(s) set to 0 (estimated below their expected noise): "
            + ", ".join(truncated)
        )
    if low:
        notes.append(
            "CIs unreliable: measured 95% coverage of the true share "
            + ", ".join(
                f"{f} {'not measured for this design' if c is None else f'{c:.3f}'}"
                for f, c in low.items()
            )
            + f" (< {COVERAGE_FLOOR}; benchmarks/sensitivity_coverage.py, {COVERAGE_SIMS} "
            "simulations per cell)"
        )
    mixed = sum(u.mixed for u in units)
    if mixed:
        notes.append(f"{mixed} cluster(s) mix answer classes (resampled with their first row)")
    return {
        "shares": shares,
        "ci": ci,
        "sum_of_shares": float(sum(shares.values())),
        "components": {f: float(comp[f][0]) for f in factors},
        "components_raw": {f: float(raw[f][0]) for f in factors},
        "truncated": truncated,
        "unreliable": unreliable,
        "unreliable_factors": list(low),
        "coverage": coverage,
        "ci_method": methods,
        **common,
        "method": "variance components of a linear probability model of per-row correctness "
        "(ANOVA sums of squares, balanced within task, less each factor's expected row x "
        "prompt noise; negative components set to 0; rows random, tasks and prompts fixed; "
        "demonstration draws as one factor within task); CI: "
        + "; ".join(
            f"{SHARE_CI_TEXT[m]} ({', '.join(f for f in factors if methods[f] == m)})"
            for m in dict.fromkeys(methods.values())
        )
        + f" (cluster bootstrap over clusters of identical prompts "
        f"within task, {n_resamples} resamples)",
        "note": "; ".join(notes) or None,
    }


# interval per kind of share (`share_kind`), chosen by benchmarks/sensitivity_coverage.py:
# the percentile interval covers every share but the residual's, whose bootstrap
# distribution sits below the estimate (0.84-0.88 at 40 rows); the recentred one covers
# the residual (0.945-0.975) but not a null instruction effect (0.88-0.91)
SHARE_CI_METHOD = "percentile"
SHARE_CI_METHODS = {RESIDUAL: "recentred"}
SHARE_CI_TEXT = {
    "bc": "bias-corrected percentile interval",
    "percentile": "percentile interval",
    "recentred": "recentred percentile interval",
    "basic": "basic (reverse percentile) interval",
}


def _share_ci(method: str, estimate: float, boot: FloatArray) -> list[float]:
    if method == "percentile":
        return _ci(boot)
    if method == "bc":
        return _bc_ci(estimate, boot)
    if method == "recentred":
        return _recentred_ci(estimate, boot)
    if method == "basic":
        return _basic_ci(estimate, boot)
    raise ValueError(f"unknown share interval {method!r}")


# ---- measured coverage of the intervals ------------------------------------------------------
COVERAGE_FLOOR = 0.93  # below this measured 95% coverage an interval is flagged unreliable
# 95% coverage of the true quantity (from the generating parameters), measured by
# benchmarks/sensitivity_coverage.py (1000 simulated sweeps per cell, 1000 resamples each;
# 3 tasks x 6 variants, instruction x 3 draws; Monte Carlo s.e. about 0.007 for a share,
# 0.004 for a per-task measure): {(rows per task, minority class share): {quantity:
# coverage}}, each the lower of the cells with and without a prompt effect. Shares by kind
# (`share_kind`). Regenerate with the script; it prints this table.
CI_COVERAGE: dict[tuple[int, float], dict[str, float]] = {
    (40, 0.5): {
        "avgp": 0.946,
        "sensitiscore": 0.928,
        "share:axis x axis": 0.933,
        "share:axis x task": 0.989,
        "share:axis": 0.931,
        "share:residual (row x prompt)": 0.945,
        "share:row (within task)": 0.915,
        "share:draws (within task)": 0.932,
        "share:task": 0.967,
        "share_prompt_dependent": 0.961,
    },
    (40, 0.1): {
        "avgp": 0.852,
        "sensitiscore": 0.936,
        "share:axis x axis": 0.929,
        "share:axis x task": 0.982,
        "share:axis": 0.940,
        "share:residual (row x prompt)": 0.961,
        "share:row (within task)": 0.937,
        "share:draws (within task)": 0.935,
        "share:task": 0.974,
        "share_prompt_dependent": 0.956,
    },
    (100, 0.5): {
        "avgp": 0.949,
        "sensitiscore": 0.941,
        "share:axis x axis": 0.942,
        "share:axis x task": 0.987,
        "share:axis": 0.952,
        "share:residual (row x prompt)": 0.945,
        "share:row (within task)": 0.940,
        "share:draws (within task)": 0.936,
        "share:task": 0.947,
        "share_prompt_dependent": 0.955,
    },
    (100, 0.1): {
        "avgp": 0.915,
        "sensitiscore": 0.939,
        "share:axis x axis": 0.933,
        "share:axis x task": 0.992,
        "share:axis": 0.945,
        "share:residual (row x prompt)": 0.940,
        "share:row (within task)": 0.948,
        "share:draws (within task)": 0.947,
        "share:task": 0.952,
        "share_prompt_dependent": 0.954,
    },
}
COVERAGE_SIMS = 1000
MEASURED_METRICS = ("balanced_accuracy", "accuracy")  # AvgP's table is for these only


def _coverage_cell(n_clusters: int, minority: float) -> tuple[int, float] | None:
    """The measured grid cell that vouches for a design: the largest measured size at or
    below its clusters (coverage grows with n: an assumption, checked between 40 and 100) and
    the class balance at or below its minority share; None below the grid."""
    sizes = sorted({n for n, _ in CI_COVERAGE if n <= n_clusters})
    shares = sorted({m for _, m in CI_COVERAGE if m <= minority + 1e-9})
    if not sizes or not shares:
        return None
    return sizes[-1], shares[-1]


def _minority(group: Group) -> float:
    if group.metric not in stats.STRATIFIED_METRICS or not len(group.indices):
        return 0.5
    counts = np.bincount(_strata(group))
    return float(counts.min() / counts.sum()) if len(counts) > 1 else 0.5


def measured_coverage(measure: str, group: Group) -> float | None:
    """Measured coverage of `measure`'s interval for a design like `group`'s (None: outside
    the measured grid)."""
    cell = _coverage_cell(group.n_clusters, _minority(group))
    if measure == "avgp" and group.metric not in MEASURED_METRICS:
        return None  # AvgP's interval was measured on balanced accuracy only
    return None if cell is None else CI_COVERAGE[cell].get(measure)


def coverage_cell_text(group: Group) -> str:
    cell = _coverage_cell(group.n_clusters, _minority(group))
    if cell is None:
        return (
            f"{group.n_clusters} clusters, minority share {_minority(group):.2f}: below the "
            "measured grid"
        )
    return (
        f"measured at {cell[0]} clusters, minority share {cell[1]:.1f}, {COVERAGE_SIMS} simulations"
    )


def share_kind(factor: str) -> str | None:
    """The kind of a variance factor in the coverage table."""
    if factor in (TASK, ROW, RESIDUAL, AXIS_X_AXIS):
        return factor
    if factor == UNATTRIBUTED:
        return None
    if factor.endswith(" (within task)"):
        return "draws (within task)"
    if factor.endswith(" x task"):
        return "axis x task"
    return "axis"


MEASURED_DESIGN = (3, 6)  # tasks, variants per task: the design the share table measured


def measured_share_coverage(groups: Sequence[Group], factor: str) -> float | None:
    """Measured coverage of a factor's share interval for the tasks' design: the lowest over
    the tasks' grid cells (the smallest task decides); None outside the grid or for a kind
    of factor never measured (the unattributed part of an unbalanced task)."""
    kind = share_kind(factor)
    cells = [_coverage_cell(g.n_clusters, _minority(g)) for g in groups]
    if kind is None or any(c is None for c in cells):
        return None
    # measured for 3 tasks x 6 variants only: in larger designs the draws' and axis x axis
    # intervals covered 0.19-0.60 (statistics review), in 2 x 4 about 0.92
    if len(groups) != MEASURED_DESIGN[0] or any(
        len(g.variants) != MEASURED_DESIGN[1] for g in groups
    ):
        return None
    values = [CI_COVERAGE[c].get(f"share:{kind}") for c in cells if c is not None]
    return None if any(v is None for v in values) else min(v for v in values if v is not None)


# ---- meta-analysis across tasks ----------------------------------------------------------------
def _matched_cells(group: Group, axis: str, a: str, b: str) -> list[tuple[int, int]]:
    """Pairs of variant columns (level a, level b) equal on every other axis: a contrast is
    taken only over cells present for both levels, so a lost trial cannot confound it."""

    def rest(ax: dict[str, str]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((k, v) for k, v in ax.items() if k != axis))

    at = {rest(x): j for j, x in enumerate(group.axes) if x.get(axis) == a}
    bt = {rest(x): j for j, x in enumerate(group.axes) if x.get(axis) == b}
    return [(at[k], bt[k]) for k in sorted(set(at) & set(bt))]


def meta_analysis(
    groups: Sequence[Group],
    boots: Sequence[FloatArray],
    observed: Sequence[FloatArray],
    *,
    level: float = LEVEL,
) -> list[dict[str, Any]]:
    """Per metric and axis contrast (level a vs level b): random-effects pooled effect across
    the tasks scored with that metric (effects on different metrics are not one quantity).

    Each task's effect is the difference of its official metric between the two levels over
    the matched cells (combinations of the other axes present for both levels); a task with
    none is left out with a note. Its variance is the variance of that difference over the
    paired row bootstrap. Pooled with statsmodels' `combine_effects` (Paule-Mandel tau^2),
    with the Hartung-Knapp-Sidik-Jonkman interval: t(k-1) and statsmodels' HKSJ variance,
    floored at the usual random-effects variance (q >= 1), because the normal interval
    under-covers with few heterogeneous tasks (measured 0.84 at k=3, tau=0.10).
    I^2 = max(0, (Q - df) / Q). The paper's paired t-test over the same matched level means is
    reported beside it. Demonstration draws (`seed`) are not pooled: their levels mean nothing
    across tasks.
    """
    from scipy.stats import t as t_dist
    from statsmodels.stats.meta_analysis import combine_effects

    contrasts: dict[tuple[str, str, str, str], list[int]] = {}
    for gi, g in enumerate(groups):
        keys = sorted({k for a in g.axes for k in a})
        for axis in keys:
            if axis in DRAW_AXES:
                continue
            levels = sorted({a[axis] for a in g.axes if axis in a})
            for a, b in itertools.combinations(levels, 2):
                contrasts.setdefault((g.metric, axis, a, b), []).append(gi)
    out = []
    for (metric, axis, a, b), members in sorted(contrasts.items()):
        effects, variances, names, sa, sb = [], [], [], [], []
        notes: list[str] = []
        for gi in members:
            g = groups[gi]
            pairs = _matched_cells(g, axis, a, b)
            n_a = sum(x.get(axis) == a for x in g.axes)
            n_b = sum(x.get(axis) == b for x in g.axes)
            if not pairs:
                notes.append(f"{g.task}: no combination of the other axes has both levels; "
                             "left out")  # fmt: skip
                continue
            if len(pairs) < max(n_a, n_b):
                notes.append(
                    f"{g.task}: contrast over the {len(pairs)} matched cells only "
                    f"({n_a} variants at {a}, {n_b} at {b})"
                )
            ca = [p[0] for p in pairs]
            cb = [p[1] for p in pairs]
            obs_a = float(observed[gi][ca].mean())
            obs_b = float(observed[gi][cb].mean())
            d_boot = boots[gi][:, ca].mean(axis=1) - boots[gi][:, cb].mean(axis=1)
            effects.append(obs_a - obs_b)
            var = float(np.var(d_boot, ddof=1))
            if not var > 0:
                # no resample moved the contrast (no row differs between the levels): an
                # infinite weight would decide the pool alone, so the variance is floored at
                # what one discordant row would give (the most one row moves the metric)
                step = _row_step(g)
                var = step * step
                notes.append(
                    f"{g.task}: zero bootstrap variance (no row differs between the levels); "
                    f"variance floored at {var:.3g} = (one row's weight {step:.3g})^2"
                )
            variances.append(var)
            names.append(g.task)
            sa.append(obs_a)
            sb.append(obs_b)
        t_test = stats.paired_t_across_tasks(sa, sb)
        row: dict[str, Any] = {
            "axis": axis,
            "a": f"{axis}={a}",
            "b": f"{axis}={b}",
            "tasks": names,
            "effects": effects,
            "variances": variances,
            "metric": metric,
            "paired_t": {"statistic": t_test.statistic, "p_value": t_test.p_value,
                         "mean_difference": t_test.mean_difference, "note": t_test.note},
            "notes": notes,
        }  # fmt: skip
        if len(names) < 2:
            row.update(pooled=None, ci=None, tau2=None, i2=None, q=None, p_value=None)
            row["note"] = "fewer than 2 tasks: nothing to pool"
            out.append(row)
            continue
        res = combine_effects(
            np.asarray(effects), np.asarray(variances), method_re="iterated",
            row_names=names, alpha=1 - level,
        )  # fmt: skip
        q, df = float(res.q), len(names) - 1
        pooled = float(res.mean_effect_re)
        # HKSJ variance with the q >= 1 floor: never narrower than the usual RE interval
        se = math.sqrt(max(float(res.var_hksj_re), float(res.sd_eff_w_re) ** 2))
        crit = float(t_dist.ppf(1 - (1 - level) / 2, df))
        tstat = pooled / se if se > 0 else math.inf
        row.update(
            pooled=pooled,
            se=se,
            ci=[pooled - crit * se, pooled + crit * se],
            p_value=float(2 * t_dist.sf(abs(tstat), df)),
            tau2=float(max(res.tau2, 0.0)),
            i2=float(max(0.0, (q - df) / q)) if q > 0 else 0.0,
            q=q,
            method="random effects (Paule-Mandel tau^2); Hartung-Knapp-Sidik-Jonkman interval "
            "(t with k-1 df, q >= 1 floor); per-task variance from the paired row bootstrap",
            note=None,
        )
        out.append(row)
    return out


def _row_step(group: Group) -> float:
    """The most one row can move the group's official metric: 1 / (classes x smallest class)
    for balanced accuracy, 1 / n otherwise (the F1 metrics' step is about that too)."""
    n = max(len(group.indices), 1)
    if group.metric in stats.STRATIFIED_METRICS:
        counts = np.bincount(_strata(group))
        return 1.0 / (len(counts) * max(int(counts.min()), 1))
    return 1.0 / n


def _tied_best(names: Sequence[str], values: FloatArray) -> list[str]:
    """Every name whose value ties the maximum (a tie is not broken by input order)."""
    return [n for n, x in zip(names, values, strict=True) if x >= values.max() - TIE_TOL]


# ---- rank stability -------------------------------------------------------------------------
def rank_stability(groups: Sequence[Group]) -> list[dict[str, Any]]:
    """Per task with >= 2 models sharing >= 2 variants: Kendall tau between the model
    rankings under each pair of variants, and the share of variants whose best model differs
    from the best under the mean score."""
    from scipy.stats import kendalltau

    out = []
    tasks = list(dict.fromkeys(g.task for g in groups))
    for task in tasks:
        mine = sorted((g for g in groups if g.task == task), key=lambda g: g.model)
        models = [g.model for g in mine]
        if len(models) < 2:
            continue
        common = sorted(set.intersection(*(set(g.variants) for g in mine)))
        if len(common) < 2:
            continue

        def scores_of(g: Group) -> dict[str, float]:
            values = _variant_scores(g, np.ones((1, len(g.indices))))[0]
            return dict(zip(g.variants, values.tolist(), strict=True))

        score = np.array([[sc[v] for v in common] for sc in map(scores_of, mine)])
        taus = []
        for i, j in itertools.combinations(range(len(common)), 2):
            t = kendalltau(score[:, i], score[:, j]).statistic
            if not math.isnan(t):
                taus.append(float(t))
        best_mean = _tied_best(models, score.mean(axis=1))
        best = [_tied_best(models, score[:, j]) for j in range(len(common))]
        # a change: none of the best models on average is among this variant's tied best
        changed = [not set(b) & set(best_mean) for b in best]
        out.append({
            "task": task,
            "models": models,
            "variants": common,
            "mean_kendall_tau": float(np.mean(taus)) if taus else None,
            "n_pairs": len(taus),
            "n_pairs_undefined": len(common) * (len(common) - 1) // 2 - len(taus),
            "best_model_by_variant": dict(zip(common, best, strict=True)),
            "best_model_mean": best_mean,
            "n_variants_with_tied_best": sum(len(b) > 1 for b in best),
            "share_best_changes": float(np.mean(changed)),
        })  # fmt: skip
    return out


# ---- the report ----------------------------------------------------------------------------
def sensitivity_report(
    outcomes: Iterable[Any],
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    cluster_by: str = "prompt",
    columns: dict[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    """The sweep's sensitivity document (JSON-able) from its trials (`TrialOutcome`s of
    `run_sweep`, or `Trial`s). `cluster_by` and `columns` (task -> row index -> value of the
    column clustered by) are the sweep's, so its units are the comparisons' units."""
    # a canonical order: the input order changes no number, except the order of a (task,
    # model)'s variants, which the range test takes as given (the sweep's plan order, as the
    # comparisons do): `_group` keeps it
    given = as_trials(outcomes)
    rank = {(t.task, t.model, t.variant): i for i, t in enumerate(given)}
    trials = sorted(given, key=lambda t: (t.task, t.model, t.variant))
    notes: list[str] = []
    excluded = [
        {"task": t.task, "model": t.model, "variant": t.variant, "status": t.status}
        for t in trials if not t.complete
    ]  # fmt: skip
    if excluded:
        notes.append(
            f"{len(excluded)} incomplete trial(s) excluded (not scored as wrong): "
            + "; ".join(
                f"{e['task']} {e['variant']} ({e['model']}): {e['status']}" for e in excluded
            )
        )
    by: dict[tuple[str, str], list[Trial]] = {}
    for t in trials:
        if t.complete:
            by.setdefault((t.task, t.model), []).append(t)
    groups: list[Group] = []
    per_task: list[dict[str, Any]] = []
    boots: list[FloatArray] = []
    observed: list[FloatArray] = []
    for (task, model), mine in by.items():
        if len(mine) < 2:
            notes.append(f"{task} ({model}): fewer than 2 complete variants, no sensitivity")
            continue
        g = _group(
            sorted(mine, key=lambda t: rank[(t.task, t.model, t.variant)]),
            cluster_by,
            (columns or {}).get(task),
        )
        notes.extend(g.notes)
        if not g.indices:
            notes.append(f"{task} ({model}): the variants share no rows")
            continue
        gseed = _group_seed(seed, "measures", task, model, *g.variants)
        # the range test takes the user's seed, as the sweep's comparisons do
        measures, _, boot = task_measures(g, n_resamples=n_resamples, seed=gseed, test_seed=seed)
        groups.append(g)
        per_task.append(measures)
        boots.append(boot)
        observed.append(np.asarray(list(measures["scores"].values()), dtype=np.float64))
    models = list(dict.fromkeys(g.model for g in groups))
    shares = {
        m: variance_shares([g for g in groups if g.model == m], n_resamples=n_resamples, seed=seed)
        for m in models
    }
    meta = []
    for m in models:
        idx = [i for i, g in enumerate(groups) if g.model == m]
        for row in meta_analysis(
            [groups[i] for i in idx], [boots[i] for i in idx], [observed[i] for i in idx]
        ):
            meta.append({"model": m, **row})
            notes.extend(f"{m} {row['a']} - {row['b']}: {n}" for n in row["notes"])
    metrics_pooled: dict[tuple[str, str], set[str]] = {(r["model"], r["axis"]): set() for r in meta}
    for r in meta:
        metrics_pooled[(r["model"], r["axis"])].add(r["metric"])
    for (m, axis), ms in metrics_pooled.items():
        if len(ms) > 1:
            notes.append(
                f"{m} {axis}: tasks use different official metrics ({', '.join(sorted(ms))}); "
                "each metric's tasks are pooled separately"
            )
    for m, v in shares.items():
        if v.get("note"):
            notes.append(f"variance shares ({m}): {v['note']}")
    report = {
        "per_task": per_task,
        "variance_shares": shares,
        "meta_analysis": meta,
        "rank_stability": rank_stability(groups),
        "excluded": excluded,
        "notes": notes,
        "n_resamples": n_resamples,
    }
    # refuse here, before anything is logged, if two (task, model)s would share a metric name
    sensitivity_metrics(report)
    return report


def pooled_effects(
    outcomes: Iterable[Any], *, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> list[dict[str, Any]]:
    """Only the meta-analysis of `sensitivity_report` (what a simulation of its coverage needs)."""
    by: dict[tuple[str, str], list[Trial]] = {}
    for t in sorted(as_trials(outcomes), key=lambda t: (t.task, t.model, t.variant)):
        if t.complete:
            by.setdefault((t.model, t.task), []).append(t)
    out = []
    for model in dict.fromkeys(m for m, _ in by):
        groups = [_group(ts) for (m, _), ts in by.items() if m == model and len(ts) >= 2]
        boots, observed = [], []
        for g in groups:
            gseed = _group_seed(seed, "measures", g.task, g.model, *g.variants)
            rng = np.random.default_rng(gseed)
            counts, _ = _resample_counts(g, n_resamples, rng)
            boots.append(_variant_scores(g, counts))
            observed.append(_variant_scores(g, np.ones((1, len(g.indices))))[0])
        out += [{"model": model, **r} for r in meta_analysis(groups, boots, observed)]
    return out


def variance_shares_artifact(report: dict[str, Any]) -> dict[str, Any]:
    """`variance_shares.json`: per model, {factor: share} (summing to 1) and a CI per factor,
    the variance components behind them (and the untruncated ones), rows and clusters per
    task; every share null with a note when there is no variance to share out."""
    keys = ("components", "components_raw", "truncated", "coverage", "n_rows", "n_clusters")
    return {
        m: {"shares": v["shares"], "ci": v["ci"], "method": v["method"],
            "unreliable": v.get("unreliable", False), "note": v.get("note"),
            **{k: v.get(k) for k in keys}}
        for m, v in report["variance_shares"].items()
    }  # fmt: skip


def metric_name(task: str, model: str, measure: str) -> str:
    """``sensitivity.<task>.<model>.<measure>``, with every character MLflow refuses in a
    metric name (anything but letters, digits, _ - . / space :) replaced by ``_``."""
    import re

    return re.sub(r"[^A-Za-z0-9_\-./ :]", "_", f"sensitivity.{task}.{model}.{measure}")


def sensitivity_metrics(report: dict[str, Any]) -> dict[str, float]:
    """The parent run's metrics: every measure, the CI bounds of those with a CI and the
    spread's p-value, per (task, model). Two different (task, model, measure) mapping to one
    name (``a.b`` + ``c`` vs ``a`` + ``b.c``, or a character MLflow refuses replaced by ``_``)
    is refused: one would silently overwrite the other."""
    out: dict[str, float] = {}
    owner: dict[str, tuple[str, str, str]] = {}

    def put(row: dict[str, Any], measure: str, value: float) -> None:
        name = metric_name(row["task"], row["model"], measure)
        key = (row["task"], row["model"], measure)
        if name in owner and owner[name] != key:
            raise ValueError(
                f"MLflow metric name {name!r} would hold both task {owner[name][0]!r} / model "
                f"{owner[name][1]!r} / {owner[name][2]} and task {key[0]!r} / model {key[1]!r} / "
                f"{key[2]}; rename a task or model alias so the names differ"
            )
        owner[name] = key
        out[name] = value

    for row in report["per_task"]:
        for m in MEASURES:
            put(row, m, row[m])
        for m in CI_MEASURES:
            lo, hi = row[f"{m}_ci"]
            put(row, f"{m}_ci_low", lo)
            put(row, f"{m}_ci_high", hi)
        if row["spread_p_value"] is not None:
            put(row, "spread_p_value", row["spread_p_value"])
    return out


def _fmt(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def format_sensitivity(report: dict[str, Any]) -> str:
    """The sensitivity section of `workbench report` (plain text)."""
    lines = ["Prompt sensitivity", "=================="]
    if not report.get("per_task"):
        lines.append("no (task, model) with at least 2 complete variants")
    else:
        lines.append(
            f"{'task':<28} {'model':<16} {'k':>2} {'spread':>6} {'p':>6} "
            f"{'MaxP':>6} {'AvgP [95% CI]':<21} {'SensiScore [CI]':<21} {'dep.rows [CI]':<21}"
        )
        for r in report["per_task"]:
            sp = _fmt(r["spread"])
            av = f"{_fmt(r['avgp'])} [{_fmt(r['avgp_ci'][0])}, {_fmt(r['avgp_ci'][1])}]"
            dp = (
                f"{_fmt(r['share_prompt_dependent'])} [{_fmt(r['share_prompt_dependent_ci'][0])}"
                f", {_fmt(r['share_prompt_dependent_ci'][1])}]"
            )
            ss = (
                f"{_fmt(r['sensitiscore'])} [{_fmt(r['sensitiscore_ci'][0])}, "
                f"{_fmt(r['sensitiscore_ci'][1])}]"
            )
            flag = "!" if r.get("ci_unreliable") else " "
            lines.append(
                f"{r['task'][:27] + flag:<28} {r['model'][:16]:<16} {r['n_variants']:>2} {sp:>6} "
                f"{_fmt(r['spread_p_value']):>6} {_fmt(r['maxp']):>6} {av:<21} "
                f"{ss:<21} {dp:<21}"
            )
            if len(r["best"]) > 1 or len(r["worst"]) > 1:
                lines.append(f"  tied: best {', '.join(r['best'])}; worst {', '.join(r['worst'])}")
        lines.append(
            f"(metric: each task's official metric; CIs: {report['per_task'][0]['ci_method']}; "
            "spread and MaxP have no CI: a bootstrap of a max or of max - min does not cover; "
            "p: range permutation test of the spread, its inference)"
        )
        for r in report["per_task"]:
            lines.append(
                f"  {r['task']} ({r['model']}): {r['n_rows']} rows, {r['n_clusters']} clusters "
                f"of identical prompts ({r['clustering']})"
            )
        if any(r.get("ci_unreliable") for r in report["per_task"]):
            lines.append("! CIs unreliable (measured coverage below "
                         f"{COVERAGE_FLOOR}, or a design outside the measured grid):")  # fmt: skip
            for r in report["per_task"]:
                if r.get("ci_unreliable"):
                    lines.append(f"  {r['task']} ({r['model']}): {r['note']}")
    for model, v in report.get("variance_shares", {}).items():
        lines.append("")
        flag = (
            " (! marks a CI whose measured coverage is low: see the note)"
            if v.get("unreliable")
            else ""
        )
        sizes = ", ".join(
            f"{t} {v['n_rows'][t]} rows / {v['n_clusters'][t]} clusters"
            for t in v.get("tasks", [])
            if t in v.get("n_rows", {})
        )
        lines.append(
            f"Variance of per-row correctness, {model} ({v['n_observations']} obs.; {sizes}; "
            f"variance components){flag}"
        )
        lines.append(f"  ({v['method']})")
        if v.get("sum_of_shares") is None:
            lines.append(f"  {v.get('note')}")
            continue
        for f, s in sorted(v["shares"].items(), key=lambda kv: -kv[1]):
            lo, hi = v["ci"][f]
            mark = "  (set to 0: estimated below its noise)" if f in v.get("truncated", []) else ""
            bang = "!" if f in v.get("unreliable_factors", []) else " "
            lines.append(f"  {f:<40} {s:6.1%}  [{lo:6.1%}, {hi:6.1%}]{bang}{mark}")
        if v.get("note"):
            lines.append(f"  note: {v['note']}")
    if report.get("meta_analysis"):
        lines.append("")
        lines.append(
            "Pooled effect across tasks (random effects, Hartung-Knapp-Sidik-Jonkman 95% CI; "
            "within one metric) | paired t-test"
        )
        for m in report["meta_analysis"]:
            head = (
                f"  {m['model']}: {m['a']} - {m['b']} ({m['metric']}) over "
                f"{len(m['tasks'])} tasks: "
            )
            if m.get("pooled") is None:
                lines.append(head + f"not pooled ({m['note']})")
                continue
            t = m["paired_t"]
            lines.append(
                head + f"{m['pooled']:+.3f} [{m['ci'][0]:+.3f}, {m['ci'][1]:+.3f}] "
                f"p={_fmt(m['p_value'])} tau2={m['tau2']:.4f} I2={m['i2']:.0%} | "
                f"t p={_fmt(t['p_value'])}"
            )
    if report.get("rank_stability"):
        lines.append("")
        lines.append("Rank stability of models across prompts")
        for r in report["rank_stability"]:
            lines.append(
                f"  {r['task']}: mean Kendall tau {_fmt(r['mean_kendall_tau'], 2)} over "
                f"{r['n_pairs']} variant pairs; best model changes in "
                f"{r['share_best_changes']:.0%} of variants (best on average: "
                f"{', '.join(r['best_model_mean'])}; variants with tied best: "
                f"{r['n_variants_with_tied_best']})"
            )
    for n in report.get("notes", []):
        lines.append(f"note: {n}")
    return "\n".join(lines)
