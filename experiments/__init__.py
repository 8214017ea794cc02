"""Experiment engine: Trial -> Predictions -> Scores (statistics and tracking grow here).

The names below are imported when first used (PEP 562 `__getattr__`), not when the package
is: every `experiments.*` module runs this file first, and `workbench --help` must not pay
for the model gateway, the trial runner and numpy (issue 35: start-up costs what the command
needs). `from experiments import X` works as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from promptlib.lazy import lazy_exports

if TYPE_CHECKING:
    from experiments.llm.cache import ResponseCache
    from experiments.llm.gateway import LiteLLMModel, get_model
    from experiments.llm.types import LM, Completion, Decoding
    from experiments.metrics import ManualEvaluationRequired, class_report, normalize, score
    from experiments.trials.record import Prediction
    from experiments.trials.run import TrialResult, run_trial
    from experiments.trials.spec import TrialSpec
    from experiments.trials.store import save_trial

_HOMES = {
    "LM": "experiments.llm.types",
    "Completion": "experiments.llm.types",
    "Decoding": "experiments.llm.types",
    "LiteLLMModel": "experiments.llm.gateway",
    "ManualEvaluationRequired": "experiments.metrics",
    "Prediction": "experiments.trials.record",
    "ResponseCache": "experiments.llm.cache",
    "TrialResult": "experiments.trials.run",
    "TrialSpec": "experiments.trials.spec",
    "class_report": "experiments.metrics",
    "get_model": "experiments.llm.gateway",
    "normalize": "experiments.metrics",
    "run_trial": "experiments.trials.run",
    "save_trial": "experiments.trials.store",
    "score": "experiments.metrics",
}
"""Where each public name lives: imported from there on first use."""

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


__getattr__, __dir__ = lazy_exports(globals(), _HOMES)
