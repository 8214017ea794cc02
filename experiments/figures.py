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
