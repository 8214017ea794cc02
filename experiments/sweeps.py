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

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from promptlib.demos import evaluation_rows
from promptlib.errors import VariantError, WorkbenchError, did_you_mean
from promptlib.render import compile_prompt
from promptlib.tasks import Catalog
from promptlib.variants import PromptVariant, parse_spec

DEFAULT_MODEL = "local/smollm2"
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
}
COMPARISON_KEYWORDS = ("best_vs_worst", "all_pairs")


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
    scoring: str
    raw: dict[str, Any] = field(default_factory=dict)

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
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise SpecError(f"{where}: malformed YAML{at}: {getattr(e, 'problem', e)}") from e
    if not isinstance(doc, dict):
        raise SpecError(f"{where}: a sweep spec is a YAML mapping (name:, tasks:, axes: ...)")
    for key, value in doc.items():
        if key not in _KEYS:
            raise SpecError(
                f"{where}: unknown field {key!r}{did_you_mean(str(key), _KEYS)} "
                f"(fields: {', '.join(_KEYS)})"
            )
        if value is not None and not isinstance(value, _KEYS[key]):  # type: ignore[arg-type]
            raise SpecError(f"{where}: field {key!r} has the wrong type ({type(value).__name__})")
    for key in ("name", "tasks"):
        if not doc.get(key):
            raise SpecError(f"{where}: field {key!r} is required")
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
    variants = _expand(where, fixed, axes)
    names = [v.name for v in variants]
    comparisons = _comparisons(where, doc.get("comparisons", "all_pairs"), names)
    correction = doc.get("correction", "holm")
    if correction not in ("holm", "bh"):
        raise SpecError(f"{where}: correction must be holm or bh, not {correction!r}")
    scoring = doc.get("scoring", "generate")
    if scoring not in ("generate", "loglik"):
        raise SpecError(f"{where}: scoring must be generate or loglik, not {scoring!r}")
    return SweepSpec(
        path=where,
        name=str(doc["name"]),
        description=str(doc.get("description", "")).strip(),
        tasks=tuple(str(t) for t in doc["tasks"]),
        requires=tuple(str(r) for r in doc.get("requires") or ()),
        models=tuple(str(m) for m in doc.get("models") or (DEFAULT_MODEL,)),
        split=str(doc.get("split", "test")),
        limit=doc.get("limit"),
        sample_seed=int(doc.get("sample_seed", 0)),
        variants=tuple(variants),
        comparisons=comparisons,
        n_resamples=int(doc.get("n_resamples", 1000)),
        correction=correction,
        scoring=scoring,
        raw=doc,
    )


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
        pairs.append((str(item[0]), str(item[1])))
    return tuple(pairs)


# ---- planning ------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlannedTask:
    task: str
    rows: tuple[str, ...]  # the rows every variant of this task is evaluated on
    skipped: str | None = None  # why the task is skipped, if it is


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
    from experiments.runner import select_rows

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
        common: list[str] | None = None
        for nv in spec.variants:
            try:
                compiled = compile_prompt(nv.variant, task, spec.split)
            except VariantError as e:
                raise SpecError(f"{spec.path}: task {name!r}, variant {nv.name!r}: {e}") from e
            kept, _ = evaluation_rows(compiled.variant, task, spec.split)
            ids = [r["index"] for r in kept]
            common = ids if common is None else [i for i in common if i in set(ids)]
        rows_by_id = {r["index"]: r for r in task.rows(spec.split)}
        chosen = select_rows(
            [rows_by_id[i] for i in common or []], limit or spec.limit, spec.sample_seed
        )
        planned.append(PlannedTask(name, tuple(r["index"] for r in chosen)))
    return planned


# ---- execution -----------------------------------------------------------------------------
@dataclass
class TrialOutcome:
    task: str
    model: str
    variant: str
    trial_id: str
    run_id: str
    score: float | None
    answers: list[str]
    outputs: list[str | None]  # normalised generations; None where the call failed
    correct: list[bool]
    resumed: bool


def trial_plan(
    spec: SweepSpec,
    planned: list[PlannedTask],
    models: tuple[str, ...],
) -> list[tuple[str, PlannedTask, NamedVariant, Any]]:
    """Every (model, task, variant) trial of the sweep, in run order."""
    from experiments.runner import TrialSpec

    out = []
    for model in models:
        for pt in planned:
            if pt.skipped:
                continue
            for nv in spec.variants:
                ts = TrialSpec(
                    pt.task,
                    nv.variant,
                    model,
                    spec.split,
                    None,
                    spec.sample_seed,
                    spec.scoring,  # type: ignore[arg-type]
                    rows=pt.rows,
                )
                out.append((model, pt, nv, ts))
    return out


def run_sweep(
    spec: SweepSpec,
    catalog: Catalog,
    *,
    models: tuple[str, ...] | None = None,
    only: tuple[str, ...] | None = None,
    limit: int | None = None,
    tracker: Any,
    lm_factory: Any,
    cache: Any = None,
    progress: Any = None,
    reports_dir: Path | None = None,
) -> dict[str, Any]:
    """Run (or resume) a sweep, log it to the tracker, and test its comparisons."""
    from experiments.metrics import normalize
    from experiments.runner import run_trial

    models = models or spec.models
    planned = plan_tasks(spec, catalog, only=only, limit=limit)
    trials = trial_plan(spec, planned, models)
    sweep_id = hashlib.sha256(
        json.dumps(
            {"spec": spec.id, "models": models, "tasks": [p.task for p in planned], "limit": limit},
            sort_keys=True,
        ).encode()
    ).hexdigest()
    params = {
        "spec": spec.path,
        "models": ",".join(models),
        "tasks": ",".join(p.task for p in planned),
        "limit": limit if limit is not None else spec.limit,
        "n_resamples": spec.n_resamples,
        "correction": spec.correction,
        "variants": ";".join(v.name for v in spec.variants),
    }
    parent = tracker.parent_run(spec.name, sweep_id, params)
    done = tracker.finished_trials(parent)
    outcomes: list[TrialOutcome] = []
    lms: dict[str, Any] = {}
    ok = False
    try:
        for n, (model, pt, nv, ts) in enumerate(trials, 1):
            if progress:
                progress(n - 1, len(trials), f"{pt.task} · {nv.name} · {model}")
            if ts.id in done:
                run_id = done[ts.id]
                preds = tracker.load_predictions(run_id)
                score = tracker.run_metrics(run_id).get("score")
                resumed = True
            else:
                if model not in lms:
                    lms[model] = lm_factory(model)
                result = run_trial(ts, catalog, lms[model], cache=cache)
                task = catalog.task(pt.task)
                compiled = _compiled(nv, task, spec.split)
                rows_by_id = {r["index"]: r for r in task.rows(spec.split)}
                run_id = tracker.log_trial(
                    parent,
                    result,
                    compiled,
                    [rows_by_id[i] for i in pt.rows],
                    nv.name,
                    {"sweep": spec.name},
                    source=str(task.files.split_path(spec.split)),
                )
                preds = [vars(p) for p in result.predictions]
                score = result.score
                resumed = False
            outcomes.append(
                TrialOutcome(
                    pt.task,
                    model,
                    nv.name,
                    ts.id,
                    run_id,
                    score,
                    [normalize(p["answer"]) for p in preds],
                    [
                        None if p["generation"] is None else normalize(p["generation"])
                        for p in preds
                    ],
                    [bool(p["correct"]) for p in preds],
                    resumed,
                )
            )
        if progress:
            progress(len(trials), len(trials), "comparisons")
        table, across = compare(spec, outcomes, catalog)
        figures = _figures(spec, outcomes, table, catalog)
        if reports_dir is not None:
            out = reports_dir / spec.name
            out.mkdir(parents=True, exist_ok=True)
            for filename, fig in figures.items():
                fig.savefig(out / filename, dpi=120)
            (out / "comparisons.json").write_text(
                json.dumps({"comparisons": table, "across_tasks": across}, indent=1)
            )
        tracker.log_comparisons(parent, table, figures)
        ok = True
    finally:
        tracker.finish(parent, ok)
    return {
        "sweep": spec.name,
        "sweep_id": sweep_id,
        "parent_run_id": parent,
        "trials": len(trials),
        "resumed": sum(o.resumed for o in outcomes),
        "skipped": [{"task": p.task, "reason": p.skipped} for p in planned if p.skipped],
        "comparisons": table,
        "across_tasks": across,
    }


def _compiled(nv: NamedVariant, task: Any, split: str) -> Any:
    return compile_prompt(nv.variant, task, split)


def _pairs(spec: SweepSpec, scores: dict[str, float | None]) -> list[tuple[str, str]]:
    if spec.comparisons == "all_pairs":
        return list(itertools.combinations([v.name for v in spec.variants], 2))
    if spec.comparisons == "best_vs_worst":
        valid = {k: v for k, v in scores.items() if v is not None}
        if len(valid) < 2:
            return []
        best = max(valid, key=lambda k: valid[k])
        worst = min(valid, key=lambda k: valid[k])
        return [] if best == worst else [(best, worst)]
    return list(spec.comparisons)  # type: ignore[arg-type]


def compare(
    spec: SweepSpec, outcomes: list[TrialOutcome], catalog: Catalog
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Paired permutation tests per (model, task, pair), corrected across the sweep."""
    from experiments import stats

    table: list[dict[str, Any]] = []
    groups: dict[tuple[str, str], dict[str, TrialOutcome]] = {}
    for o in outcomes:
        groups.setdefault((o.model, o.task), {})[o.variant] = o
    for (model, task), by_variant in groups.items():
        metric = catalog.task(task).spec.metric
        scores = {k: v.score for k, v in by_variant.items()}
        for a, b in _pairs(spec, scores):
            oa, ob = by_variant[a], by_variant[b]
            test_metric: stats.MetricName
            if metric == "balanced_accuracy":
                y, pa, pb, test_metric = oa.answers, oa.outputs, ob.outputs, "balanced_accuracy"
            else:  # other metrics: test per-row correctness, stated as such
                y = ["1"] * len(oa.correct)
                pa = ["1" if c else "0" for c in oa.correct]
                pb = ["1" if c else "0" for c in ob.correct]
                test_metric = "accuracy"
            res = stats.paired_permutation_test(
                y,
                pa,
                pb,
                metric=test_metric,
                n_resamples=spec.n_resamples,
                seed=0,
            )
            ci = stats.bootstrap_ci(y, pa, pb, metric=test_metric, n_resamples=2000, seed=0)
            mde = stats.minimum_detectable_effect(y, pa, pb, metric=test_metric)
            table.append(
                {
                    "model": model,
                    "task": task,
                    "a": a,
                    "b": b,
                    "metric": test_metric,
                    "score_a": oa.score,
                    "score_b": ob.score,
                    "statistic": res.statistic,
                    "p_value": res.p_value,
                    "exact": res.exact,
                    "n_resamples": res.n_resamples,
                    "n": res.n,
                    "n_discordant": res.n_discordant,
                    "ci_low": ci.low,
                    "ci_high": ci.high,
                    "mde_80": mde,
                    "test": res.test,
                }
            )
    ps = [row["p_value"] for row in table]
    holm = stats.holm(ps) if ps else []
    bh = stats.benjamini_hochberg(ps) if ps else []
    for row, ph, pb_ in zip(table, holm, bh, strict=True):
        row["p_holm"] = ph
        row["p_bh"] = pb_
        row["p_corrected"] = ph if spec.correction == "holm" else pb_
    across: list[dict[str, Any]] = []
    if isinstance(spec.comparisons, tuple):
        for a, b in spec.comparisons:
            for model in {o.model for o in outcomes}:
                rows = [r for r in table if r["a"] == a and r["b"] == b and r["model"] == model]
                sa = [
                    r["score_a"]
                    for r in rows
                    if r["score_a"] is not None and r["score_b"] is not None
                ]
                sb = [
                    r["score_b"]
                    for r in rows
                    if r["score_a"] is not None and r["score_b"] is not None
                ]
                if len(sa) >= 2 and any(x != y for x, y in zip(sa, sb, strict=True)):
                    t = stats.paired_t_across_tasks(sa, sb)
                    w = stats.wilcoxon_across_tasks(sa, sb)
                    for r in (t, w):
                        across.append({"model": model, "a": a, "b": b, **vars(r)})
    return table, across


def _figures(
    spec: SweepSpec, outcomes: list[TrialOutcome], table: list[dict[str, Any]], catalog: Catalog
) -> dict[str, Any]:
    from experiments.figures import draws_figure, pair_figure

    figures: dict[str, Any] = {}
    for model in sorted({o.model for o in outcomes}):
        mine = [o for o in outcomes if o.model == model]
        rows = [r for r in table if r["model"] == model]
        tag = safe_model(model)
        if spec.comparisons == "best_vs_worst":
            figures[f"figure_{spec.name}_{tag}.png"] = draws_figure(spec.name, model, mine, rows)
        else:
            figures[f"figure_{spec.name}_{tag}.png"] = pair_figure(spec.name, model, mine, rows)
    return figures


def safe_model(model: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in model)
