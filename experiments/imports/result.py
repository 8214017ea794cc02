"""What `import_results` and `compare_import` return: a typed, frozen `ImportResult`, and its
one JSON form (`to_dict`).

The record is what a caller reads (fields, not keys); `to_dict` is the document `workbench
import --json` and `workbench compare --json` print, key for key and in the same order as
before the record existed, so no output byte changed when it was introduced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ImportResult:
    """An import compared: what was read (files, tools), how it was compared (`between`),
    the verdict document's rows (comparisons, across-task tests, sensitivity, the rows left
    out, notes, clustering, pairing, the trials as scored), and where it is tracked.

    `tracking` is None for an untracked import (``--no-track``); else the parent run
    (``run_id``, ``experiment``; ``reused`` when the same import was already tracked,
    ``read_back`` for `workbench compare`) and ``tracking_uri``.
    """

    name: str
    import_id: str
    format: str
    files: Sequence[dict[str, Any]]  # {path, sha256, role: given | companion}
    tools: Sequence[str]
    between: str  # "variants" or "models": what A and B are
    comparisons: Sequence[Any]
    across_tasks: Sequence[Any]
    sensitivity: dict[str, Any]
    left_out: Sequence[dict[str, Any]]
    notes: Sequence[str]
    clustering: Sequence[dict[str, Any]]
    pairing: Sequence[str]
    trials: Sequence[dict[str, Any]]
    tracking: dict[str, Any] | None = None
    # the sample-level HTML report (`imports.report.ReportWritten.to_dict`): None when none
    # was made (an untracked import without a reports folder, or `workbench compare`)
    report: dict[str, Any] | None = None

    @classmethod
    def of(cls, record: Mapping[str, Any], doc: Mapping[str, Any]) -> ImportResult:
        """The result of the import `record` (name, id, format, files, tools) and its verdict
        document `doc` (`imports.verdict`, with ``between``)."""
        return cls(
            name=str(record["name"]),
            import_id=str(record["import_id"]),
            format=str(record["format"]),
            files=record["files"],
            tools=record.get("tools", []),
            between=doc["between"],
            comparisons=doc["comparisons"],
            across_tasks=doc["across_tasks"],
            sensitivity=doc["sensitivity"],
            left_out=doc["left_out"],
            notes=doc["notes"],
            clustering=doc["clustering"],
            pairing=doc["pairing"],
            trials=doc["trials"],
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: today's keys in today's order, ``report`` only when one was made,
        ``tracking`` only when tracked."""
        out: dict[str, Any] = {
            "import": self.name,
            "import_id": self.import_id,
            "format": self.format,
            "files": list(self.files),
            "tools": list(self.tools),
            "between": self.between,
            "comparisons": [_row(r) for r in self.comparisons],
            "across_tasks": [_row(r) for r in self.across_tasks],
            "sensitivity": self.sensitivity,
            "left_out": list(self.left_out),
            "notes": list(self.notes),
            "clustering": list(self.clustering),
            "pairing": list(self.pairing),
            "trials": list(self.trials),
        }
        if self.report is not None:
            out["report"] = self.report
        if self.tracking is not None:
            out["tracking"] = self.tracking
        return out


def _row(row: Any) -> Any:
    """A document's row: a record's own `to_dict` (a comparison), a dict as it is."""
    return row.to_dict() if hasattr(row, "to_dict") else row
