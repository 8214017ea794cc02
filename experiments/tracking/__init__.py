"""MLflow tracking: the config, the store, the Tracker, the UI, grades imported into a run.

The only package that imports mlflow. Modules: `store` (mlflow.yaml, the client, locks, store
errors), `base` + one mixin per job composing `tracker.Tracker`
(`parents`, `trial_runs`, `single_runs`, `reports`, `registry`), `grades` (a graded CSV into a
trial), `imported` (`workbench import`'s runs), `ui` (`workbench ui`).

The names are imported on first use (`promptlib.lazy`): a cached `workbench run` reads only
`store` (its config and errors), not the report files and their analysis (0.18 s).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from promptlib.lazy import lazy_exports

if TYPE_CHECKING:
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

_HOMES = {
    "SweepIncomplete": "experiments.tracking.store",
    "Tracker": "experiments.tracking.tracker",
    "TrackingConfig": "experiments.tracking.store",
    "TrackingError": "experiments.tracking.store",
    "artifact_dir": "experiments.tracking.store",
    "comparisons_csv": "experiments.reports.files",
    "import_grades": "experiments.tracking.grades",
    "load_config": "experiments.tracking.store",
    "log_sensitivity": "experiments.tracking.reports",
    "open_client": "experiments.tracking.store",
    "reusable_run": "experiments.tracking.single_runs",
    "serve_ui": "experiments.tracking.ui",
    "store_errors": "experiments.tracking.store",
    "tracked_before": "experiments.tracking.single_runs",
}
"""Where each public name lives: imported from there on first use (`promptlib.lazy`)."""

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

__getattr__, __dir__ = lazy_exports(globals(), _HOMES)
