"""One trial: its spec, the run over a task's rows, its record, the saved folder, hand grades."""

from experiments.trials.grading import GradingError, export_csv
from experiments.trials.predictions import read_predictions
from experiments.trials.record import Prediction, SweepStatus, TrialRecord, TrialStatus
from experiments.trials.run import TrialResult, run_trial
from experiments.trials.spec import ResolvedTrial, TrialSpec, resolve_trial
from experiments.trials.store import SavedTrial, save_result, save_trial

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
