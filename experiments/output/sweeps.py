"""`workbench sweep` and `workbench report`: the summary around the tables, where the
files went, what it cost, incomplete trials and the sensitivity section.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from experiments.output.common import note_lines
from experiments.output.comparisons import across_table, comparison_table, decision_lines
from experiments.output.sequential import sequential_table
from experiments.trials.labels import display_name


def sweep_summary(
    result: dict[str, Any], tracking_uri: str, folders: Sequence[str] = (), explain: bool = False
) -> str:
    """`workbench sweep`: header, skipped tasks, comparison and across-task tables, where to look.

    `result` is `run_sweep`'s dict; its optional `trial_rows` (per-trial invalid rates) feed
    the comparison table's invalid-output columns; its `report_dir` is where its files went
    (this sweep run's own folder, under the reports folder).
    `folders` (the spec's): a text file's path is shown relative to it when that is shorter.
    """
    lines = [
        f"sweep {result['sweep']}: {result['trials']} trials "
        f"({result['resumed']} resumed from MLflow), parent run {result['parent_run_id']}",
    ]
    lines += [f"skipped {s['task']}: {s['reason']}" for s in result["skipped"]]
    lines += note_lines(result.get("notes") or [])
    if result.get("sequential") is not None:
        lines.append(sequential_table(result["sequential"], folders, explain=explain))
    else:
        lines.append(comparison_table(result["comparisons"], result.get("trial_rows"),
                                      folders=folders, explain=explain))  # fmt: skip
        lines.append(across_table(result["across_tasks"], folders))
    if result.get("cost"):
        lines.append(cost_line(result["cost"]))
    sens = result.get("sensitivity") or {}
    if sens.get("per_task") or sens.get("error"):
        lines.append(
            sens.get("error") or f"prompt sensitivity: in workbench report {result['sweep']}"
        )
    if result.get("report_dir"):
        lines.append(
            report_folder_line(result["report_dir"], result["report_files"], result["latest"])
        )
    if line := html_report_line(result):
        lines.append(line)
    lines.append(f"MLflow store: {tracking_uri}")
    where = f" (experiment {result['experiment']})" if result.get("experiment") else ""
    lines.append(
        # workbench ui finds the same store from any folder of the project (or the user
        # default); make ui only works at the project root
        "Open the MLflow UI on these runs: workbench ui  (or make ui at the project root), then "
        f"http://127.0.0.1:5000{where}"
    )
    lines += decision_lines(result, folders)  # last: what to do, one line per comparison
    return "\n".join(lines)


def report_folder_line(folder: str, files: Sequence[str], latest: str) -> str:
    """Where `workbench sweep` wrote this sweep run's files: its own folder, named by its
    sweep id (`reports.folders`), and the `latest` pointer (symlink, or LATEST file) now
    naming it."""
    table = [f for f in files if f.startswith("comparisons.")]
    figures = [f for f in files if f.endswith(".png")]
    listed = ", ".join(table) + (f"; figures: {', '.join(figures)}" if figures else "")
    points = "names it" if latest.endswith("LATEST") else "points at it"
    return f"reports written to {folder}/ ({listed}); {latest} {points}"


def html_report_line(result: dict[str, Any]) -> str | None:
    """Where the sweep's HTML report is (its run folder's index.html; also on the parent run),
    or why it was not built (the other files are written all the same)."""
    if result.get("html_error"):
        return (
            f"HTML report not built ({result['html_error']}); the comparisons and figures "
            "are written and logged as usual"
        )
    if result.get("report_dir") and "index.html" in (result.get("report_files") or ()):
        if result.get("html_unlogged"):
            return (
                f"HTML report: {result['report_dir']}/index.html (open it in a browser); not "
                f"on the parent run ({result['html_unlogged']}): rerun the sweep to log it"
            )
        return (
            f"HTML report: {result['report_dir']}/index.html (open it in a browser; "
            "also index.html on the parent run)"
        )
    return None


def cost_line(cost: dict[str, Any]) -> str:
    """What a sweep cost: model calls made now against the full grid's, tokens and price."""
    price = "unknown" if cost.get("cost_usd") is None else f"${cost['cost_usd']:.4f}"
    share = cost.get("share_of_grid")
    of_grid = "" if share is None else f" ({share:.0%} of the grid)"
    return (
        f"cost ({cost['design']} design): {cost['model_calls']} model calls made now, "
        f"{cost['cache_hits']} rows from the cache or MLflow; {cost['rows_evaluated']} rows "
        f"evaluated of the full grid's {cost['grid_calls']}{of_grid}; {_tokens(cost)}; "
        f"cost {price}"
    ) + (judge_cost_clause(cost["judge"]) if cost.get("judge") else "")


def judge_cost_clause(judge: dict[str, Any]) -> str:
    """The judge's share of a sweep's cost line (a spec with ``judge:``), labelled."""
    price = "unknown" if judge.get("cost_usd") is None else f"${judge['cost_usd']:.4f}"
    tokens = (
        "tokens not counted (log-likelihood judge)"
        if judge.get("scoring") == "loglik"
        else f"tokens {judge['tokens_in']} in, {judge['tokens_out']} out"
    )
    return (
        f"; judge {judge.get('model', '')} ({judge.get('scoring', '')}): "
        f"{judge['model_calls']} judge calls made now, {judge['cache_hits']} from the cache or "
        f"already judged; {tokens}; cost {price}"
    )


def _tokens(cost: dict[str, Any]) -> str:
    """The tokens sent, saying which rows nobody counted (log-likelihood rows record none)
    rather than printing their 0 as a total."""
    uncounted = cost.get("tokens_uncounted_rows") or 0
    counted = f"tokens {cost['tokens_in']} in, {cost['tokens_out']} out"
    if not uncounted:
        return counted
    rows = f"{uncounted} log-likelihood row{'s' if uncounted != 1 else ''}"
    if not cost["tokens_in"] and not cost["tokens_out"]:
        return f"tokens not counted ({rows}: the model returns label log-probabilities, no usage)"
    return f"{counted} (not counted: {rows})"


def incomplete_trials_error(incomplete: list[dict[str, Any]]) -> str:
    """stderr line of a sweep with incomplete trials."""
    listed = "; ".join(
        f"{t['task']} · {t['variant']} · {t['model']} ({t['status']}: {t['n_errors']} of "
        f"{t['n']} rows failed)"
        for t in incomplete
    )
    # the first row error says what to do (a key to set, a server to start) before a rerun
    first = next((t for t in incomplete if t.get("first_error")), None)
    why = f" First error: {first['first_error']}." if first else ""
    return (
        f"error: {len(incomplete)} trial(s) incomplete: {listed}.{why} Their comparisons have "
        "no p-value. Rerun the same command to resume: only the failed rows are sent again."
    )


def sweep_report(
    sweep_name: str,
    info: dict[str, Any],
    doc: dict[str, Any],
    trials: Sequence[dict[str, Any]] | None = None,
    *,
    report_dir: str | None = None,
    shown: tuple[int, int] | None = None,
    explain: bool = False,
    page: str | None = None,
) -> str:
    """`workbench report`: a sweep's tables again, from its MLflow parent run (a text file's
    path shown relative to here or to the spec's folder, its `spec` param, when shorter).

    `report_dir`: the run's folder under reports/, when there is one here (`page`: its HTML
    report, when it has one). `shown`: (this
    model's comparisons, the sweep's) when `doc` is cut to one model (``--model``)."""
    spec = (info.get("params") or {}).get("spec")
    folders = [os.path.dirname(str(spec)) or "."] if spec else []
    sid = f"sweep id {info['sweep_id']}, " if info.get("sweep_id") else ""
    lines = [f"sweep {sweep_name} ({sid}run {info['run_id']}, {info['status']})"]
    if doc.get("model_shown") and shown is not None:
        lines.append(
            f"model {doc['model_shown']} only (--model): {shown[0]} of the sweep's {shown[1]} "
            "comparisons; every number is the whole sweep's (corrections over all its models)"
        )
    if doc.get("sequential") is not None:  # a sequential sweep's comparisons are its sequences'
        lines.append(
            sequential_table(doc["sequential"], folders, shown[1] if shown else None, explain)
        )
    else:
        lines.append(comparison_table(doc["comparisons"], trials, folders=folders, explain=explain))
    lines.append(across_table(doc.get("across_tasks") or [], folders))
    lines += [
        f"incomplete: {t['task']} · {display_name(str(t['variant']), folders)} · {t['model']} "
        f"({t['n_errors']} of {t['n']} rows failed); rerun the sweep to resume"
        for t in doc.get("incomplete") or []
    ]
    lines.append(sensitivity_section(doc.get("sensitivity"), folders))
    if report_dir:
        lines.append(f"report files: {report_dir}/")
    if page:
        lines.append(f"HTML report: {page} (open it in a browser)")
    lines += decision_lines(doc, folders)  # last: what to do
    return "\n".join(lines)


def sensitivity_section(sens: dict[str, Any] | None, folders: Sequence[str] = ()) -> str:
    """The prompt-sensitivity section of `workbench report` (`experiments.analysis.sensitivity`)."""
    if not sens:
        return "prompt sensitivity: not computed for this sweep (run it again to add it)"
    if sens.get("error"):
        return f"prompt sensitivity: {sens['error']}"
    # start-up time: the CLI imports output first
    from experiments.analysis.sensitivity import format_sensitivity

    return format_sensitivity(sens, folders)
