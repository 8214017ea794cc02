"""Plan before paying: what a sweep will cost in calls, time and money, and what it can detect.

`workbench plan SPEC` (`plan_study`) and `workbench sweep --dry-run` (`model_times`) share the
dry run's per-trial estimates (`plan.dry_run_items`: calls, prompt tokens, price). On top:

- Time, for local models: the tokens a local model evaluates, divided by this machine's
  measured rates (`experiments.llm.speed`): the prompt text not shared with the row before
  (llama.cpp keeps the shared prefix's cache) at the prompt rate, plus the tokens decoded one
  by one (`plan.decode_tokens`) at the generation rate. Models run one after another in one
  process, so the study's time is the sum. API and served models get no time (their rate is
  the provider's), API models a price (litellm's cost map, as the dry run). Checked on the
  demo study (480 calls, 2 cores shared with other jobs, load average ~9 both when measured
  and when run): 247 s estimated for its 12 trials, 246 s of trial wall time measured;
  per (task, model) from 40% under (abercrombie on smollm2: 80 short prompts, where the
  per-call work the rates leave out counts most) to 20% over. Not in it: loading the model,
  MLflow, the analysis after the calls.
- MDE80, per task: the smallest true difference the comparison the sweep runs detects with
  80% power, at alpha 0.05 and at the corrected level (`analysis.planned_power`), for the
  task's planned rows, their answer classes and prompt clusters, under a stated assumption.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from experiments import ids
from experiments.analysis.clusters import for_rows
from experiments.analysis.planned_power import Assumption, PlannedMDE, family_alpha, planned_mde
from experiments.llm.backends import backend_class
from experiments.llm.speed import Speed
from experiments.metrics import task_metric
from experiments.sweeps.plan import PlannedTask, dry_run_items, is_arm, plan_tasks, trial_plan
from experiments.sweeps.report import _column
from experiments.sweeps.spec import SweepSpec
from promptlib.render import compile_prompt
from promptlib.tasks import Catalog

HOUR = 3600.0  # a study estimated above this warns before it runs
ALPHA = 0.05  # the level every comparison is tested at (compare.correct: p_corrected <= 0.05)
POWER = 0.8


@dataclass(frozen=True)
class ModelTime:
    """One model's share of a study: calls, tokens, time on this machine and price."""

    model: str
    calls: int
    prompt_tokens: int  # every prompt's tokens (4 characters a token): what an API bills
    fresh_tokens: int  # what a local model evaluates: text not shared with the row before
    decode_tokens: int  # tokens decoded one at a time (generation, label continuations)
    seconds: float | None  # None: not estimated (`why`)
    cost: float | None  # USD; None: unknown price
    speed: Speed | None = None
    why: str = ""  # why there is no time estimate
    upper: bool = False  # a sequential design: at most this (its budget)

    @property
    def local(self) -> bool:
        return timed_here(self.model)

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "speed"}
        out["speed"] = self.speed.to_dict() if self.speed else None
        return out


def timed_here(model: str) -> bool:
    """Whether `model` runs on this machine, so its measured speed times it (its backend's
    `timed_here`); an API or served model's time is its provider's."""
    return backend_class(model).timed_here()


def seconds_for(fresh_tokens: int, decode_tokens: int, speed: Speed) -> float:
    """Time a local model takes for these tokens at these rates."""
    return fresh_tokens / speed.prompt_tok_s + decode_tokens / speed.gen_tok_s


def model_times(
    items: Sequence[Mapping[str, Any]], speeds: Mapping[str, Speed | None]
) -> list[ModelTime]:
    """Per model, in the items' order: the dry run's trials summed, timed where measured."""
    out = []
    for model in dict.fromkeys(str(it["model"]) for it in items):
        mine = [it for it in items if it["model"] == model]
        fresh = sum(int(it["fresh_tokens_est"]) for it in mine)
        decode = sum(int(it["decode_tokens_est"]) for it in mine)
        costs = [it["cost_est"] for it in mine]
        speed = speeds.get(model)
        why = ""
        here = timed_here(model)
        if not here:
            why = "not estimated for an API or served model (the provider's rate decides it)"
        elif speed is None:
            why = "not measured on this machine"
        out.append(
            ModelTime(
                model=model,
                calls=sum(int(it["n"]) for it in mine),
                prompt_tokens=sum(int(it["prompt_tokens_est"]) for it in mine),
                fresh_tokens=fresh,
                decode_tokens=decode,
                seconds=seconds_for(fresh, decode, speed) if speed and here else None,
                cost=None if any(c is None for c in costs) else float(sum(costs)),
                speed=speed if here else None,
                why=why,
                upper=any(it.get("bound") == "upper" for it in mine),
            )
        )
    return out


def total_seconds(times: Sequence[ModelTime]) -> float:
    """The estimated seconds of the models that have an estimate (they run one by one)."""
    return sum(t.seconds or 0.0 for t in times)


def too_long(times: Sequence[ModelTime]) -> bool:
    """Whether the study's estimated time on this machine passes an hour."""
    return total_seconds(times) > HOUR


# ---- the plan ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskPlan:
    """One task of a study: its rows, its comparisons, and what they can detect."""

    task: str
    rows: int  # the rows every variant is evaluated on, after the spec's limit
    split_rows: int | None  # the split's rows before the limit (None: no such split)
    train_rows: int | None  # the train split's rows: the pool demonstrations come from
    variants: int
    comparisons: int  # tested comparisons on this task, per model
    metric: str
    n_units: int = 0  # clusters of rows given the same prompt (the test's units)
    mde: PlannedMDE | None = None  # at alpha 0.05
    mde_family: PlannedMDE | None = None  # at the corrected level
    skipped: str | None = None  # why the task runs nothing

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for key in ("mde", "mde_family"):
            m = out[key]
            out[key] = None if m is None else {"value": m.value, "alpha": m.alpha, "note": m.note}
        return out


@dataclass(frozen=True)
class TaskModelPlan:
    """One (task, model) of a study: its calls, tokens, time and price."""

    task: str
    model: str
    calls: int
    prompt_tokens: int
    seconds: float | None
    cost: float | None

    @property
    def local(self) -> bool:
        return timed_here(self.model)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class StudyPlan:
    """What `workbench plan` prints: per task and model, and the models' totals."""

    spec_path: str
    name: str
    models: tuple[str, ...]
    split: str
    design: str  # "fixed" or "sequential"
    comparisons: str  # "best_vs_worst", "all_pairs" or "N listed pair(s)"
    correction: str
    family: int  # tested comparisons the correction runs over (a sequential elimination: one)
    n_resamples: int
    assumption: Assumption
    tasks: tuple[TaskPlan, ...]
    cells: tuple[TaskModelPlan, ...]
    times: tuple[ModelTime, ...]
    mde_note: str = ""  # why MDE80 is not given (a design it does not cover)
    cluster_by: str = "prompt"  # the units the tests swap (`SweepSpec.cluster_by`)
    # a sequential design's family-wise alpha (split over its comparisons, Bonferroni)
    sequential_alpha: float | None = None
    # (task, why) of each task, or variant on a task, the sweep skips (`plan.skipped_items`)
    skipped: tuple[tuple[str, str], ...] = field(default=())

    @property
    def alpha_family(self) -> float:
        return family_alpha(ALPHA, self.family)

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec": self.spec_path,
            "name": self.name,
            "models": list(self.models),
            "split": self.split,
            "design": self.design,
            "comparisons": self.comparisons,
            "correction": self.correction,
            "family": self.family,
            "alpha": ALPHA,
            "alpha_family": self.alpha_family,
            "power": POWER,
            "n_resamples": self.n_resamples,
            "assumption": {
                "accuracy": self.assumption.accuracy,
                "correlation": self.assumption.correlation,
            },
            "tasks": [t.to_dict() for t in self.tasks],
            "cells": [c.to_dict() for c in self.cells],
            "times": [t.to_dict() for t in self.times],
            "total_seconds": total_seconds(self.times),
            "mde_note": self.mde_note,
            "cluster_by": self.cluster_by,
            "sequential_alpha": self.sequential_alpha,
            "skipped": [{"task": t, "reason": r} for t, r in self.skipped],
        }


def plan_study(
    spec: SweepSpec,
    catalog: Catalog,
    models: tuple[str, ...],
    lm_factory: Callable[[str], Any],
    speed_of: Callable[[str], Speed | None],
    *,
    only: tuple[str, ...] | None = None,
    limit: int | None = None,
    assumption: Assumption = Assumption(),  # noqa: B008 - frozen, so one shared default is safe
) -> StudyPlan:
    """The plan of `spec` on `models` (no model call): the dry run's estimates per task and
    model, each local model timed with `speed_of(model)` (asked once the spec has planned
    without error: it may measure), and each task's planned MDE80."""
    planned = plan_tasks(spec, catalog, only=only, limit=limit)
    items, skipped = dry_run_items(
        catalog, planned, trial_plan(spec, planned, models), lm_factory, spec
    )
    times = model_times(items, {m: speed_of(m) for m in models if timed_here(m)})
    by_model = {t.model: t for t in times}
    counts = {p.task: _comparisons(spec, p) for p in planned}
    family = sum(counts.values()) * len(models)
    if spec.sequential is not None and isinstance(spec.comparisons, str):
        # one elimination per (task, model) of two arms or more, alpha split over those
        # (`sequential.run_sequential`); each splits its share over its own pairs
        family = sum(1 for p in planned if counts[p.task]) * len(models)
    tasks = tuple(_task_plan(spec, catalog, p, counts[p.task], family, assumption) for p in planned)
    cells = []
    for model, p in itertools.product(models, planned):
        mine = [it for it in items if it["model"] == model and it["task"] == p.task]
        if not mine:
            continue
        speed = by_model[model].speed
        fresh = sum(int(it["fresh_tokens_est"]) for it in mine)
        decode = sum(int(it["decode_tokens_est"]) for it in mine)
        costs = [it["cost_est"] for it in mine]
        cells.append(
            TaskModelPlan(
                task=p.task,
                model=model,
                calls=sum(int(it["n"]) for it in mine),
                prompt_tokens=sum(int(it["prompt_tokens_est"]) for it in mine),
                seconds=seconds_for(fresh, decode, speed) if speed is not None else None,
                cost=None if any(c is None for c in costs) else float(sum(costs)),
            )
        )
    pairs = spec.comparisons
    kind = pairs if isinstance(pairs, str) else f"{len(pairs)} listed pair(s)"
    return StudyPlan(
        spec_path=spec.path,
        name=spec.name,
        models=models,
        split=spec.split,
        design="sequential" if spec.sequential is not None else "fixed",
        comparisons=kind,
        correction=spec.correction,
        family=family,
        n_resamples=spec.n_resamples,
        assumption=assumption,
        tasks=tasks,
        cells=tuple(cells),
        times=tuple(times),
        mde_note=_mde_note(spec),
        cluster_by=spec.cluster_by,
        sequential_alpha=spec.sequential.alpha if spec.sequential is not None else None,
        skipped=tuple((str(x["task"]), str(x["reason"])) for x in skipped),
    )


def _comparisons(spec: SweepSpec, p: PlannedTask) -> int:
    """The comparisons a task tests per model (a pair with an arm the task skips is not)."""
    if p.skipped:
        return 0
    names = [nv.name for nv in p.variants if spec.sequential is None or is_arm(spec, nv.name)]
    if spec.comparisons == "best_vs_worst":
        return 1 if len(names) >= 2 else 0
    if isinstance(spec.comparisons, str):  # all_pairs
        return len(names) * (len(names) - 1) // 2
    return sum(a in names and b in names for a, b in spec.comparisons)


def _mde_note(spec: SweepSpec) -> str:
    """Why the plan gives no MDE80 for this design ("" where it does)."""
    if spec.sequential is not None:
        return (
            "design: sequential stops each comparison once it is decided, so its power is not "
            "a fixed-n MDE (README: 'When to use which design' gives the rows it used at "
            "0.5x, 1x and 2x the MDE)"
        )
    if spec.comparisons == "best_vs_worst":
        return (
            "best_vs_worst runs the range test over the drawn variants, which picks its pair "
            "after seeing the scores; MDE80 is that of one pair named in advance, a lower "
            "bound on what the range test detects (the report gives no MDE80 for it)"
        )
    return ""


def _task_plan(
    spec: SweepSpec,
    catalog: Catalog,
    p: PlannedTask,
    comparisons: int,
    family: int,
    assumption: Assumption,
) -> TaskPlan:
    """A task's rows and, unless it is skipped or the design is sequential, its MDE80s."""
    task = catalog.task(p.task)
    n_split = len(task.rows(spec.split)) if task.has_split(spec.split) else None
    metric = task_metric(task)  # a user task's is its task.json's, as the sweep scores it
    plan = TaskPlan(
        task=p.task,
        rows=len(p.rows),
        split_rows=n_split,
        train_rows=task.spec.n_train,
        variants=len(p.variants),
        comparisons=comparisons,
        metric=metric,
    )
    if p.skipped or not p.rows:
        return replace(plan, skipped=p.skipped or "no rows to evaluate")
    by_id = {r["index"]: r for r in task.rows(spec.split)}
    rows = [by_id[i] for i in p.rows]
    per_variant = []
    for nv in p.variants:
        compiled = compile_prompt(nv.for_task(p.task), task, spec.split)
        per_variant.append([ids.prompt_hash(compiled.render(r)) for r in rows])
    clusters = for_rows(per_variant, list(p.rows), spec.cluster_by, _column(spec, catalog, p.task))
    n_units = int(clusters.ids.max()) + 1 if len(rows) else 0
    if spec.sequential is not None or comparisons == 0:
        return replace(plan, n_units=n_units)
    answers = [r["answer"] for r in rows]

    def at(alpha: float) -> PlannedMDE:
        return planned_mde(
            answers,
            metric,
            alpha=alpha,
            power_target=POWER,
            clusters=[int(c) for c in clusters.ids],
            n_resamples=spec.n_resamples,
            assumption=assumption,
        )

    mde = at(ALPHA)
    corrected = at(family_alpha(ALPHA, family)) if family > 1 else mde
    return replace(plan, n_units=n_units, mde=mde, mde_family=corrected)
