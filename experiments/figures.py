"""Figures in the style of the LegalBench paper's prompt-study figures.

- `pair_figure` (Figures 1 and 2): per task, the two variants' scores side by side, with the
  permutation-test p-value above each pair.
- `draws_figure` (Figure 3): per task, the score of each demonstration draw, the best and the
  worst marked, and the p-value of best vs worst.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def _p_label(p: float | None) -> str:
    if p is None:
        return "incomplete"
    return f"p={p:.3f}" if p >= 0.001 else "p<0.001"


def pair_figure(
    name: str, model: str, outcomes: Sequence[Any], table: Sequence[dict[str, Any]]
) -> Any:
    tasks = list(dict.fromkeys(o.task for o in outcomes))
    variants = list(dict.fromkeys(o.variant for o in outcomes))
    score = {(o.task, o.variant): o.score for o in outcomes}
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(tasks) + 2), 3.8))
    width = 0.8 / max(1, len(variants))
    colors = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3"]
    for j, v in enumerate(variants):
        xs = [i + (j - (len(variants) - 1) / 2) * width for i in range(len(tasks))]
        ys = [score.get((t, v)) or 0.0 for t in tasks]
        ax.bar(xs, ys, width=width, label=v, color=colors[j % len(colors)])
    for i, t in enumerate(tasks):
        rows = [r for r in table if r["task"] == t]
        if rows:
            top = max((score.get((t, v)) or 0.0) for v in variants)
            ax.text(i, min(top + 0.03, 1.02), _p_label(rows[0]["p_value"]), ha="center", fontsize=7)
    ax.set_xticks(range(len(tasks)), tasks, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("balanced accuracy")
    ax.axhline(0.5, color="grey", lw=0.6, ls=":")
    ax.set_title(f"{name} — {model}", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def draws_figure(
    name: str, model: str, outcomes: Sequence[Any], table: Sequence[dict[str, Any]]
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
    ax.set_xticks(range(len(tasks)), tasks, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("balanced accuracy")
    ax.axhline(0.5, color="grey", lw=0.6, ls=":")
    ax.set_title(f"{name} — {model}\nscore of each demonstration draw", fontsize=9)
    if tasks:
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig
