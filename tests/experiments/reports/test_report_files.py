"""A report's files are made in one place (`experiments.reports.files`): the sweep's folder
and the MLflow run (of a sweep or an import) get the same comparisons.csv."""

from __future__ import annotations

import json
from typing import Any

from experiments import tracking
from experiments.reports import comparisons_csv, report_files


def test_the_folder_and_mlflow_write_one_csv() -> None:
    table: list[dict[str, Any]] = [
        {"model": "m", "task": "t", "a": "=cmd", "b": "B", "p_value": 0.5,
         "recommendation": {"line": "no decision", "action": "undecided"}},
        {"model": "m", "task": "t", "a": "A", "b": "C", "p_value": None, "note": "untested"},
    ]  # fmt: skip
    doc = {"comparisons": table, "across_tasks": []}
    files = report_files(doc, {})
    assert sorted(files) == ["comparisons.csv", "comparisons.json"]
    assert files["comparisons.json"] == json.dumps(doc, indent=1, default=str)
    assert files["comparisons.csv"] == comparisons_csv(table)
    # the recommendation's sentence is the last column; a formula-like name is text
    lines = str(files["comparisons.csv"]).splitlines()
    assert lines[0] == "model,task,a,b,p_value,note,recommendation"
    assert lines[1] == "m,t,'=cmd,B,0.5,,no decision"
    # the MLflow copy is written by the same function (the old import path still works)
    assert tracking.comparisons_csv is comparisons_csv
