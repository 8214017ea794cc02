"""A sweep's results: comparisons, sensitivity, figures and the reports/<sweep>/ files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from experiments.analysis import compare as cmp
from experiments.analysis.sensitivity import sensitivity_report
from experiments.files import atomic_write_bytes, atomic_write_text
from experiments.names import safe_model
from experiments.sweeps.spec import SpecError, SweepSpec
from experiments.tracking import comparisons_csv
from experiments.trials.record import TrialRecord
from promptlib.errors import WorkbenchError
from promptlib.tasks import Catalog


class ReportError(WorkbenchError):
    """reports/<sweep>/ cannot be written: the trials are logged, only the files are missing."""


def _write_report(out: Path, doc: dict[str, Any], figures: dict[str, Any]) -> None:
    """reports/<sweep>/: figures, comparisons.json and .csv, each written atomically.

    A folder that cannot be written (deleted, made read-only or replaced by a file mid-sweep)
    is one `ReportError` line; every trial is already logged, so a rerun only redoes this.
    """
    import io

    try:
        out.mkdir(parents=True, exist_ok=True)
        for filename, fig in figures.items():
            buf = io.BytesIO()
            fig.savefig(buf, dpi=120, format="png")
            atomic_write_bytes(out / filename, buf.getvalue())
        atomic_write_text(out / "comparisons.json", json.dumps(doc, indent=1, default=str))
        atomic_write_text(out / "comparisons.csv", comparisons_csv(doc["comparisons"]))
    except OSError as e:
        raise ReportError(
            f"cannot write the sweep report to {out}/ ({e.strerror or e}"
            f"{': ' + str(e.filename) if e.filename else ''}); make it a writable folder and "
            "run the same command again: finished trials are logged in MLflow and are not rerun"
        ) from e


def compare(
    spec: SweepSpec, outcomes: list[TrialRecord], catalog: Catalog
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The sweep's comparisons per (model, task), corrected across the sweep, and the
    declared across-task test (see `experiments.analysis.compare`)."""

    table: list[dict[str, Any]] = []
    groups: dict[tuple[str, str], dict[str, TrialRecord]] = {}
    for o in outcomes:
        groups.setdefault((o.model, o.task), {})[o.variant] = o
    for (model, task), by_variant in groups.items():
        arms = dict(by_variant)
        where = f"{task} ({model})"
        how: dict[str, Any] = {
            "n_resamples": spec.n_resamples,
            "where": where,
            "cluster_by": spec.cluster_by,
            "column": _column(spec, catalog, task),
        }
        if spec.comparisons == "best_vs_worst":
            rows = [cmp.best_vs_worst(list(arms.values()), **how)]
        else:
            peers = list(arms.values())
            rows = [
                cmp.pair(arms[a], arms[b], peers=peers, **how)
                for a, b in cmp.pairs_of(spec.comparisons, list(arms))
            ]
        table += [{"model": model, "task": task, **row} for row in rows]
    cmp.correct(table, spec.correction)
    tasks = list(dict.fromkeys(o.task for o in outcomes))
    kind = spec.comparisons if isinstance(spec.comparisons, str) else "pairs"
    across = cmp.across_tasks(table, kind=kind, test=spec.across_tasks, all_tasks=tasks)  # type: ignore[arg-type]
    return table, across


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
    for model in sorted({o.model for o in outcomes}):
        mine = [o for o in outcomes if o.model == model]
        rows = [r for r in table if r["model"] == model]
        tag = safe_model(model)
        draw = draws_figure if spec.comparisons == "best_vs_worst" else pair_figure
        figures[f"figure_{spec.name}_{tag}.png"] = draw(spec.name, model, mine, rows, chance)
    return figures


def _sensitivity(
    spec: SweepSpec, ordered: list[TrialRecord], catalog: Catalog
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The sweep's prompt-sensitivity report and its figures (`experiments.analysis.sensitivity`).

    A report the analysis refuses (e.g. scores it cannot reproduce from the generations) is
    recorded as an error beside the comparisons, which stand on their own: never a number.
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
        sens = sensitivity_report(
            ordered,
            n_resamples=spec.n_resamples,
            cluster_by=spec.cluster_by,
            columns=columns,
        )
    except (ValueError, AssertionError) as e:
        return {"per_task": [], "error": f"no sensitivity analysis: {e}"}, {}
    return sens, (sensitivity_figures(sens) if sens.get("per_task") else {})
