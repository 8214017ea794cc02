"""A sweep trial's record (`TrialRecord`) from its stored or fresh predictions, however it ended."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from experiments.sweeps.plan import PlannedTrial
from experiments.trials.record import Prediction, TrialRecord, TrialStatus
from experiments.trials.spec import prompt_hash


def _outcome(
    t: PlannedTrial,
    rt: Any,
    run_id: str,
    preds: Sequence[Mapping[str, Any] | Prediction],
    status: TrialStatus,
    metric: str,
    score: float | None,
    resumed: bool,
) -> TrialRecord:
    """A trial's outcome; each row's prompt hash (its cluster key) is the one recorded with
    its prediction, or recomputed from the resolved trial's prompt where none was."""

    rendered: dict[str, str] = {}
    for row in rt.rows:
        rendered.setdefault(str(row["index"]), prompt_hash(rt.compiled.render(row)))
    return TrialRecord.from_stored(
        task=t.planned.task,
        model=t.model,
        variant=t.variant.name,
        trial_id=rt.id,
        run_id=run_id,
        status=status,
        metric=metric,
        score=score,
        rows=preds,
        rendered=rendered,
        resumed=resumed,
    )


def _lost(rows: Sequence[dict[str, str]], reason: str) -> list[dict[str, Any]]:
    """Predictions of a trial that never ran to the end: every row failed, with the reason."""
    return [
        {"index": r["index"], "answer": r["answer"], "generation": None, "correct": None,
         "error": reason}
        for r in rows
    ]  # fmt: skip
