"""What `run_sweep` returns: a typed, frozen `SweepResult`, and its one JSON form (`to_dict`).

The record is what a caller reads (fields, not keys); `to_dict` is the document the CLI prints
with ``--json``, key for key and in the same order as before the record existed, so no output
byte changed when it was introduced (tests/test_pinned_outputs.py pins them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from experiments.sweeps.sequential_result import SequentialComparison
from experiments.trials.record import SweepStatus


@dataclass(frozen=True)
class ReportFiles:
    """The report folder a sweep wrote (`sweeps.report_dirs`): this sweep id's folder, the
    files in it (names, not paths), and the ``latest`` pointer (symlink, or LATEST file)."""

    report_dir: str
    report_files: tuple[str, ...]
    latest: str


@dataclass(frozen=True)
class SweepResult:
    """A sweep as run (or resumed): its ids, its trials, its comparisons and its report.

    The comparison, across-task, incomplete and sensitivity entries are the rows of the
    sweep's comparisons document (`comparisons.json`), as written and logged. `sequential`
    is None for a fixed design; `report` None when no reports folder was given;
    `trial_rows` (each trial's invalid-output rates, from its child run) is what the CLI
    adds before printing, None until then.
    """

    sweep: str
    sweep_id: str
    parent_run_id: str
    status: SweepStatus
    trials: int  # planned trials (for a sequential sweep: the arms it logged)
    resumed: int  # trials read back from MLflow, not run
    skipped: Sequence[dict[str, Any]]
    notes: Sequence[dict[str, str]]
    incomplete: Sequence[dict[str, Any]]
    comparisons: Sequence[Any]
    across_tasks: Sequence[Any]
    sensitivity: dict[str, Any]
    sequential: Sequence[SequentialComparison] | None  # a sequential design's comparisons
    figures: Sequence[str]  # the figures' paths in the report folder
    report: ReportFiles | None
    rebuilt: Sequence[str]  # trials whose FINISHED run lost its predictions, run again
    experiment: str
    unreviewed: Sequence[Any]  # generated texts in the sweep not marked reviewed
    cost: dict[str, Any]
    trial_rows: Sequence[dict[str, Any]] | None = None
    # the spec's `judge:` step (`experiments.sweeps.judging.SweepJudging`); None without one
    judge: Any = None
    # why the HTML report (index.html) could not be built; None when it was
    html_error: str | None = None
    # why the built page is not on the parent run (its upload failed); None when it is
    html_unlogged: str | None = None

    @property
    def ok(self) -> bool:
        """Every trial complete (the CLI exits 1 otherwise)."""
        return not self.incomplete

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (`workbench sweep --json`): today's keys, in today's order;
        ``sequential`` only for a sequential sweep, the folder's keys only when written."""
        out: dict[str, Any] = {
            "sweep": self.sweep,
            "sweep_id": self.sweep_id,
            "parent_run_id": self.parent_run_id,
            "status": str(self.status),
            "trials": self.trials,
            "resumed": self.resumed,
            "skipped": _rows(self.skipped),
            "notes": _rows(self.notes),
            "incomplete": _rows(self.incomplete),
            "comparisons": _rows(self.comparisons),
            "across_tasks": _rows(self.across_tasks),
            "sensitivity": self.sensitivity,
        }
        if self.sequential is not None:
            out["sequential"] = _rows(self.sequential)
        out["figures"] = list(self.figures)
        if self.report is not None:
            out["report_dir"] = self.report.report_dir
            out["report_files"] = list(self.report.report_files)
            out["latest"] = self.report.latest
        out["rebuilt"] = list(self.rebuilt)
        out["experiment"] = self.experiment
        out["unreviewed"] = list(self.unreviewed)
        out["cost"] = self.cost
        if self.trial_rows is not None:
            out["trial_rows"] = list(self.trial_rows)
        if self.judge is not None:  # only a spec with `judge:`: other documents unchanged
            out["judge"] = self.judge.to_dict()
        if self.html_error is not None:  # only when the page failed: the files are written
            out["html_error"] = self.html_error
        if self.html_unlogged is not None:  # only when the upload failed
            out["html_unlogged"] = self.html_unlogged
        return out


def _rows(rows: Sequence[Any]) -> list[Any]:
    """A document's rows: a record's own `to_dict` (a comparison, a sequential comparison),
    a dict as it is."""
    return [r.to_dict() if hasattr(r, "to_dict") else r for r in rows]
