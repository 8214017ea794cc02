"""A sweep's judge step (``judge:`` in its spec): after the trials, the judge model grades each
generate trial of a task with a rubric, and the sweep reports what that gives.

Through the same response cache as the trials (`judge_trial`): a rerun makes no judge call
it made before. The judge's scores go on the trials' MLflow runs (`judge.tracking`), its cost
joins the sweep's cost line, labelled ``judge``. Then the calibrated comparison of the judged
trials (`experiments.calibrated`), on the pairs the sweep tested: with hand grades, PPI
estimates and intervals; with none yet, the judge's scores alone, labelled as judge scores,
and how many hand grades a valid interval needs. Its figures go in the sweep's report folder
and its numbers on the parent and trial runs (`calibrated.tracked`).

A judge failure (a model that cannot score, a rubric that does not fit, a store that refuses
the judge's metrics) never undoes the trials: it is said beside the sweep's results, with
what to run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments import settings
from experiments.calibrated.by_cell import report_by_cell, sweep_pairs
from experiments.calibrated.figures import write_figures
from experiments.calibrated.frames import Arm
from experiments.calibrated.records import CalibratedReport
from experiments.calibrated.tracked import log_calibrated
from experiments.judge.run import JudgeRun, judge_trial
from experiments.judge.store import load_judge_scores
from experiments.sweeps.judge_spec import SweepJudge
from experiments.tracking import store_errors
from experiments.trials.record import TrialRecord
from promptlib.errors import WorkbenchError
from promptlib.tasks import Catalog

if TYPE_CHECKING:
    from experiments.tracking import Tracker

GENERATE = "generate"


@dataclass(frozen=True)
class SweepJudging:
    """What the judge step did: the judge, each trial's judge run, the trials it left out
    and why, its cost (this invocation's calls), the calibrated report (None with `error`
    saying why), and the figures written."""

    sweep: str
    model: str
    scoring: str
    criteria: tuple[str, ...]
    runs: tuple[JudgeRun, ...]
    skipped: tuple[Mapping[str, str], ...]
    cost: Mapping[str, Any]
    report: CalibratedReport | None
    error: str | None = None
    figures: tuple[str, ...] = ()
    tracked: bool = False
    failed: tuple[Mapping[str, str], ...] = field(default_factory=tuple)

    @property
    def n_hand(self) -> int:
        """Hand-graded rows over the report's variants and criteria."""
        if self.report is None:
            return 0
        return sum(m.n_hand for c in self.report.cells for m in c.means)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "scoring": self.scoring,
            "criteria": list(self.criteria),
            "judged": [
                {
                    "trial_id": r.trial_id,
                    "task": r.task,
                    "judge_id": r.judge_id,
                    "n": r.n,
                    "n_unparsed": r.n_unparsed,
                    "n_errors": r.n_errors,
                    "cost": r.cost,
                    "status": str(r.status),
                    "mean_judge_score": dict(r.means),
                }
                for r in self.runs
            ],
            "skipped": [dict(s) for s in self.skipped],
            "failed": [dict(s) for s in self.failed],
            "cost": dict(self.cost),
            "calibrated": None if self.report is None else self.report.to_dict(),
            "error": self.error,
            "figures": list(self.figures),
            "n_hand": self.n_hand,
        }


def judge_cost(runs: Sequence[JudgeRun], trial_dirs: Mapping[str, Path]) -> dict[str, Any]:
    """This invocation's judge calls: calls made, cached, tokens and price of the calls made
    (a reused run made none); the price is unknown when a call made has none."""
    calls = sum(r.model_calls for r in runs)
    hits = sum(r.cache_hits + (len(r.criteria) * r.n if r.reused else 0) for r in runs)
    tokens_in = tokens_out = 0
    price: float | None = 0.0
    for r in runs:
        if r.reused or not r.model_calls:
            continue
        for s in load_judge_scores(trial_dirs[r.trial_id], r.judge_id).values():
            if s.cache_hit:
                continue
            tokens_in += s.tokens_in
            tokens_out += s.tokens_out
            if s.cost is None:
                price = None
            elif price is not None:
                price += s.cost
    return {
        "model_calls": calls,
        "cache_hits": hits,
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "cost_usd": price if calls else 0.0,
    }


def judge_sweep(
    name: str,
    judge: SweepJudge,
    ordered: Sequence[TrialRecord],
    scorings: Sequence[str],
    comparisons: Sequence[Mapping[str, Any]],
    catalog: Catalog,
    lm: Any,
    cache: Any,
    *,
    tracker: Tracker | None = None,
    parent_id: str | None = None,
    report_folder: Path | None = None,
    runs_root: Path | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> SweepJudging:
    """Judge the sweep's generate trials (`ordered`, each with its trial's scoring in
    `scorings`), then report and log the calibrated comparison on `comparisons`' pairs."""
    root = runs_root or settings.runs_dir()
    skipped: list[dict[str, str]] = []
    failed: list[dict[str, str]] = []
    runs: list[JudgeRun] = []
    dirs: dict[str, Path] = {}
    arms: list[Arm] = []
    for o, scoring in zip(ordered, scorings, strict=True):
        where = {"task": o.task, "variant": o.variant, "model": o.model, "trial_id": o.trial_id}
        rubrics = judge.rubrics_of(o.task)
        if scoring != GENERATE:
            skipped.append({**where, "reason": f"scored by {scoring}: no explanation to judge"})
            continue
        if rubrics is None:
            skipped.append(
                {**where, "reason": "no rubric shipped for the task: add judge.rubrics: "
                 f"{{{o.task}: FILE}} (copy experiments/judge/rubrics/hearsay.yaml)"}
            )  # fmt: skip
            continue
        trial_dir = root / o.trial_id
        if not (trial_dir / "summary.json").is_file():
            skipped.append(
                {**where, "reason": f"no folder {trial_dir} on this machine (read back from "
                 "MLflow): run the trial here ('workbench run') to judge it"}
            )  # fmt: skip
            continue

        def bar(done: int, total: int, o: TrialRecord = o) -> None:
            if progress:
                progress(done, total, f"judge · {o.task} · {o.variant} · {o.model}")

        try:
            run = judge_trial(
                trial_dir, lm, rubrics, judge.criteria, cache,
                catalog=catalog, scoring=judge.scoring, progress=bar,
            )  # fmt: skip
        except WorkbenchError as e:
            failed.append({**where, "error": str(e)})
            continue
        runs.append(run)
        dirs[o.trial_id] = trial_dir
        arms.append(Arm(o.trial_id, o.task, o.model, o.variant))
        if not run.complete:
            failed.append(
                {**where, "error": f"{run.n_errors} judge call(s) failed: run the sweep again "
                 "(answered calls come from the cache)"}
            )  # fmt: skip
    tracked = False
    if tracker is not None:
        # start-up time: the judge's MLflow logging, only when a judge ran
        from experiments.judge.tracking import log_judge

        try:  # the judge's scores are saved under runs/ whatever the store does
            with store_errors(tracker.config, "logging the judge scores"):
                for run in runs:
                    log_judge(tracker, run, dirs[run.trial_id])
                tracked = bool(runs)
        except WorkbenchError as e:
            failed.append({"task": "-", "variant": "-", "model": judge.model, "error": str(e)})
    report, error, figures = None, None, []
    if arms:
        try:
            pairs, note = sweep_pairs(comparisons, arms)
            report = report_by_cell(name, arms, pairs, pairs_note=note, runs_root=root)
        except WorkbenchError as e:
            error = str(e)
    else:
        error = "no trial was judged" + (f" ({failed[0]['error']})" if failed else "")
    if report is not None and report_folder is not None:
        figures = [str(p) for p in write_figures(report, report_folder, runs_root=root)]
    if report is not None and tracker is not None and parent_id is not None:
        try:  # `workbench grade report` logs them again once the store works
            with store_errors(tracker.config, "logging the calibrated comparisons"):
                log_calibrated(tracker, parent_id, report, runs_root=root)
                for path in figures:
                    tracker.client.log_artifact(parent_id, path)
        except WorkbenchError as e:
            failed.append({"task": "-", "variant": "-", "model": judge.model, "error": str(e)})
    return SweepJudging(
        sweep=name,
        model=judge.model,
        scoring=judge.scoring,
        criteria=judge.criteria,
        runs=tuple(runs),
        skipped=tuple(skipped),
        cost=judge_cost(runs, dirs),
        report=report,
        error=error,
        figures=tuple(figures),
        tracked=tracked,
        failed=tuple(failed),
    )
