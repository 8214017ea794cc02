"""MLflow tracking: the config, the store, the Tracker, the UI, grades imported into a run."""

from experiments.tracking.grades import import_grades
from experiments.tracking.tracking import (
    SweepIncomplete,
    Tracker,
    TrackingConfig,
    TrackingError,
    artifact_dir,
    load_config,
    open_client,
    serve_ui,
)

__all__ = [
    "SweepIncomplete",
    "Tracker",
    "TrackingConfig",
    "TrackingError",
    "artifact_dir",
    "import_grades",
    "load_config",
    "open_client",
    "serve_ui",
]
