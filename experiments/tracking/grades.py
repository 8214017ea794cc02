"""Import a graded CSV into a trial: its MLflow run first, then its folder (`workbench grade
import`).

Here, above both `trials.grading` (the checks and the folder) and `tracking` (the store), so
neither imports the other back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from experiments.files import atomic_write_dir, check_writable, dir_lock
from experiments.secrets import safe_url
from experiments.tracking.store import TrackingError, _first_line
from experiments.tracking.tracker import Tracker
from experiments.trials.grading import (
    GradingError,
    grade_metrics,
    grades_doc,
    read_graded_csv,
    trial_folder,
)
from experiments.trials.store import runs_dir
from promptlib.errors import WorkbenchError

__all__ = ["import_grades"]


def import_grades(path: Path, *, root: Path | None = None, track: bool = True) -> dict[str, Any]:
    """Validate a graded CSV against its trial, then write grades and score atomically.

    Every problem names the CSV line and column and nothing is written: the trial must be
    known and hand-graded, every evaluated row must appear exactly once and no other, and
    every grade must be 1/0 or correct/incorrect (any case). Returns the updated summary.

    The trial's MLflow run gets the grades first and the folder second, all under the
    folder's lock (a rerun saving the same trial waits): a store that refuses the write
    leaves the folder as it was, so disk and MLflow still agree, and importing again
    finishes both. Only a folder that cannot be written after the store took the grades
    leaves MLflow ahead; the error says so and importing again (or the next 'workbench run'
    of the trial, which drops grades its folder lacks) makes them agree.
    """
    rows = read_graded_csv(path)
    if not rows:
        raise GradingError(f"{path}: no rows to import (only a header)")
    ids = {r["trial_id"].strip() for _, r in rows}
    if len(ids) != 1:
        raise GradingError(
            f"{path}: column trial_id holds {len(ids)} different trial ids; one file grades "
            "one trial"
        )
    trial_id = ids.pop()
    root = root or runs_dir()
    trial_dir = trial_folder(root, trial_id.lower(), f"{path}: line {rows[0][0]}, column trial_id")
    trial_id = trial_dir.name
    if not (trial_dir / "summary.json").is_file():
        raise GradingError(
            f"{path}: line {rows[0][0]}, column trial_id: unknown trial {trial_id!r} "
            f"(no {trial_dir}/); "
            "grade a file exported from this machine's runs/ folder"
        )
    grades_doc(path, rows, trial_dir)  # every check before anything is opened or written
    tracker = None
    if track:
        try:
            tracker = Tracker()
        except TrackingError as e:
            raise TrackingError(
                f"{e}. No grades were written ({trial_dir} is unchanged): import again once "
                "the store works, or add --no-track to grade on disk only"
            ) from None
    try:
        check_writable([("the trial's grades", root)])
    except WorkbenchError as e:
        raise GradingError(f"{e}; no grades were written") from None
    with dir_lock(trial_dir):
        # checked again as the folder is now, with no writer in between until it is written
        summary, doc, files = grades_doc(path, rows, trial_dir)
        run_id = _log_grades(tracker, summary, doc, trial_dir) if tracker is not None else None
        try:
            atomic_write_dir(trial_dir, files)
        except OSError as e:
            ahead = (
                f"; MLflow run {run_id} has the grades, the folder not: import again once it "
                "is writable (the next 'workbench run' of the trial would drop them from MLflow)"
                if run_id is not None
                else ""
            )
            raise GradingError(
                f"{trial_dir}: cannot write the grades ({e.strerror or e}); the folder is "
                f"unchanged{ahead or ': import again once it is writable'}"
            ) from None
    new_summary: dict[str, Any] = json.loads(files["summary.json"])
    if run_id is not None:
        new_summary["mlflow_run_id"] = run_id
    return new_summary


def _log_grades(
    tracker: Any, summary: dict[str, Any], doc: dict[str, Any], trial_dir: Path
) -> str | None:
    """Put the grades on the trial's MLflow run; a store failure is one line naming it."""
    try:
        run_id: str | None = tracker.log_grades(
            summary["task"], doc["trial_id"], grade_metrics(doc), doc
        )
    except WorkbenchError:
        raise
    except Exception as e:  # the store refused the write (read-only, locked, gone)
        reason = _first_line(e)
        raise TrackingError(
            f"cannot write the grades to the MLflow store "
            f"{safe_url(tracker.config.tracking_uri)} ({reason}); {trial_dir} is unchanged and "
            "the run is not marked graded: import again once the store is writable, or add "
            "--no-track to grade on disk only"
        ) from None
    return run_id
