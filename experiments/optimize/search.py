"""One worker's Optuna trials: the objective, evaluated in batches along dev, and its callback."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any, cast

from experiments.llm.types import Completion
from experiments.optimize.config import OptimizeConfig, StepProgress, checkpoints
from experiments.optimize.dev import _batches, instance_weights
from experiments.optimize.errors import TrialIncomplete
from experiments.optimize.interrupts import _LOGGING, INTERRUPTED, WORKER_ATTR, _Interrupts, _worker
from experiments.optimize.space import (
    INVALID_ATTR,
    NO_PROMPT,
    REUSED_ATTR,
    VARIANT_ATTR,
    SearchSpace,
    _not_evaluated,
    invalid,
    space_variants,
    variant_from_params,
)
from experiments.optimize.study import CALLS_ATTR, FAILURE_ATTR, completed_variants
from experiments.trials.run import TrialResult, run_trial
from experiments.trials.spec import TrialSpec
from promptlib.leakage import evaluation_rows
from promptlib.render import compile_prompt
from promptlib.tasks import Catalog, Task
from promptlib.variants import PromptVariant

if TYPE_CHECKING:
    import optuna

    from experiments.llm.cache import ResponseCache

log = logging.getLogger("workbench.optimize")
# The sampler proposing only configurations the study has completed (or that no prompt
# combines) this many times in a row ends the search (a converged TPE, or a random sampler
# near the end of a small space).
MAX_REUSED_IN_A_ROW = 100


class _TrialReplay:
    """The answers one trial has had, in front of the response cache.

    A trial is evaluated in batches; its whole result (logged, and the objective value) is
    then assembled by running the runner on every row evaluated so far, answered from here
    without calling the model again — failed rows too (the response cache never keeps
    those), so a FAIL trial's run shows its errors without retrying them.
    """

    def __init__(self, cache: ResponseCache | None) -> None:
        self.cache = cache
        self.seen: dict[str, Completion] = {}

    def get(self, key: str) -> Completion | None:
        if key in self.seen:
            return self.seen[key]
        return self.cache.get(key) if self.cache is not None else None

    def put(self, key: str, completion: Completion) -> None:
        self.seen[key] = completion
        if self.cache is not None:
            self.cache.put(key, completion)


class _Search:
    """This worker's trials of one study: `run` (the search), Optuna's objective and `tell`
    callback, and their counts.

    `total_calls` counts the model calls of every trial, finished or not (cache hits apart);
    `tell` stops the study once `target` trials evaluated a prompt.
    """

    def __init__(
        self,
        cfg: OptimizeConfig,
        space: SearchSpace,
        catalog: Catalog,
        lm: Any,
        tracker: Any,
        parent: str,
        dev: list[str],
        cache: Any,
        progress: StepProgress | None,
        guard: _Interrupts,
    ) -> None:
        self.cfg, self.space, self.catalog, self.lm = cfg, space, catalog, lm
        self.tracker, self.parent, self.dev, self.cache = tracker, parent, dev, cache
        self.progress, self.guard = progress, guard
        self.task = catalog.task(cfg.task)
        self.position = {i: n for n, i in enumerate(dev)}
        self.weight = instance_weights(self.task, cfg.split, dev)
        self.n_checks = checkpoints(cfg, len(dev))
        self.total_calls = 0
        self.target = 0
        self.finished = self.reused_in_a_row = 0

    def run(self, study: Any) -> int:
        """Run this worker's trials; returns the model calls they made (cache hits apart).

        Each trial evaluates dev in `checkpoints` batches along the study's fixed order and
        asks the pruner after each: Wilcoxon gets every row's value (`instance_weights` x
        correct) reported at the row's position in that order, so trials are paired row by
        row; median gets the running score on the rows so far. Failed rows end the trial as
        FAIL (Optuna `catch`), whichever the pruner.
        """
        cfg, space, progress, guard = self.cfg, self.space, self.progress, self.guard

        # `--trials N`: N prompts evaluated by this worker. A proposal the study has completed
        # already takes that trial's value (no model call, no MLflow run) and does not count,
        # nor does one of levels no prompt combines (`left` counts real prompts only).
        left = len(space_variants(space, cfg.sampler) - set(completed_variants(study)))
        target = self.target = min(cfg.n_trials, left)
        if target < cfg.n_trials:
            _note(
                space,
                f"search space: {left} distinct prompt(s) not yet completed in study "
                f"{study.study_name!r}; evaluating {target}, not --trials {cfg.n_trials}",
            )
        if target == 0:
            return self.total_calls

        if progress:
            progress(0, target, "searching")
        guard.critical = True  # Optuna's ask/tell between trials; only evaluation is interrupted
        try:
            study.optimize(
                self.objective, n_trials=None, catch=(TrialIncomplete,), callbacks=[self.tell]
            )
        finally:
            guard.critical = False
        guard.open()  # a signal during the last trial's bookkeeping ends the study here
        return self.total_calls

    def objective(self, trial: optuna.Trial) -> float:
        guard = self.guard
        trial.set_user_attr(WORKER_ATTR, _worker())  # a later run can tell it was abandoned
        try:
            guard.open()  # a signal that came while Optuna wrote is raised here
            return self.evaluate(trial)
        except KeyboardInterrupt:  # Optuna records FAIL; say why, and `_clean_up` its run
            with contextlib.suppress(Exception):
                trial.set_user_attr(FAILURE_ATTR, INTERRUPTED)
            raise
        finally:
            guard.critical = True  # Optuna now records the trial's state: not torn mid-way

    def evaluate(self, trial: optuna.Trial) -> float:
        import optuna  # start-up: optuna is loaded only when a study runs

        cfg, space = self.cfg, self.space
        params = {
            "instruction": trial.suggest_categorical("instruction", space.instruction),
            "register": trial.suggest_categorical("register", space.register),
            "demos": trial.suggest_categorical("demos", space.demos),
            "demo_seed": trial.suggest_int("demo_seed", 0, space.demo_seeds - 1)
            if cfg.sampler != "grid"
            else trial.suggest_categorical("demo_seed", [0]),
            "format": trial.suggest_categorical("format", space.formats),
            "answer_hint": trial.suggest_categorical("answer_hint", space.answer_hint),
        }
        for name, levels in space.extra_axes().items():  # extended space only: new names
            params[name] = trial.suggest_categorical(name, levels)
        if invalid(params):
            trial.set_user_attr(INVALID_ATTR, True)  # not a prompt: `tell` does not count it
            raise optuna.TrialPruned(NO_PROMPT)
        variant = variant_from_params(params, space.texts)
        earlier = completed_variants(trial.study).get(variant.id)
        if earlier is not None:  # evaluated before (a resumed seeded sampler replays): reuse
            trial.set_user_attr(REUSED_ATTR, earlier.number)
            trial.set_user_attr(CALLS_ATTR, 0)
            # no per-row values: the pruners see evaluated trials only (`_EvaluatedStudy`,
            # which also answers `best_trial` with `earlier` when this one ties for it)
            return float(earlier.value)
        trial.set_user_attr(VARIANT_ATTR, variant.id)
        return self.evaluate_batches(trial, variant)

    def evaluate_batches(self, trial: optuna.Trial, variant: PromptVariant) -> float:
        """`variant` on dev, batch by batch, the pruner asked after each; the dev score."""
        import optuna  # start-up: optuna is loaded only when a study runs

        cfg, task, lm, catalog = self.cfg, self.task, self.lm, self.catalog
        tracker, parent, n_checks = self.tracker, self.parent, self.n_checks
        # dev rows showing the same text as one of this variant's demonstrations are left out
        bound = compile_prompt(variant, task, cfg.split).variant
        allowed = {r["index"] for r in evaluation_rows(bound, task, cfg.split)[0]}
        rows = [i for i in self.dev if i in allowed]
        replay = _TrialReplay(self.cache)
        calls = hits = 0
        done: list[str] = []

        def spec(indices: list[str]) -> TrialSpec:
            return TrialSpec(
                task=cfg.task,
                variant=variant,
                model=cfg.model,
                split=cfg.split,
                scoring=cfg.scoring,
                rows=tuple(indices),
            )

        def so_far() -> TrialResult:
            whole = run_trial(spec(done), catalog, lm, cache=cast("ResponseCache", replay))
            return dataclasses.replace(whole, model_calls=calls, cache_hits=hits)

        for step, batch in enumerate(_batches(rows, n_checks)):
            part = run_trial(spec(batch), catalog, lm, cache=cast("ResponseCache", replay))
            calls, hits = calls + part.model_calls, hits + part.cache_hits
            self.total_calls += part.model_calls
            trial.set_user_attr(CALLS_ATTR, calls)
            done += batch
            if not part.complete:
                # Provider errors are not a bad prompt: the trial FAILs with the reason.
                result = so_far()
                reason = f"{result.status}: {result.failure_reason()}"
                trial.set_user_attr(FAILURE_ATTR, reason)
                _log(tracker, parent, result, variant, task, trial, "FAIL", step)
                raise TrialIncomplete(reason)
            if cfg.pruner == "wilcoxon":
                for p in part.predictions:
                    trial.report(
                        self.weight[p.index] * float(bool(p.correct)), self.position[p.index]
                    )
            elif cfg.pruner == "median":
                running = so_far().score
                assert running is not None
                trial.report(running, step)
            if cfg.pruner != "none" and trial.should_prune():
                _log(tracker, parent, so_far(), variant, task, trial, "PRUNED", step)
                raise optuna.TrialPruned()
        result = so_far()
        assert result.score is not None
        _log(tracker, parent, result, variant, task, trial, "COMPLETE", n_checks - 1)
        return result.score

    def tell(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        space, target = self.space, self.target
        if _not_evaluated(trial):
            self.reused_in_a_row += 1
            if self.reused_in_a_row >= MAX_REUSED_IN_A_ROW:
                _note(
                    space,
                    f"search stopped after {self.finished} of {target} new trial(s): the sampler "
                    f"proposed only prompts study {study.study_name!r} had already evaluated "
                    f"(or levels no LegalBench prompt combines), {MAX_REUSED_IN_A_ROW} times "
                    "in a row",
                )
                study.stop()
            return
        self.reused_in_a_row = 0
        self.finished += 1
        if self.progress:
            self.progress(self.finished, target, f"trial {trial.number} {trial.state.name.lower()}")
        if self.finished >= target:
            study.stop()


def _note(space: SearchSpace, text: str) -> None:
    """A line for stderr now and for the report's notes."""
    log.warning("%s", text)
    space.notes.append(text)


def _log(
    tracker: Any,
    parent: str,
    result: TrialResult,
    variant: PromptVariant,
    task: Task,
    trial: Any,
    state: str,
    step: int,
) -> None:
    compiled = compile_prompt(variant, task, result.spec.split)
    rows = {r["index"]: r for r in task.rows(result.spec.split)}
    _LOGGING[parent] = time.time()  # a run created from now on, naming no trial yet, is ours
    tracker.log_trial(
        parent,
        result,
        compiled,
        [rows[p.index] for p in result.predictions],
        variant.label,
        {
            "optuna.trial": trial.number,
            "optuna.state": state,
            "optuna.step": step,
            "answer_hint": variant.answer_hint,
        },
        source=str(task.files.split_path(result.spec.split)),
    )
    _LOGGING.pop(parent, None)
