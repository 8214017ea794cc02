"""Variance components of per-row correctness per model: task, row, each axis, axis x task,
axis x axis and residual shares with cluster-bootstrap intervals (`variance_shares`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from experiments.analysis import stats
from experiments.analysis.sensitivity.coverage import (
    COVERAGE_FLOOR,
    COVERAGE_SIMS,
    measured_share_coverage,
    share_kind,
)
from experiments.analysis.sensitivity.groups import (
    AXIS_X_AXIS,
    DRAW_AXES,
    N_RESAMPLES,
    RESIDUAL,
    ROW,
    TASK,
    UNATTRIBUTED,
    FloatArray,
    Group,
    _group_seed,
    draw_factor,
)
from experiments.analysis.sensitivity.measures import (
    _basic_ci,
    _bc_ci,
    _ci,
    _recentred_ci,
    _Units,
    _units,
)


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


def _levels(group: Group, axis: str) -> tuple[str, ...]:
    """The levels of `axis` among the group's variants, sorted."""
    return tuple(sorted({str(a.get(axis)) for a in group.axes}))


def _pooled_axes(groups: Sequence[Group]) -> set[str]:
    """The axes whose main effect may be pooled across the tasks: those with the same levels
    in every task. A task that skipped a level (a prompt file it lacks) has other levels, and
    pooling effects by position would pair one task's level with another's; such an axis's
    effect stays within task (`draw_factor`), never split into a main effect and "x task"."""
    axes = {k for g in groups for a in g.axes for k in a}
    return {k for k in axes if len({_levels(g, k) for g in groups}) == 1}


def _design_notes(groups: Sequence[Group]) -> list[str]:
    """What the design of the tasks changed in the decomposition: an axis whose levels differ
    between tasks (within task only), a task whose variants are not a full factorial."""
    notes = []
    pooled = _pooled_axes(groups)
    for axis in sorted({k for g in groups for a in g.axes for k in a} - pooled - set(DRAW_AXES)):
        ran = "; ".join(f"{g.task}: {', '.join(_levels(g, axis))}" for g in groups)
        notes.append(
            f"{axis}: the tasks ran different levels ({ran}), so its effect is reported "
            f"within task ({draw_factor(axis)!r}), not split into a pooled effect and x task"
        )
    for g in groups:
        if _layout(g)[2] is None:
            notes.append(
                f"{g.task}: its {len(g.variants)} variants are not a full factorial of its axes "
                f"(a skipped or lost combination): its between-variant part is {UNATTRIBUTED!r},"
                " not attributed to the axes"
            )
    return notes


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

    Long because it is one computation: the sums of squares of every factor and their
    expected noise, accumulated task by task over the same running totals.
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
    pooled = _pooled_axes(groups)
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
            if len(sub) == 1 and (
                varying[min(sub) - 1] in DRAW_AXES or varying[min(sub) - 1] not in pooled
            ):
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

    Long because of this docstring: the code is about 60 lines.
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
        return _no_variance(factors, common, method_of, total)
    shares = {f: float(comp[f][0]) / comp_total for f in factors}
    boot = _boot_shares(groups, units, rngs, factors, n_resamples)
    ci = {f: _share_ci(method_of(f), shares[f], np.asarray(boot[f])) for f in factors}
    methods = {f: method_of(f) for f in factors}
    truncated = [f for f in factors if float(raw[f][0]) < 0]
    coverage = {f: measured_share_coverage(groups, f) for f in factors}
    low = {f: c for f, c in coverage.items() if c is None or c < COVERAGE_FLOOR}
    unreliable = bool(low)
    notes = _design_notes(groups) + _share_notes(truncated, low, units)
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


def _no_variance(
    factors: Sequence[str],
    common: dict[str, Any],
    method_of: Callable[[str], str],
    total: float,
) -> dict[str, Any]:
    """`variance_shares`'s document when there is nothing to share out (no shares, no CIs)."""
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


def _boot_shares(
    groups: Sequence[Group],
    units: Sequence[_Units],
    rngs: Sequence[np.random.Generator],
    factors: Sequence[str],
    n_resamples: int,
) -> dict[str, list[float]]:
    """Each factor's share in every cluster-bootstrap resample (task t's from `rngs[t]`)."""
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
    return boot


def _share_notes(
    truncated: Sequence[str], low: dict[str, float | None], units: Sequence[_Units]
) -> list[str]:
    """The notes of `variance_shares`: truncated components, low coverage, mixed clusters."""
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
    return notes


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
