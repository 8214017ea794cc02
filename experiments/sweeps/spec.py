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
tests compare like with like (see `experiments.sweeps.plan`).

One spec may cross axes over tasks that do not all support every level. Each task runs the
variants that compile for it and skips the others, with the reason (a prompt file it lacks,
e.g. instruction=reference without rule_reference_prompt.txt, register=plain without
zero_shot_simple.txt, demos=icl:2 without icl_2.txt; format=claude or answer_hint on a task
with no label set); a task where none compiles is skipped whole. A comparison with an arm a
task skipped is reported as skipped for that task, and the across-task tests and the
sensitivity analysis use only what each task ran. `requires:` stays a hard requirement: it
is the user's statement that every task must have these files, so a task without one is an
error, not a skip (leave a file out of `requires:` to let tasks without it run what they
can). A variant no task could ever run (instruction=reference with register=plain), an
unknown axis, level or task is an error of the spec, as before.

A text file level may name ``{task}`` (``instruction_file: [none, ablations/generated/{task}/
description.yaml]``): each task reads its own file, a task without one skips that variant
and the sweep says so; ``none`` is the prompt file's own text, so one axis compares the two.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments import bounds, ids
from experiments.generate.review import TEXT_FILE_KEYS
from experiments.llm.backends import DEFAULT_MODEL
from experiments.names import check_name
from experiments.sweeps.design import SequentialDesign, check_design
from experiments.sweeps.judge_spec import SweepJudge, check_judge
from promptlib.data import SPLITS as SPLITS  # re-exported: its home is promptlib.data
from promptlib.data import read_text
from promptlib.errors import VariantError, WorkbenchError, did_you_mean
from promptlib.formats import canonical_format, draw_formats
from promptlib.variants import PromptVariant, parse_spec
from promptlib.variants.axes import sweep_axes
from promptlib.yamlsafe import safe_yaml_load

#: The axes a sweep may fix or vary, from the table of prompt axes (`promptlib.variants.axes`:
#: text files, verbalizer, order...); `_variants` reads the table itself, each time.
AXES = sweep_axes()
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
    "design": str,
    "sequential": dict,
    "judge": dict,
}
COMPARISON_KEYWORDS = ("best_vs_worst", "all_pairs")


class SpecError(WorkbenchError):
    pass


TASK_FIELD = "{task}"  # in an instruction_file/register_file path: that task's own file


@dataclass(frozen=True)
class NamedVariant:
    name: str  # e.g. "instruction=reference" (the axis levels that vary)
    variant: PromptVariant
    # the variant string when a text-file path names {task}: each task reads its own file
    # (`for_task`); `variant` is then the rest of the levels, without that file
    per_task: str | None = None

    def for_task(self, task: str) -> PromptVariant:
        """The variant a task runs: a `{task}` file path read for it (`VariantError` if that
        task's file is missing, so the sweep skips the task's variant and says why)."""
        if self.per_task is None:
            return self.variant
        return parse_spec(self.per_task.replace(TASK_FIELD, task))


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
    # `design: sequential` (experiments.sweeps.design): batches of rows until each comparison
    # is decided; None is the fixed design (every variant on every row)
    sequential: SequentialDesign | None = None
    # `judge:` (experiments.sweeps.judge_spec): after the trials, a judge model grades each
    # generate trial of a task with a rubric; None (no key) is a sweep as before
    judge: SweepJudge | None = None

    @property
    def id(self) -> str:
        return ids.spec_id(self.raw)


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a sweep spec; every problem names the file and the field.

    The checks run in a fixed order (the file, its fields, the sample, the axes, the
    comparisons, the analysis), and the first that fails is the error.
    """
    p = Path(path)
    where = str(p)
    doc = _read_mapping(p, where)
    _check_fields(where, doc)
    name = str(doc["name"])
    split, n_resamples = _check_sample(where, doc)
    variants = _variants(where, doc)
    names = [v.name for v in variants]
    comparisons = _comparisons(where, doc.get("comparisons", "all_pairs"), names)
    correction, scoring, across = _check_tests(where, doc, comparisons)
    cluster_by = _cluster_by(where, doc)
    design = check_design(where, doc, int(doc.get("sample_seed", 0)))
    if isinstance(design, str) and design != "fixed":
        raise SpecError(design)
    sequential = design if isinstance(design, SequentialDesign) else None
    judge = check_judge(where, doc.get("judge"), tuple(str(t) for t in doc["tasks"]))
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
        sequential=sequential,
        judge=judge,
    )


def _read_mapping(p: Path, where: str) -> dict[str, Any]:
    """The spec file's YAML mapping, read safely."""
    if not p.exists():  # a folder or FIFO is `read_text`'s one line, never a wait
        raise SpecError(f"{where}: no such sweep spec (the shipped ones are in ablations/)")
    text = read_text(p, "sweep spec", SpecError)  # size-capped, UTF-8, names the file
    # No anchors or aliases, bounded depth and size: a few hundred bytes of nested aliases
    # would otherwise expand to gigabytes (issue 19, defect 8).
    doc = safe_yaml_load(text, where, SpecError)
    if not isinstance(doc, dict):
        raise SpecError(f"{where}: a sweep spec is a YAML mapping (name:, tasks:, axes: ...)")
    return doc


def _check_fields(where: str, doc: dict[str, Any]) -> None:
    """Known fields of the right types, the required ones, a safe name, no repeated items."""
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
    # the name becomes a folder under reports/ and an MLflow experiment: no path tricks
    if not check_name(name):
        raise SpecError(
            f"{where}: name {name!r} must be letters, digits, '_', '-' or '.', starting with a "
            "letter or digit (it names a folder under reports/ and an MLflow experiment)"
        )
    for key in ("tasks", "models", "requires"):
        _no_duplicates(where, key, doc.get(key) or [])


def _check_sample(where: str, doc: dict[str, Any]) -> tuple[Any, Any]:
    """The split and the number of resamples; a valid limit and sample seed."""
    split = doc.get("split", "test")
    if split not in SPLITS:
        raise SpecError(f"{where}: split must be train or test, not {split!r}")
    n_resamples = doc.get("n_resamples", 1000)
    bounds.N_RESAMPLES.check(
        n_resamples,
        f"{where}: n_resamples",
        SpecError,
        why="a Monte Carlo p-value is never below 1/(R+1); the paper used 1000",
    )
    if doc.get("limit") is not None:
        bounds.LIMIT.check(doc["limit"], f"{where}: limit", SpecError)
    bounds.SEED.check(doc.get("sample_seed", 0), f"{where}: sample_seed", SpecError)
    return split, n_resamples


def _variants(where: str, doc: dict[str, Any]) -> list[NamedVariant]:
    """The variants the fixed levels and the product of the axes make, checked."""
    fixed = dict(doc.get("fixed") or {})
    axes = dict(doc.get("axes") or {})
    known = sweep_axes()
    for axis in [*fixed, *axes]:
        if axis not in known:
            raise SpecError(
                f"{where}: unknown axis {axis!r}{did_you_mean(str(axis), known)} "
                f"(axes: {', '.join(known)})"
            )
    if isinstance(axes.get("format"), dict):
        axes["format"] = _drawn_formats(where, axes["format"])
    for axis, levels in axes.items():
        if not isinstance(levels, list) or not levels:
            raise SpecError(f"{where}: axes.{axis} must be a non-empty list of levels")
        _no_duplicates(where, f"axes.{axis}", levels)
    for axis in set(fixed) & set(axes):
        raise SpecError(f"{where}: axis {axis!r} is both fixed and varied; keep one")
    return _expand(where, fixed, axes)


_DRAW_KEYS = ("draw", "seed", "with")


def _drawn_formats(where: str, raw: dict[str, Any]) -> list[str]:
    """``format: {draw: K, seed: S, with: [base]}``: the levels listed under ``with``, then K
    grammar points drawn with seed S (`promptlib.formats.draw_formats`: the same points in
    every process), written into the spec's variants as the points themselves."""
    unknown = [k for k in raw if k not in _DRAW_KEYS]
    if unknown:
        raise SpecError(
            f"{where}: axes.format: unknown key {unknown[0]!r} (a drawn format axis is "
            "{draw: K, seed: S, with: [base, ...]})"
        )
    k, seed, listed = raw.get("draw"), raw.get("seed", 0), raw.get("with") or []
    for name, value, limits in (("draw", k, bounds.FORMAT_DRAW), ("seed", seed, bounds.SEED)):
        limits.check(value, f"{where}: axes.format.{name}", SpecError)
    if not isinstance(listed, list):
        raise SpecError(f"{where}: axes.format.with must be a list of format levels")
    assert isinstance(k, int) and isinstance(seed, int)
    try:
        drawn = draw_formats(k, seed)
    except VariantError as e:
        raise SpecError(f"{where}: axes.format: {e}") from e
    try:
        canonical = {canonical_format(str(x)) for x in listed}
    except VariantError as e:
        raise SpecError(f"{where}: axes.format.with: {e}") from e
    return [str(x) for x in listed] + [p for p in drawn if p not in canonical]


def _check_tests(
    where: str, doc: dict[str, Any], comparisons: tuple[tuple[str, str], ...] | str
) -> tuple[Any, Any, Any]:
    """The multiple-testing correction, the scoring and the across-task test."""
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
    return correction, scoring, across


def _cluster_by(where: str, doc: dict[str, Any]) -> str:
    """The units the tests resample: prompt (the default), rows or column:<name>."""
    cluster_by = str(doc.get("cluster_by", "prompt"))
    if cluster_by not in ("prompt", "rows") and not (
        cluster_by.startswith("column:") and cluster_by[7:].strip()
    ):
        raise SpecError(
            f"{where}: cluster_by must be prompt (rows given the same prompt are one unit, "
            f"the default), rows, or column:<a data column>, not {cluster_by!r}"
        )
    return cluster_by


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
        per_task = {k: v for k, v in levels.items() if TASK_FIELD in str(v)}
        for key in per_task:
            if key not in TEXT_FILE_KEYS:
                raise SpecError(
                    f"{where}: {key}: {TASK_FIELD} names each task's own file, so it is "
                    f"allowed in {' and '.join(TEXT_FILE_KEYS)} paths only"
                )
        rest = ",".join(f"{k}={v}" for k, v in levels.items() if k not in per_task)
        try:
            variant = parse_spec(rest if per_task else spec_str)
        except VariantError as e:
            raise SpecError(f"{where}: variant {name!r}: {e}") from e
        out.append(NamedVariant(name, variant, spec_str if per_task else None))
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
