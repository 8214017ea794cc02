"""Rubrics: what the judge is told a criterion means for one task, one YAML file per task.

A rubric file (``experiments/judge/rubrics/<task>.yaml``, shipped as package data; any file
of the same shape replaces it with ``workbench judge --rubric TASK=FILE``)::

    task: hearsay
    input: "{{text}} Is there hearsay?"   # the task's own question, from the row's columns
    reference: "{{answer}}"               # optional (this is the default): the gold answer
    rule: |                               # the rule the answer applies
      ...
    criteria:                             # one rubric per criterion (the paper's two)
      correctness: |
        ...
      analysis: |
        ...

The judge sees the task's input, never the variant's prompt: it must be blind to the variant
it grades. Each criterion's rubric is hashed (`Rubric.sha256`) over everything of the file that
reaches that criterion's judge prompt, so an edited rubric is another judge (`ids.judge_id`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from experiments import ids
from promptlib.errors import TemplateError, WorkbenchError
from promptlib.templates import fill, placeholders
from promptlib.yamlsafe import safe_yaml_load

CRITERIA = ("correctness", "analysis")
"""The paper's two criteria (Section "rule-application"); `experiments.grading.criteria`
names the same two for the hand grades."""

SHIPPED = "rubrics"
"""The package folder of the shipped rubrics (package data, see pyproject.toml)."""

_KEYS = ("task", "input", "reference", "rule", "criteria")


class RubricError(WorkbenchError):
    """A rubric file is missing or malformed; the message names the file and the field."""


@dataclass(frozen=True)
class Rubric:
    """One criterion's rubric for one task, as the judge prompt uses it."""

    task: str
    criterion: str
    input: str  # template of the task's input, {{column}} placeholders
    reference: str  # template of the reference answer
    rule: str
    text: str  # what the criterion asks, for this task
    path: str  # where it was read (a shipped file: its package path)

    @property
    def sha256(self) -> str:
        """The rubric's identity: every field that reaches the judge prompt (not `path`)."""
        return ids.canonical_sha256(
            {
                "task": self.task,
                "criterion": self.criterion,
                "input": self.input,
                "reference": self.reference,
                "rule": self.rule,
                "text": self.text,
            }
        )

    def question(self, row: Mapping[str, str], where: str) -> str:
        """The task's input for `row` (its columns), as the judge sees it."""
        return fill(self.input, row, where=f"{where}: rubric {self.path} field 'input'")

    def gold(self, row: Mapping[str, str], where: str) -> str:
        """The reference answer for `row`."""
        return fill(self.reference, row, where=f"{where}: rubric {self.path} field 'reference'")


@dataclass(frozen=True)
class TaskRubrics:
    """A task's rubrics, one per criterion, from one file."""

    task: str
    path: str
    rubrics: Mapping[str, Rubric]

    def of(self, criterion: str) -> Rubric:
        if criterion not in self.rubrics:
            raise RubricError(
                f"{self.path}: field 'criteria' has no rubric for {criterion!r} (it has "
                f"{', '.join(self.rubrics) or 'none'}); add one or judge other --criteria"
            )
        return self.rubrics[criterion]

    def shas(self, criteria: tuple[str, ...]) -> dict[str, str]:
        """criterion -> rubric sha256, for the judge id."""
        return {c: self.of(c).sha256 for c in criteria}


def shipped_tasks() -> tuple[str, ...]:
    """The tasks a rubric is shipped for."""
    folder = resources.files("experiments.judge").joinpath(SHIPPED)
    return tuple(
        sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))
    )


def load_rubrics(task: str, path: Path | None = None) -> TaskRubrics:
    """The rubrics of `task`: from `path` (a ``--rubric`` file) or the shipped file."""
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise RubricError(f"{path}: cannot read the rubric file ({e})") from None
        return parse_rubrics(text, str(path), task)
    resource = resources.files("experiments.judge").joinpath(SHIPPED, f"{task}.yaml")
    if not resource.is_file():
        raise RubricError(
            f"no rubric is shipped for task {task!r} (shipped: {', '.join(shipped_tasks())}); "
            f"write one (copy experiments/judge/rubrics/hearsay.yaml) and pass "
            f"--rubric {task}=FILE"
        )
    return parse_rubrics(
        resource.read_text(encoding="utf-8"), f"experiments/judge/rubrics/{task}.yaml", task
    )


def _text(doc: Mapping[str, Any], key: str, where: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value.strip():
        raise RubricError(f"{where}: field {key!r} must be a non-empty text")
    return value.strip()


def parse_rubrics(text: str, where: str, task: str | None = None) -> TaskRubrics:
    """A rubric file's rubrics, each field checked (errors name `where` and the field)."""
    doc = safe_yaml_load(text, where, RubricError)
    if not isinstance(doc, dict):
        raise RubricError(f"{where}: a rubric file is a mapping with fields {', '.join(_KEYS)}")
    unknown = sorted(str(k) for k in doc if k not in _KEYS)
    if unknown:
        raise RubricError(
            f"{where}: unknown field(s) {', '.join(unknown)}; a rubric has {', '.join(_KEYS)}"
        )
    name = _text(doc, "task", where)
    if task is not None and name != task:
        raise RubricError(f"{where}: field 'task' is {name!r}, but it is given for task {task!r}")
    template = _text(doc, "input", where)
    if not placeholders(template):
        raise RubricError(
            f"{where}: field 'input' names no column of the task ({{{{text}}}} or the like): "
            "the judge would not see the question"
        )
    reference = _text(doc, "reference", where) if "reference" in doc else "{{answer}}"
    rule = _text(doc, "rule", where)
    criteria = doc.get("criteria")
    if not isinstance(criteria, dict) or not criteria:
        raise RubricError(
            f"{where}: field 'criteria' must map each criterion ({', '.join(CRITERIA)}) to "
            "its rubric text"
        )
    rubrics: dict[str, Rubric] = {}
    for criterion, body in criteria.items():
        if criterion not in CRITERIA:
            raise RubricError(
                f"{where}: field 'criteria.{criterion}': unknown criterion; use "
                f"{' or '.join(CRITERIA)}"
            )
        if not isinstance(body, str) or not body.strip():
            raise RubricError(f"{where}: field 'criteria.{criterion}' must be a non-empty text")
        rubrics[criterion] = Rubric(
            task=name,
            criterion=criterion,
            input=template,
            reference=reference,
            rule=rule,
            text=body.strip(),
            path=where,
        )
    return TaskRubrics(task=name, path=where, rubrics=rubrics)


__all__ = [
    "CRITERIA",
    "Rubric",
    "RubricError",
    "TaskRubrics",
    "TemplateError",
    "load_rubrics",
    "parse_rubrics",
    "shipped_tasks",
]
