"""The plan of a sweep: each task's common rows, its trials in run order, the sweep id, estimates.

Within a (task, model), every variant is evaluated on the *same* rows: the test rows that no
variant uses as a demonstration (the paper's protocol for resampled demos), so the paired
tests compare like with like.

A task runs the variants of the spec it supports: a variant that cannot compile for it (a
prompt file it lacks, a label set it has none of) is skipped on that task, with the
`VariantError`'s reason (`PlannedTask.skipped_variants`); its common rows and its trials are
those of the variants it runs. A task that supports none of them is skipped whole.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from experiments import ids
from experiments.analysis.clusters import task_clusters
from experiments.analysis.sequential import row_order
from experiments.llm.backends import backend_class
from experiments.llm.loglik import default_scoring
from experiments.llm.types import Scoring
from experiments.sweeps.spec import NamedVariant, SpecError, SweepSpec
from experiments.trials.spec import TrialSpec, decoding_for, resolve_trial, select_rows
from promptlib.errors import VariantError
from promptlib.leakage import evaluation_rows
from promptlib.render import CompiledPrompt, compile_prompt
from promptlib.tasks import Catalog


@dataclass(frozen=True)
class PlannedTask:
    task: str
    rows: tuple[str, ...]  # the rows every variant of this task is evaluated on
    skipped: str | None = None  # why the task is skipped, if it is
    has_label_set: bool = False  # log-likelihood scoring needs one
    # the spec's variants this task runs, in spec order (empty: skipped, or not planned)
    variants: tuple[NamedVariant, ...] = ()
    # (variant name, why) of each spec variant this task cannot run, in spec order
    skipped_variants: tuple[tuple[str, str], ...] = ()
    # (variant name, note) of what a variant's prompt says against it (`CompiledPrompt.notes`)
    notes: tuple[tuple[str, str], ...] = ()


def plan_tasks(
    spec: SweepSpec,
    catalog: Catalog,
    *,
    only: tuple[str, ...] | None = None,
    limit: int | None = None,
) -> list[PlannedTask]:
    """Resolve each task's common evaluation rows and the variants it runs, or why it is
    skipped.

    A task named in the spec that is unknown, or lacks a file of `requires:` (the user's
    explicit statement of what every task must have), is an error (the spec is wrong). A
    variant that cannot compile for a task is skipped on that task, with the reason, and the
    task runs the others; a task that can run none of them, or whose split is absent from the
    data, is skipped, with the reasons, so one task does not stop the sweep.
    """

    tasks = spec.tasks
    if only is not None and not only:  # `--tasks "$TASKS"` with it empty: not every task
        raise SpecError(
            f"{spec.path}: --tasks names no task; give comma-separated task names of this "
            f"spec ({', '.join(spec.tasks)}), or leave --tasks out to run them all"
        )
    if only is not None:
        unknown = [t for t in only if t not in spec.tasks]
        if unknown:
            raise SpecError(
                f"{spec.path}: --tasks names {', '.join(unknown)}, not in this spec's tasks "
                f"({', '.join(spec.tasks)})"
            )
        tasks = tuple(t for t in spec.tasks if t in only)
    return [_plan_task(spec, catalog, name, limit) for name in tasks]


def _plan_task(spec: SweepSpec, catalog: Catalog, name: str, limit: int | None) -> PlannedTask:
    """One task's plan: the variants it runs, those it skips and why, and its common rows."""
    task = catalog.task(name)  # unknown task -> did you mean
    missing = [f for f in spec.requires if f not in task.spec.prompt_files]
    if missing:
        raise SpecError(
            f"{spec.path}: task {name!r} lacks {', '.join(missing)}, which this study "
            "requires; remove it from tasks: (or drop the file from requires: to run only the "
            "variants the task supports)"
        )
    if not task.has_split(spec.split):
        return PlannedTask(name, (), f"no {spec.split} split in this data")
    kept_ids: list[list[str]] = []
    runs: list[NamedVariant] = []
    skipped: list[tuple[str, str]] = []
    notes: list[tuple[str, str]] = []
    prompts: dict[tuple[object, ...], str] = {}  # what a variant shows -> the first to show it
    for nv in spec.variants:
        try:
            compiled = compile_prompt(nv.for_task(name), task, spec.split)
            kept, _ = evaluation_rows(compiled.variant, task, spec.split)
        except VariantError as e:
            skipped.append((nv.name, short_reason(str(e))))
            continue
        same = prompts.setdefault(_prompt_key(compiled), nv.name)
        if same != nv.name:
            # a format point with nothing to act on here renders the base prompt: testing it
            # against its twin would compare a prompt with itself (and swell the family)
            skipped.append((nv.name, f"renders the same prompt as variant {same} on this task"))
            continue
        runs.append(nv)
        notes += [(nv.name, note) for note in compiled.notes]
        kept_ids.append([r["index"] for r in kept])
    if not runs:
        why = "; ".join(f"{n}: {r}" for n, r in skipped)
        return PlannedTask(
            name, (), f"no variant of this spec runs on it ({why})", skipped_variants=tuple(skipped)
        )
    # Row ids are unique (read_tsv refuses repeats), so ids map to rows one to one.
    rows_by_id = {r["index"]: r for r in task.rows(spec.split)}
    chosen = select_rows(
        [rows_by_id[i] for i in _common_rows(kept_ids)], limit or spec.limit, spec.sample_seed
    )
    return PlannedTask(
        name,
        tuple(r["index"] for r in chosen),
        has_label_set=bool(task.spec.labels),
        variants=tuple(runs),
        skipped_variants=tuple(skipped),
        notes=tuple(notes),
    )


_REASON_MAX = 160


def short_reason(message: str) -> str:
    """A `VariantError`'s message as a skip reason: without its advice ("; pick a task that
    has it": the sweep already did) or the list of the task's files, at most 160 characters."""
    text = message.split("; ")[0]
    text = re.sub(r" \((its prompt files|levels): [^)]*\)", "", text).strip()
    return text if len(text) <= _REASON_MAX else text[: _REASON_MAX - 1].rstrip() + "…"


def skipped_variants(planned: Sequence[PlannedTask]) -> dict[str, dict[str, str]]:
    """Task -> {variant: why} of the variants each planned task cannot run."""
    return {p.task: dict(p.skipped_variants) for p in planned if p.skipped_variants}


def skipped_items(planned: Sequence[PlannedTask]) -> list[dict[str, Any]]:
    """What the sweep skipped, for its report: each skipped task ({task, reason}) and each
    variant a task skipped ({task, variant, reason}; the reason names the variant too, so a
    line printed from it alone says what was skipped)."""
    out: list[dict[str, Any]] = []
    for p in planned:
        if p.skipped:
            out.append({"task": p.task, "reason": p.skipped})
            continue
        out += [
            {"task": p.task, "variant": v, "reason": f"variant {v} ({why})"}
            for v, why in p.skipped_variants
        ]
    return out


def _prompt_key(compiled: CompiledPrompt) -> tuple[object, ...]:
    """What a compiled variant shows the model and scores by: its prompt with the query's
    placeholders left in, its answer join (log-likelihood continuations) and label words."""
    return (compiled.template(), compiled.answer_join, compiled.label_map, compiled.labels)


def note_items(planned: Sequence[PlannedTask]) -> list[dict[str, str]]:
    """What a planned variant's prompt says against it ({task, variant, note}), for the
    sweep's output: it runs, and its score is read with this in mind."""
    return [{"task": p.task, "variant": v, "note": n} for p in planned for v, n in p.notes]


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
            for nv in pt.variants:
                ts = TrialSpec(
                    task=pt.task,
                    variant=nv.for_task(pt.task),
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
    # over the spec's variants, not those a task runs: a task that skips its few-shot
    # variants would otherwise be scored by log-likelihood beside tasks scored by generation,
    # and the across-task statistics would pool the two (found in review)
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
    catalog: Any,
    planned: Any,
    trials: Any,
    lm_factory: Callable[[str], Any],
    spec: SweepSpec | None = None,
    *,
    batch: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The planned trials with prompt-token and cost estimates (no model call); with `batch`
    the cost is at the provider's batch prices (``price: batch``; None where unknown).

    Under a sequential `spec` each trial's rows are its ordered rows cut at the budget
    (``max_rows``) and its estimates an upper bound (``bound: "upper"``): the rows a
    sequential comparison uses depend on the true difference, unknown before the calls; a
    variant no listed pair names is left out (it is not evaluated).
    """
    items = []
    lms = {t.model: lm_factory(t.model) for t in trials}
    design = spec.sequential if spec is not None else None
    every = [resolve_trial(t.spec, catalog, lms[t.model]) for t in trials]
    # the clusters of the sweep's own order (`sequential.order_trials`): over every trial
    clusters = task_clusters(every) if design is not None else {}
    for t, resolved in zip(trials, every, strict=True):
        pt, nv, model = t.planned, t.variant, t.model
        if design is not None and not is_arm(spec, nv.name):
            continue
        task = catalog.task(pt.task)
        rows = resolved.rows
        if design is not None:  # the rows in the design's order (clusters together), cut
            cid = clusters[pt.task]
            order = row_order(
                [r["answer"] for r in rows], design.seed, [r["index"] for r in rows],
                [cid[r["index"]] for r in rows],
            )  # fmt: skip
            rows = [rows[i] for i in order][: design.max_rows or len(order)]
        prompts = [resolved.compiled.render(r) for r in rows]
        tokens = sum(map(len, prompts)) // 4
        # the trial's own budget (an explanation's 150 or 300 tokens, a verbalizer's longer
        # label), the task's default under log-likelihood (no generation budget)
        budget = resolved.decoding.get("max_tokens") or decoding_for(task.spec, "chat").max_tokens
        out_tokens = len(rows) * int(budget)
        item = {
            "trial_id": resolved.id,
            "task": pt.task,
            "variant": nv.name,
            "model": model,
            "n": len(rows),
            "prompt_tokens_est": tokens,
            # what a local model evaluates (`experiments.sweeps.estimate`): the prompts'
            # text not shared with the row before, and the tokens it decodes one by one
            "fresh_tokens_est": fresh_chars(prompts) // 4,
            "decode_tokens_est": len(rows) * decode_tokens(resolved.decoding, task.spec),
            "cost_est": cost_estimate(model, tokens, out_tokens, batch=batch),
            **({"price": "batch"} if batch else {}),
        }
        if design is not None:  # the trial id is its rows' once the loop stops: none yet
            item.update(trial_id=None, bound="upper", grid_n=len(pt.rows))
        items.append(item)
    return items, skipped_items(planned)


def fresh_chars(prompts: Sequence[str]) -> int:
    """Characters of `prompts`, in run order, that a local model evaluates: each prompt's
    text after the prefix it shares with the one before (llama.cpp keeps that prefix's
    cache; the instruction and demonstrations are most of a LegalBench prompt)."""
    fresh, before = 0, ""
    for p in prompts:
        fresh += len(p) - _shared_prefix(before, p)
        before = p
    return fresh


def _shared_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of `a` and `b`, by bisection over slices (each
    comparison in C: a character loop in Python took seconds over a large sweep)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def decode_tokens(decoding: dict[str, Any], spec: Any) -> int:
    """Tokens a local model decodes one at a time for one row, counting a word a token
    (LegalBench's labels are common words, which BPE vocabularies hold whole): under
    log-likelihood each label continuation's tokens after its first (read from the
    prompt's logits); generating, a label's mean length and a stop token for a task with
    labels (capped at max_tokens), max_tokens otherwise (an upper bound)."""
    if "continuations" in decoding:
        return sum(max(0, len(c.split()) - 1) for c in decoding["continuations"])
    cap = int(decoding.get("max_tokens") or 0)
    labels = spec.labels or ()
    # no stop (an application prompt's explanation): the reply runs to its budget
    if not (spec.is_classification and labels) or not decoding.get("stop", ("\n",)):
        return cap
    words = sum(max(1, len(x.split())) for x in labels) / len(labels)
    return min(cap, math.ceil(words) + 1)


def is_arm(spec: Any, variant: str) -> bool:
    """Whether a sequential sweep evaluates this variant: every one for best_vs_worst and
    all_pairs, the named ones for listed pairs."""
    return isinstance(spec.comparisons, str) or any(variant in p for p in spec.comparisons)


def cost_estimate(
    model: str, prompt_tokens: int, completion_tokens: int, *, batch: bool = False
) -> float | None:
    """Price in USD of a trial's tokens, as its backend prices them (`price`: nothing for a
    local model, else litellm's price; its batch price with `batch`: None where litellm has
    none, never the direct price)."""
    return backend_class(model).price(model, prompt_tokens, completion_tokens, batch=batch)
