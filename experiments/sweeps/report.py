"""A sweep's results: comparisons, sensitivity, figures and the reports/<sweep>/<sweep id>/
files."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from experiments.analysis import compare as cmp
from experiments.analysis import decision
from experiments.analysis.sensitivity import sensitivity_report
from experiments.names import figure_files
from experiments.sweeps.report_dirs import ReportFolder, run_folder, write_run
from experiments.sweeps.spec import SpecError, SweepSpec
from experiments.tracking import comparisons_csv
from experiments.trials.record import TrialRecord
from promptlib.errors import WorkbenchError
from promptlib.tasks import Catalog


class ReportError(WorkbenchError):
    """reports/<sweep>/<sweep id>/ cannot be written: the trials are logged, only the files
    are missing."""


def _write_report(
    reports_dir: Path, sweep: str, sweep_id: str, doc: dict[str, Any], figures: dict[str, Any]
) -> ReportFolder:
    """reports/<sweep>/<sweep id>/: figures, comparisons.json and .csv, written as one folder
    (`report_dirs.write_run`: whole or not at all, this sweep id's folder only), then
    reports/<sweep>/latest pointed at it.

    A folder that cannot be written (deleted, made read-only or replaced by a file mid-sweep)
    is one `ReportError` line; every trial is already logged, so a rerun only redoes this.
    """
    import io

    files: dict[str, str | bytes] = {}
    for filename, fig in figures.items():
        buf = io.BytesIO()
        fig.savefig(buf, dpi=120, format="png")
        files[filename] = buf.getvalue()
    files["comparisons.json"] = json.dumps(doc, indent=1, default=str)
    files["comparisons.csv"] = comparisons_csv(doc["comparisons"])
    out = run_folder(reports_dir, sweep, sweep_id)
    try:
        return write_run(reports_dir, sweep, sweep_id, files)
    except OSError as e:
        raise ReportError(
            f"cannot write the sweep report to {out}/ ({e.strerror or e}"
            f"{': ' + str(e.filename) if e.filename else ''}); make it a writable folder and "
            "run the same command again: finished trials are logged in MLflow and are not rerun"
        ) from e


def compare(
    spec: SweepSpec,
    outcomes: list[TrialRecord],
    catalog: Catalog,
    skipped: Mapping[str, Mapping[str, str]] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    final: bool = True,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The sweep's comparisons per (model, task), corrected across the sweep, and the
    declared across-task test (see `experiments.analysis.compare`), each with its
    recommendation (`experiments.analysis.decision`). `progress(done, total,
    what)` is told after each comparison (100 variants' all_pairs are 4,950 of them).

    `skipped` (task -> variant -> why) names the variants a task could not run: a comparison
    with such an arm is listed for that task as skipped, with the reason, never tested on the
    arms that did run; the across-task test takes only the tasks that tested it."""

    table: list[dict[str, Any]] = []
    groups: dict[tuple[str, str], dict[str, TrialRecord]] = {}
    for o in outcomes:
        groups.setdefault((o.model, o.task), {})[o.variant] = o
    names = [nv.name for nv in spec.variants]
    gone_of = {task: dict((skipped or {}).get(task, {})) for _, task in groups}
    todo = {
        key: [] if spec.comparisons == "best_vs_worst"
        else cmp.pairs_of(spec.comparisons, [n for n in names if n in arms or n in gone_of[key[1]]])
        for key, arms in groups.items()
    }  # fmt: skip
    total, done = sum(len(pairs) or 1 for pairs in todo.values()), 0

    def tick(where: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total, f"comparisons, {where}")

    for (model, task), by_variant in groups.items():
        arms = dict(by_variant)
        where = f"{task} ({model})"
        how: dict[str, Any] = {
            "n_resamples": spec.n_resamples,
            "where": where,
            "cluster_by": spec.cluster_by,
            "column": _column(spec, catalog, task),
        }
        gone = gone_of[task]
        if spec.comparisons == "best_vs_worst":
            if len(arms) < 2 and gone:
                rows = [_skipped_row(where, "best", "worst", arms, gone, "range permutation test")]
            else:
                rows = [cmp.best_vs_worst(list(arms.values()), **how)]
            tick(where)
        else:
            peers = list(arms.values())
            memo: dict[tuple[str, ...], Any] = {}  # the peers' clusters (`cmp.pair`)
            rows = []
            for a, b in todo[(model, task)]:
                rows.append(
                    _skipped_row(where, a, b, arms, gone, "paired permutation test")
                    if a in gone or b in gone
                    else cmp.pair(arms[a], arms[b], peers=peers, memo=memo, **how)
                )
                tick(where)
        table += [{"model": model, "task": task, **row} for row in rows]
    cmp.correct(table, spec.correction)
    tasks = list(dict.fromkeys(o.task for o in outcomes))
    kind = spec.comparisons if isinstance(spec.comparisons, str) else "pairs"
    across = cmp.across_tasks(table, kind=kind, test=spec.across_tasks, all_tasks=tasks)  # type: ignore[arg-type]
    # what to do, in a line each (`final` False: some trials are incomplete, see `annotate`)
    decision.annotate(table, across, spec.correction, final)
    return table, across


def _skipped_row(
    where: str,
    a: str,
    b: str,
    arms: Mapping[str, TrialRecord],
    gone: Mapping[str, str],
    test: str,
) -> dict[str, Any]:
    """A comparison not computed on a task because an arm could not run there: no score and
    no p-value, and a status saying which arm and why."""
    missing = [v for v in (a, b) if v in gone] or sorted(gone)
    row = cmp.untested(where, a, b, list(arms.values()), test)
    row["status"] = f"{decision.SKIPPED}: " + "; ".join(f"{v}: {gone[v]}" for v in missing)
    if a == "best":  # best_vs_worst with fewer than two variants run
        row["status"] += f" (only {len(arms)} variant(s) ran: no draws to compare)"
    return row


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
    spec: SweepSpec, outcomes: list[TrialRecord], table: list[dict[str, Any]], catalog: Catalog
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
        rows = [r for r in table if r["model"] == model]
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
        return {"per_task": [], "notes": ["one variant: nothing to compare"]}, {}
    try:
        columns = (
            {t: _column(spec, catalog, t) or {} for t in spec.tasks}
            if spec.cluster_by.startswith("column:")
            else None
        )
        report = sensitivity_report(
            ordered,
            n_resamples=spec.n_resamples,
            cluster_by=spec.cluster_by,
            columns=columns,
            # each pooled effect takes the sign of the comparisons table (`analysis.contrast`)
            order=[v.name for v in spec.variants],
            pairs=() if isinstance(spec.comparisons, str) else spec.comparisons,
        )
    except (ValueError, AssertionError) as e:
        return {"per_task": [], "error": f"no sensitivity analysis: {e}"}, {}
    notes = [*report.notes, *_skip_notes(spec, skipped or {})]
    sens = dataclasses.replace(report, notes=notes).to_dict()  # the document's section
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
