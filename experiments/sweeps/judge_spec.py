"""A sweep spec's ``judge:`` key: the judge model that grades the sweep's explanations.

::

    judge:
      model: local/smollm2          # any model 'workbench run' takes
      scoring: loglik               # loglik or generate (default: loglik for local models)
      criteria: [correctness, analysis]
      rubrics: {hearsay: my_rubrics/hearsay.yaml}   # replaces a task's shipped rubric

After the trials, the driver judges every generate trial of a task with a rubric (shipped,
or given here) through the same response cache (`experiments.sweeps.judging`). The key is
part of the spec, so of the sweep's id: a sweep with a judge is its own sweep, whose trials
come from the response cache. A spec without the key is the sweep it always was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.judge.rubrics import CRITERIA, RubricError, TaskRubrics, load_rubrics
from experiments.judge.run import JUDGE_SCORINGS, JudgeScoring, default_judge_scoring
from promptlib.errors import WorkbenchError, did_you_mean

JUDGE_KEYS = ("model", "scoring", "criteria", "rubrics")


class JudgeSpecError(WorkbenchError):
    """The spec's ``judge:`` key is malformed (the message names the file and the field)."""


@dataclass(frozen=True)
class SweepJudge:
    """The judge a sweep runs after its trials: its model, scoring, criteria and the
    rubrics that replace shipped ones (task -> rubrics, read and checked when the spec
    loads)."""

    model: str
    scoring: JudgeScoring
    criteria: tuple[str, ...]
    rubrics: Mapping[str, TaskRubrics] = field(default_factory=dict)

    def rubrics_of(self, task: str) -> TaskRubrics | None:
        """The task's rubrics: the spec's file, else the shipped one; None when neither."""
        if task in self.rubrics:
            return self.rubrics[task]
        try:
            return load_rubrics(task)
        except RubricError:
            return None


def check_judge(where: str, raw: Any, tasks: tuple[str, ...]) -> SweepJudge | None:
    """The ``judge:`` key, checked; None when the spec has none."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise JudgeSpecError(f"{where}: judge must be a mapping ({', '.join(JUDGE_KEYS)})")
    for key in raw:
        if key not in JUDGE_KEYS:
            raise JudgeSpecError(
                f"{where}: judge: unknown field {key!r}{did_you_mean(str(key), JUDGE_KEYS)} "
                f"(fields: {', '.join(JUDGE_KEYS)})"
            )
    model = raw.get("model")
    if not isinstance(model, str) or not model.strip():
        raise JudgeSpecError(
            f"{where}: judge.model is required: the judge model (local/smollm2, openai/...)"
        )
    scoring = raw.get("scoring") or default_judge_scoring(model)
    if scoring not in JUDGE_SCORINGS:
        raise JudgeSpecError(
            f"{where}: judge.scoring must be {' or '.join(JUDGE_SCORINGS)}, not {scoring!r}"
        )
    criteria = raw.get("criteria", list(CRITERIA))
    if not isinstance(criteria, list) or not criteria:
        raise JudgeSpecError(
            f"{where}: judge.criteria must be a non-empty list of {', '.join(CRITERIA)}"
        )
    for c in criteria:
        if c not in CRITERIA:
            raise JudgeSpecError(
                f"{where}: judge.criteria: unknown criterion {c!r}; use {', '.join(CRITERIA)}"
            )
    if len(set(criteria)) != len(criteria):
        raise JudgeSpecError(f"{where}: judge.criteria lists a criterion twice; list it once")
    return SweepJudge(
        model=model.strip(),
        scoring=scoring,
        criteria=tuple(str(c) for c in criteria),
        rubrics=_rubrics(where, raw.get("rubrics"), tasks),
    )


def _rubrics(where: str, raw: Any, tasks: tuple[str, ...]) -> dict[str, TaskRubrics]:
    """``rubrics: {task: path}``: each file read now (a path relative to the current
    folder, as a spec's other file paths), so a bad file stops the sweep before any call."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise JudgeSpecError(f"{where}: judge.rubrics must map a task to its rubric file")
    out: dict[str, TaskRubrics] = {}
    for task, path in raw.items():
        if task not in tasks:
            raise JudgeSpecError(
                f"{where}: judge.rubrics: {task!r} is not one of the spec's tasks"
                f"{did_you_mean(str(task), tasks)}"
            )
        if not isinstance(path, str) or not path.strip():
            raise JudgeSpecError(f"{where}: judge.rubrics.{task} must be a file path")
        try:
            out[str(task)] = load_rubrics(str(task), Path(path))
        except RubricError as e:
            raise JudgeSpecError(f"{where}: judge.rubrics.{task}: {e}") from None
    return out
