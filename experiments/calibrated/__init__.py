"""Calibrated comparisons of open-ended answers: hand grades on a random subset combined with
a judge's scores on every row by prediction-powered inference (issue 33).

Modules: `frames` (one arm's row-aligned judge scores, hand grades and cluster keys),
`hand` (current hand grades, whether the graded rows are a random subset), `load` (a frame
read from runs/ and grades/), `stats` (the PPI and kappa estimators, in the shape read
here), `compare` (a (task, model)'s means and Holm-corrected paired differences, decision
lines), `records` (the typed results), `report` (a sweep's or a set of trials' report),
`next` (`workbench grade next`: which rows to grade next, and when to stop).
"""

from experiments.calibrated.frames import Arm, ArmFrame, CalibratedError
from experiments.calibrated.records import (
    JUDGE_LABEL,
    Agreement,
    CalibratedCell,
    CalibratedComparison,
    CalibratedMean,
    CalibratedReport,
)
from experiments.calibrated.report import calibrated_report, sweep_arms

__all__ = [
    "JUDGE_LABEL",
    "Agreement",
    "Arm",
    "ArmFrame",
    "CalibratedCell",
    "CalibratedComparison",
    "CalibratedError",
    "CalibratedMean",
    "CalibratedReport",
    "calibrated_report",
    "sweep_arms",
]
