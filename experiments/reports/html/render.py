"""A ReportDoc dict -> one self-contained HTML page (issue 34).

The page must open offline, from a file or from MLflow's artifact view, so the CSS, the script
and the data are all inside it: the assets (`assets/page.html`, `report.css`, `report.js`) are
package data, the data is the ReportDoc as JSON in a `<script type="application/json">`, and
the script builds the DOM from it with `textContent` only (row texts are untrusted). Every `<`,
`>` and `&` in the JSON is written as a `\\u` escape, so no text can close the script element.
The output depends only on the doc: the same doc gives the same bytes.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from promptlib.errors import WorkbenchError

#: the ReportDoc version this renderer reads
VERSION = 1
#: what a ReportDoc must hold for the page to be built
REQUIRED = ("version", "title", "comparisons", "samples")
_SLOTS = ("{{TITLE}}", "{{CSS}}", "{{JS}}", "{{DATA}}")
# JSON string escapes that keep the document inert inside <script> (and valid JSON)
_SCRIPT_SAFE = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


class ReportDocError(WorkbenchError):
    """A ReportDoc the page cannot be built from (wrong version, a missing key)."""


@cache
def _asset(name: str) -> str:
    return (resources.files(__package__) / "assets" / name).read_text(encoding="utf-8")


def _finite(value: Any) -> Any:
    """NaN and infinities become null: JSON has no word for them and JSON.parse would fail."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def embedded_json(doc: Mapping[str, Any]) -> str:
    """The doc as JSON that is safe inside a `<script>` element: no `<`, `>` or `&` appears."""
    text = json.dumps(_finite(doc), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.translate(_SCRIPT_SAFE)


def _check(doc: Mapping[str, Any]) -> None:
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise ReportDocError(
            f"the report document lacks {', '.join(missing)}: build it with "
            "experiments.reports.html.build (ReportDoc.to_dict())"
        )
    if doc["version"] != VERSION:
        raise ReportDocError(
            f"the report document is version {doc['version']!r}, this renderer reads version "
            f"{VERSION}: rebuild the report with this workbench"
        )


def render_html(doc: Mapping[str, Any]) -> str:
    """The page for `doc` (a ReportDoc dict): one HTML string with everything inside it."""
    _check(doc)
    page = _asset("page.html")
    values = {
        "{{TITLE}}": html.escape(str(doc.get("title") or "Report")),
        "{{CSS}}": _asset("report.css"),
        "{{JS}}": _asset("report.js"),
        "{{DATA}}": embedded_json(doc),
    }
    # one pass, so a slot's text inserted earlier is never searched for a later slot
    parts = [page]
    for slot in _SLOTS:
        parts = [piece for part in parts for piece in _split_keep(part, slot)]
    return "".join(values.get(p, p) for p in parts)


def _split_keep(text: str, slot: str) -> list[str]:
    if text in _SLOTS:
        return [text]
    pieces = text.split(slot)
    out = [pieces[0]]
    for piece in pieces[1:]:
        out += [slot, piece]
    return out
