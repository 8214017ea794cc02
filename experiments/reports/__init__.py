"""A comparison report's files: their bytes (`files`: comparisons.json and .csv, the figures'
PNGs) and the reports/<sweep>/<sweep id>/ folders they are written to (`folders`, with the
`latest` pointer). A sweep writes its folder from here; `tracking` logs the same files to a
sweep's or an import's MLflow run."""

from experiments.reports.files import comparisons_csv, report_files
from experiments.reports.folders import ReportFolder, latest_id, run_folder, run_ids, write_run

__all__ = [
    "ReportFolder",
    "comparisons_csv",
    "latest_id",
    "report_files",
    "run_folder",
    "run_ids",
    "write_run",
]
