"""A user task's declared facts (`task.json`), and the folder user tasks live in.

LegalBench states a task's type and labels in its README, which `promptlib.tasks` parses with
care. A task made by ``workbench task new`` says them once, exactly, in a small JSON file
beside its TSVs: the task type, the label set (or none, for extraction and generation), the
metric and the columns. The catalog reads it instead of guessing from prose.

`WORKBENCH_TASKS_DIR` is read here with its default (promptlib cannot import experiments);
`experiments.settings` reads the same setting and a test checks the two defaults agree.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptlib import inputs
from promptlib.errors import DataError

#: where user tasks live when `WORKBENCH_TASKS_DIR` is unset (the XDG data folder's place)
TASKS_DIR_ENV = "WORKBENCH_TASKS_DIR"
DEFAULT_TASKS_DIR = "~/.local/share/workbench/tasks"
META_FILE = "task.json"
META_FORMAT = 1
#: the largest task.json read (it holds a few names and labels)
MAX_META_BYTES = 1 << 20

#: The metrics a user task may declare (their implementations: `experiments.metrics.METRICS`).
#: balanced_accuracy is LegalBench's; macro_f1 is F1 averaged over the gold classes;
#: exact_match is the share of replies equal to the answer (LegalBench's normalisation).
USER_METRICS = ("balanced_accuracy", "macro_f1", "exact_match")
#: The task types a user task may have (multi-label answers are not supported).
USER_TASK_TYPES = ("binary", "multi-class", "extraction", "generation")


def user_tasks_dir() -> Path:
    """The user task folder: ``$WORKBENCH_TASKS_DIR``, else `DEFAULT_TASKS_DIR` (expanded)."""
    return Path(os.environ.get(TASKS_DIR_ENV) or DEFAULT_TASKS_DIR).expanduser()


@dataclass(frozen=True)
class TaskMeta:
    """What `task.json` declares. Frozen: the catalog's spec is built from it."""

    task_type: str
    labels: tuple[str, ...] | None
    metric: str
    input_columns: tuple[str, ...]
    slice_column: str | None = None
    #: where the rows came from (a file path or hf:NAME), for people reading the folder
    source: str = ""

    def __post_init__(self) -> None:
        if self.task_type not in USER_TASK_TYPES:
            raise DataError(f"task type {self.task_type!r} is none of {', '.join(USER_TASK_TYPES)}")
        if self.metric not in USER_METRICS:
            raise DataError(f"metric {self.metric!r} is none of {', '.join(USER_METRICS)}")
        classification = self.task_type in ("binary", "multi-class")
        if classification != (self.labels is not None):
            raise DataError(
                f"a {self.task_type} task "
                + ("needs a label set" if classification else "has no label set")
            )
        if self.labels is not None and len(self.labels) < 2:
            raise DataError(f"a label set needs at least two labels, not {list(self.labels)}")
        if not self.input_columns:
            raise DataError("a task needs at least one input column")

    def to_json(self) -> dict[str, Any]:
        return {
            "format": META_FORMAT,
            "task_type": self.task_type,
            "labels": list(self.labels) if self.labels is not None else None,
            "metric": self.metric,
            "input_columns": list(self.input_columns),
            "slice_column": self.slice_column,
            "source": self.source,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, indent=1) + "\n"


_FIELDS: dict[str, tuple[type, ...]] = {
    "format": (int,),
    "task_type": (str,),
    "labels": (list, type(None)),
    "metric": (str,),
    "input_columns": (list,),
    "slice_column": (str, type(None)),
    "source": (str,),
}


def read_meta(path: Path) -> TaskMeta:
    """A task.json, checked; every problem is a `DataError` naming the file and the field."""
    data = inputs.read_text(path, "task metadata", DataError, MAX_META_BYTES)
    try:
        doc = inputs.loads(data, f"task metadata {path}", DataError)
    except json.JSONDecodeError as e:
        raise DataError(
            f"{path}: not valid JSON ({e.msg} at line {e.lineno}); recreate the task with "
            "workbench task new --force"
        ) from None
    if not isinstance(doc, dict):
        raise DataError(f"{path}: expected a JSON object (task_type, labels, metric, ...)")
    missing = [k for k in _FIELDS if k not in doc and k not in ("slice_column", "source")]
    if missing:
        raise DataError(f"{path}: missing field(s) {', '.join(missing)}; recreate the task")
    unknown = sorted(set(doc) - set(_FIELDS))
    if unknown:
        raise DataError(f"{path}: unknown field(s) {', '.join(unknown)}; recreate the task")
    for key, value in doc.items():
        if not isinstance(value, _FIELDS[key]) or isinstance(value, bool):
            raise DataError(f"{path}: field {key!r} has the wrong type ({value!r})")
    if doc["format"] != META_FORMAT:
        raise DataError(
            f"{path}: format {doc['format']} is not {META_FORMAT}, the one this version reads; "
            "recreate the task with workbench task new"
        )
    for key in ("labels", "input_columns"):
        items = doc[key]
        if items is not None and not all(isinstance(x, str) and x for x in items):
            raise DataError(f"{path}: field {key!r} must list non-empty strings")
    try:
        return TaskMeta(
            task_type=doc["task_type"],
            labels=tuple(doc["labels"]) if doc["labels"] is not None else None,
            metric=doc["metric"],
            input_columns=tuple(doc["input_columns"]),
            slice_column=doc.get("slice_column"),
            source=doc.get("source", ""),
        )
    except DataError as e:
        raise DataError(f"{path}: {e}; fix the field or recreate the task") from None
