"""Bring a tracked sweep's MLflow runs up to date with the hand grades (`workbench grade add`,
`workbench grade report`): the hand-graded means and counts on the trials' runs, and, once a
judge has scored the trials, the calibrated estimates and comparisons (`calibrated.tracked`)
and the figures in the sweep's report folder.

A sweep that was not tracked (no MLflow run of its trials) is said, never an error: the
grades are on disk either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from experiments import settings
from experiments.calibrated.by_cell import report_by_cell
from experiments.calibrated.figures import write_figures
from experiments.calibrated.frames import CalibratedError
from experiments.calibrated.records import CalibratedReport
from experiments.calibrated.report import sweep_arms
from experiments.calibrated.tracked import log_calibrated, log_hand_grades
from experiments.criteria import CRITERIA
from experiments.names import PARENT, TRIAL_ID
from experiments.reports.folders import run_folder
from promptlib.errors import WorkbenchError

if TYPE_CHECKING:
    from experiments.tracking import Tracker


@dataclass(frozen=True)
class Refreshed:
    """What was updated: per sweep parent run, the runs written and whether calibrated
    numbers went with the hand grades (else `note` says why not)."""

    sweep: str
    parent_id: str
    runs: int
    calibrated: bool
    figures: tuple[str, ...]
    note: str | None = None

    def line(self) -> str:
        what = "hand grades and calibrated estimates" if self.calibrated else "hand grades"
        head = f"MLflow: {what} of sweep {self.sweep} on its parent run {self.parent_id} "
        head += f"and {max(self.runs - 1 if self.calibrated else self.runs, 0)} trial run(s)"
        return head + (f" ({self.note})" if self.note else "")


def sweep_parents(tracker: Tracker, trial_ids: Sequence[str]) -> list[str]:
    """The sweep parent runs that hold a run of any of these trials (active runs only)."""
    # start-up time: mlflow's entities, only when a sweep is looked up
    from mlflow.entities import ViewType

    exps = [
        e.experiment_id for e in tracker.client.search_experiments(view_type=ViewType.ACTIVE_ONLY)
    ]
    parents: dict[str, None] = {}
    for tid in dict.fromkeys(trial_ids):
        if not exps:
            break
        runs = tracker.client.search_runs(
            experiment_ids=exps,
            filter_string=f"tags.`{TRIAL_ID}` = '{tid}'",
            run_view_type=ViewType.ACTIVE_ONLY,
        )
        for r in runs:
            parent = r.data.tags.get(PARENT)
            if parent:
                parents[parent] = None
    return list(parents)


def refresh_sweep(
    tracker: Tracker,
    ref: str,
    *,
    report: CalibratedReport | None = None,
    runs_root: Path | None = None,
    grades_root: Path | None = None,
    reports_root: Path | None = None,
) -> Refreshed:
    """Update the sweep `ref` names (a name, sweep id or parent run id) on MLflow; `report`:
    its calibrated report when the caller has it (else made here, if a judge scored it)."""
    info, _ = tracker.sweep_report(ref)
    found = sweep_arms(tracker, info["run_id"])
    parent = str(info["run_id"])
    note = None
    if report is None:
        try:
            report = report_by_cell(
                found.name, found.arms, found.pairs, pairs_note=found.note,
                runs_root=runs_root, grades_root=grades_root,
            )  # fmt: skip
        except CalibratedError as e:
            note = f"no calibrated numbers: {e}"
    if report is None:
        ids = [a.trial_id for a in found.arms]
        runs = log_hand_grades(
            tracker, parent, ids, CRITERIA, runs_root=runs_root, grades_root=grades_root
        )
        return Refreshed(found.name, parent, len(runs), False, (), note)
    runs = log_calibrated(tracker, parent, report, runs_root=runs_root, grades_root=grades_root)
    folder = run_folder(reports_root or settings.reports_dir(), found.name, info["sweep_id"])
    figures: list[str] = []
    if folder.is_dir():  # the sweep's own report folder, when this machine wrote it
        figures = [
            str(p)
            for p in write_figures(report, folder, runs_root=runs_root, grades_root=grades_root)
        ]
        for path in figures:
            tracker.client.log_artifact(parent, path)
    return Refreshed(found.name, parent, len(runs), True, tuple(figures), note)


def refresh_trials(
    tracker: Tracker,
    trial_ids: Sequence[str],
    *,
    runs_root: Path | None = None,
    grades_root: Path | None = None,
) -> tuple[list[Refreshed], str | None]:
    """Update every tracked sweep that ran any of these trials; a note when none did (or a
    sweep could not be read)."""
    parents = sweep_parents(tracker, trial_ids)
    if not parents:
        return [], "not tracked: no MLflow run of these trials (the grades are saved on disk)"
    out, notes = [], []
    for parent in parents:
        try:
            out.append(refresh_sweep(tracker, parent, runs_root=runs_root, grades_root=grades_root))
        except WorkbenchError as e:
            notes.append(f"run {parent}: {e}")
    return out, "; ".join(notes) or None
