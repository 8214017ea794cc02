"""MLflow tracking: the config, the store, the Tracker, the UI, grades imported into a run.

The only package that imports mlflow. Modules: `store` (mlflow.yaml, the client, locks, store
errors), `base` + one mixin per job composing `tracker.Tracker`
(`parents`, `trial_runs`, `single_runs`, `reports`, `registry`), `grades` (a graded CSV into a
trial), `imported` (`workbench import`'s runs), `ui` (`workbench ui`).
"""

from experiments.reports.files import comparisons_csv  # its home: where report files are made
from experiments.tracking.grades import import_grades
from experiments.tracking.reports import log_sensitivity
from experiments.tracking.single_runs import reusable_run, tracked_before
from experiments.tracking.store import (
    SweepIncomplete,
    TrackingConfig,
    TrackingError,
    artifact_dir,
    load_config,
    open_client,
    store_errors,
)
from experiments.tracking.tracker import Tracker
from experiments.tracking.ui import serve_ui

__all__ = [
    "SweepIncomplete",
    "Tracker",
    "TrackingConfig",
    "TrackingError",
    "artifact_dir",
    "comparisons_csv",
    "import_grades",
    "load_config",
    "log_sensitivity",
    "open_client",
    "reusable_run",
    "serve_ui",
    "store_errors",
    "tracked_before",
]
