"""Sweeps: the YAML spec, the plan of trials, the driver, the executors (local threads, Ray)."""

from experiments.sweeps.executors import (
    Executor,
    ExecutorError,
    LocalExecutor,
    RayExecutor,
    TrialJob,
    get_executor,
)
from experiments.sweeps.sweeps import (
    ReportError,
    SpecError,
    SweepSpec,
    load_spec,
    plan_tasks,
    run_sweep,
    sweep_id,
    trial_plan,
)

__all__ = [
    "Executor",
    "ExecutorError",
    "LocalExecutor",
    "RayExecutor",
    "ReportError",
    "SpecError",
    "SweepSpec",
    "TrialJob",
    "get_executor",
    "load_spec",
    "plan_tasks",
    "run_sweep",
    "sweep_id",
    "trial_plan",
]
