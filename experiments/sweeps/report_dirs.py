"""reports/<sweep>/<sweep id>/ and `latest`: moved to `experiments.reports.folders` (the home
of a report's files); these names stay importable from here."""

from experiments.reports.folders import (
    LATEST,
    LATEST_FILE,
    ReportFolder,
    latest_id,
    point_latest,
    run_folder,
    run_ids,
    write_run,
)

__all__ = [
    "LATEST",
    "LATEST_FILE",
    "ReportFolder",
    "latest_id",
    "point_latest",
    "run_folder",
    "run_ids",
    "write_run",
]
