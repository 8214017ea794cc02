"""Across tasks and models: the random-effects meta-analysis of each axis contrast
(`meta_analysis`) and rank stability of the models under the variants (`rank_stability`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from experiments.analysis import stats
from experiments.analysis.contrast import LevelOrder
from experiments.analysis.sensitivity.groups import (
    DRAW_AXES,
    LEVEL,
    TIE_TOL,
    FloatArray,
    Group,
    _strata,
)
from experiments.analysis.sensitivity.measures import _variant_scores


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
    order: LevelOrder | None = None,
) -> list[dict[str, Any]]:
    """Per metric and axis contrast (level a vs level b): random-effects pooled effect across
    the tasks scored with that metric (effects on different metrics are not one quantity).

    Every effect is level a − level b, a and b as `order` says (`experiments.analysis.contrast`:
    the level listed first in the sweep, or a declared pair's order), the sign of the
    comparisons table; by default the order the groups' variants were given in. Each task's
    95% interval (``effect_ci``, what the forest figure draws) is effect +- z x its bootstrap
    standard deviation, the variance the pool weighs it by.

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
    from scipy.stats import norm  # start-up: scipy.stats is slow to import

    z = float(norm.ppf(1 - (1 - level) / 2))
    levels = (
        order
        if order is not None
        else LevelOrder.of(v for g in groups for v in (g.given_order or g.variants))
    )
    # the rows in the study's order of levels, as the comparisons table lists its pairs
    contrasts = sorted(
        _contrasts(groups, levels).items(),
        key=lambda kv: (kv[0][0], kv[0][1], levels.position(kv[0][1], kv[0][2]),
                        levels.position(kv[0][1], kv[0][3])),
    )  # fmt: skip
    out = []
    for (metric, axis, a, b), members in contrasts:
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
            "effect_ci": [[e - z * v**0.5, e + z * v**0.5]
                          for e, v in zip(effects, variances, strict=True)],
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
        row.update(_pooled_fields(effects, variances, names, level))
        out.append(row)
    return out


def _contrasts(
    groups: Sequence[Group], order: LevelOrder
) -> dict[tuple[str, str, str, str], list[int]]:
    """(metric, axis, level a, level b) -> the groups that have both levels (draw axes left
    out); a and b as `order` orients them."""
    contrasts: dict[tuple[str, str, str, str], list[int]] = {}
    for gi, g in enumerate(groups):
        keys = sorted({k for a in g.axes for k in a})
        for axis in keys:
            if axis in DRAW_AXES:
                continue
            levels = sorted({a[axis] for a in g.axes if axis in a})
            for x, y in itertools.combinations(levels, 2):
                c = order.contrast(axis, x, y)
                contrasts.setdefault((g.metric, axis, c.a, c.b), []).append(gi)
    return contrasts


def _pooled_fields(
    effects: list[float], variances: list[float], names: list[str], level: float
) -> dict[str, Any]:
    """The random-effects pool of the tasks' effects with its HKSJ interval (2+ tasks)."""
    from scipy.stats import t as t_dist  # start-up: scipy.stats is slow to import
    from statsmodels.stats.meta_analysis import combine_effects  # start-up: slow to import

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
    return dict(
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


def _row_step(group: Group) -> float:
    """The most one row can move the group's official metric: 1 / (classes x smallest class)
    for balanced accuracy, 1 / n otherwise (the F1 metrics' step is about that too)."""
    n = max(len(group.indices), 1)
    if group.stat_metric in stats.STRATIFIED_METRICS:
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
