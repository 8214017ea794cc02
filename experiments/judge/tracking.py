"""The judge's scores on the trial's MLflow runs (`workbench judge`, when the trial was tracked).

Every active run of the trial (tag ``workbench.trial_id``: its `workbench run` run and the
child runs of the sweeps that ran it) gets, for each judge (its id's first 12 hex digits,
``J``), metrics named as judge scores, never as correctness:

- ``judge_score.<criterion>.J``: the mean judge score of the criterion over the rows judged;
- ``judge_unparsed.J``, ``judge_errors.J``, ``judge_n.J`` and ``judge_cost.J`` (when known);

tags ``judge.J.id`` (the whole judge id), ``judge.J.model``, ``judge.J.scoring`` and
``judge.J.rubric.<criterion>`` (the rubric's sha256), and the judge's two files as artifacts
under ``judge/``. Neither holds a key: the judge model's identity is stored without a URL's
password (`judge.run`), and replies are hidden of secrets by the gateway and the cache.
"""

from __future__ import annotations

from pathlib import Path

from experiments.judge.run import JudgeRun
from experiments.judge.store import meta_path, scores_path
from experiments.names import TRIAL_ID
from experiments.tracking.store import TrackingError, _first_line
from experiments.tracking.tracker import Tracker

SHORT = 12


def judge_metrics(run: JudgeRun) -> dict[str, float]:
    """The judge's MLflow metrics (judge scores, not correctness)."""
    j = run.judge_id[:SHORT]
    out: dict[str, float] = {
        f"judge_n.{j}": float(run.n),
        f"judge_unparsed.{j}": float(run.n_unparsed),
        f"judge_errors.{j}": float(run.n_errors),
    }
    for criterion, mean in run.means.items():
        if mean is not None:
            out[f"judge_score.{criterion}.{j}"] = float(mean)
    if run.cost is not None:
        out[f"judge_cost.{j}"] = float(run.cost)
    return out


def judge_tags(run: JudgeRun) -> dict[str, str]:
    j = run.judge_id[:SHORT]
    tags = {
        f"judge.{j}.id": run.judge_id,
        f"judge.{j}.model": run.model,
        f"judge.{j}.scoring": run.scoring,
    }
    for criterion, rubric in run.rubrics.items():
        tags[f"judge.{j}.rubric.{criterion}"] = str(rubric["sha256"])
    return tags


def trial_run_ids(tracker: Tracker, trial_id: str) -> list[str]:
    """The active MLflow runs of a trial, in any experiment."""
    from mlflow.entities import ViewType

    exps = [
        e.experiment_id for e in tracker.client.search_experiments(view_type=ViewType.ACTIVE_ONLY)
    ]
    if not exps:
        return []
    runs = tracker.client.search_runs(
        experiment_ids=exps,
        filter_string=f"tags.`{TRIAL_ID}` = '{trial_id}'",
        run_view_type=ViewType.ACTIVE_ONLY,
    )
    return [str(r.info.run_id) for r in runs]


def log_judge(tracker: Tracker, run: JudgeRun, trial_dir: Path) -> list[str]:
    """Put the judge's scores on every run of the trial; the run ids (none: not tracked).

    A store failure raises `TrackingError` naming it: the judge scores are on disk already,
    and running 'workbench judge' again (from the cache) logs them."""
    try:
        run_ids = trial_run_ids(tracker, run.trial_id)
        for run_id in run_ids:
            tracker._log_metrics(run_id, judge_metrics(run))
            for key, value in judge_tags(run).items():
                tracker.client.set_tag(run_id, key, value)
            for path in (scores_path(trial_dir, run.judge_id), meta_path(trial_dir, run.judge_id)):
                tracker.client.log_artifact(run_id, str(path), artifact_path="judge")
    except Exception as e:  # the store refused a write
        raise TrackingError(
            f"cannot write the judge scores of trial {run.trial_id[:12]} to MLflow "
            f"({_first_line(e)}); they are saved in {trial_dir / 'judge'}: run 'workbench "
            "judge' again once the store works, or add --no-track"
        ) from None
    return run_ids
