"""Prompt optimisation: Optuna studies over variants and DSPy programs, with a held-out split.

The `optimize()` entry point is `experiments.optimize.optimize`, not re-exported here:
the name would hide the submodule of the same name."""

from experiments.optimize.config import OptimizeConfig
from experiments.optimize.errors import IncompleteEvaluation, StudyInterrupted, TrialIncomplete
from experiments.optimize.report import OptimizeReport

__all__ = [
    "IncompleteEvaluation",
    "OptimizeConfig",
    "OptimizeReport",
    "StudyInterrupted",
    "TrialIncomplete",
]
