"""The calibrated figure of one (task, model): ``calibrated_<task>_<model>.png``.

One panel per criterion, one row per variant, three intervals a row:

- the calibrated estimate (hand grades + judge scores by PPI++) with its 95% interval, in
  black: the number to read;
- the hand grades alone (the same estimator with lambda = 0), in blue: what the hand grades
  say without the judge (its width against the black one's is what the judge bought);
- the judge's score alone, hollow orange, labelled "judge score, uncalibrated": what the judge
  says, which a biased judge moves; never correctness or analysis.

A variant with too few hand grades has no black interval: the row says how many to grade.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import settings
from experiments.analysis.stats.ppi import ppi_mean
from experiments.calibrated.compare import _clusters
from experiments.calibrated.frames import Arm
from experiments.calibrated.load import load_frames
from experiments.calibrated.records import CalibratedCell, CalibratedReport
from experiments.grading.store import load_grades, load_sheet_keys
from experiments.names import safe_model

JUDGE_MARK = "judge score, uncalibrated"


@dataclass(frozen=True)
class HandOnly:
    """A variant's mean of its hand grades alone on one criterion, with its interval (None
    when there are too few grades for one)."""

    estimate: float | None
    low: float | None
    high: float | None
    n_hand: int


def figure_name(task: str, model: str) -> str:
    return f"calibrated_{safe_model(task)}_{safe_model(model)}.png"


def hand_only(
    report: CalibratedReport,
    *,
    runs_root: Path | None = None,
    grades_root: Path | None = None,
    level: float = 0.95,
) -> dict[tuple[str, str], HandOnly]:
    """(trial id, criterion) -> the hand-only mean (`ppi_mean` with lambda = 0, clustered by
    prompt as the calibrated one), on the rows the calibrated estimate uses."""
    runs_root = runs_root or settings.runs_dir()
    grades = load_grades(grades_root)
    keys = load_sheet_keys(grades_root)
    out: dict[tuple[str, str], HandOnly] = {}
    for cell in report.cells:
        arms = list(
            {m.trial_id: Arm(m.trial_id, m.task, m.model, m.variant) for m in cell.means}.values()
        )
        criteria = list(dict.fromkeys(m.criterion for m in cell.means))
        # the cell's trials read together, as the calibrated estimate reads them
        frames = load_frames(arms, criteria, cell.judge_id, runs_root, grades, keys)
        for m in cell.means:
            frame = frames[(m.variant, m.criterion)]
            if frame.n_hand < 2:
                out[(m.trial_id, m.criterion)] = HandOnly(None, None, None, frame.n_hand)
                continue
            est = ppi_mean(
                frame.judge, frame.hand, clusters=_clusters([frame]), level=level, lam=0.0
            )
            ok = est.valid and math.isfinite(est.low) and math.isfinite(est.high)
            out[(m.trial_id, m.criterion)] = HandOnly(
                float(est.estimate),
                float(est.low) if ok else None,
                float(est.high) if ok else None,
                frame.n_hand,
            )
    return out


def cell_figure(cell: CalibratedCell, hands: Mapping[tuple[str, str], HandOnly]) -> Any:
    """The figure of one (task, model) (see the module's docstring)."""
    # start-up time: matplotlib, only when figures are drawn
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = list(dict.fromkeys(m.variant for m in cell.means))
    criteria = list(cell.criteria)
    fig, axes = plt.subplots(
        1, len(criteria), figsize=(4.6 * len(criteria) + 1.6, 1.1 + 1.05 * len(variants)),
        sharey=True, squeeze=False,
    )  # fmt: skip
    level = cell.means[0].level if cell.means else 0.95
    for ax, criterion in zip(axes[0], criteria, strict=True):
        for k, variant in enumerate(variants):
            y = len(variants) - 1 - k
            m = next(
                (x for x in cell.means if x.variant == variant and x.criterion == criterion), None
            )
            if m is None:
                continue
            h = hands.get((m.trial_id, criterion))
            _interval(ax, y + 0.22, m.estimate, m.low, m.high, "black", "o", True)
            if m.estimate is None:
                need = f"grade {m.hand_needed} more" if m.hand_needed else "grade more rows"
                ax.text(0.5, y + 0.22, f"no calibrated interval: {need}", ha="center",
                        va="center", fontsize=7.5, color="black")  # fmt: skip
            if h is not None:
                _interval(ax, y, h.estimate, h.low, h.high, "tab:blue", "s", True)
            _interval(ax, y - 0.22, m.judge_mean, m.judge_low, m.judge_high, "tab:orange",
                      "D", False)  # fmt: skip
            ax.text(1.02, y, f"hand {m.n_hand}/{m.n_rows}", va="center", fontsize=7,
                    color="dimgray", transform=ax.get_yaxis_transform())  # fmt: skip
        # a PPI or normal interval may pass 0 or 1: shown whole, never cut at the frame
        ends = [
            x
            for m in cell.means
            if m.criterion == criterion
            for x in (m.low, m.high, m.judge_low, m.judge_high)
            if x is not None and math.isfinite(x)
        ] + [
            x
            for (tid, c), h in hands.items()
            if c == criterion and any(m.trial_id == tid for m in cell.means)
            for x in (h.low, h.high)
            if x is not None
        ]
        ax.set_xlim(min([-0.02, *ends]) - 0.01, max([1.02, *ends]) + 0.01)
        for bound in (0.0, 1.0):  # a share lies in [0, 1]; an interval may pass a bound
            ax.axvline(bound, color="gray", linewidth=0.8, linestyle=":")
        ax.set_ylim(-0.6, len(variants) - 0.4)
        ax.set_yticks(range(len(variants)))
        ax.set_yticklabels(list(reversed(variants)))
        ax.set_xlabel(f"share of rows passing {criterion}")
        ax.set_title(criterion)
        ax.grid(axis="x", alpha=0.3)
    # start-up time: matplotlib, only when figures are drawn
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], color="black", marker="o", label=f"calibrated (PPI++), {level:.0%} CI"),
        Line2D([], [], color="tab:blue", marker="s", label=f"hand grades only, {level:.0%} CI"),
        Line2D(
            [],
            [],
            color="tab:orange",
            marker="D",
            markerfacecolor="white",
            label=f"{JUDGE_MARK}, {level:.0%} CI",
        ),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"{cell.task} ({cell.model}): judge {cell.judge_id[:12]}", fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 0.94, 1))
    return fig


def _interval(
    ax: Any, y: float, est: float | None, low: float | None, high: float | None, color: str,
    marker: str, filled: bool,
) -> None:  # fmt: skip
    if est is None:
        return
    if low is not None and high is not None:
        ax.plot([low, high], [y, y], color=color, linewidth=2)
    face = color if filled else "white"
    ax.plot([est], [y], marker=marker, color=color, markerfacecolor=face, markersize=6)


def write_figures(
    report: CalibratedReport,
    folder: Path,
    *,
    runs_root: Path | None = None,
    grades_root: Path | None = None,
) -> list[Path]:
    """Each cell's figure into `folder` (the sweep's report folder); the paths written."""
    # start-up time: matplotlib, only when figures are drawn
    import matplotlib.pyplot as plt

    hands = hand_only(report, runs_root=runs_root, grades_root=grades_root)
    written = []
    folder.mkdir(parents=True, exist_ok=True)
    for cell in report.cells:
        fig = cell_figure(cell, hands)
        try:
            path = folder / figure_name(cell.task, cell.model)
            fig.savefig(path, dpi=110)
            written.append(path)
        finally:
            plt.close(fig)
    return written


def figure_names(cells: Sequence[CalibratedCell]) -> list[str]:
    return [figure_name(c.task, c.model) for c in cells]
