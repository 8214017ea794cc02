"""A sweep trial's outcome: the rows the comparisons and the report read, however it ended."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from experiments.sweeps.plan import PlannedTrial
from experiments.trials.runner import prompt_hash


@dataclass
class TrialOutcome:
    task: str
    model: str
    variant: str
    trial_id: str
    run_id: str
    status: str  # a TrialStatus value
    n_errors: int
    metric: str
    score: float | None  # the official score; None unless the trial is complete
    indices: list[str]
    answers: list[str]  # raw answers
    generations: list[str | None]  # raw generations; None where the call failed
    correct: list[bool | None]
    resumed: bool
    prompt_hashes: list[str | None] = field(default_factory=list)  # per row: the clusters

    @property
    def complete(self) -> bool:
        return self.status == "complete"


def _outcome(
    t: PlannedTrial,
    rt: Any,
    run_id: str,
    preds: list[dict[str, Any]],
    status: str,
    metric: str,
    score: float | None,
    resumed: bool,
) -> TrialOutcome:
    """A trial's outcome; each row's prompt hash (its cluster key) is the one recorded with
    its prediction, or recomputed from the resolved trial's prompt where none was."""

    rendered: dict[str, str] = {}
    for row in rt.rows:
        rendered.setdefault(str(row["index"]), prompt_hash(rt.compiled.render(row)))
    return TrialOutcome(
        task=t.planned.task,
        model=t.model,
        variant=t.variant.name,
        trial_id=rt.id,
        run_id=run_id,
        status=status,
        n_errors=sum(p.get("error") is not None for p in preds),
        metric=metric,
        score=score if status == "complete" else None,
        indices=[str(p["index"]) for p in preds],
        answers=[str(p["answer"]) for p in preds],
        generations=[p["generation"] for p in preds],
        correct=[p["correct"] for p in preds],
        resumed=resumed,
        prompt_hashes=[p.get("prompt_hash") or rendered.get(str(p["index"])) for p in preds],
    )


def _lost(rows: Sequence[dict[str, str]], reason: str) -> list[dict[str, Any]]:
    """Predictions of a trial that never ran to the end: every row failed, with the reason."""
    return [
        {"index": r["index"], "answer": r["answer"], "generation": None, "correct": None,
         "error": reason}
        for r in rows
    ]  # fmt: skip
