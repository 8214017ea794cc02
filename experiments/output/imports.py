"""`workbench import` and `workbench compare`: the summary of an import."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.output.comparisons import across_table, comparison_table, decision_lines
from experiments.output.sweeps import sensitivity_section


def _left_out_lines(left_out: Sequence[dict[str, Any]], shown: int = 10) -> list[str]:
    """The rows left out of the comparisons, grouped by (task, model) and reason."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for x in left_out:
        groups.setdefault((x["task"], x["model"], x["reason"]), []).append(x["row"])
    lines = []
    for (task, model, reason), rows in groups.items():
        more = f" and {len(rows) - shown} more" if len(rows) > shown else ""
        lines.append(
            f"left out of {task} ({model}): {len(rows)} row(s) {reason}, not scored as wrong: "
            f"{', '.join(rows[:shown])}{more}"
        )
    return lines


def import_summary(result: dict[str, Any], explain: bool = False) -> str:
    """`workbench import` and `workbench compare`: what was read, the rows left out, the
    scoring notes, the comparison and across-task tables, sensitivity, where it is tracked."""
    files = result["files"]
    tools = f" ({', '.join(result['tools'])})" if result.get("tools") else ""
    lines = [
        f"import {result['import']}: {len(result['trials'])} trial(s) from {len(files)} "
        f"{result['format']} file(s){tools}"
    ]
    lines += _left_out_lines(result.get("left_out") or [])
    lines += [f"note: {n}" for n in result.get("notes") or []]
    models = {t["model"] for t in result["trials"]}
    if not result["comparisons"] and len(models) > 1 and result.get("between") != "models":
        lines.append("one variant per model: to compare the models, add --between models")
    if result.get("between") == "models":
        lines.append(
            "between models: A and B are models, and the 'model' column (shown with more than "
            "one) names the prompt variant they were both given"
        )
    lines.append(comparison_table(result["comparisons"], of="import", explain=explain))
    lines += [f"pairing: {n}" for n in result.get("pairing") or []]
    lines.append(across_table(result["across_tasks"]))
    lines.append(sensitivity_section(result.get("sensitivity")))
    rep = result.get("report")
    if rep:
        if rep.get("path"):
            lines.append(f"report: {rep['path']} (the rows where the variants disagree)")
        if rep.get("note"):
            lines.append(f"report: {rep['note']}")
    tr = result.get("tracking")
    if tr:
        how = (
            "read back from"
            if tr.get("read_back")
            else "already tracked, not logged again"
            if tr.get("reused")
            else "tracked"
        )
        where = f", experiment {tr['experiment']}" if tr.get("experiment") else ""
        lines.append(f"MLflow: {how}: parent run {tr['run_id']}{where} ({tr['tracking_uri']})")
        lines.append(f"again, with other tests: workbench compare {result['import']} --help")
    else:
        lines.append("MLflow: not tracked (--no-track)")
    lines += decision_lines(result)
    return "\n".join(lines)
