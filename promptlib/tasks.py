"""The task catalog: one frozen `TaskSpec` per LegalBench task, and loaded `Task`s.

Facts come from the data (label sets, split sizes, prompt files) and from each task's
README (reasoning category, task type). A fact that cannot be derived is recorded as
`None` / "unknown" rather than guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from promptlib.data import SPLITS, DataSource, Table, TaskFiles, read_tsv
from promptlib.errors import DataError, TemplateError, WorkbenchError
from promptlib.templates import ParsedPrompt, parse_prompt, placeholders

if TYPE_CHECKING:
    import datasets
    import pandas as pd

# Official metric names, as LegalBench's evaluation code (evaluation.py) assigns them:
# every task uses exact-match balanced accuracy except these. successor_liability is in the
# code's balanced-accuracy list although the paper reports F1 for it; the code is the default.
SPECIAL_METRICS: dict[str, str] = {
    "sara_numeric": "sara_numeric_within_10pct",
    "citation_prediction_open": "citation_open_contains",
    "definition_extraction": "definition_extraction_stemmed_match",
    "ssla_company_defendants": "ssla_f1",
    "ssla_individual_defendants": "ssla_f1",
    "ssla_plaintiff": "ssla_f1",
    "rule_qa": "manual",
}
DEFAULT_METRIC = "balanced_accuracy"

# README "Legal reasoning type" -> the paper's six categories.
_CATEGORY = {
    "issue-spotting": "issue",
    "rule-recall": "rule",
    "rule-application/rule-conclusion": "conclusion",
    "application/conclusion": "conclusion",
    "interpretation": "interpretation",
    "rhetorical-analysis": "rhetoric",
}

CLASSIFICATION_TYPES = ("binary", "multi-class", "multi-label")
TASK_TYPES = (*CLASSIFICATION_TYPES, "extraction", "generation", "unknown")

# Where a README's task type contradicts the data, the data wins; each override says why.
_TYPE_OVERRIDES: dict[str, tuple[str, str]] = {
    "sara_numeric": ("generation", "answers are dollar amounts, scored numerically"),
    "successor_liability": ("multi-label", "answers list several exceptions, comma-joined"),
}


def metric_for(task: str) -> str:
    return SPECIAL_METRICS.get(task, DEFAULT_METRIC)


def _readme_field(readme: str | None, label: str) -> str | None:
    if readme is None:
        return None
    m = re.search(rf"\*\*{re.escape(label)}\*\*:\s*(.+)", readme)
    return m.group(1).strip() if m else None


def _task_type(name: str, readme: str | None) -> str:
    if name in _TYPE_OVERRIDES:
        return _TYPE_OVERRIDES[name][0]
    raw = (_readme_field(readme, "Task type") or "").lower()
    if not raw:
        return "unknown"
    if "binary" in raw or "yes/no" in raw:
        return "binary"
    if re.search(r"\d+-way classification", raw):
        return "multi-class"
    if "extraction" in raw:
        return "extraction"
    if "generation" in raw:
        return "generation"
    return "unknown"


def _category(readme: str | None) -> str | None:
    raw = _readme_field(readme, "Legal reasoning type")
    return _CATEGORY.get(raw.lower()) if raw else None


def _claude_label_order(files: TaskFiles) -> list[str]:
    """The label order LegalBench's Claude prompt gives ("Reply with either: a, b"), if any."""
    if "claude_prompt.txt" not in files.prompt_files():
        return []
    m = re.search(r"Reply with either:\s*(.+)", files.read_prompt("claude_prompt.txt"))
    return [x.strip() for x in m.group(1).split(",")] if m else []


@dataclass(frozen=True)
class TaskSpec:
    """What is known about a task. Frozen: the same data always gives the same spec."""

    name: str
    category: str | None
    task_type: str
    labels: tuple[str, ...] | None
    metric: str
    prompt_files: tuple[str, ...]
    n_train: int | None
    n_test: int | None
    columns: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def is_classification(self) -> bool:
        return self.task_type in CLASSIFICATION_TYPES

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "category": self.category,
            "task_type": self.task_type,
            "labels": list(self.labels) if self.labels is not None else None,
            "metric": self.metric,
            "prompt_files": list(self.prompt_files),
            "n_train": self.n_train,
            "n_test": self.n_test,
            "columns": list(self.columns),
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class TaskProblem:
    """A task whose spec cannot be built (unreadable TSV, prompt or README), and why."""

    name: str
    error: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "error": self.error}


class Task:
    """A task loaded from a data source: its spec, splits and parsed prompt files."""

    def __init__(self, files: TaskFiles) -> None:
        self.files = files
        self.name = files.name
        self._tables: dict[str, Table] = {}
        self._prompts: dict[str, ParsedPrompt] = {}

    def table(self, split: str) -> Table:
        """A split as read from its TSV (every column kept, values as strings)."""
        if split not in SPLITS:
            raise DataError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
        if split not in self._tables:
            path = self.files.split_path(split)
            if not path.is_file():
                raise DataError(
                    f"task {self.name!r} has no {split} split ({path} is absent); "
                    + (
                        "use --split train, or the full data from Hugging Face (--hf)"
                        if split == "test"
                        else "re-download the task's data"
                    )
                )
            self._tables[split] = read_tsv(path)
        return self._tables[split]

    def has_split(self, split: str) -> bool:
        return self.files.has_split(split)

    def rows(self, split: str) -> list[dict[str, str]]:
        """A split as a list of row dicts (a fresh list; the rows are shared, do not mutate)."""
        return list(self.table(split).rows)

    def dataset(self, split: str) -> datasets.Dataset:
        """A split as a `datasets.Dataset`, every column kept as a string."""
        import datasets

        t = self.table(split)
        return datasets.Dataset.from_dict({c: t.column(c) for c in t.columns})

    def frame(self, split: str) -> pd.DataFrame:
        """A split as a pandas DataFrame of strings, for analysis."""
        import pandas as pd

        t = self.table(split)
        return pd.DataFrame(list(t.rows), columns=list(t.columns), dtype=str)

    def prompt(self, filename: str) -> ParsedPrompt:
        if filename not in self._prompts:
            text = self.files.read_prompt(filename)
            self._prompts[filename] = parse_prompt(text, f"{self.name}/{filename}")
        return self._prompts[filename]

    def check_columns(self, template: str, split: str, where: str) -> None:
        """Fail early, naming the file, if a template needs a column the split lacks."""
        cols = set(self.table(split).columns)
        missing = [c for c in placeholders(template) if c not in cols]
        if missing:
            raise TemplateError(
                f"{where} of task {self.name!r} uses "
                + ", ".join(f"{{{{{c}}}}}" for c in missing)
                + f" but {self.files.split_path(split)} has no such column "
                f"(columns: {', '.join(sorted(cols))}); fix the template or the TSV header"
            )

    @cached_property
    def spec(self) -> TaskSpec:
        readme = self.files.readme()
        notes: list[str] = []
        task_type = _task_type(self.name, readme)
        if self.name in _TYPE_OVERRIDES:
            notes.append(f"task type set to {task_type}: {_TYPE_OVERRIDES[self.name][1]}")
        train = self.table("train") if self.has_split("train") else None
        test = self.table("test") if self.has_split("test") else None
        frames = [f for f in (train, test) if f is not None]
        labels: tuple[str, ...] | None = None
        if task_type in CLASSIFICATION_TYPES and frames:
            answers = [a for f in frames for a in f.column("answer")]
            if task_type == "multi-label":
                answers = [a.strip() for ans in answers for a in ans.split(",")]
            seen = dict.fromkeys(a for a in answers)
            order = [x for x in _claude_label_order(self.files) if x in seen]
            labels = tuple(order + sorted(a for a in seen if a not in order))
        for empty in self.files.empty_prompt_files():
            notes.append(f"{empty} is empty in this data")
        for split, f in (("train", train), ("test", test)):
            if f is None:
                notes.append(f"no {split} split in this data")
        cols = list(dict.fromkeys(c for f in frames for c in f.columns))
        return TaskSpec(
            name=self.name,
            category=_category(readme),
            task_type=task_type,
            labels=labels,
            metric=metric_for(self.name),
            prompt_files=self.files.prompt_files(),
            n_train=len(train) if train is not None else None,
            n_test=len(test) if test is not None else None,
            columns=tuple(cols),
            notes=tuple(notes),
        )


class Catalog:
    """Every task of a data source, loaded lazily and kept once per process."""

    def __init__(self, source: DataSource) -> None:
        self.source = source
        self._tasks: dict[str, Task] = {}

    def names(self) -> tuple[str, ...]:
        return self.source.names()

    def task(self, name: str) -> Task:
        if name not in self._tasks:
            self._tasks[name] = Task(self.source.task(name))
        return self._tasks[name]

    def specs(self) -> list[TaskSpec]:
        """Every task's spec; a broken task raises its error (`survey` lists around it)."""
        return [self.task(n).spec for n in self.names()]

    def survey(self) -> list[TaskSpec | TaskProblem]:
        """Every task in name order: its spec, or a `TaskProblem` saying why it has none.

        One broken task (e.g. a malformed or non-UTF-8 TSV) does not hide the others;
        asking for it directly (`task(name).spec`) still raises its error.
        """
        out: list[TaskSpec | TaskProblem] = []
        for name in self.names():
            try:
                out.append(self.task(name).spec)
            except WorkbenchError as e:
                out.append(TaskProblem(name, str(e).replace("\n", " ")))
        return out
