"""A sweep's HTML report (`experiments.reports.html`): built from its trials, prompts and
comparisons, rendered to one page for reports/<sweep>/<sweep id>/index.html and the parent run.

Why apart from `report`: the page is an addition to the comparisons, never a condition of
them. Anything that stops it (a row the prompt cannot render, a renderer error) is caught
here and becomes a one-line `error`; comparisons.json, .csv and the figures are written and
logged as they would be without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from experiments.reports.html.build import build_sweep_report
from experiments.reports.html.render import render_html
from experiments.sweeps.looks import sequential_section
from experiments.sweeps.report import _column
from experiments.sweeps.sequential_result import SequentialComparison
from experiments.sweeps.spec import SweepSpec
from experiments.trials.record import TrialRecord
from promptlib.tasks import Catalog

if TYPE_CHECKING:
    from experiments.tracking import Tracker

UI_BASE = "http://127.0.0.1:5000"  # where `workbench ui` serves MLflow by default (--port)


@dataclass(frozen=True)
class HtmlReport:
    """The page (None when it could not be built) and why not; `unlogged`: why a page that
    was built is not on the parent run (its artifact upload failed)."""

    page: str | None
    error: str | None = None
    unlogged: str | None = None


def html_report(
    spec: SweepSpec,
    sid: str,
    ordered: Sequence[TrialRecord],
    doc: Mapping[str, Any],
    pngs: Mapping[str, bytes],
    resolved: Sequence[Any],
    catalog: Catalog,
    tracker: Tracker,
    sequential: Sequence[SequentialComparison] | None = None,
) -> HtmlReport:
    """The sweep's HTML page, or the error that stopped it (never raised: see the module).
    A sequential sweep's rows (`sequential`) come with their looks (`sweeps.looks`)."""
    try:
        columns = None
        if spec.cluster_by.startswith("column:"):
            tasks = sorted({o.task for o in ordered})
            columns = {t: c for t in tasks if (c := _column(spec, catalog, t)) is not None}
        report = build_sweep_report(
            name=spec.name,
            sweep_id=sid,
            records=ordered,
            doc=doc,
            figures=pngs,
            resolved=resolved,
            ui_base=UI_BASE,
            experiment_id=_experiment_id(tracker, spec.name),
            n_resamples=spec.n_resamples,
            sequential_entries=(
                sequential_section(sequential, ordered) if sequential is not None else None
            ),
            sequential_rows=decided_rows(sequential or ()),
            cluster_by=spec.cluster_by,
            cluster_columns=columns,
        )
        return HtmlReport(render_html(report.to_dict()))
    except Exception as e:  # the comparisons stand without the page: say why it is missing
        return HtmlReport(None, f"{type(e).__name__}: {e}")


def decided_rows(
    rows: Sequence[SequentialComparison],
) -> dict[tuple[str, str, str, str], tuple[str, ...]]:
    """Each sequential comparison's rows up to its stop (its ``n`` first planned rows), by
    (task, model, a, b): a pair that stopped while its arms ran on for other pairs is shown
    on its own rows, not on all its arms share. Rows read back from a document (no
    `Population`) are left out (the page says so)."""
    return {
        (r.task, r.model, r.a, r.b): r.population.order[: r.n]
        for r in rows
        if r.population is not None and r.a is not None and r.b is not None
    }


def _experiment_id(tracker: Tracker, name: str) -> str | None:
    """The sweep's MLflow experiment id, for the page's run links; None (no links) when the
    store cannot say."""
    try:
        return tracker.experiment_id(name)
    except Exception:  # the links are a convenience: the page stands without them
        return None
