"""Sweeps: the YAML spec, the plan of trials, the driver, the executors (local threads, Ray)."""

from experiments.sweeps.driver import run_sweep
from experiments.sweeps.executors import (
    Executor,
    ExecutorError,
    LocalExecutor,
    RayExecutor,
    TrialJob,
    get_executor,
)
from experiments.sweeps.plan import plan_tasks, sweep_id, trial_plan
from experiments.sweeps.report import ReportError
from experiments.sweeps.result import ReportFiles, SweepResult
from experiments.sweeps.spec import SpecError, SweepSpec, load_spec

__all__ = [
    "Executor",
    "ExecutorError",
    "LocalExecutor",
    "RayExecutor",
    "ReportError",
    "ReportFiles",
    "SpecError",
    "SweepResult",
    "SweepSpec",
    "TrialJob",
    "get_executor",
    "load_spec",
    "plan_tasks",
    "run_sweep",
    "sweep_id",
    "trial_plan",
]
