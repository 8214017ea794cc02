"""Figures in the style of the LegalBench paper's prompt-study figures.

- `pair_figure` (Figures 1 and 2): per task, the two variants' scores side by side, with the
  permutation-test p-value above each pair.
- `draws_figure` (Figure 3): per task, the score of each demonstration draw, the best and the
  worst marked, and the p-value of best vs worst.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def _p_label(p: float | None) -> str:
    if p is None:
        return "incomplete"
    return f"p={p:.3f}" if p >= 0.001 else "p<0.001"


def _metric_label(outcomes: Sequence[Any]) -> str:
    metrics = sorted({getattr(o, "metric", "score") for o in outcomes})
    return metrics[0].replace("_", " ") if len(metrics) == 1 else "official metric (per task)"


def _chance_lines(ax: Any, tasks: Sequence[str], chance: Mapping[str, float | None]) -> None:
    """A dotted line at 1/K over each task's own group of bars (K = its number of labels)."""
    for i, t in enumerate(tasks):
        level = chance.get(t)
        if level is not None:
            ax.hlines(level, i - 0.45, i + 0.45, color="grey", lw=0.8, ls=":")


def pair_figure(
    name: str,
    model: str,
    outcomes: Sequence[Any],
    table: Sequence[dict[str, Any]],
    chance: Mapping[str, float | None] | None = None,
) -> Any:
    """Scores side by side; a missing score (incomplete trial) is marked, never drawn as 0."""
    tasks = list(dict.fromkeys(o.task for o in outcomes))
    variants = list(dict.fromkeys(o.variant for o in outcomes))
    score = {(o.task, o.variant): o.score for o in outcomes}
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(tasks) + 2), 3.8))
    width = 0.8 / max(1, len(variants))
    colors = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3"]
    for j, v in enumerate(variants):
        xs = [i + (j - (len(variants) - 1) / 2) * width for i in range(len(tasks))]
        ys = [score.get((t, v)) for t in tasks]
        ax.bar(
            [x for x, y in zip(xs, ys, strict=True) if y is not None],
            [y for y in ys if y is not None],
            width=width,
            label=v,
            color=colors[j % len(colors)],
        )
        for x, y in zip(xs, ys, strict=True):
            if y is None:
                ax.text(x, 0.02, "n/a", ha="center", fontsize=6, rotation=90)
    for i, t in enumerate(tasks):
        rows = [r for r in table if r["task"] == t]
        if rows:
            top = max((score.get((t, v)) or 0.0) for v in variants)
            ax.text(i, min(top + 0.03, 1.02), _p_label(rows[0]["p_value"]), ha="center", fontsize=7)
    _chance_lines(ax, tasks, chance or {})
    ax.set_xticks(range(len(tasks)), tasks, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel(_metric_label(outcomes))
    ax.set_title(f"{name} — {model} (dotted: chance, 1/K)", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def draws_figure(
    name: str,
    model: str,
    outcomes: Sequence[Any],
    table: Sequence[dict[str, Any]],
    chance: Mapping[str, float | None] | None = None,
) -> Any:
    tasks = list(dict.fromkeys(o.task for o in outcomes))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(tasks) + 2), 3.8))
    for i, t in enumerate(tasks):
        draws = [o for o in outcomes if o.task == t and o.score is not None]
        ax.scatter([i] * len(draws), [o.score for o in draws], color="#4C72B0", s=22, zorder=2)
        rows = [r for r in table if r["task"] == t]
        if rows and rows[0]["p_value"] is None:
            ax.text(i, 1.04, _p_label(None), ha="center", fontsize=7)
        elif rows:
            r = rows[0]
            ax.scatter(
                [i],
                [r["score_a"]],
                color="#55A868",
                marker="^",
                s=70,
                zorder=3,
                label="best" if i == 0 else None,
            )
            ax.scatter(
                [i],
                [r["score_b"]],
                color="#C44E52",
                marker="v",
                s=70,
                zorder=3,
                label="worst" if i == 0 else None,
            )
            ax.text(
                i, min(r["score_a"] + 0.04, 1.04), _p_label(r["p_value"]), ha="center", fontsize=7
            )
    _chance_lines(ax, tasks, chance or {})
    ax.set_xticks(range(len(tasks)), tasks, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel(_metric_label(outcomes))
    ax.set_title(
        f"{name} — {model}\nscore of each demonstration draw (dotted: chance, 1/K); "
        "p: range permutation test",
        fontsize=9,
    )
    if tasks:
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


# ---- prompt sensitivity (issue 11) ---------------------------------------------------------
def _short_variant(name: str) -> str:
    """``instruction=reference,seed=0`` -> ``reference · 0`` (the axes go in the axis label)."""
    parts = [p.partition("=") for p in name.split(",")]
    return " · ".join(v if sep else k for k, sep, v in parts)


def _variant_axes(names: Sequence[str]) -> str:
    keys = [p.partition("=")[0] for p in names[0].split(",")] if names else []
    return ", ".join(k for k in keys if k)


def variance_share_figure(report: Mapping[str, Any]) -> Any:
    """Share of the variance of per-row correctness per factor (bars), with its CI."""
    all_shares = report.get("variance_shares") or {}
    # a model with no variance has no shares (all null): drawn as no bars, named in the title
    shares = {m: v for m, v in all_shares.items() if v.get("sum_of_shares") is not None}
    no_variance = [m for m in all_shares if m not in shares]
    models = list(shares)
    factors: list[str] = []
    for v in shares.values():
        factors += [f for f in v["shares"] if f not in factors]
    order = sorted(factors, key=lambda f: -max(shares[m]["shares"].get(f, 0.0) for m in models))
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.38 * max(1, len(order)) * max(1, len(models))))
    height = 0.8 / max(1, len(models))
    colors = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3"]
    for j, m in enumerate(models):
        ys = [i + (j - (len(models) - 1) / 2) * height for i in range(len(order))]
        vals = [shares[m]["shares"].get(f, 0.0) for f in order]
        ci = [shares[m]["ci"].get(f, [v, v]) for f, v in zip(order, vals, strict=True)]
        err = [
            [max(0.0, v - lo) for v, (lo, _) in zip(vals, ci, strict=True)],
            [max(0.0, hi - v) for v, (_, hi) in zip(vals, ci, strict=True)],
        ]
        ax.barh(ys, vals, height=height, xerr=err, color=colors[j % len(colors)], label=m,
                error_kw={"lw": 0.8, "capsize": 2})  # fmt: skip
        for y, v, (_, hi) in zip(ys, vals, ci, strict=True):
            ax.text(max(v, hi) + 0.01, y, f"{v:.1%}", va="center", fontsize=7)
    ax.set_yticks(range(len(order)), order, fontsize=8)
    ax.invert_yaxis()
    top = max([hi for m in models for _, hi in shares[m]["ci"].values()] or [1.0])
    ax.set_xlim(0, min(1.0, top + 0.12))
    ax.set_xlabel(
        "share of the variance of per-row correctness\n"
        "(95% recentred percentile bootstrap interval)"
    )
    ax.set_ylabel("factor")
    title = "What moves per-row correctness: task, item, prompt axes"
    if no_variance:
        title += f"\nno variance (no shares): {', '.join(no_variance)}"
    ax.set_title(title, fontsize=10)
    if not order:
        ax.text(0.5, 0.5, "no task with 2 or more variants", ha="center", transform=ax.transAxes)
    if models:
        ax.legend(fontsize=8, loc="lower right", title="model", title_fontsize=8)
    fig.tight_layout()
    return fig


def forest_figure(report: Mapping[str, Any]) -> Any:
    """Per-task paired effects of each axis contrast (95% CI) and the random-effects pool."""
    from scipy.stats import norm

    rows = list(report.get("meta_analysis") or [])
    z = float(norm.ppf(0.975))
    metrics = sorted({str(r["metric"]) for r in rows})  # pooled only within one metric
    labels: list[str] = []
    n_lines = sum(len(r["tasks"]) + 2 for r in rows)
    fig, ax = plt.subplots(figsize=(8.5, 1.6 + 0.26 * max(2, n_lines)), layout="constrained")
    y = 0
    heads = []
    for r in rows:
        a, b = r["a"].partition("=")[2], r["b"].partition("=")[2]
        unit = f", {r['metric'].replace('_', ' ')}" if len(metrics) > 1 else ""
        labels.append(f"{r['axis']}: {a} − {b}  [{r['model']}{unit}]")
        heads.append(y)
        y += 1
        for task, eff, var in zip(r["tasks"], r["effects"], r["variances"], strict=True):
            half = z * var**0.5
            ax.errorbar(eff, y, xerr=half, fmt="s", color="#4C72B0", ms=4, lw=1, capsize=2)
            labels.append(f"{task}")
            y += 1
        if r.get("pooled") is not None:
            lo, hi = r["ci"]
            ax.fill([lo, r["pooled"], hi, r["pooled"]], [y, y - 0.3, y, y + 0.3], color="#C44E52")
            labels.append(f"pooled (τ²={r['tau2']:.2g}, I²={r['i2']:.0%})")
        else:
            ax.text(0, y, f"not pooled: {r.get('note')}", fontsize=7, va="center")
            labels.append("pooled")
        y += 1
    ax.axvline(0, color="grey", lw=0.8, ls=":")
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    for h in heads:
        ax.get_yticklabels()[h].set_fontweight("bold")
        ax.axhline(h - 0.5, color="lightgrey", lw=0.6)
    ax.invert_yaxis()
    metric = metrics[0].replace("_", " ") if len(metrics) == 1 else "each contrast's metric"
    ax.set_xlabel(
        f"difference in {metric}, first level − second\n"
        "(tasks: 95% CI; pooled: Hartung-Knapp-Sidik-Jonkman 95% CI)"
    )
    ax.set_ylabel("axis contrast / task")
    ax.set_title(
        "Effect of each prompt axis per task (squares) and pooled\n"
        "by random effects (diamonds: 95% CI); demonstration draws are not pooled",
        fontsize=9,
    )
    if not rows:
        ax.text(0.5, 0.5, "no axis contrast (demonstration draws are not pooled)",
                ha="center", transform=ax.transAxes, fontsize=8)  # fmt: skip
    return fig


def sensitivity_heatmap(report: Mapping[str, Any]) -> Any:
    """Task x variant scores, one panel per model; a missing (excluded) trial is blank."""
    import numpy as np

    per_task = list(report.get("per_task") or [])
    models = list(dict.fromkeys(r["model"] for r in per_task)) or ["(none)"]
    tasks = list(dict.fromkeys(r["task"] for r in per_task))
    variants: list[str] = []
    for r in per_task:
        variants += [v for v in r["scores"] if v not in variants]
    width = max(6.0, 1.6 + 0.55 * len(variants))
    fig, axes = plt.subplots(
        len(models), 1, figsize=(width, 1.0 + (0.45 * max(1, len(tasks)) + 2.2) * len(models)),
        squeeze=False, layout="constrained",
    )  # fmt: skip
    image = None
    for ax, model in zip(axes[:, 0], models, strict=True):
        grid = np.full((len(tasks), len(variants)), np.nan)
        for r in per_task:
            if r["model"] == model:
                for v, s in r["scores"].items():
                    grid[tasks.index(r["task"]), variants.index(v)] = s
        ax.set_xlabel(f"variant ({_variant_axes(variants)})")
        ax.set_ylabel("task")
        ax.set_title(f"Score of each prompt variant — {model}", fontsize=10)
        if not tasks:
            ax.text(0.5, 0.5, "no task with 2 or more complete variants", ha="center",
                    transform=ax.transAxes)  # fmt: skip
            continue
        image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=1, aspect="auto")
        for i in range(len(tasks)):
            for j in range(len(variants)):
                val = grid[i, j]
                color = "white" if val < 0.6 else "black"
                text = "n/a" if np.isnan(val) else f"{val:.2f}"
                ax.text(j, i, text, ha="center", va="center", fontsize=7, color=color)
        ax.set_xticks(range(len(variants)), [_short_variant(v) for v in variants],
                      rotation=45, ha="right", fontsize=7)  # fmt: skip
        ax.set_yticks(range(len(tasks)), tasks, fontsize=8)
    if image is not None:
        metric = {r["metric"] for r in per_task}
        label = metric.pop().replace("_", " ") if len(metric) == 1 else "official metric"
        fig.colorbar(image, ax=list(axes[:, 0]), label=label, shrink=0.9)
    return fig


def sensitivity_figures(report: Mapping[str, Any]) -> dict[str, Any]:
    """The three sensitivity figures, by the file name they are logged under."""
    return {
        "variance_shares.png": variance_share_figure(report),
        "forest.png": forest_figure(report),
        "sensitivity_heatmap.png": sensitivity_heatmap(report),
    }
