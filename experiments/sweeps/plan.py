"""The plan of a sweep: each task's common rows, its trials in run order, the sweep id, estimates.

Within a (task, model), every variant is evaluated on the *same* rows: the test rows that no
variant uses as a demonstration (the paper's protocol for resampled demos), so the paired
tests compare like with like.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from experiments import ids
from experiments.llm.backends import is_local
from experiments.llm.gateway import estimate_cost
from experiments.llm.loglik import default_scoring
from experiments.llm.types import Scoring
from experiments.sweeps.spec import NamedVariant, SpecError, SweepSpec
from experiments.trials.spec import TrialSpec, decoding_for, resolve_trial, select_rows
from promptlib.errors import VariantError
from promptlib.leakage import evaluation_rows
from promptlib.render import compile_prompt
from promptlib.tasks import Catalog


@dataclass(frozen=True)
class PlannedTask:
    task: str
    rows: tuple[str, ...]  # the rows every variant of this task is evaluated on
    skipped: str | None = None  # why the task is skipped, if it is
    has_label_set: bool = False  # log-likelihood scoring needs one


def plan_tasks(
    spec: SweepSpec,
    catalog: Catalog,
    *,
    only: tuple[str, ...] | None = None,
    limit: int | None = None,
) -> list[PlannedTask]:
    """Resolve each task's common evaluation rows, or the reason it is skipped.

    A task named in the spec that is unknown, or lacks a required prompt file, is an error
    (the spec is wrong); a task whose split is absent from the data is skipped, with the
    reason, so one missing split does not stop the sweep.
    """

    tasks = spec.tasks
    if only:
        unknown = [t for t in only if t not in spec.tasks]
        if unknown:
            raise SpecError(
                f"{spec.path}: --tasks names {', '.join(unknown)}, not in this spec's tasks "
                f"({', '.join(spec.tasks)})"
            )
        tasks = tuple(t for t in spec.tasks if t in only)
    planned = []
    for name in tasks:
        task = catalog.task(name)  # unknown task -> did you mean
        missing = [f for f in spec.requires if f not in task.spec.prompt_files]
        if missing:
            raise SpecError(
                f"{spec.path}: task {name!r} lacks {', '.join(missing)}, which this study "
                "requires; remove it from tasks:"
            )
        if not task.has_split(spec.split):
            planned.append(PlannedTask(name, (), f"no {spec.split} split in this data"))
            continue
        kept_ids: list[list[str]] = []
        for nv in spec.variants:
            try:
                compiled = compile_prompt(nv.variant, task, spec.split)
            except VariantError as e:
                raise SpecError(f"{spec.path}: task {name!r}, variant {nv.name!r}: {e}") from e
            kept, _ = evaluation_rows(compiled.variant, task, spec.split)
            kept_ids.append([r["index"] for r in kept])
        # Row ids are unique (read_tsv refuses repeats), so ids map to rows one to one.
        rows_by_id = {r["index"]: r for r in task.rows(spec.split)}
        chosen = select_rows(
            [rows_by_id[i] for i in _common_rows(kept_ids)], limit or spec.limit, spec.sample_seed
        )
        planned.append(
            PlannedTask(
                name, tuple(r["index"] for r in chosen), has_label_set=bool(task.spec.labels)
            )
        )
    return planned


def _common_rows(kept_ids: Sequence[Sequence[str]]) -> list[str]:
    """The row ids every variant keeps, in the first variant's (file) order.

    Linear in the rows: each variant's ids become a set once. Rebuilding that set for every
    row (as planning once did) made a 20k-row split take 17 s to plan and 100k never finish.
    """
    if not kept_ids:
        return []
    common = list(kept_ids[0])
    for others in kept_ids[1:]:
        keep = set(others)
        common = [i for i in common if i in keep]
    return common


@dataclass(frozen=True)
class PlannedTrial:
    model: str
    planned: PlannedTask
    variant: NamedVariant
    spec: Any  # TrialSpec


def trial_plan(
    spec: SweepSpec,
    planned: list[PlannedTask],
    models: tuple[str, ...],
) -> list[PlannedTrial]:
    """Every (model, task, variant) trial of the sweep, in run order."""

    out = []
    for model in models:
        for pt in planned:
            if pt.skipped:
                continue
            for nv in spec.variants:
                ts = TrialSpec(
                    task=pt.task,
                    variant=nv.variant,
                    model=model,
                    split=spec.split,
                    seed=spec.sample_seed,
                    scoring=trial_scoring(spec, model, pt.has_label_set),
                    rows=pt.rows,
                )
                out.append(PlannedTrial(model, pt, nv, ts))
    return out


def trial_scoring(spec: SweepSpec, model: str, has_label_set: bool) -> Scoring:
    """The spec's `scoring:` if it sets one; otherwise log-likelihood for a local model when
    every variant of the spec is zero-shot and the task has a label set (tiny models answer
    such prompts with prose or an empty line), and generation for everything else.

    Decided per (model, task), never per variant: the arms of a comparison are always scored
    the same way.
    """
    if spec.scoring is not None:
        return cast(Scoring, spec.scoring)
    zero_shot = all(nv.variant.demos == "none" for nv in spec.variants)
    return default_scoring(model, zero_shot=zero_shot, has_label_set=has_label_set)


def sweep_id(
    spec: SweepSpec,
    lm_identities: list[dict[str, Any]],
    tasks: list[str],
    limit: int | None,
    trial_ids: list[str],
) -> str:
    """The sweep's identity: spec, models (name, api_base, mode), tasks, limit, and the ids of
    its trials, which cover the data and prompt content. Edit a TSV or a prompt file and the
    sweep is a new one, with its own parent run: a parent never mixes trials of two setups.
    """
    return ids.sweep_id(spec.id, lm_identities, tasks, limit, trial_ids)


def dry_run_items(
    catalog: Any, planned: Any, trials: Any, lm_factory: Callable[[str], Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The planned trials with prompt-token and cost estimates (no model call)."""
    items = []
    lms = {t.model: lm_factory(t.model) for t in trials}
    for t in trials:
        pt, nv, model = t.planned, t.variant, t.model
        task = catalog.task(pt.task)
        resolved = resolve_trial(t.spec, catalog, lms[model])
        chars = sum(len(resolved.compiled.render(r)) for r in resolved.rows)
        tokens = chars // 4
        out_tokens = len(pt.rows) * decoding_for(task.spec, "chat").max_tokens
        items.append(
            {
                "trial_id": resolved.id,
                "task": pt.task,
                "variant": nv.name,
                "model": model,
                "n": len(pt.rows),
                "prompt_tokens_est": tokens,
                "cost_est": cost_estimate(model, tokens, out_tokens),
            }
        )
    skipped = [{"task": p.task, "reason": p.skipped} for p in planned if p.skipped]
    return items, skipped


def cost_estimate(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Price in USD of a trial's tokens: nothing for a local model, else litellm's price."""
    if is_local(model):
        return 0.0
    return estimate_cost(model, prompt_tokens, completion_tokens)
