"""Declarative sweep specs (`ablations/*.yaml`): tasks x variant axes x models x seeds.

A spec is plain YAML, validated here with errors that name the file and field::

    name: reference_vs_description
    tasks: [hearsay, abercrombie]
    requires: [rule_reference_prompt.txt, rule_description_prompt.txt]
    fixed: {demos: none}               # levels shared by every variant
    axes:                              # the product of these levels makes the variants
      instruction: [reference, description]
    comparisons: [[instruction=reference, instruction=description]]   # or best_vs_worst / all_pairs
    n_resamples: 1000

Within a (task, model), every variant is evaluated on the *same* rows: the test rows that no
variant uses as a demonstration (the paper's protocol for resampled demos), so the paired
tests compare like with like.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from experiments.analysis import compare as cmp
from experiments.analysis.sensitivity import sensitivity_report
from experiments.files import atomic_write_bytes, atomic_write_text
from experiments.llm.backends import DEFAULT_MODEL
from experiments.llm.loglik import default_scoring
from experiments.llm.types import Scoring
from experiments.sweeps.executors import Executor, LocalExecutor, TrialJob, TrialLost
from experiments.tracking import comparisons_csv, log_sensitivity, store_errors
from experiments.trials.record import TrialRecord
from experiments.trials.spec import TrialSpec, prompt_hash, resolve_trial, select_rows
from promptlib.data import read_text
from promptlib.errors import VariantError, WorkbenchError, did_you_mean
from promptlib.leakage import evaluation_rows
from promptlib.render import compile_prompt
from promptlib.tasks import Catalog
from promptlib.variants import PromptVariant, parse_spec
from promptlib.yamlsafe import safe_yaml_load

if TYPE_CHECKING:
    from experiments.tracking import Tracker

AXES = ("instruction", "register", "demos", "seed", "pool", "format")
_KEYS = {
    "name": str,
    "description": str,
    "tasks": list,
    "requires": list,
    "models": list,
    "split": str,
    "limit": int,
    "sample_seed": int,
    "fixed": dict,
    "axes": dict,
    "comparisons": (list, str),
    "n_resamples": int,
    "correction": str,
    "scoring": str,
    "across_tasks": str,
    "cluster_by": str,
}
COMPARISON_KEYWORDS = ("best_vs_worst", "all_pairs")
SPLITS = ("train", "test")
MIN_RESAMPLES = 100
# A sweep's name becomes a folder under reports/ and an MLflow experiment: no path tricks.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


class SpecError(WorkbenchError):
    pass


@dataclass(frozen=True)
class NamedVariant:
    name: str  # e.g. "instruction=reference" (the axis levels that vary)
    variant: PromptVariant


@dataclass(frozen=True)
class SweepSpec:
    path: str
    name: str
    description: str
    tasks: tuple[str, ...]
    requires: tuple[str, ...]
    models: tuple[str, ...]
    split: str
    limit: int | None
    sample_seed: int
    variants: tuple[NamedVariant, ...]
    comparisons: tuple[tuple[str, str], ...] | str
    n_resamples: int
    correction: str
    scoring: str | None  # None: per trial, models.default_scoring (loglik for local zero-shot)
    across_tasks: str = "t"
    raw: dict[str, Any] = field(default_factory=dict)
    # the units the tests resample: "prompt" (rows a variant gave the same prompt), "rows",
    # or "column:<name>" of the task's data (see experiments.analysis.clusters)
    cluster_by: str = "prompt"

    @property
    def id(self) -> str:
        blob = json.dumps(self.raw, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a sweep spec; every problem names the file and the field."""
    p = Path(path)
    where = str(p)
    if not p.is_file():
        raise SpecError(f"{where}: no such sweep spec (the shipped ones are in ablations/)")
    text = read_text(p, "sweep spec", SpecError)  # size-capped, UTF-8, names the file
    # No anchors or aliases, bounded depth and size: a few hundred bytes of nested aliases
    # would otherwise expand to gigabytes (issue 19, defect 8).
    doc = safe_yaml_load(text, where, SpecError)
    if not isinstance(doc, dict):
        raise SpecError(f"{where}: a sweep spec is a YAML mapping (name:, tasks:, axes: ...)")
    for key, value in doc.items():
        if key not in _KEYS:
            raise SpecError(
                f"{where}: unknown field {key!r}{did_you_mean(str(key), _KEYS)} "
                f"(fields: {', '.join(_KEYS)})"
            )
        wrong_bool = isinstance(value, bool) and _KEYS[key] is int
        if value is not None and (
            wrong_bool or not isinstance(value, _KEYS[key])  # type: ignore[arg-type]
        ):
            raise SpecError(f"{where}: field {key!r} has the wrong type ({type(value).__name__})")
    for key in ("name", "tasks"):
        if not doc.get(key):
            raise SpecError(f"{where}: field {key!r} is required")
    name = str(doc["name"])
    if not _NAME.fullmatch(name) or ".." in name:
        raise SpecError(
            f"{where}: name {name!r} must be letters, digits, '_', '-' or '.', starting with a "
            "letter or digit (it names a folder under reports/ and an MLflow experiment)"
        )
    for key in ("tasks", "models", "requires"):
        _no_duplicates(where, key, doc.get(key) or [])
    split = doc.get("split", "test")
    if split not in SPLITS:
        raise SpecError(f"{where}: split must be train or test, not {split!r}")
    n_resamples = doc.get("n_resamples", 1000)
    if n_resamples < MIN_RESAMPLES:
        raise SpecError(
            f"{where}: n_resamples must be at least {MIN_RESAMPLES}, not {n_resamples} "
            "(a Monte Carlo p-value is never below 1/(R+1); the paper used 1000)"
        )
    if doc.get("limit") is not None and doc["limit"] < 1:
        raise SpecError(f"{where}: limit must be at least 1, not {doc['limit']}")
    if doc.get("sample_seed", 0) < 0:
        raise SpecError(f"{where}: sample_seed must be >= 0, not {doc['sample_seed']}")
    fixed = dict(doc.get("fixed") or {})
    axes = dict(doc.get("axes") or {})
    for axis in [*fixed, *axes]:
        if axis not in AXES:
            raise SpecError(
                f"{where}: unknown axis {axis!r}{did_you_mean(str(axis), AXES)} "
                f"(axes: {', '.join(AXES)})"
            )
    for axis, levels in axes.items():
        if not isinstance(levels, list) or not levels:
            raise SpecError(f"{where}: axes.{axis} must be a non-empty list of levels")
        _no_duplicates(where, f"axes.{axis}", levels)
    for axis in set(fixed) & set(axes):
        raise SpecError(f"{where}: axis {axis!r} is both fixed and varied; keep one")
    variants = _expand(where, fixed, axes)
    names = [v.name for v in variants]
    comparisons = _comparisons(where, doc.get("comparisons", "all_pairs"), names)
    correction = doc.get("correction", "holm")
    if correction not in ("holm", "bh"):
        raise SpecError(f"{where}: correction must be holm or bh, not {correction!r}")
    scoring = doc.get("scoring")
    if scoring is not None and scoring not in ("generate", "loglik", "loglik-norm"):
        raise SpecError(
            f"{where}: scoring must be generate, loglik or loglik-norm, not {scoring!r}"
        )
    default_across = "permutation" if comparisons == "best_vs_worst" else "t"
    across = doc.get("across_tasks", default_across)
    if across not in ("t", "wilcoxon", "permutation"):
        raise SpecError(f"{where}: across_tasks must be t, wilcoxon or permutation, not {across!r}")
    if comparisons == "best_vs_worst" and across != "permutation":
        raise SpecError(
            f"{where}: best_vs_worst needs across_tasks: permutation (a {across} test of the "
            "best vs the worst draw is biased by choosing them after the fact)"
        )
    cluster_by = str(doc.get("cluster_by", "prompt"))
    if cluster_by not in ("prompt", "rows") and not (
        cluster_by.startswith("column:") and cluster_by[7:].strip()
    ):
        raise SpecError(
            f"{where}: cluster_by must be prompt (rows given the same prompt are one unit, "
            f"the default), rows, or column:<a data column>, not {cluster_by!r}"
        )
    return SweepSpec(
        path=where,
        name=name,
        description=str(doc.get("description", "")).strip(),
        tasks=tuple(str(t) for t in doc["tasks"]),
        requires=tuple(str(r) for r in doc.get("requires") or ()),
        models=tuple(str(m) for m in doc.get("models") or (DEFAULT_MODEL,)),
        split=str(split),
        limit=doc.get("limit"),
        sample_seed=int(doc.get("sample_seed", 0)),
        variants=tuple(variants),
        comparisons=comparisons,
        n_resamples=int(n_resamples),
        correction=correction,
        scoring=scoring,
        across_tasks=str(across),
        raw=doc,
        cluster_by=cluster_by,
    )


def _no_duplicates(where: str, field_name: str, items: list[Any]) -> None:
    seen: set[str] = set()
    for item in items:
        key = str(item)
        if key in seen:
            raise SpecError(f"{where}: {field_name} lists {key!r} twice; list it once")
        seen.add(key)


def _expand(where: str, fixed: dict[str, Any], axes: dict[str, list[Any]]) -> list[NamedVariant]:
    out = []
    keys = list(axes)
    for combo in itertools.product(*(axes[k] for k in keys)) if keys else [()]:
        levels = {**fixed, **dict(zip(keys, combo, strict=True))}
        name = ",".join(f"{k}={v}" for k, v in zip(keys, combo, strict=True)) or "base"
        spec_str = ",".join(f"{k}={v}" for k, v in levels.items())
        try:
            variant = parse_spec(spec_str)
        except VariantError as e:
            raise SpecError(f"{where}: variant {name!r}: {e}") from e
        out.append(NamedVariant(name, variant))
    return out


def _comparisons(where: str, raw: Any, names: list[str]) -> tuple[tuple[str, str], ...] | str:
    if isinstance(raw, str):
        if raw not in COMPARISON_KEYWORDS:
            raise SpecError(
                f"{where}: comparisons must be a list of [a, b] variant pairs or one of "
                f"{', '.join(COMPARISON_KEYWORDS)}, not {raw!r}"
            )
        return raw
    pairs = []
    for item in raw:
        if not (isinstance(item, list) and len(item) == 2):
            raise SpecError(f"{where}: each comparison is a pair [a, b], got {item!r}")
        for n in item:
            if n not in names:
                raise SpecError(
                    f"{where}: comparison names unknown variant {n!r}"
                    f"{did_you_mean(str(n), names)} (variants: {', '.join(names)})"
                )
        a, b = str(item[0]), str(item[1])
        if a == b:
            raise SpecError(f"{where}: comparison [{a}, {b}] compares a variant with itself")
        if (a, b) in pairs or (b, a) in pairs:
            raise SpecError(f"{where}: comparison [{a}, {b}] is listed twice")
        pairs.append((a, b))
    return tuple(pairs)


# ---- planning ------------------------------------------------------------------------------
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
    for ids in kept_ids[1:]:
        keep = set(ids)
        common = [i for i in common if i in keep]
    return common


# ---- execution -----------------------------------------------------------------------------
@dataclass
class TrialOutcome:
    task: str
    model: str
    variant: str
    trial_id: str
    run_id: str
    status: str  # a TrialStatus value
    n_errors: int
    metric: str
    score: float | None  # the official score; None unless the trial is complete
    indices: list[str]
    answers: list[str]  # raw answers
    generations: list[str | None]  # raw generations; None where the call failed
    correct: list[bool | None]
    resumed: bool
    prompt_hashes: list[str | None] = field(default_factory=list)  # per row: the clusters

    @property
    def complete(self) -> bool:
        return self.status == "complete"


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
    blob = json.dumps(
        {
            "spec": spec.id,
            "models": lm_identities,
            "tasks": tasks,
            "limit": limit,
            "trials": sorted(trial_ids),
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


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
) -> dict[str, Any]:
    """Run (or resume) a sweep, log it to the tracker, and test its comparisons.

    Each trial is claimed before it runs (see `Tracker.claim`): one already FINISHED is read
    back; one a peer process is running is left for later and waited for at the end. An
    incomplete trial's run ends FAILED and its comparisons get no p-value; the parent ends
    FINISHED only when every trial is complete.

    `executor` (default: `LocalExecutor`, in this process) computes the claimed trials; this
    function alone claims, logs to MLflow and compares, whatever the executor. A trial the
    executor lost (its Ray worker died past its retries) has no run and counts as failed.
    """

    models = models or spec.models
    planned = plan_tasks(spec, catalog, only=only, limit=limit)
    plan = trial_plan(spec, planned, models)
    if not plan:  # nothing to run or compare: not a result, and no parent run claims one
        why = "; ".join(f"{p.task}: {p.skipped}" for p in planned if p.skipped)
        raise SpecError(
            f"{spec.path}: every task was skipped ({why or 'no tasks'}), so there is nothing "
            f"to run or compare and nothing was logged; choose tasks that have a {spec.split} "
            "split (--tasks, tasks:) or another split:"
        )
    lms = {m: lm_factory(m) for m in models}  # cheap: a local model loads on first call
    resolved = [resolve_trial(t.spec, catalog, lms[t.model]) for t in plan]
    sid = sweep_id(
        spec,
        [lms[m].cache_identity() for m in models],
        [p.task for p in planned],
        limit,
        [rt.id for rt in resolved],
    )
    params = {
        "spec": spec.path,
        "models": ",".join(models),
        "tasks": ",".join(p.task for p in planned),
        "limit": limit if limit is not None else spec.limit,
        "n_resamples": spec.n_resamples,
        "correction": spec.correction,
        "variants": ";".join(v.name for v in spec.variants),
    }
    executor = executor or LocalExecutor()
    # Before anything is logged: a cluster that cannot start the workers, or workers whose
    # local model is not this machine's, stop the sweep with no parent run written.
    executor.start([lms[m] for m in models], cache)
    parent = tracker.parent_run(spec.name, sid, params)
    # A FINISHED parent stays FINISHED until this run changes something (a trial to run,
    # other comparisons): a rerun with nothing to do, even an interrupted one, leaves it so.
    running = tracker.run_status(parent) != "FINISHED"
    if running:
        tracker.mark_running(parent)
    outcomes: dict[int, TrialOutcome] = {}
    held: dict[int, contextlib.ExitStack] = {}  # claims of trials handed to the executor
    rebuilt: list[str] = []  # trials whose FINISHED run had lost its predictions
    ok = False

    def touch() -> None:
        nonlocal running
        if not running:
            tracker.mark_running(parent)
            running = True

    def claimed(pending: list[int], wait: bool, deferred: list[int]) -> Iterator[TrialJob]:
        """Claim trials one at a time, as the executor asks for work; yield those to run."""
        for i in pending:
            t, rt = plan[i], resolved[i]
            if progress:
                progress(
                    len(outcomes), len(plan), f"{t.planned.task} · {t.variant.name} · {t.model}"
                )
            stack = contextlib.ExitStack()
            try:
                claim = stack.enter_context(tracker.claim(parent, rt.id, wait=wait))
                if claim is None:
                    stack.close()
                    deferred.append(i)
                    continue
                if claim.startswith("done:"):
                    run_id = claim.removeprefix("done:")
                    preds = tracker.stored_predictions(run_id)
                    if preds is not None:
                        stack.close()
                        outcomes[i] = _outcome(
                            t,
                            rt,
                            run_id,
                            preds,
                            "complete",
                            rt.metric,
                            tracker.run_metrics(run_id).get("score"),
                            True,
                        )
                        continue
                    # Its artifacts were deleted: rerun it (answers from the response cache)
                    # and log it again, still under this trial's claim.
                    touch()
                    tracker.discard_run(run_id)
                    rebuilt.append(rt.id)
                touch()
            except BaseException:
                stack.close()
                raise
            held[i] = stack  # released once the result is logged
            yield TrialJob(i, rt, catalog.task(t.planned.task), lms[t.model])

    try:
        pending = list(range(len(plan)))
        for wait in (False, True):  # first pass skips trials a peer is running; second waits
            deferred: list[int] = []
            for job, result in executor.map_trials(
                claimed(pending, wait, deferred), catalog, cache
            ):
                i = job.key
                t, rt = plan[i], resolved[i]
                try:
                    if isinstance(result, TrialLost):  # no run logged: the rerun resumes it
                        outcomes[i] = _outcome(
                            t, rt, "", _lost(rt.rows, result.reason), "failed",
                            rt.metric, None, False,
                        )  # fmt: skip
                        continue
                    task = catalog.task(t.planned.task)
                    doing = f"logging trial {t.planned.task} · {t.variant.name} · {t.model}"
                    with store_errors(tracker.config, doing):
                        run_id = tracker.log_trial(
                            parent,
                            result,
                            rt.compiled,
                            rt.rows,
                            t.variant.name,
                            {"sweep": spec.name},
                            source=str(task.files.split_path(spec.split)),
                        )
                    outcomes[i] = _outcome(
                        t,
                        rt,
                        run_id,
                        [vars(p) for p in result.predictions],
                        str(result.status),
                        result.metric,
                        result.score,
                        False,
                    )
                finally:
                    held.pop(i).close()
            pending = deferred
        ordered = [outcomes[i] for i in range(len(plan))]
        if progress:
            progress(len(plan), len(plan), "comparisons")
        table, across = compare(spec, ordered, catalog)
        figures = _figures(spec, ordered, table, catalog)
        incomplete = [
            {"task": o.task, "model": o.model, "variant": o.variant, "trial_id": o.trial_id,
             "status": o.status, "n_errors": o.n_errors, "n": len(o.indices)}
            for o in ordered if not o.complete
        ]  # fmt: skip
        sens, sens_figures = _sensitivity(spec, ordered, catalog)
        written: list[str] = []
        doc = {
            "comparisons": table,
            "across_tasks": across,
            "incomplete": incomplete,
            "sensitivity": sens,
        }
        try:
            if reports_dir is not None:
                _write_report(reports_dir / spec.name, doc, {**figures, **sens_figures})
                written = [
                    str(reports_dir / spec.name / f) for f in sorted({**figures, **sens_figures})
                ]
            # A FINISHED parent that already holds these comparisons is left untouched.
            logged = None if running else tracker.logged_comparisons(parent, sorted(figures))
            if logged is None or _canonical(logged) != _canonical(doc):
                touch()
                tracker.log_comparisons(parent, doc, figures)
                if sens.get("per_task"):
                    log_sensitivity(tracker, parent, sens, sens_figures)
        finally:  # pyplot keeps every open figure alive: a long-lived driver would pile them up
            import matplotlib.pyplot as plt

            for fig in {**figures, **sens_figures}.values():
                plt.close(fig)
        ok = not incomplete
    except BaseException:
        for stack in held.values():
            stack.close()
        if running:  # best effort: the error on its way (maybe the store itself) says more
            with contextlib.suppress(Exception):
                tracker.finish(parent, False)
        raise
    for stack in held.values():
        stack.close()
    if running:
        with store_errors(tracker.config, "ending the sweep's parent run"):
            tracker.finish(parent, ok)
    return {
        "sweep": spec.name,
        "sweep_id": sid,
        "parent_run_id": parent,
        "status": "complete" if ok else "incomplete",
        "trials": len(plan),
        "resumed": sum(o.resumed for o in ordered),
        "skipped": [{"task": p.task, "reason": p.skipped} for p in planned if p.skipped],
        "incomplete": incomplete,
        "comparisons": table,
        "across_tasks": across,
        "sensitivity": sens,
        "figures": written,
        "rebuilt": rebuilt,
        "experiment": f"{tracker.config.experiment_prefix}/{spec.name}",
    }


def _canonical(doc: dict[str, Any]) -> str:
    """A comparisons document as text, to tell whether the parent already holds this one."""
    return json.dumps(doc, sort_keys=True, default=str)


def _sensitivity(
    spec: SweepSpec, ordered: list[TrialOutcome], catalog: Catalog
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The sweep's prompt-sensitivity report and its figures (`experiments.analysis.sensitivity`).

    A report the analysis refuses (e.g. scores it cannot reproduce from the generations) is
    recorded as an error beside the comparisons, which stand on their own: never a number.
    """
    # start-up time: matplotlib, only when figures are drawn
    from experiments.analysis.figures import sensitivity_figures

    if len(spec.variants) < 2:
        return {"per_task": [], "notes": ["one variant: nothing to compare"]}, {}
    try:
        columns = (
            {t: _column(spec, catalog, t) or {} for t in spec.tasks}
            if spec.cluster_by.startswith("column:")
            else None
        )
        sens = sensitivity_report(
            [TrialRecord.from_outcome(o) for o in ordered],
            n_resamples=spec.n_resamples,
            cluster_by=spec.cluster_by,
            columns=columns,
        )
    except (ValueError, AssertionError) as e:
        return {"per_task": [], "error": f"no sensitivity analysis: {e}"}, {}
    return sens, (sensitivity_figures(sens) if sens.get("per_task") else {})


def _outcome(
    t: PlannedTrial,
    rt: Any,
    run_id: str,
    preds: list[dict[str, Any]],
    status: str,
    metric: str,
    score: float | None,
    resumed: bool,
) -> TrialOutcome:
    """A trial's outcome; each row's prompt hash (its cluster key) is the one recorded with
    its prediction, or recomputed from the resolved trial's prompt where none was."""

    rendered: dict[str, str] = {}
    for row in rt.rows:
        rendered.setdefault(str(row["index"]), prompt_hash(rt.compiled.render(row)))
    return TrialOutcome(
        task=t.planned.task,
        model=t.model,
        variant=t.variant.name,
        trial_id=rt.id,
        run_id=run_id,
        status=status,
        n_errors=sum(p.get("error") is not None for p in preds),
        metric=metric,
        score=score if status == "complete" else None,
        indices=[str(p["index"]) for p in preds],
        answers=[str(p["answer"]) for p in preds],
        generations=[p["generation"] for p in preds],
        correct=[p["correct"] for p in preds],
        resumed=resumed,
        prompt_hashes=[p.get("prompt_hash") or rendered.get(str(p["index"])) for p in preds],
    )


def _lost(rows: Sequence[dict[str, str]], reason: str) -> list[dict[str, Any]]:
    """Predictions of a trial that never ran to the end: every row failed, with the reason."""
    return [
        {"index": r["index"], "answer": r["answer"], "generation": None, "correct": None,
         "error": reason}
        for r in rows
    ]  # fmt: skip


class ReportError(WorkbenchError):
    """reports/<sweep>/ cannot be written: the trials are logged, only the files are missing."""


def _write_report(out: Path, doc: dict[str, Any], figures: dict[str, Any]) -> None:
    """reports/<sweep>/: figures, comparisons.json and .csv, each written atomically.

    A folder that cannot be written (deleted, made read-only or replaced by a file mid-sweep)
    is one `ReportError` line; every trial is already logged, so a rerun only redoes this.
    """
    import io

    try:
        out.mkdir(parents=True, exist_ok=True)
        for filename, fig in figures.items():
            buf = io.BytesIO()
            fig.savefig(buf, dpi=120, format="png")
            atomic_write_bytes(out / filename, buf.getvalue())
        atomic_write_text(out / "comparisons.json", json.dumps(doc, indent=1, default=str))
        atomic_write_text(out / "comparisons.csv", comparisons_csv(doc["comparisons"]))
    except OSError as e:
        raise ReportError(
            f"cannot write the sweep report to {out}/ ({e.strerror or e}"
            f"{': ' + str(e.filename) if e.filename else ''}); make it a writable folder and "
            "run the same command again: finished trials are logged in MLflow and are not rerun"
        ) from e


def compare(
    spec: SweepSpec, outcomes: list[TrialOutcome], catalog: Catalog
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The sweep's comparisons per (model, task), corrected across the sweep, and the
    declared across-task test (see `experiments.analysis.compare`)."""

    table: list[dict[str, Any]] = []
    groups: dict[tuple[str, str], dict[str, TrialOutcome]] = {}
    for o in outcomes:
        groups.setdefault((o.model, o.task), {})[o.variant] = o
    for (model, task), by_variant in groups.items():
        arms = {name: TrialRecord.from_outcome(o) for name, o in by_variant.items()}
        where = f"{task} ({model})"
        how: dict[str, Any] = {
            "n_resamples": spec.n_resamples,
            "where": where,
            "cluster_by": spec.cluster_by,
            "column": _column(spec, catalog, task),
        }
        if spec.comparisons == "best_vs_worst":
            rows = [cmp.best_vs_worst(list(arms.values()), **how)]
        else:
            peers = list(arms.values())
            rows = [
                cmp.pair(arms[a], arms[b], peers=peers, **how)
                for a, b in cmp.pairs_of(spec.comparisons, list(arms))
            ]
        table += [{"model": model, "task": task, **row} for row in rows]
    cmp.correct(table, spec.correction)
    tasks = list(dict.fromkeys(o.task for o in outcomes))
    kind = spec.comparisons if isinstance(spec.comparisons, str) else "pairs"
    across = cmp.across_tasks(table, kind=kind, test=spec.across_tasks, all_tasks=tasks)  # type: ignore[arg-type]
    return table, across


def _column(spec: SweepSpec, catalog: Catalog, task: str) -> dict[str, str] | None:
    """Row index -> value of the data column a sweep clusters by (None unless it does)."""
    if not spec.cluster_by.startswith("column:"):
        return None
    name = spec.cluster_by[7:].strip()
    rows = catalog.task(task).rows(spec.split)
    if rows and name not in rows[0]:
        raise SpecError(
            f"{spec.path}: cluster_by {spec.cluster_by!r}: task {task} has no column {name!r} "
            f"(its columns: {', '.join(rows[0])}); use cluster_by: prompt"
        )
    return {str(r["index"]): str(r.get(name) or "") for r in rows}


def _figures(
    spec: SweepSpec, outcomes: list[TrialOutcome], table: list[dict[str, Any]], catalog: Catalog
) -> dict[str, Any]:
    # start-up time: matplotlib, only when figures are drawn
    from experiments.analysis.figures import draws_figure, pair_figure

    figures: dict[str, Any] = {}
    chance: dict[str, float | None] = {}
    for task in {o.task for o in outcomes}:
        spec_ = catalog.task(task).spec
        labels = spec_.labels if spec_.is_classification else None
        chance[task] = 1.0 / len(labels) if labels else None
    for model in sorted({o.model for o in outcomes}):
        mine = [o for o in outcomes if o.model == model]
        rows = [r for r in table if r["model"] == model]
        tag = safe_model(model)
        draw = draws_figure if spec.comparisons == "best_vs_worst" else pair_figure
        figures[f"figure_{spec.name}_{tag}.png"] = draw(
            spec.name, model, [TrialRecord.from_outcome(o) for o in mine], rows, chance
        )
    return figures


def safe_model(model: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in model)
