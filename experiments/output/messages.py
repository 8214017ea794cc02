"""Command-line notes and errors (stderr lines) and the version line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def version_line(version: str | None) -> str:
    """`workbench --version` (None: the package is not installed)."""
    if version is None:
        return "workbench (version unknown: the package is not installed)"
    return f"workbench {version}"


def task_problem(name: str, error: str) -> str:
    """stderr line of `workbench tasks` for a task whose data cannot be read."""
    return f"error: task {name!r}: {error}"


def demonstrations_left_out(split: str, excluded: Sequence[str]) -> str:
    """stderr note of `workbench render`: rows held out because they are demonstrations."""
    return (
        f"note: {len(excluded)} {split} row(s) left out because they are "
        "demonstrations: " + ", ".join(excluded)
    )


def run_note(text: str) -> str:
    """stderr note of `workbench run` (grades dropped or kept, an earlier trial kept)."""
    return f"note: {text}"


def run_untracked_error(out_dir: str, error: str) -> str:
    """stderr line of `workbench run` when the trial is saved but the store refused it."""
    return (
        f"error: the trial is saved in {out_dir} but not tracked: {error}. Run the "
        "same command again to track it (answers come from the cache), or add --no-track"
    )


def run_incomplete_error(
    status: str, reason: str, predictions: str, rerun_helps: bool, kept: Sequence[str] = ()
) -> str:
    """stderr line of `workbench run` for a trial with failed rows; `kept`: what of an
    earlier, better result this rerun left as it was (`run_kept_notes`), in the same line."""
    # an error a rerun meets again (longer than the context, a missing key) gets its fix,
    # not the advice to run again
    then = (
        "Run the same command again to retry only those rows."
        if rerun_helps
        else "The same prompts fail the same way until that is fixed: see the fix in the error."
    )
    also = "".join(f" {k[:1].upper()}{k[1:]}." for k in kept)
    return (
        f"error: trial {status}: {reason}; see 'error' in {predictions}. It has no score.{also} "
        f"{then}"
    )


def run_kept_notes(summary: dict[str, Any]) -> list[str]:
    """What an unfinished `workbench run` left as it was: the saved trial on disk, and the
    trial's FINISHED MLflow run (the rerun was not logged beside it)."""
    kept = [summary[k] for k in ("grades_kept", "trial_kept") if summary.get(k)]
    if summary.get("mlflow_kept_run_id"):
        kept.append(
            f"its FINISHED MLflow run {summary['mlflow_kept_run_id']} stays the trial's record "
            "(this rerun was not logged)"
        )
    return kept


def command_error(message: str) -> str:
    """stderr line of any command stopped by a workbench error (message already redacted)."""
    return f"error: {message}"


def sweep_rebuilt_note(n_rebuilt: int) -> str:
    """stderr note of `workbench sweep` when trial runs were logged anew."""
    return (
        f"note: {n_rebuilt} trial run(s) had lost their MLflow artifacts; "
        "they were run again (answers from the response cache) and logged anew"
    )


def other_sweep_runs_note(sweep_name: str, shown: str, others: Sequence[dict[str, Any]]) -> str:
    """stderr line of `workbench report NAME` when the sweep has several runs (sweep ids):
    which one is shown (the latest) and how to show another."""
    listed = [f"{o['sweep_id'][:12]} (models {o['models'] or '?'}, {o['status']})" for o in others]
    more = f" and {len(listed) - 5} more" if len(listed) > 5 else ""
    return (
        f"note: sweep {sweep_name!r} has {len(others) + 1} runs; showing the latest, "
        f"{shown[:12]}; other runs: {', '.join(listed[:5])}{more}; show one with "
        "workbench report <sweep id>"
    )


def sweep_not_complete_error(sweep_name: str, status: str) -> str:
    """stderr line of `workbench report` on a sweep that has not finished."""
    return (
        f"error: sweep {sweep_name!r} is not complete (parent run {status}); "
        "its table is partial. Rerun the sweep to resume it"
    )
