"""What `optimize` returns: the report of a study, and its JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass
class OptimizeReport:
    task: str
    model: str
    method: str
    study: str
    n_trials: int
    n_pruned: int
    n_failed: int
    best_variant: str
    best_variant_id: str
    best_variant_json: str  # the winner bound to the task: rerun with run --variant-file
    best_params: dict[str, Any]
    dev_score: float | None
    heldout: dict[str, Any]
    base_heldout: dict[str, Any]
    p_value: float | None  # None under the sequential verdict (`sequential` says it)
    test: str
    heldout_indices: list[str]
    n_dev: int
    search_notes: list[str]
    prompt_registry: str | None = None
    pruner: str | None = None  # optuna only
    search_model_calls: int = 0  # model calls of this invocation's search (cache hits apart)
    n_reused: int = 0  # proposals answered from a trial that had evaluated the same prompt
    n_invalid: int = 0  # proposals of levels no LegalBench prompt combines (not evaluated)
    sequential: dict[str, Any] | None = None  # the sequential held-out verdict, when asked
    # model calls made against the full grid's: every trial on every dev row, both prompts
    # on every judged held-out row (`experiments.optimize.optimize._cost`)
    cost: dict[str, Any] | None = None
    # use the best variant or keep the base prompt (`experiments.analysis.decision.for_heldout`):
    # action, choice and the line printed last
    recommendation: dict[str, Any] | None = None
    # the winner's variant file and the command that reruns it (`experiments.optimize.winner`;
    # None when the caller saved none)
    best_variant_file: str | None = None
    rerun_command: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def dumps(report: OptimizeReport) -> str:
    return json.dumps(report.to_dict(), default=str)
