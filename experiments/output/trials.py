"""One trial (`workbench run`): its summary and its score line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from experiments.output.common import _f
from experiments.trials.record import TrialStatus

if TYPE_CHECKING:  # start-up time: the reader imports the metrics (numpy)
    from experiments.trials.predictions import UndocumentedLabel


def trial_summary(s: dict[str, Any]) -> str:
    """`workbench run`: a trial's summary (`TrialResult.summary()` plus predictions/tracking)."""
    graded = s.get("graded")
    if s["score"] is not None:
        score_line = f"{s['metric']:<28}{_f(s['score'])}"
    elif s["metric"] == "manual" and s["status"] == TrialStatus.COMPLETE:
        score_line = (
            f"{'score':<28}ungraded (graded by hand: workbench grade export {s['trial_id'][:12]})"
        )
    else:
        score_line = f"{s['metric']:<28}-   (on answered rows: {_f(s['score_on_answered'])})"
    lines = [
        f"task      {s['task']}   split={s['split']}   n={s['n']}   status={s['status']}",
        f"variant   {s['variant']}   ({s['variant_id'][:12]})",
        f"model     {s['model']}   scoring={s['scoring']}",
        score_line,
    ]
    if graded:
        lines.append(f"{'graded rows':<28}{graded}")
    lines += [
        f"{'accuracy':<28}{_f(s['accuracy'])}",
        f"{'invalid rate':<28}{_f(s['invalid_rate'])}",
        f"{'errors':<28}{s['n_errors']}",
        f"{'model calls / cache hits':<28}{s['model_calls']} / {s['cache_hits']}",
        f"{'tokens in / out':<28}"
        + (
            "not counted (log-likelihood scoring: no usage is returned)"
            if str(s.get("scoring", "")).startswith("loglik") and not s["tokens_in"]
            else f"{s['tokens_in']} / {s['tokens_out']}"
        ),
        f"{'cost (USD)':<28}{_f(s['cost'], '.6f')}",
        f"{'wall time (s)':<28}{s['wall_time']}",
        f"predictions {s['predictions']}",
    ]
    if s.get("mlflow_run_id"):
        again = "; this trial was tracked before" if s.get("mlflow_reused") else ""
        lines.append(f"MLflow run  {s['mlflow_run_id']}   ({s.get('mlflow_experiment')}{again})")
    elif s.get("mlflow_kept_run_id"):
        lines.append(
            f"MLflow run  {s['mlflow_kept_run_id']}   ({s.get('mlflow_experiment')}; the finished "
            "trial's, unchanged: this rerun was not logged)"
        )
    return "\n".join(lines)


def score_line(task: str, metric: str, value: float, n: int) -> str:
    """`workbench score`."""
    return f"{task}  {metric} = {value:.4f}  (n={n})"


def undocumented_note(found: Sequence[UndocumentedLabel], how: str) -> str:
    """`workbench score`: the gold labels it scored that no local file documents ("" if
    none), and how the official metric scored them (`metrics.scores_undocumented_gold`)."""
    if not found:
        return ""
    listed = ", ".join(
        f"{u.label!r} ({u.rows} row{'s' if u.rows != 1 else ''}, first line {u.first_line})"
        for u in found
    )
    return (
        "gold answers outside the task's documented labels, scored as LegalBench's "
        f"evaluation.py scores them ({how}): {listed}"
    )
