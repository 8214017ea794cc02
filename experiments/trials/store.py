"""Where trials are saved: runs/<trial id>/{predictions.jsonl,summary.json}, crash-safe.

A finished result is never lost to an unfinished rerun (`save_result`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import settings
from experiments.files import OutputError, atomic_write_dir, dir_lock
from experiments.trials.predictions import PREDICTIONS_FILE, encode_predictions
from experiments.trials.record import TrialStatus
from experiments.trials.run import TrialResult


def runs_dir() -> Path:
    return settings.runs_dir()


KEPT_FOLDERS = ("judge",)
"""Subfolders of a trial's folder that a rewrite of the folder carries over: the judge scores
(`experiments.judge`), each naming the generation it graded, so one made stale by a rerun is
detected, not lost."""


def kept_files(trial_dir: Path) -> dict[str, bytes]:
    """The files of `trial_dir`'s `KEPT_FOLDERS` ("judge/<name>" -> bytes), for a rewrite of
    the folder (`atomic_write_dir`) to carry over; links and deeper folders are not read."""
    out: dict[str, bytes] = {}
    for folder in KEPT_FOLDERS:
        where = trial_dir / folder
        if where.is_symlink() or not where.is_dir():
            continue
        for f in sorted(where.iterdir()):
            if f.is_file() and not f.is_symlink() and not f.name.startswith("."):
                out[f"{folder}/{f.name}"] = f.read_bytes()
    return out


def save_trial(result: TrialResult, root: Path | None = None) -> Path:
    """Write runs/<trial_id>/{predictions.jsonl,summary.json} together, crash-safe (the
    folder's judge scores carried over: `KEPT_FOLDERS`)."""
    out = (root or runs_dir()) / result.trial_id
    summary = {**result.summary(), "spec": result.spec.to_dict()}
    with dir_lock(out):
        atomic_write_dir(
            out,
            {
                PREDICTIONS_FILE: encode_predictions(result.predictions),
                "summary.json": json.dumps(summary, indent=1, ensure_ascii=False),
                **kept_files(out),
            },
        )
    return out


# An unfinished rerun of a trial saved complete goes to <runs>/incomplete-reruns/<trial id>/:
# outside the trial's folder, so no rewrite of that folder (a later rerun, a grade import)
# drops it, and no trial id prefix matches it.
INCOMPLETE_RERUNS = "incomplete-reruns"


@dataclass(frozen=True)
class SavedTrial:
    """Where `save_result` put a result."""

    folder: Path  # holds this result's predictions.jsonl and summary.json
    kept: Path | None = None  # the saved trial this unfinished rerun was not saved over
    kept_complete: bool = True  # that trial is complete (else: it answered more rows)

    def kept_note(
        self,
        result: TrialResult,
        trial: str = "complete trial",
        unchanged: str = "its predictions and score",
    ) -> str | None:
        """One line saying the saved trial was kept and where the attempt went."""
        if self.kept is None:
            return None
        if not self.kept_complete:
            trial = "saved trial, which answered more rows,"
        return (
            f"this rerun of trial {result.trial_id[:12]} is {result.status} and was not saved "
            f"over the {trial} in {self.kept} ({unchanged} are unchanged); the attempt is in "
            f"{self.folder}"
        )


def save_result(result: TrialResult, root: Path | None = None) -> SavedTrial:
    """`save_trial`, except that a finished result is never lost to an unfinished rerun.

    A result that is not complete, of a trial already saved complete (a --no-cache rerun
    whose calls failed) or saved with more answered rows (a rerun failing where the first
    run answered), is saved in `<root>/incomplete-reruns/<trial id>/` and the saved trial's
    folder stays as it was, as MLflow keeps its run.
    """

    root = root or runs_dir()
    trial_dir = root / result.trial_id
    target = root
    try:
        # the saved summary is read and replaced under the folder's lock: a peer saving the
        # same trial cannot slip a complete result in between (and be overwritten)
        with dir_lock(trial_dir):
            if not result.complete:
                saved = _saved_summary(trial_dir)
                complete = saved.get("status") == str(TrialStatus.COMPLETE)
                answered = len(result.predictions) - result.n_errors
                if complete or _answered(saved) > answered:
                    target = root / INCOMPLETE_RERUNS
                    attempt = save_trial(result, target)
                    return SavedTrial(attempt, kept=trial_dir, kept_complete=complete)
            return SavedTrial(save_trial(result, root))
    except OSError as e:  # junk in the way (a file named like a folder), a full disk
        where = Path(e.filename) if isinstance(e.filename, str) else target
        raise OutputError(
            f"{where}: cannot save trial {result.trial_id[:12]} under {target} "
            f"({e.strerror or e}); move whatever is in the way (it must be a folder) and rerun "
            "the same command: answered rows come from the cache"
        ) from None


def _saved_summary(trial_dir: Path) -> dict[str, Any]:
    """The saved trial's summary.json; {} if there is none (readable)."""
    try:
        summary = json.loads((trial_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # nothing (readable) saved there: nothing finished to keep
    return summary if isinstance(summary, dict) else {}


def _answered(summary: dict[str, Any]) -> int:
    """Rows the saved trial answered (no provider error); 0 if the summary cannot say."""
    n, errors = summary.get("n"), summary.get("n_errors")
    return n - errors if isinstance(n, int) and isinstance(errors, int) else 0
