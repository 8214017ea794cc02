"""One trial: its spec, the run over a task's rows, its record, the saved folder, hand grades.

The names are imported on first use: every `experiments.trials.*` module runs this file
first, and `workbench --help` (which reads `trials.labels`) must not pay for the runner and
the model gateway (issue 35).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from promptlib.lazy import lazy_exports

if TYPE_CHECKING:
    from experiments.trials.grading import GradingError, export_csv
    from experiments.trials.predictions import read_predictions
    from experiments.trials.record import Prediction, SweepStatus, TrialRecord, TrialStatus
    from experiments.trials.run import TrialResult, run_trial
    from experiments.trials.spec import ResolvedTrial, TrialSpec, resolve_trial
    from experiments.trials.store import SavedTrial, save_result, save_trial

_HOMES = {
    "GradingError": "experiments.trials.grading",
    "Prediction": "experiments.trials.record",
    "ResolvedTrial": "experiments.trials.spec",
    "SavedTrial": "experiments.trials.store",
    "SweepStatus": "experiments.trials.record",
    "TrialRecord": "experiments.trials.record",
    "TrialResult": "experiments.trials.run",
    "TrialSpec": "experiments.trials.spec",
    "TrialStatus": "experiments.trials.record",
    "export_csv": "experiments.trials.grading",
    "read_predictions": "experiments.trials.predictions",
    "resolve_trial": "experiments.trials.spec",
    "run_trial": "experiments.trials.run",
    "save_result": "experiments.trials.store",
    "save_trial": "experiments.trials.store",
}
"""Where each public name lives: imported from there on first use (`promptlib.lazy`)."""

__all__ = [
    "GradingError",
    "Prediction",
    "ResolvedTrial",
    "SavedTrial",
    "SweepStatus",
    "TrialRecord",
    "TrialResult",
    "TrialSpec",
    "TrialStatus",
    "export_csv",
    "read_predictions",
    "resolve_trial",
    "run_trial",
    "save_result",
    "save_trial",
]

__getattr__, __dir__ = lazy_exports(globals(), _HOMES)
