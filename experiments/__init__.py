"""Experiment engine: Trial -> Predictions -> Scores (statistics and tracking grow here)."""

from experiments.llm.cache import ResponseCache
from experiments.llm.gateway import LiteLLMModel, get_model
from experiments.llm.types import LM, Completion, Decoding
from experiments.metrics import ManualEvaluationRequired, class_report, normalize, score
from experiments.trials.record import Prediction
from experiments.trials.run import TrialResult, run_trial
from experiments.trials.spec import TrialSpec
from experiments.trials.store import save_trial

__all__ = [
    "LM",
    "Completion",
    "Decoding",
    "LiteLLMModel",
    "ManualEvaluationRequired",
    "Prediction",
    "ResponseCache",
    "TrialResult",
    "TrialSpec",
    "class_report",
    "get_model",
    "normalize",
    "run_trial",
    "save_trial",
    "score",
]
