"""A sweep's results: comparisons, sensitivity, figures and the reports/<sweep>/<sweep id>/
files."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from experiments.analysis.plan import ComparisonPlan, plan_sensitivity, run_plan
from experiments.analysis.records import AcrossTaskTest, Comparison
from experiments.names import figure_files
from experiments.reports.folders import ReportFolder, run_folder, write_run
from experiments.sweeps.spec import SpecError, SweepSpec
from experiments.trials.record import TrialRecord
from promptlib.errors import WorkbenchError
from promptlib.tasks import Catalog


class ReportError(WorkbenchError):
    """reports/<sweep>/<sweep id>/ cannot be written: the trials are logged, only the files
    are missing."""


def _write_report(
    reports_dir: Path, sweep: str, sweep_id: str, files: Mapping[str, str | bytes]
) -> ReportFolder:
    """reports/<sweep>/<sweep id>/: the report's files (`reports.files.report_files`: figures,
    comparisons.json and .csv; and index.html, the HTML report, when it was built), written
    as one folder (`reports.folders.write_run`: whole or not at all, this sweep id's folder
    only), then reports/<sweep>/latest pointed at it (and reports/<sweep>/index.html, the
    page opening the latest run's report, rewritten).

    A folder that cannot be written (deleted, made read-only or replaced by a file mid-sweep)
    is one `ReportError` line; every trial is already logged, so a rerun only redoes this.
    """
    out = run_folder(reports_dir, sweep, sweep_id)
    try:
        return write_run(reports_dir, sweep, sweep_id, files)
    except OSError as e:
        raise ReportError(
            f"cannot write the sweep report to {out}/ ({e.strerror or e}"
            f"{': ' + str(e.filename) if e.filename else ''}); make it a writable folder and "
            "run the same command again: finished trials are logged in MLflow and are not rerun"
        ) from e


def plan_of(spec: SweepSpec) -> ComparisonPlan:
    """The sweep's comparison plan (`experiments.analysis.plan`): its variants in spec order,
    its declared comparisons and tests."""
    return ComparisonPlan(
        name=spec.name,
        tasks=spec.tasks,
        models=spec.models,
        variants=tuple(nv.name for nv in spec.variants),
        comparisons=spec.comparisons,
        n_resamples=spec.n_resamples,
        correction=spec.correction,
        across_tasks=spec.across_tasks,
        cluster_by=spec.cluster_by,
    )


def compare(
    spec: SweepSpec,
    outcomes: list[TrialRecord],
    catalog: Catalog,
    skipped: Mapping[str, Mapping[str, str]] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    final: bool = True,
) -> tuple[list[Comparison], list[AcrossTaskTest]]:
    """The sweep's comparisons: its plan (`plan_of`) run on its trials (`analysis.plan.run_plan`:
    per (model, task), corrected across the sweep, the declared across-task test, each with
    its recommendation), the cluster column read from the task data when it clusters by one.

    `skipped` (task -> variant -> why) names the variants a task could not run: a comparison
    with such an arm is listed for that task as skipped, with the reason, never tested on the
    arms that did run; the across-task test takes only the tasks that tested it."""
    columns = None
    if spec.cluster_by.startswith("column:"):
        tasks = dict.fromkeys(o.task for o in outcomes)
        columns = {t: c for t in tasks if (c := _column(spec, catalog, t)) is not None}
    return run_plan(
        plan_of(spec), outcomes, columns=columns, skipped=skipped, progress=progress, final=final
    )


def _column(spec: SweepSpec, catalog: Catalog, task: str) -> dict[str, str] | None:
    """Row index -> value of the data column a sweep clusters by (None unless it does)."""
    if not spec.cluster_by.startswith("column:"):
        return None
    name = spec.cluster_by[7:].strip()
    rows = catalog.task(task).rows(spec.split)
    if rows and name not in rows[0]:
        raise SpecError(
            f"{spec.path}: cluster_by {spec.cluster_by!r}: task {task} has no column {name!r} "
            f"(its columns: {', '.join(rows[0])}); use cluster_by: prompt"
        )
    return {str(r["index"]): str(r.get(name) or "") for r in rows}


def _figures(
    spec: SweepSpec, outcomes: list[TrialRecord], table: list[Comparison], catalog: Catalog
) -> dict[str, Any]:
    # start-up time: matplotlib, only when figures are drawn
    from experiments.analysis.figures import draws_figure, pair_figure

    figures: dict[str, Any] = {}
    chance: dict[str, float | None] = {}
    for task in {o.task for o in outcomes}:
        spec_ = catalog.task(task).spec
        labels = spec_.labels if spec_.is_classification else None
        chance[task] = 1.0 / len(labels) if labels else None
    files = figure_files(spec.name, sorted({o.model for o in outcomes}))
    for model, filename in files.items():  # models with one `safe_model`: each its own
        mine = [o for o in outcomes if o.model == model]
        rows = [r for r in table if r.model == model]
        draw = draws_figure if spec.comparisons == "best_vs_worst" else pair_figure
        figures[filename] = draw(spec.name, model, mine, rows, chance)
    return figures


def _sensitivity(
    spec: SweepSpec,
    ordered: list[TrialRecord],
    catalog: Catalog,
    skipped: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The sweep's prompt-sensitivity report and its figures (`experiments.analysis.sensitivity`).

    A report the analysis refuses (e.g. scores it cannot reproduce from the generations) is
    recorded as an error beside the comparisons, which stand on their own: never a number.
    It is computed from the trials that ran: a task's measures cover the variants it ran,
    and a note names those it skipped (`skipped`: task -> variant -> why).
    """
    # start-up time: matplotlib, only when figures are drawn
    from experiments.analysis.figures import sensitivity_figures

    if len(spec.variants) < 2:
        return plan_sensitivity(plan_of(spec), ordered), {}
    columns = (
        {t: _column(spec, catalog, t) or {} for t in spec.tasks}
        if spec.cluster_by.startswith("column:")
        else None
    )
    sens = plan_sensitivity(plan_of(spec), ordered, columns)
    if "error" in sens:
        return sens, {}
    sens["notes"] = [*sens.get("notes", []), *_skip_notes(spec, skipped or {})]
    return sens, (sensitivity_figures(sens) if sens.get("per_task") else {})


def _skip_notes(spec: SweepSpec, skipped: Mapping[str, Mapping[str, str]]) -> list[str]:
    """One note per task that skipped variants: what it ran, and what it skipped and why."""
    n = len(spec.variants)
    return [
        f"{task}: ran {n - len(gone)} of {n} variants, skipped "
        + "; ".join(f"{v} ({why})" for v, why in gone.items())
        + ": its measures and variance shares cover only the variants it ran"
        for task, gone in skipped.items()
        if gone
    ]
