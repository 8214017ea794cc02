"""The sweep driver: plan, sweep id, parent run, the claimed trials, their outcomes, the report."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.analysis.records import AcrossTaskTest, Comparison
from experiments.generate.review import files_in_sweep, unreviewed
from experiments.llm.types import clip
from experiments.metrics import is_rule_conclusion
from experiments.reports.files import report_files
from experiments.reports.folders import INDEX, ReportFolder
from experiments.sweeps.cost import Cost
from experiments.sweeps.executors import Executor, LocalExecutor, TrialJob, TrialLost
from experiments.sweeps.html_report import HtmlReport, html_report
from experiments.sweeps.judging import SweepJudging, judge_sweep
from experiments.sweeps.outcomes import _lost, _outcome
from experiments.sweeps.plan import (
    PlannedTask,
    PlannedTrial,
    is_arm,
    note_items,
    plan_tasks,
    skipped_items,
    skipped_variants,
    sweep_id,
    trial_plan,
)
from experiments.sweeps.report import _figures, _sensitivity, _write_report, compare
from experiments.sweeps.result import ReportFiles, SweepResult
from experiments.sweeps.sequential import (
    MemoryCache,
    SequentialRun,
    check_metrics,
    order_trials,
    run_sequential,
    sequential_params,
    sequential_rows,
)
from experiments.sweeps.sequential_result import SequentialComparison
from experiments.sweeps.spec import SpecError, SweepSpec
from experiments.tracking import TrackingError, log_sensitivity, store_errors
from experiments.tracking.generations import mark_unreviewed
from experiments.trials.record import SweepStatus, TrialRecord, TrialStatus
from experiments.trials.run import FIRST_ERROR_CHARS, TrialResult
from experiments.trials.spec import LOGLIK, ResolvedTrial, resolve_trial
from experiments.trials.store import save_result
from promptlib.errors import WorkbenchError
from promptlib.tasks import Catalog

if TYPE_CHECKING:
    from experiments.tracking import Tracker

SEQUENTIAL_NO_SENSITIVITY = (
    "sequential design: each arm stops on its own rows, so no sensitivity analysis (run the "
    "fixed design for it)"
)


class FinishedSweepKept(WorkbenchError):
    """A rerun of a FINISHED sweep ended with failed rows: nothing of it was logged or
    written, the finished sweep stands as it was (exit 1, as for incomplete trials)."""

    exit_code = 1

    def __init__(self, name: str, incomplete: list[dict[str, Any]]) -> None:
        first = incomplete[0]
        listed = f"{first['task']} · {first['variant']} · {first['model']}"
        more = f" and {len(incomplete) - 1} more" if len(incomplete) > 1 else ""
        super().__init__(
            f"this rerun of sweep {name!r} is incomplete ({len(incomplete)} trial(s) with failed "
            f"rows: {listed}{more}) and was not logged: the finished sweep is unchanged (its "
            "parent run stays FINISHED with its trial runs and comparisons, and its reports "
            "are as they were). Run the same command again to retry"
        )


def run_sweep(
    spec: SweepSpec,
    catalog: Catalog,
    *,
    models: tuple[str, ...] | None = None,
    only: tuple[str, ...] | None = None,
    limit: int | None = None,
    tracker: Tracker,
    lm_factory: Any,
    cache: Any = None,
    progress: Any = None,
    reports_dir: Path | None = None,
    executor: Executor | None = None,
    before_trials: Any = None,
) -> SweepResult:
    """Run (or resume) a sweep, log it to the tracker, and test its comparisons.

    Each trial is claimed before it runs (see `Tracker.claim`): one already FINISHED is read
    back; one a peer process is running is left for later and waited for at the end. An
    incomplete trial's run ends FAILED and its comparisons get no p-value; the parent ends
    FINISHED only when every trial is complete. A rerun never demotes a FINISHED sweep: one
    whose rows fail (a sequential sweep's loop run again without a cache, a lost trial run
    rebuilt) logs and writes nothing and raises `FinishedSweepKept`.

    `executor` (default: `LocalExecutor`, in this process) computes the claimed trials; this
    function alone claims, logs to MLflow and compares, whatever the executor. A trial the
    executor lost (its Ray worker died past its retries) has no run and counts as failed.

    The steps: plan, sweep id, parent run, claim and run the pending trials, collect their
    outcomes, compare and report, end the parent.

    `before_trials(catalog, resolved, lms, cache)`, if given, runs once the trials are
    resolved and before anything is logged, on the trials not FINISHED in the store (those
    are read back, not run), and returns the models and cache the trials run on
    (``--batch``: `experiments.sweeps.batching.SweepBatches` answers the uncached calls by
    batch first).
    """

    models = models or spec.models
    planned, plan = _plan(spec, catalog, models, only, limit)
    lms = {m: lm_factory(m) for m in models}  # cheap: a local model loads on first call
    resolved = [resolve_trial(t.spec, catalog, lms[t.model]) for t in plan]
    if spec.sequential is not None:  # the rows in the design's order, cut at its budget
        resolved = order_trials(spec.sequential, resolved)
        check_metrics(spec.path, resolved)  # an F1 task is refused before any call
    sid = _sweep_id(spec, models, planned, limit, lms, resolved)
    if before_trials is not None:  # ids are taken: the models it gives keep their identity
        # trials a rerun reads back from MLflow make no call: none is sent for them (--batch)
        done = tracker.finished_in_sweep(spec.name, sid)
        todo = [rt for rt in resolved if rt.id not in done]
        lms, cache = before_trials(catalog, todo, lms, cache)
    executor = executor or LocalExecutor()
    # Before anything is logged: a cluster that cannot start the workers, or workers whose
    # local model is not this machine's, stop the sweep with no parent run written.
    executor.start([lms[m] for m in models], cache)
    parent = ParentRun.open(tracker, spec.name, sid, _params(spec, models, planned, limit))
    trials = SweepTrials(spec, catalog, plan, resolved, lms, parent, progress)
    seq: SequentialRun | None = None
    try:
        # generated texts are never used silently: the parent names the unreviewed ones (and
        # loses the tag once they are all `reviewed: true`)
        texts = files_in_sweep(spec.raw)
        unchecked = unreviewed(texts)
        if texts:
            mark_unreviewed(tracker, parent.run_id, unchecked)
        if spec.sequential is not None:
            cache = cache if cache is not None else MemoryCache()  # `MemoryCache`: why
            seq = run_sequential(
                spec.sequential, spec.comparisons, plan, resolved,
                lms=lms, catalog=catalog, cache=cache, progress=progress,
            )  # fmt: skip
            if seq.failed and parent.finished:  # never demoted: nothing was logged yet
                raise FinishedSweepKept(spec.name, seq.failed)
            if seq.cost.model_calls:  # it changed the sweep (a FINISHED one stays so else)
                parent.touch()
            # each arm's trial on the rows it ended on, logged like any trial (every row
            # is in the response cache now)
            trials = SweepTrials(spec, catalog, seq.plan, seq.resolved, lms, parent, progress)
            # in this process, from the loop's cache: a Ray worker (another cache folder or
            # none) would send the rows again and log answers the sequences never saw
            executor = LocalExecutor()
        trials.run(executor, cache)
        ordered = trials.ordered()
        failed = [o for o in ordered if not o.status.ok]
        if failed and parent.finished:  # no incomplete trial was logged (`record`)
            parent.keep()
            raise FinishedSweepKept(spec.name, [_incomplete_item(o) for o in failed])
        if progress:
            progress(len(trials.plan), len(trials.plan), "comparisons")
        rows = sequential_rows(seq) if seq is not None else None
        doc, written, page = _report(
            spec, ordered, catalog, parent, reports_dir, planned, sid, seq, rows, trials.resolved
        )
        cost = _cost(spec, plan, trials, seq)
        judging = None
        if spec.judge is not None:  # the judge step: absent, the sweep is as it always was
            judging = _judge(spec, trials, ordered, doc, lm_factory, cache, written, progress)
            cost = {
                **cost,
                "judge": {"model": judging.model, "scoring": judging.scoring, **judging.cost},
            }
        if parent.running:  # this invocation changed the sweep: log what it cost
            with store_errors(tracker.config, "logging the sweep's cost"):
                tracker.log_cost(parent.run_id, cost, doc.get("sequential") or [])
        ok = not doc["incomplete"]
    except BaseException:
        trials.release()
        parent.abandon()
        raise
    trials.release()
    parent.end(ok)
    result = _summary(
        spec, sid, parent, trials, planned, ordered, doc, written, rows, unchecked, cost
    )
    if page.error is not None:  # the page alone is missing: the comparisons are written
        result = dataclasses.replace(result, html_error=page.error)
    if page.unlogged is not None:  # written, not on the parent run
        result = dataclasses.replace(result, html_unlogged=page.unlogged)
    return result if judging is None else dataclasses.replace(result, judge=judging)


def _judge(
    spec: SweepSpec,
    trials: SweepTrials,
    ordered: list[TrialRecord],
    doc: dict[str, Any],
    lm_factory: Any,
    cache: Any,
    written: ReportFolder | None,
    progress: Any,
) -> SweepJudging:
    """The spec's judge over the sweep's generate trials (`experiments.sweeps.judging`): the
    judge model is the trials' own object when it is one of theirs (a local model loads once)."""
    assert spec.judge is not None
    judge = spec.judge
    lm = trials.lms.get(judge.model) or lm_factory(judge.model)
    return judge_sweep(
        spec.name, judge, ordered, [rt.spec.scoring for rt in trials.resolved],
        doc["comparisons"], trials.catalog, lm, cache,
        tracker=trials.parent.tracker, parent_id=trials.parent.run_id,
        report_folder=written.path if written is not None else None, progress=progress,
    )  # fmt: skip


def _cost(
    spec: SweepSpec, plan: list[PlannedTrial], trials: SweepTrials, seq: SequentialRun | None
) -> dict[str, Any]:
    """What this invocation cost against the full grid (`experiments.sweeps.cost`).

    Fixed: the trials run now (calls and cache hits) plus the rows of those read back from
    MLflow. Sequential: the loop's rows; the logging pass adds only the calls it made (a
    failed row tried again), its cache hits being the loop's rows once more.
    """
    # the grid: every planned trial; under a sequential design only the variants it runs
    # (those a listed pair names), as the dry run counts them
    grid = sum(len(t.planned.rows) for t in plan if seq is None or is_arm(spec, t.variant.name))
    if seq is None:
        total = Cost(cache_hits=trials.resumed_rows)
        total.merge(trials.cost)
        return total.summary(grid, "fixed")
    total = Cost()
    total.merge(seq.cost)
    total.merge(dataclasses.replace(trials.cost, cache_hits=0))
    return total.summary(grid, "sequential")


def _plan(
    spec: SweepSpec,
    catalog: Catalog,
    models: tuple[str, ...],
    only: tuple[str, ...] | None,
    limit: int | None,
) -> tuple[list[PlannedTask], list[PlannedTrial]]:
    """The planned tasks and the trials; a sweep whose every task is skipped is an error."""
    planned = plan_tasks(spec, catalog, only=only, limit=limit)
    plan = trial_plan(spec, planned, models)
    if not plan:  # nothing to run or compare: not a result, and no parent run claims one
        why = "; ".join(f"{p.task}: {p.skipped}" for p in planned if p.skipped)
        raise SpecError(
            f"{spec.path}: every task was skipped ({why or 'no tasks'}), so there is nothing "
            f"to run or compare and nothing was logged; choose tasks that have a {spec.split} "
            "split and support the spec's variants (--tasks, tasks:), or another split:"
        )
    return planned, plan


def _sweep_id(
    spec: SweepSpec,
    models: tuple[str, ...],
    planned: list[PlannedTask],
    limit: int | None,
    lms: dict[str, Any],
    resolved: list[ResolvedTrial],
) -> str:
    """The sweep id of these models, tasks, limit and resolved trials (`plan.sweep_id`)."""
    return sweep_id(
        spec,
        [lms[m].cache_identity() for m in models],
        [p.task for p in planned],
        limit,
        [rt.id for rt in resolved],
    )


def _params(
    spec: SweepSpec, models: tuple[str, ...], planned: list[PlannedTask], limit: int | None
) -> dict[str, Any]:
    """The parent run's MLflow params."""
    return {
        "spec": spec.path,
        "models": ",".join(models),
        "tasks": ",".join(p.task for p in planned),
        "limit": limit if limit is not None else spec.limit,
        "n_resamples": spec.n_resamples,
        "correction": spec.correction,
        "variants": ";".join(v.name for v in spec.variants),
        # only a sequential sweep has these: a fixed sweep's params are as they were
        **(sequential_params(spec.sequential) if spec.sequential is not None else {}),
    }


@dataclass
class ParentRun:
    """The sweep's parent run, and whether this process has marked it RUNNING.

    A FINISHED parent stays FINISHED until this run changes something (a trial to run, other
    comparisons): a rerun with nothing to do, even an interrupted one, leaves it so.
    """

    tracker: Tracker
    run_id: str
    running: bool
    finished: bool = False  # FINISHED when this process found it: never demoted

    @classmethod
    def open(cls, tracker: Tracker, name: str, sid: str, params: dict[str, Any]) -> ParentRun:
        """Find or create the parent run of this sweep id; mark it RUNNING unless FINISHED."""
        run_id = tracker.parent_run(name, sid, params)
        running = tracker.run_status(run_id) != "FINISHED"
        if running:
            tracker.mark_running(run_id)
        return cls(tracker, run_id, running, finished=not running)

    def touch(self) -> None:
        """Mark the parent RUNNING before this process first changes it."""
        if not self.running:
            self.tracker.mark_running(self.run_id)
            self.running = True

    def end(self, ok: bool) -> None:
        """End a parent this process marked RUNNING: FINISHED when `ok`, else FAILED."""
        if self.running:
            with store_errors(self.tracker.config, "ending the sweep's parent run"):
                self.tracker.finish(self.run_id, ok)

    def keep(self) -> None:
        """A FINISHED parent's rerun failed: end it FINISHED again if this process marked it
        RUNNING (it logged only complete trials: every trial still has its FINISHED run)."""
        if self.running and self.finished:
            self.end(True)
            self.running = False

    def abandon(self) -> None:
        """On an error, end a parent this process marked RUNNING as FAILED, if the store lets."""
        if self.running:  # best effort: the error on its way (maybe the store itself) says more
            with contextlib.suppress(Exception):
                self.tracker.finish(self.run_id, False)


@dataclass
class SweepTrials:
    """The sweep's trials as they are claimed, run by the executor, logged and collected."""

    spec: SweepSpec
    catalog: Catalog
    plan: list[PlannedTrial]
    resolved: list[ResolvedTrial]
    lms: dict[str, Any]
    parent: ParentRun
    progress: Any = None
    outcomes: dict[int, TrialRecord] = field(default_factory=dict)
    held: dict[int, contextlib.ExitStack] = field(default_factory=dict)  # claims handed out
    rebuilt: list[str] = field(default_factory=list)  # FINISHED runs that lost predictions
    # trial -> its FINISHED run that lost its predictions: replaced only by a complete rerun
    replacing: dict[int, str] = field(default_factory=dict)
    cost: Cost = field(default_factory=Cost)  # what the trials run now sent (and hits)
    resumed_rows: int = 0  # rows of the trials read back from MLflow, not run

    def run(self, executor: Executor, cache: Any) -> None:
        """Run every trial not yet done; the first pass skips trials a peer is running, the
        second waits for them."""
        pending = list(range(len(self.plan)))
        for wait in (False, True):
            deferred: list[int] = []
            for job, result in executor.map_trials(
                self.claimed(pending, wait, deferred), self.catalog, cache
            ):
                self.record(job, result)
            pending = deferred

    def claimed(self, pending: list[int], wait: bool, deferred: list[int]) -> Iterator[TrialJob]:
        """Claim trials one at a time, as the executor asks for work; yield those to run."""
        tracker = self.parent.tracker
        for i in pending:
            t, rt = self.plan[i], self.resolved[i]
            if self.progress:
                self.progress(
                    len(self.outcomes),
                    len(self.plan),
                    f"{t.planned.task} · {t.variant.name} · {t.model}",
                )
            stack = contextlib.ExitStack()
            try:
                claim = stack.enter_context(tracker.claim(self.parent.run_id, rt.id, wait=wait))
                if claim is None:
                    stack.close()
                    deferred.append(i)
                    continue
                if claim.finished is not None:
                    run_id = claim.finished
                    preds = tracker.stored_predictions(run_id)
                    if preds is not None:
                        stack.close()
                        self.resumed_rows += len(rt.rows)
                        self.outcomes[i] = _outcome(
                            t,
                            rt,
                            run_id,
                            preds,
                            TrialStatus.COMPLETE,
                            rt.metric,
                            tracker.run_metrics(run_id).get("score"),
                            True,
                        )
                        continue
                    # Its artifacts were deleted: rerun it (answers from the response cache)
                    # and log it again, still under this trial's claim; the old run goes only
                    # once a complete one replaces it (`record`).
                    self.replacing[i] = run_id
            except BaseException:
                stack.close()
                raise
            self.held[i] = stack  # released once the result is logged
            yield TrialJob(i, rt, self.catalog.task(t.planned.task), self.lms[t.model])

    def record(self, job: TrialJob, result: TrialResult | TrialLost) -> None:
        """Log a trial's result under the parent and keep its outcome; release its claim."""
        i = job.key
        t, rt = self.plan[i], self.resolved[i]
        tracker, spec = self.parent.tracker, self.spec
        old = self.replacing.pop(i, None)
        try:
            if isinstance(result, TrialLost):  # no run logged: the rerun resumes it
                self.outcomes[i] = _outcome(
                    t,
                    rt,
                    "",
                    _lost(rt.rows, result.reason),
                    TrialStatus.FAILED,
                    rt.metric,
                    None,
                    False,
                )
                return
            self.cost.add(
                result.model_calls, result.cache_hits, result.predictions, result.spent,
                counted=result.spec.scoring not in LOGLIK,
            )  # fmt: skip
            if not result.complete and (old is not None or self.parent.finished):
                # a rerun never demotes a finished result: its FINISHED run stays the record
                self.outcomes[i] = _outcome(
                    t, rt, old or "", result.predictions, result.status, result.metric,
                    result.score, False,
                )  # fmt: skip
                return
            self.parent.touch()  # before this process first changes the sweep
            task = self.catalog.task(t.planned.task)
            doing = f"logging trial {t.planned.task} · {t.variant.name} · {t.model}"
            with store_errors(tracker.config, doing):
                run_id = tracker.log_trial(
                    self.parent.run_id,
                    result,
                    rt.compiled,
                    rt.rows,
                    t.variant.name,
                    {"sweep": spec.name},
                    source=str(task.files.split_path(spec.split)),
                )
            if old is not None:  # the complete rerun replaces the run that lost its files
                tracker.discard_run(old)
                self.rebuilt.append(rt.id)
            # the judge, the grade sheets and the calibrated report read runs/<trial id>/:
            # a judged sweep's trials and every explanation (an application prompt's) are
            # saved there; other sweeps write what they always wrote
            if spec.judge is not None or is_rule_conclusion(result.metric):
                save_result(result)
            self.outcomes[i] = _outcome(
                t,
                rt,
                run_id,
                result.predictions,
                result.status,
                result.metric,
                result.score,
                False,
            )
        finally:
            self.held.pop(i).close()

    def ordered(self) -> list[TrialRecord]:
        """Every trial's outcome, in plan order."""
        return [self.outcomes[i] for i in range(len(self.plan))]

    def release(self) -> None:
        """Release the claims still held (trials handed out whose result never came)."""
        for stack in self.held.values():
            stack.close()


def _report(
    spec: SweepSpec,
    ordered: list[TrialRecord],
    catalog: Catalog,
    parent: ParentRun,
    reports_dir: Path | None,
    planned: list[PlannedTask],
    sid: str,
    seq: SequentialRun | None = None,
    rows: list[SequentialComparison] | None = None,
    resolved: list[ResolvedTrial] | None = None,
) -> tuple[dict[str, Any], ReportFolder | None, HtmlReport]:
    """Compare the outcomes, write reports/<sweep>/<sweep id>/ (`reports.folders`) and log the
    comparisons on the parent, and the HTML report (`sweeps.html_report`, from the trials'
    prompts and rows: `resolved`) as index.html in both places.

    Returns the comparisons document, the report folder written (None without
    `reports_dir`) and the HTML report (its page, or why there is none: then every other
    file is written and logged all the same). What the plan skipped
    (tasks, and variants a task cannot run) is in the document as ``skipped`` when any was.
    A sequential sweep's comparisons are its sequences' (``sequential``: `rows`); its arms end on
    different rows, so it has no fixed-design tests, sensitivity analysis or figures.
    """
    gone = skipped_variants(planned)
    incomplete = [_incomplete_item(o) for o in ordered if not o.status.ok]
    if seq is not None:  # a row failed in the loop: its comparisons stopped, even when the
        # logging pass then answered it (the rerun resumes the loop from the cache)
        listed = {t["trial_id"] for t in incomplete}
        incomplete += [t for t in seq.failed if t["trial_id"] not in listed]
    table: list[Comparison] = []
    across: list[AcrossTaskTest] = []
    if seq is None:
        table, across = compare(spec, ordered, catalog, gone, final=not incomplete)
        figures = _figures(spec, ordered, table, catalog)
        sens, sens_figures = _sensitivity(spec, ordered, catalog, gone)
    else:
        figures, sens_figures = {}, {}
        sens = {"per_task": [], "notes": [SEQUENTIAL_NO_SENSITIVITY]}
    written: ReportFolder | None = None
    doc: dict[str, Any] = {
        "comparisons": [r.to_dict() for r in table],
        "across_tasks": [r.to_dict() for r in across],
        "incomplete": incomplete,
        "sensitivity": sens,
    }
    if rows is not None:
        doc["sequential"] = [r.to_dict() for r in rows]
    if skipped_items(planned):  # absent otherwise: an unchanged sweep's document is unchanged
        doc["skipped"] = skipped_items(planned)
    tracker = parent.tracker
    try:
        files = report_files(doc, {**figures, **sens_figures})
        pngs = {n: v for n, v in files.items() if n.endswith(".png") and isinstance(v, bytes)}
        page = html_report(
            spec, sid, ordered, doc, pngs, resolved or [], catalog, tracker, sequential=rows
        )
        if page.page is not None:
            files[INDEX] = page.page
        if reports_dir is not None:
            written = _write_report(reports_dir, spec.name, sid, files)
        # A FINISHED parent that already holds these comparisons is left untouched.
        logged = (
            None if parent.running else tracker.logged_comparisons(parent.run_id, sorted(figures))
        )
        changed = logged is None or _canonical(logged) != _canonical(doc)
        if changed:
            parent.touch()
            tracker.log_comparisons(parent.run_id, doc, figures)
            if sens.get("per_task"):
                log_sensitivity(tracker, parent.run_id, sens, sens_figures)
        # the page, also on a finished parent whose run predates it (an artifact only); a
        # failed upload costs the page's artifact only, not the logged comparisons' sweep
        if page.page is not None:
            try:
                if changed or not tracker.has_report_html(parent.run_id):
                    tracker.log_report_html(parent.run_id, page.page)
            except TrackingError as e:
                page = dataclasses.replace(page, unlogged=str(e))
    finally:  # pyplot keeps every open figure alive: a long-lived driver would pile them up
        import matplotlib.pyplot as plt

        for fig in {**figures, **sens_figures}.values():
            plt.close(fig)
    return doc, written, page


def _incomplete_item(o: TrialRecord) -> dict[str, Any]:
    """An incomplete trial as the sweep's document lists it, with its first row error (what
    to do, for a missing key or a server that does not answer: `experiments.llm.advice`)."""
    first = next((p.error for p in o.rows if p.error is not None), None)
    return {"task": o.task, "model": o.model, "variant": o.variant, "trial_id": o.trial_id,
            "status": str(o.status), "n_errors": o.n_errors, "n": len(o.indices),
            "first_error": clip(first, FIRST_ERROR_CHARS) if first else None}  # fmt: skip


def _summary(
    spec: SweepSpec,
    sid: str,
    parent: ParentRun,
    trials: SweepTrials,
    planned: list[PlannedTask],
    ordered: list[TrialRecord],
    doc: dict[str, Any],
    written: ReportFolder | None,
    rows: list[SequentialComparison] | None,
    unchecked: list[str],
    cost: dict[str, Any],
) -> SweepResult:
    """What `run_sweep` returns: the sweep, its parent run, its trials and its comparisons,
    and its report folder (``report``; ``figures``: the figures' paths in it)."""
    ok = not doc["incomplete"]
    figures = (
        []
        if written is None
        else [str(written.path / f) for f in written.files if f.endswith(".png")]
    )
    return SweepResult(
        sweep=spec.name,
        sweep_id=sid,
        parent_run_id=parent.run_id,
        status=SweepStatus.of(ok),
        trials=len(trials.plan),
        resumed=sum(o.resumed for o in ordered),
        skipped=skipped_items(planned),
        notes=note_items(planned),
        incomplete=doc["incomplete"],
        comparisons=doc["comparisons"],
        across_tasks=doc["across_tasks"],
        sensitivity=doc["sensitivity"],
        sequential=rows,
        figures=figures,
        report=(
            None
            if written is None
            else ReportFiles(str(written.path), tuple(written.files), str(written.latest))
        ),
        rebuilt=trials.rebuilt,
        experiment=f"{parent.tracker.config.experiment_prefix}/{spec.name}",
        unreviewed=unchecked,
        cost=cost,
    )


def _canonical(doc: dict[str, Any]) -> str:
    """A comparisons document as text, to tell whether the parent already holds this one."""
    return json.dumps(doc, sort_keys=True, default=str)
