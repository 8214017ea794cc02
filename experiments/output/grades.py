"""`workbench grade`: the export and import lines."""

from __future__ import annotations

from typing import Any


def grade_export(path: str, n_rows: int, trial_id: str) -> str:
    return (
        f"wrote {path}: {n_rows} rows of trial {trial_id[:12]} to grade; fill the 'grade' "
        "column with 1/0 (or correct/incorrect), then: workbench grade import " + path
    )


def grade_import(summary: dict[str, Any]) -> str:
    tracked = (
        f"; MLflow run {summary['mlflow_run_id']} updated" if summary.get("mlflow_run_id") else ""
    )
    return (
        f"trial {summary['trial_id'][:12]} ({summary['task']}): {summary['metric']} = "
        f"{summary['score']:.4f} on {summary['graded']} graded rows{tracked}"
    )
