"""Per-task prompt optimisation with Optuna (and DSPy), honest on held-out data.

The task's evaluation rows are split, stratified and seeded, into *dev* (the search may use
it) and *held-out* (it must not: the whole search runs inside `heldout_guard`, so rendering a
held-out row raises). Demonstrations come from train, never from held-out. The best variant
found on dev is evaluated once on held-out and compared with the base prompt there with the
paired permutation test; the report states both, with a bootstrap CI.

The Optuna search space covers instruction, register, number of demonstrations and their
seed, format and an answer hint — each only where the task supports it (the log says which
axes are left out and why). Dev rows are evaluated in one fixed order shared by every trial
of a study: shuffled (seeded) within each answer class and interleaved, so every prefix keeps
the class balance of the whole of dev (LegalBench files are sorted by label). Trials are
evaluated in batches along that order and a pruner (`--pruner`: Wilcoxon signed-rank on the
per-row values by default, median of running scores, or none) stops a trial that is worse
than the best one, so a hopeless prompt stops calling the model. Storage is a SQLite file by
default; a PostgreSQL URL lets several processes share one study.
"""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass
from typing import Any

from experiments.analysis.decision import KEY as RECOMMENDATION
from experiments.optimize.config import PRUNERS, OptimizeConfig, StepProgress
from experiments.optimize.dev import DevHeldout, dev_order, split_dev_heldout
from experiments.optimize.dspy_programs import compile_dspy
from experiments.optimize.errors import IncompleteEvaluation, StudyInterrupted
from experiments.optimize.instructions import refuse_quoted_heldout
from experiments.optimize.interrupts import _clean_up, _Interrupts, _signals_interrupt
from experiments.optimize.report import OptimizeReport
from experiments.optimize.search import _Search
from experiments.optimize.space import (
    INVALID_ATTR,
    REUSED_ATTR,
    SearchSpace,
    _not_evaluated,
    check_space_gold,
    search_space,
    variant_from_params,
)
from experiments.optimize.study import (
    FAILURE_ATTR,
    _open_study,
    _setup,
    _study_key,
    _study_name,
    _study_parent,
)
from experiments.optimize.verdict import _evaluate, _verdict
from experiments.tracking.generations import mark_unreviewed
from promptlib.errors import WorkbenchError
from promptlib.leakage import heldout_guard
from promptlib.tasks import Catalog, Task
from promptlib.variants import PromptVariant

log = logging.getLogger("workbench.optimize")


def optimize(
    cfg: OptimizeConfig,
    catalog: Catalog,
    lm: Any,
    tracker: Any,
    *,
    cache: Any = None,
    progress: StepProgress | None = None,
) -> OptimizeReport:
    """Search on dev inside the held-out guard, then evaluate the winner on held-out.

    `progress(done, total, what)` is told after each finished Optuna trial (whatever its
    state), once around a DSPy compile, and before the held-out verdict.
    """
    task = catalog.task(cfg.task)
    if not task.spec.is_classification:
        raise WorkbenchError(
            f"optimisation supports classification tasks; {cfg.task!r} is {task.spec.task_type}"
        )
    if cfg.pruner not in PRUNERS:
        raise WorkbenchError(f"--pruner must be one of {', '.join(PRUNERS)}, not {cfg.pruner!r}")
    split = split_dev_heldout(task, cfg.split, cfg.heldout_fraction, cfg.split_seed)
    # stratified, seeded order; --dev-limit takes its prefix, itself a stratified sample
    dev = dev_order(task, split, cfg.split, cfg.dev_limit)
    space = search_space(task, cfg.space, cfg.files)
    for axis, levels in space.to_dict()["axes"].items():
        log.info("search space: %s: %s", axis, ", ".join(map(str, levels)))
    for note in space.notes:
        log.info("search space: %s", note)
    rows = {r["index"]: r for r in task.rows(cfg.split)}
    heldout_rows = [rows[i] for i in split.heldout]
    refuse_quoted_heldout(cfg.files, task, heldout_rows)  # before any store or model call
    check_space_gold(space, task, cfg.split, list(rows.values()))  # so is a shown answer

    with _signals_interrupt() as guard:
        try:
            return _optimize(
                cfg, catalog, lm, tracker, cache, progress, task, split, dev, space, rows,
                heldout_rows, guard,
            )  # fmt: skip
        except BaseException as e:
            # a signal may surface as another error (Optuna's own bookkeeping, interrupted
            # mid-way, raises UnboundLocalError): whatever ends the study after one is the
            # interrupt
            if not isinstance(e, KeyboardInterrupt) and not guard.received:
                raise
            signum = guard.received[-1] if guard.received else signal.SIGINT
            raise StudyInterrupted(
                f"study {_study_name(cfg)!r} interrupted ({signal.Signals(signum).name}); its "
                "finished trials are kept and the one running is marked FAIL. Rerun the same "
                "command to resume: answered calls come from the response cache",
                signum,
            ) from None


def _optimize(
    cfg: OptimizeConfig,
    catalog: Catalog,
    lm: Any,
    tracker: Any,
    cache: Any,
    progress: StepProgress | None,
    task: Task,
    split: DevHeldout,
    dev: list[str],
    space: SearchSpace,
    rows: dict[str, dict[str, str]],
    heldout_rows: list[dict[str, str]],
    guard: _Interrupts,
) -> OptimizeReport:
    """`optimize` once the split is made; an interrupt leaves the study resumable.

    On SIGTERM or Ctrl-C the trial this process was running is marked FAIL in Optuna (it
    counts as no result: `n_trials` more are run by the next invocation as by this one) and
    its unfinished MLflow child run is deleted, as a sweep's claim deletes a killed trial's
    run; the parent run ends FAILED and `StudyInterrupted` says how to resume. A process
    killed outright (SIGKILL) is cleaned up the same way by the next invocation.
    """
    parent = _study_parent(cfg, tracker, _study_key(cfg))
    tracker.log_search_space(parent, space.to_dict())  # what the study searched
    if cfg.files:  # generated instruction files no one reviewed yet tag the parent run
        mark_unreviewed(tracker, parent, [f.label for f in cfg.files if f.reviewed is False])
    ok = False
    study: Any = None
    try:
        if cfg.method == "optuna":
            study = _open_study(cfg, space, split, dev, _setup(cfg, lm, task, dev))
            _clean_up(study, tracker, parent, mine=False)  # what killed workers left behind
            with heldout_guard(cfg.task, heldout_rows):
                search = _Search(
                    cfg, space, catalog, lm, tracker, parent, dev, cache, progress, guard
                )
                calls = search.run(study)
            found = _best_trial(study, calls, space)
        else:
            found = _compiled(cfg, catalog, lm, cache, progress, task, dev, space, heldout_rows)
        if progress:
            progress(found.n_trials, found.n_trials, "held-out verdict")
        report = _verdict(cfg, catalog, lm, tracker, parent, task, split, rows, dev, cache,
                          found.best_variant, found.dev_score, found.best_params)  # fmt: skip
        ok = True
    except BaseException:
        guard.critical = False  # a second signal may stop the clean-up (the next run does it)
        if study is not None:
            _clean_up(study, tracker, parent, mine=True)
        raise
    finally:
        tracker.finish(parent, ok)
    return OptimizeReport(
        task=cfg.task,
        model=cfg.model,
        method=cfg.method,
        study=found.study_name,
        n_trials=found.n_trials,
        n_pruned=found.n_pruned,
        n_failed=found.n_failed,
        n_reused=found.n_reused,
        n_invalid=found.n_invalid,
        best_variant=found.best_variant.label,
        best_variant_id=found.best_variant.id,
        best_variant_json=report["best_variant_json"],  # the winner bound (`_verdict`)
        best_params=found.best_params,
        dev_score=found.dev_score,
        heldout=report["heldout"],
        base_heldout=report["base_heldout"],
        p_value=report["p_value"],
        test=report["test"],
        heldout_indices=list(split.heldout),
        n_dev=len(dev),
        search_notes=space.notes,
        prompt_registry=report["prompt_registry"],
        pruner=cfg.pruner if cfg.method == "optuna" else None,
        search_model_calls=found.calls,
        sequential=report.get("sequential"),
        cost=_cost(cfg, found, report, len(dev), tracker, parent),
        recommendation=report.get(RECOMMENDATION),
    )


def _cost(
    cfg: OptimizeConfig,
    found: _Found,
    report: dict[str, Any],
    n_dev: int,
    tracker: Any,
    parent: str,
) -> dict[str, Any]:
    """This invocation's model calls (search and verdict) against the full grid's: every
    trial on every dev row (no pruning) and both prompts on every judged held-out row;
    printed and logged on the study's parent run (``cost.*``)."""
    verdict = report.get("verdict_calls") or {}
    grid = found.n_trials * n_dev + int(verdict.get("grid_calls", 0))
    made = found.calls + int(verdict.get("model_calls", 0))
    cost = {
        "design": cfg.heldout_design, "model_calls": made, "grid_calls": grid,
        "search_calls": found.calls, "verdict_calls": verdict.get("model_calls", 0),
        "share_of_grid": round(made / grid, 4) if grid else None,
    }  # fmt: skip
    tracker.log_cost(parent, cost, [])  # a store error is one line (`_store_op`)
    return cost


@dataclass
class _Found:
    """What the search found on dev, before the held-out verdict."""

    best_variant: PromptVariant
    dev_score: float | None
    best_params: dict[str, Any]
    study_name: str
    calls: int  # model calls of this invocation's search (cache hits apart)
    n_trials: int
    n_pruned: int = 0
    n_failed: int = 0
    n_reused: int = 0
    n_invalid: int = 0


def _best_trial(study: Any, calls: int, space: SearchSpace) -> _Found:
    """The Optuna study's winner and counts; refused (IncompleteEvaluation) if none completed."""
    evaluated = [t for t in study.trials if not _not_evaluated(t)]
    states = [t.state.name for t in evaluated]
    n_trials, n_pruned, n_failed = len(states), states.count("PRUNED"), states.count("FAIL")
    n_reused = sum(REUSED_ATTR in t.user_attrs for t in study.trials)
    n_invalid = sum(INVALID_ATTR in t.user_attrs for t in study.trials)
    if "COMPLETE" not in states:
        reasons = [t.user_attrs.get(FAILURE_ATTR) for t in study.trials]
        first = next((r for r in reasons if r), "every trial was pruned")
        raise IncompleteEvaluation(
            f"study {study.study_name!r}: no trial completed ({n_failed} failed, "
            f"{n_pruned} pruned; {first}); no winner to judge. Rerun the same command "
            "to retry the failed rows"
        )
    best = study.best_trial
    return _Found(
        best_variant=variant_from_params(best.params, space.texts),
        dev_score=float(best.value) if best.value is not None else None,
        best_params=dict(best.params),
        study_name=study.study_name,
        calls=calls,
        n_trials=n_trials,
        n_pruned=n_pruned,
        n_failed=n_failed,
        n_reused=n_reused,
        n_invalid=n_invalid,
    )


def _compiled(
    cfg: OptimizeConfig,
    catalog: Catalog,
    lm: Any,
    cache: Any,
    progress: StepProgress | None,
    task: Task,
    dev: list[str],
    space: SearchSpace,
    heldout_rows: list[dict[str, str]],
) -> _Found:
    """A DSPy program compiled on dev and scored there by the workbench runner."""
    if progress:
        progress(0, 1, f"compiling with {cfg.method}")
    with heldout_guard(cfg.task, heldout_rows):
        compiled = compile_dspy(cfg, task, dev, lm, seed=cfg.seed, cache=cache)
        best_variant = compiled.variant
        # scored by the workbench runner, like an Optuna trial: on dev rows that are
        # not the program's own demonstrations (nor show the same text as one)
        dev_res = _evaluate(cfg, catalog, lm, best_variant, tuple(dev), cache)
    if not dev_res.complete:
        raise IncompleteEvaluation(
            f"{cfg.method}: the dev evaluation of the compiled program is incomplete "
            f"({dev_res.failure_reason()}); no dev score on partial data. Rerun the "
            "same command: answered calls come from the response cache"
        )
    notes = [
        *compiled.notes,
        f"dev score: {dev_res.metric} on {len(dev_res.predictions)} of {len(dev)} dev "
        f"rows (the {len(dev) - len(dev_res.predictions)} left out are the program's "
        "demonstrations or show the same text as one)",
    ]
    space.notes.extend(notes)
    return _Found(
        best_variant=best_variant,
        dev_score=dev_res.score,
        best_params={"method": cfg.method},
        study_name=_study_name(cfg),
        calls=compiled.model_calls + dev_res.model_calls,
        n_trials=1,
    )
