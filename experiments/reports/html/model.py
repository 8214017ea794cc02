"""The HTML report's data: frozen records whose `to_dict()` is the document the page renders.

Why records: the sweep (`build`) and an import write the same document, and the renderer
(`render`) reads only its dict; the one JSON shape is fixed here (version 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

VERSION = 1
ROWS_CAP = 300  # disagreeing rows shown per comparison (the counts cover them all)
INPUT_CHARS = 4000  # a row's input as shown
OUTPUT_CHARS = 2000  # an output or parsed answer as shown

Outcome = Literal["a_right", "b_right", "both_wrong"]
DiffOp = tuple[str, str]


def cut(text: str | None, limit: int) -> str | None:
    """`text` cut to `limit` characters, saying how many more there were."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


@dataclass(frozen=True)
class SampleSide:
    """One arm on one row: its output, its parsed answer, and whether it was right."""

    output: str | None
    parsed: str | None
    correct: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {"output": self.output, "parsed": self.parsed, "correct": self.correct}


@dataclass(frozen=True)
class SampleRow:
    """A row where the two arms disagree; `diff` indexes its comparison's `diffs`."""

    index: str
    label: str
    slice: str | None
    sample_id: str | None
    outcome: Outcome
    a: SampleSide
    b: SampleSide
    diff: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "label": self.label,
            "slice": self.slice,
            "sample_id": self.sample_id,
            "outcome": self.outcome,
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "diff": self.diff,
        }


@dataclass(frozen=True)
class Counts:
    """Disagreeing rows by outcome, over all of them (not only those shown)."""

    a_right: int = 0
    b_right: int = 0
    both_wrong: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"a_right": self.a_right, "b_right": self.b_right, "both_wrong": self.both_wrong}


@dataclass(frozen=True)
class SampleComparison:
    """One (task, model, A, B) comparison's disagreeing rows, their prompts' diffs, and its
    per-slice and per-class tables (`analysis.slices.SliceTable.to_dict()`)."""

    key: str
    task: str
    model: str
    a: str
    b: str
    metric: str
    a_run: str | None
    b_run: str | None
    experiment_id: str | None
    n_rows: int
    n_disagree: int
    n_shown: int
    cap: int
    counts: Counts
    diffs: tuple[tuple[DiffOp, ...], ...]
    rows: tuple[SampleRow, ...]
    slices: tuple[Mapping[str, Any], ...] = ()
    classes: tuple[Mapping[str, Any], ...] = ()
    untested: str | None = None  # why the comparison has no result (its rows are no verdict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "task": self.task,
            "model": self.model,
            "a": self.a,
            "b": self.b,
            "metric": self.metric,
            "a_run": self.a_run,
            "b_run": self.b_run,
            "experiment_id": self.experiment_id,
            "n_rows": self.n_rows,
            "n_disagree": self.n_disagree,
            "n_shown": self.n_shown,
            "cap": self.cap,
            "counts": self.counts.to_dict(),
            "diffs": [[[op, text] for op, text in d] for d in self.diffs],
            "rows": [r.to_dict() for r in self.rows],
            "slices": [dict(s) for s in self.slices],
            "classes": [dict(c) for c in self.classes],
            "untested": self.untested,
        }


@dataclass(frozen=True)
class Figure:
    """A figure of the report, as PNG bytes in base64."""

    name: str
    png_base64: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "png_base64": self.png_base64}


@dataclass(frozen=True)
class ReportDoc:
    """The whole report (`to_dict`: the JSON the renderer takes, version 1)."""

    kind: Literal["sweep", "import"]
    title: str
    name: str
    id: str
    created: str
    status: str
    ui_base: str | None
    notes: tuple[str, ...] = ()
    comparisons: tuple[Mapping[str, Any], ...] = ()
    figures: tuple[Figure, ...] = ()
    inputs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    samples: tuple[SampleComparison, ...] = ()
    sequential: tuple[Mapping[str, Any], ...] = ()
    version: int = VERSION

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "kind": self.kind,
            "title": self.title,
            "name": self.name,
            "id": self.id,
            "created": self.created,
            "status": self.status,
            "ui_base": self.ui_base,
            "notes": list(self.notes),
            "comparisons": [dict(c) for c in self.comparisons],
            "figures": [f.to_dict() for f in self.figures],
            "inputs": {t: dict(rows) for t, rows in self.inputs.items()},
            "samples": [s.to_dict() for s in self.samples],
            "sequential": [dict(s) for s in self.sequential],
        }
