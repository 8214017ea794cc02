"""Prompt sensitivity of a sweep: how much each prompt factor moves a legal task.

Pure functions over the sweep's trials (one per task, model and variant; a variant's name
``instruction=reference,seed=0`` carries its axis values). `sensitivity_report` returns a
JSON-able document with, for a sweep that has at least two variants of a (task, model):

- per (task, model): spread (max - min of the task's official metric over the variants, with
  the range permutation test's p-value from `experiments.stats`), MaxP, AvgP (Mizrahi et al.),
  PromptSensiScore (ProSA: per row, the mean over variant pairs of |correct_i - correct_j|,
  averaged over rows) and the share of rows whose correctness depends on the prompt; each with
  a percentile bootstrap CI over rows (all variants of a row resampled together, stratified by
  answer class for balanced accuracy as `stats.bootstrap_ci` does);
- per model, the variance of per-row correctness split into task, row (within task), each
  axis, axis x task, axis x axis, and residual (row x prompt) shares, summing to 1, each with a
  cluster-bootstrap CI over rows (see `variance_shares`);
- per model and axis contrast, a random-effects meta-analysis across tasks of the per-task
  paired effect, with the paper's paired t-test beside it;
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

from experiments import stats

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


def _row_order(index: str) -> tuple[int, int, str]:
    return (0, int(index), "") if index.isdigit() else (1, 0, index)


def _group(trials: Sequence[Trial]) -> Group:
    """Align a (task, model)'s variants on their common rows. Each trial's own score is first
    checked against its generations on all its rows; variants scored on different rows are
    restricted to the common rows with a note saying how many rows each lost."""
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
    for t in trials:
        pos = {idx: j for j, idx in enumerate(t.indices)}
        gens.append(tuple(str(t.generations[pos[i]]) for i in indices))
        corr.append([1.0 if t.correct[pos[i]] else 0.0 for i in indices])
        if not answers:
            answers = tuple(str(t.answers[pos[i]]) for i in indices)
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
    )


def _strata(group: Group) -> NDArray[np.intp]:
    """Answer class of each row for the class-based metrics (as stats.bootstrap_ci), else one."""
    y = np.asarray(group.answers, dtype=object)
    if group.metric in stats.STRATIFIED_METRICS:
        return stats.class_index(y, group.metric)
    return np.zeros(len(y), dtype=np.intp)


def _variant_scores(group: Group, counts: FloatArray) -> FloatArray:
    """(r, v) official metric of every variant under r row-count vectors (resamples)."""
    y = np.asarray(group.answers, dtype=object)
    preds = [np.asarray(g, dtype=object) for g in group.generations]
    fn = stats.metric_fn(group.metric)
    observed = [fn(y, p) for p in preds]
    dec = stats.checked_decomposition(group.metric, y, preds, observed)
    if dec is not None:
        n, v, m = dec.stats.shape
        totals = (counts @ dec.stats.reshape(n, v * m)).reshape(len(counts), v, m)
        return np.asarray(dec.combine(totals), dtype=np.float64)
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
    """Percentile interval of a share, moved so the bootstrap median sits on the estimate.

    A resample of rows adds its own sampling noise to every sum of squares once more, so the
    bootstrap distribution of a small factor's share sits above the estimate (measured: the
    plain percentile interval of a 1% share often excludes it). Recentring keeps the
    bootstrap's width and puts it around the estimate; clipped to [0, 1].
    """
    lo, hi = _ci(boot, level)
    shift = float(np.median(boot)) - estimate
    return [max(0.0, lo - shift), min(1.0, hi - shift)]


def _resample_counts(
    strata: NDArray[np.intp], n_resamples: int, rng: np.random.Generator
) -> FloatArray:
    sizes = np.bincount(strata)
    return np.asarray(stats.resample_counts(strata, sizes, n_resamples, rng), dtype=np.float64)


def task_measures(
    group: Group, *, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> tuple[dict[str, Any], FloatArray, FloatArray]:
    """Spread, MaxP, AvgP, PromptSensiScore, prompt-dependent share of one (task, model), with
    CIs; also the bootstrap row counts and per-variant scores (reused by the meta-analysis)."""
    rng = np.random.default_rng(seed)
    counts = _resample_counts(_strata(group), n_resamples, rng)
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
    test = stats.range_permutation_test(
        list(group.answers), [list(g) for g in group.generations], metric=group.metric,
        n_resamples=n_resamples, seed=seed,
    )  # fmt: skip
    sensi, share = _sensi(group.correct)
    k = group.correct.shape[1]
    m = group.correct.sum(axis=1)
    per_row = m * (k - m) / (k * (k - 1) / 2)
    dependent = ((m > 0) & (m < k)).astype(float)
    n = len(group.indices)
    bs_sensi = counts @ per_row / n
    bs_share = counts @ dependent / n
    values: dict[str, tuple[float, FloatArray | None]] = {
        "spread": (float(observed.max() - observed.min()), None),
        "maxp": (float(observed.max()), None),
        "avgp": (float(observed.mean()), boot.mean(axis=1)),
        "sensitiscore": (sensi, bs_sensi),
        "share_prompt_dependent": (share, bs_share),
    }
    out: dict[str, Any] = {
        "task": group.task,
        "model": group.model,
        "metric": group.metric,
        "n_rows": n,
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
        "spread_p_value": test.p_value,
        "spread_test": test.test,
        "n_resamples": n_resamples,
        "ci_measures": list(CI_MEASURES),
        "ci_method": f"percentile bootstrap over rows ({n_resamples} resamples, all variants "
        "of a row together"
        + (", stratified by answer class)" if group.metric in stats.STRATIFIED_METRICS else ")"),
    }
    for name, (est, dist) in values.items():
        out[name] = est
        if name in CI_MEASURES and dist is not None:
            out[f"{name}_ci"] = _ci(np.asarray(dist, dtype=np.float64))
    smallest = int(np.bincount(_strata(group)).min())
    unit = "class" if group.metric in stats.STRATIFIED_METRICS else "sample"
    out["ci_unreliable"] = smallest < stats.MIN_CLASS_ROWS
    out["note"] = (
        "spread and MaxP carry no CI (a bootstrap of a max or of max - min does not cover); "
        "the spread's inference is the range permutation test's p-value"
        + (
            f"; CIs unreliable: the smallest {unit} has {smallest} rows (< {stats.MIN_CLASS_ROWS})"
            if out["ci_unreliable"]
            else ""
        )
    )
    return out, counts, boot


# ---- variance decomposition -------------------------------------------------------------------
def _task_design(group: Group) -> tuple[list[str], FloatArray | None]:
    """The task's varying axes and its correctness as an array (rows, levels_1, ..., levels_k),
    or None when the variants are not a full factorial of those axes (unbalanced)."""
    keys = sorted({k for a in group.axes for k in a})
    varying = [k for k in keys if len({a.get(k) for a in group.axes}) > 1]
    arr = _as_factorial(group, group.correct[None])
    return varying, None if arr is None else arr[0]


def _effects(arr: FloatArray) -> dict[frozenset[int], FloatArray]:
    """Balanced-ANOVA effects of every subset of the dims of `arr` (leading batch dim 0).

    The effect of a subset S is sum over T in S of (-1)^|S - T| times the mean of `arr` over
    the dims outside T: the orthogonal decomposition of a full factorial with one observation
    per cell, i.e. the OLS sums of squares of the saturated-but-one model (types I, II and III
    agree in a balanced design).
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


def _ss(e: FloatArray, full_shape: tuple[int, ...]) -> FloatArray:
    """Sum of squares of an effect broadcast to the full design, per batch entry."""
    reps = math.prod(full_shape[1:]) / math.prod(e.shape[1:])
    return np.asarray((e**2).reshape(len(e), -1).sum(axis=1) * reps, dtype=np.float64)


def _decompose(
    designs: Sequence[tuple[list[str], FloatArray | None, FloatArray]],
) -> dict[str, FloatArray]:
    """Sums of squares per factor across tasks, for a batch of resamples.

    `designs` holds, per task, its varying axes, its (batch, rows, levels...) array (None if
    unbalanced) and its (batch, rows, variants) correctness. Returns {factor: (batch,) SS},
    including "total".
    """
    batch = designs[0][2].shape[0]
    ss: dict[str, FloatArray] = {}

    def add(name: str, value: FloatArray) -> None:
        ss[name] = ss.get(name, np.zeros(batch)) + value

    n_obs = [d[2].shape[1] * d[2].shape[2] for d in designs]
    means = [d[2].reshape(batch, -1).mean(axis=1) for d in designs]
    grand = sum(m * n for m, n in zip(means, n_obs, strict=True)) / sum(n_obs)
    add("total", sum(((d[2].reshape(batch, -1) - grand[:, None]) ** 2).sum(1) for d in designs))
    add(TASK, sum(n * (m - grand) ** 2 for m, n in zip(means, n_obs, strict=True)))
    # axis main effects per task, pooled later into axis and axis x task
    main: dict[tuple[str, tuple[str, ...]], list[tuple[int, FloatArray]]] = {}
    for t, (varying, arr, corr) in enumerate(designs):
        if arr is None:  # not a full factorial: rows and the between-variant part only
            eff = _effects(corr)
            add(ROW, _ss(eff[frozenset({1})], corr.shape))
            add(UNATTRIBUTED, _ss(eff[frozenset({2})], corr.shape))
            add(RESIDUAL, _ss(eff[frozenset({1, 2})], corr.shape))
            continue
        eff = _effects(arr)
        for s, e in eff.items():
            if not s:
                continue
            value = _ss(e, arr.shape)
            if s == {1}:
                add(ROW, value)
            elif 1 in s:
                add(RESIDUAL, value)
            elif len(s) == 1 and varying[min(s) - 2] in DRAW_AXES:
                add(draw_factor(varying[min(s) - 2]), value)  # never pooled across tasks
            elif len(s) == 1:
                (d,) = s
                main.setdefault((varying[d - 2], (str(t),)), []).append((n_obs[t], e))
            else:
                add(AXIS_X_AXIS, value)
    # pool each axis's within-task main effects (same number of levels) into a common effect
    by_axis: dict[str, list[tuple[int, FloatArray]]] = {}
    for (axis, _), items in main.items():
        by_axis.setdefault(axis, []).extend(items)
    for axis, items in by_axis.items():
        groups: dict[int, list[tuple[int, FloatArray]]] = {}
        for n, e in items:
            groups.setdefault(e.size // batch, []).append((n, e))
        for members in groups.values():
            vecs = [(n, e.reshape(batch, -1)) for n, e in members]
            w = sum(n for n, _ in vecs)
            common: FloatArray = np.sum([n * v for n, v in vecs], axis=0) / w
            levels = common.shape[1]
            add(axis, w / levels * (common**2).sum(axis=1))
            add(
                f"{axis} x task",
                np.sum([n / levels * ((v - common) ** 2).sum(axis=1) for n, v in vecs], axis=0),
            )
    return ss


def _design_batch(
    group: Group, rows: NDArray[np.intp] | None
) -> tuple[list[str], FloatArray | None, FloatArray]:
    varying, arr = _task_design(group)
    if rows is None:
        return varying, None if arr is None else arr[None], group.correct[None]
    return varying, None if arr is None else arr[rows], group.correct[rows]


def variance_shares(
    groups: Sequence[Group], *, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> dict[str, Any]:
    """Shares of the variance of per-row correctness (0/1) of one model's trials.

    A linear probability model with factors task, row within task, each axis, axis x task,
    axis x axis and residual (row x prompt), fitted by OLS; every task's variants are evaluated
    on the same rows, so each task's design is a balanced full factorial and the sums of
    squares are the closed-form ANOVA ones (checked against statsmodels' anova_lm in the
    tests). The CI of each share is a cluster bootstrap: rows resampled within each task
    (stratified by answer class for class-based metrics), all variants of a row together; the
    percentile interval recentred on the estimate (`_recentred_ci`).
    """
    if not groups:
        raise ValueError("no complete (task, model) with at least 2 variants")
    groups = sorted(groups, key=lambda g: g.task)
    # one RNG per task, seeded from its identity: the order of the tasks changes no number
    rngs = [
        np.random.default_rng(_group_seed(seed, "shares", g.task, g.model, *g.variants))
        for g in groups
    ]
    point = _decompose([_design_batch(g, None) for g in groups])
    total = float(point.pop("total")[0])
    factors = list(point)
    smallest = min(int(np.bincount(_strata(g)).min()) for g in groups)
    common: dict[str, Any] = {
        "total_sum_of_squares": total,
        "n_observations": int(sum(g.correct.size for g in groups)),
        "tasks": [g.task for g in groups],
        "n_resamples": n_resamples,
        "unreliable": smallest < stats.MIN_CLASS_ROWS,
    }
    if total <= 0:  # every row right (or wrong) under every prompt: nothing to share out
        return {
            "shares": {f: None for f in factors},
            "ci": {f: None for f in factors},
            "sum_of_shares": None,
            **common,
            "method": "no variance: per-row correctness is the same everywhere, so no share",
            "note": "no variance: every observation has the same correctness; shares undefined",
        }
    shares = {f: float(point[f][0]) / total for f in factors}
    boot: dict[str, list[float]] = {f: [] for f in factors}
    chunk = 100
    for start in range(0, n_resamples, chunk):
        r = min(chunk, n_resamples - start)
        designs = []
        for g, rng in zip(groups, rngs, strict=True):
            strata = _strata(g)
            idx = np.empty((r, len(strata)), dtype=np.intp)
            for c in np.unique(strata):
                members = np.flatnonzero(strata == c)
                idx[:, members] = members[rng.integers(0, len(members), (r, len(members)))]
            designs.append(_design_batch(g, idx))
        ss = _decompose(designs)
        tot = ss.pop("total")
        for f in factors:
            boot[f].extend((ss.get(f, np.zeros(r)) / np.where(tot > 0, tot, 1.0)).tolist())
    return {
        "shares": shares,
        "ci": {f: _recentred_ci(shares[f], np.asarray(boot[f])) for f in factors},
        "sum_of_shares": float(sum(shares.values())),
        **common,
        "method": "OLS ANOVA sums of squares of a linear probability model of per-row "
        "correctness (balanced within task; closed form); demonstration draws as one factor "
        "within task; CI: recentred percentile bootstrap interval (cluster bootstrap over rows "
        f"within task, {n_resamples} resamples)",
        "note": (
            f"CIs unreliable: a task's smallest answer class has {smallest} rows "
            f"(< {stats.MIN_CLASS_ROWS})"
            if common["unreliable"]
            else None
        ),
    }


def expected_shares(truth: Sequence[Group]) -> dict[str, float]:
    """The shares `variance_shares` estimates when each row's correctness is Bernoulli with
    the probabilities in ``truth[i].correct`` (a linear probability model), independently.

    Every factor's sum of squares is a quadratic form q_f of the data, so for y = p + e with
    independent e_i of variance p_i (1 - p_i): E[q_f(y)] = q_f(p) + sum_i p_i (1 - p_i)
    q_f(u_i), u_i the i-th unit vector (exact; the cross term has mean 0). The expected share
    is E[q_f] / E[q_total] (a ratio of expectations: the share's own mean differs by O(1/N)).
    """
    point = _decompose([_design_batch(g, None) for g in truth])
    expected = {f: float(v[0]) for f, v in point.items()}
    sizes = [g.correct.size for g in truth]
    for t, g in enumerate(truth):
        p = g.correct.ravel()
        var = p * (1 - p)
        for start in range(0, sizes[t], 256):
            ids = np.arange(start, min(start + 256, sizes[t]))
            designs = []
            for u, h in enumerate(truth):
                corr = np.zeros((len(ids), *h.correct.shape))
                if u == t:
                    flat = corr.reshape(len(ids), -1)
                    flat[np.arange(len(ids)), ids] = 1.0
                varying, _ = _task_design(h)
                designs.append((varying, _as_factorial(h, corr), corr))
            ss = _decompose(designs)
            for f, v in ss.items():
                expected[f] = expected.get(f, 0.0) + float(v @ var[ids])
    total = expected.pop("total")
    return {f: v / total for f, v in expected.items()}


def _as_factorial(group: Group, corr: FloatArray) -> FloatArray | None:
    """(batch, rows, variants) values laid out as the task's (batch, rows, levels...) array."""
    keys = sorted({k for a in group.axes for k in a})
    varying = [k for k in keys if len({a.get(k) for a in group.axes}) > 1]
    levels = [sorted({str(a.get(k)) for a in group.axes}) for k in varying]
    shape = [len(lv) for lv in levels]
    if math.prod(shape) != len(group.variants):
        return None
    arr = np.full((corr.shape[0], corr.shape[1], *shape), np.nan)
    for j, a in enumerate(group.axes):
        pos = tuple(lv.index(str(a.get(k))) for k, lv in zip(varying, levels, strict=True))
        where: tuple[slice | int, ...] = (slice(None), slice(None), *pos)
        arr[where] = corr[:, :, j]
    return None if np.isnan(arr).any() else arr


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
            variances.append(float(np.var(d_boot, ddof=1)))
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
        usable = [v > 0 for v in variances]
        if len(names) < 2 or not all(usable):
            row.update(pooled=None, ci=None, tau2=None, i2=None, q=None, p_value=None)
            row["note"] = (
                "fewer than 2 tasks: nothing to pool"
                if len(names) < 2
                else "a task's effect has zero bootstrap variance (no row differs): not pooled"
            )
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
    outcomes: Iterable[Any], *, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> dict[str, Any]:
    """The sweep's sensitivity document (JSON-able) from its trials (`TrialOutcome`s of
    `run_sweep`, or `Trial`s)."""
    # a canonical order: the input order changes no number
    trials = sorted(as_trials(outcomes), key=lambda t: (t.task, t.model, t.variant))
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
        g = _group(mine)
        notes.extend(g.notes)
        if not g.indices:
            notes.append(f"{task} ({model}): the variants share no rows")
            continue
        gseed = _group_seed(seed, "measures", task, model, *g.variants)
        measures, _, boot = task_measures(g, n_resamples=n_resamples, seed=gseed)
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
            counts = _resample_counts(_strata(g), n_resamples, rng)
            boots.append(_variant_scores(g, counts))
            observed.append(_variant_scores(g, np.ones((1, len(g.indices))))[0])
        out += [{"model": model, **r} for r in meta_analysis(groups, boots, observed)]
    return out


def variance_shares_artifact(report: dict[str, Any]) -> dict[str, Any]:
    """`variance_shares.json`: per model, {factor: share} (summing to 1) and a CI per factor;
    every share null with a note when there is no variance to share out."""
    return {
        m: {"shares": v["shares"], "ci": v["ci"], "method": v["method"],
            "unreliable": v.get("unreliable", False), "note": v.get("note")}
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
        if any(r.get("ci_unreliable") for r in report["per_task"]):
            lines.append(
                f"! CIs unreliable: the smallest answer class has < {stats.MIN_CLASS_ROWS} rows"
            )
    for model, v in report.get("variance_shares", {}).items():
        lines.append("")
        flag = " (! CIs unreliable: small answer class)" if v.get("unreliable") else ""
        lines.append(
            f"Variance of per-row correctness, {model} ({v['n_observations']} obs.; "
            f"recentred percentile bootstrap interval){flag}"
        )
        if v.get("sum_of_shares") is None:
            lines.append(f"  {v.get('note')}")
            continue
        for f, s in sorted(v["shares"].items(), key=lambda kv: -kv[1]):
            lo, hi = v["ci"][f]
            lines.append(f"  {f:<40} {s:6.1%}  [{lo:6.1%}, {hi:6.1%}]")
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
