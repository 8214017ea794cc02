"""What `workbench judge` prints: one line per trial judged, and the reminder that judge
scores are not correctness."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.judge.run import JudgeRun

NOT_CORRECTNESS = (
    "judge scores are not correctness until calibrated with hand grades (`workbench grade sheet`)"
)


def run_line(run: JudgeRun) -> str:
    """One trial's judge run: its ids, counts, cost and mean judge score per criterion."""
    cost = "cost unknown" if run.cost is None else f"cost ${run.cost:.4f}"
    means = ", ".join(f"{c} {'-' if m is None else f'{m:.3f}'}" for c, m in run.means.items())
    how = (
        "reused (already judged)"
        if run.reused
        else f"{run.model_calls} calls, {run.cache_hits} cached"
    )
    return (
        f"trial {run.trial_id[:12]} ({run.task}): judge {run.judge_id[:12]} ({run.model}, "
        f"{run.scoring}) · {run.n} rows judged · {run.n_unparsed} unparsed · {run.n_errors} "
        f"errors · {cost} · {how} · {run.status} · mean judge score: {means}"
    )


def run_record(run: JudgeRun, tracked: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON of one judge run (`--json`)."""
    return {
        "trial_id": run.trial_id,
        "task": run.task,
        "judge_id": run.judge_id,
        "model": run.model,
        "scoring": run.scoring,
        "criteria": list(run.criteria),
        "n": run.n,
        "n_unparsed": run.n_unparsed,
        "n_errors": run.n_errors,
        "cost": run.cost,
        "status": str(run.status),
        "mean_judge_score": dict(run.means),
        "rubrics": {c: dict(r) for c, r in run.rubrics.items()},
        "scores": str(run.path),
        "model_calls": run.model_calls,
        "cache_hits": run.cache_hits,
        "reused": run.reused,
        "mlflow_run_ids": list(tracked),
    }
