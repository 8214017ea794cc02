"""The calibrated report of a sweep whose tasks were judged by different judge runs.

A judge's id covers its rubric, and a rubric is per task: a sweep of two tasks judged by one
judge model has two judge ids. `calibrated_report` reads one judge run for all its trials;
here each (task, model) is read with its own (the one its trials have, or `judge`), and the
cells are put together in one report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.calibrated.frames import Arm
from experiments.calibrated.records import CalibratedReport
from experiments.calibrated.report import _pairs, calibrated_report


def report_by_cell(
    name: str,
    arms: Sequence[Arm],
    pairs: Mapping[tuple[str, str], Sequence[tuple[str, str]]],
    *,
    judge: str | None = None,
    task: str | None = None,
    model: str | None = None,
    pairs_note: str | None = None,
    runs_root: Path | None = None,
    grades_root: Path | None = None,
) -> CalibratedReport:
    """`calibrated_report`, one (task, model) at a time, so each reads its own judge run."""
    return calibrated_report(
        name, arms, pairs, judge=judge, task=task, model=model, pairs_note=pairs_note,
        runs_root=runs_root, grades_root=grades_root, judge_per_cell=True,
    )  # fmt: skip


def sweep_pairs(
    comparisons: Sequence[Mapping[str, Any]], arms: Sequence[Arm]
) -> tuple[dict[tuple[str, str], tuple[tuple[str, str], ...]], str | None]:
    """Per (task, model) the pairs a sweep's comparisons document tested (best vs worst:
    every pair, with the note saying so), as `sweep_arms` reads them."""
    return _pairs(comparisons, arms)
