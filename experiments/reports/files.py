"""The bytes of a comparison report's files: comparisons.json and comparisons.csv, and the
figures as PNG.

Why here: the same files are written to two places, the sweep's reports/<sweep>/<sweep id>/
folder (`reports.folders`, by `sweeps.report`) and the MLflow run of a sweep or an import
(`tracking.reports`); one encoder keeps the two copies the same table.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from experiments.analysis.records import RECOMMENDATION  # decision.KEY, without the statistics
from experiments.files import csv_cell

COMPARISONS_JSON = "comparisons.json"
COMPARISONS_CSV = "comparisons.csv"


def comparisons_csv(table: Sequence[Mapping[str, Any]]) -> str:
    """The comparisons table as CSV, one row per comparison, formula-like text quoted
    (`experiments.files.csv_cell`, as the grade export does)."""
    if not table:
        return ""
    buf = io.StringIO()
    # every key of every row, in order of first appearance: an untested row has fewer keys
    # than a tested one (no interval method, no draws' intervals), and may come first. The
    # recommendation is the last column whatever the rows (the columns before it are as
    # they were before it existed), its sentence as the cell
    fields = [k for k in dict.fromkeys(k for row in table for k in row) if k != RECOMMENDATION]
    fields += [RECOMMENDATION] if any(RECOMMENDATION in row for row in table) else []
    w = csv.DictWriter(buf, fieldnames=fields, restval="")
    w.writeheader()
    # text cells (variant, model and task names, notes) as spreadsheets read them safely:
    # a name like `=HYPERLINK(...)` is text, not a formula; numbers stay numbers
    for row in table:
        cells = {k: _sentence(v) if k == RECOMMENDATION else v for k, v in row.items()}
        w.writerow({k: csv_cell(v) if isinstance(v, str) else v for k, v in cells.items()})
    return buf.getvalue()


def _sentence(recommendation: Any) -> Any:
    """A recommendation's cell: its line (the whole object is in comparisons.json)."""
    return recommendation.get("line") if isinstance(recommendation, dict) else recommendation


def comparisons_json(doc: Mapping[str, Any]) -> str:
    """The comparisons document as the report folder holds it (non-JSON values as text)."""
    return json.dumps(doc, indent=1, default=str)


def figure_png(fig: Any) -> bytes:
    """A matplotlib figure as the report folder's PNG."""
    buf = io.BytesIO()
    fig.savefig(buf, dpi=120, format="png")
    return buf.getvalue()


def report_files(doc: Mapping[str, Any], figures: Mapping[str, Any]) -> dict[str, str | bytes]:
    """A report folder's files by name: the figures, comparisons.json and comparisons.csv."""
    files: dict[str, str | bytes] = {name: figure_png(fig) for name, fig in figures.items()}
    files[COMPARISONS_JSON] = comparisons_json(doc)
    files[COMPARISONS_CSV] = comparisons_csv(doc["comparisons"])
    return files
