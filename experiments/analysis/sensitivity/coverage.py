"""Measured coverage of the sensitivity intervals: `CI_COVERAGE` (pasted from
benchmarks/sensitivity_coverage.py) and the look-ups that flag an interval ``ci_unreliable``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from experiments.analysis import stats
from experiments.analysis.sensitivity.groups import (
    AXIS_X_AXIS,
    DRAW_AXES,
    RESIDUAL,
    ROW,
    TASK,
    UNATTRIBUTED,
    Group,
    _strata,
)

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
    if group.stat_metric not in stats.STRATIFIED_METRICS or not len(group.indices):
        return 0.5
    counts = np.bincount(_strata(group))
    return float(counts.min() / counts.sum()) if len(counts) > 1 else 0.5


def measured_coverage(measure: str, group: Group) -> float | None:
    """Measured coverage of `measure`'s interval for a design like `group`'s (None: outside
    the measured grid)."""
    cell = _coverage_cell(group.n_clusters, _minority(group))
    if measure == "avgp" and group.stat_metric not in MEASURED_METRICS:
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
        # measured for demonstration draws; another axis kept within task (its levels differ
        # between the tasks) was never measured
        return "draws (within task)" if factor.removesuffix(" (within task)") in DRAW_AXES else None
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
