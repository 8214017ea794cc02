"""The search space: the prompt axes a task supports, and the variant a trial's params name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from experiments.optimize.instructions import NO_FILE, PARAM, InstructionFile
from promptlib.errors import VariantError, WorkbenchError
from promptlib.formats import draw_formats
from promptlib.gold import check_gold_not_shown
from promptlib.render import compile_prompt
from promptlib.tasks import Task
from promptlib.variants import (
    AS_DRAWN,
    INSTRUCTION_FILES,
    OFFICIAL_LABELS,
    REGISTER_FILES,
    PromptVariant,
)
from promptlib.variants.axes import NO_LAYOUT, searches
from promptlib.verbalizers import SCHEMES, resolve

VARIANT_ATTR = "variant_id"  # the trial's PromptVariant id: what makes two trials the same
REUSED_ATTR = "reused_from"  # a proposal already completed: the trial whose value it took
# a proposal of levels no LegalBench prompt combines (PRUNED at once, never evaluated)
INVALID_ATTR = "invalid_combination"
NO_PROMPT = "no LegalBench prompt combines these levels"
SPACES = ("base", "extended")  # `--space`: extended adds the verbalizer, order, layout axes
AS_WRITTEN = OFFICIAL_LABELS  # verbalizer level: the labels as LegalBench writes them
# AS_DRAWN (order level: the demonstrations in the order drawn) and NO_LAYOUT (layout level:
# the `format` axis decides alone) are the table's (`promptlib.variants.axes`)
ORDER_SEEDS = 3  # order levels besides drawn
LAYOUT_DRAWS = 4  # drawn format grammar points
LAYOUT_SEED = 0


@dataclass
class SearchSpace:
    instruction: list[str]
    register: list[str]
    demos: list[str]  # "base", "none", "k2", "k4", ...
    formats: list[str]
    answer_hint: list[bool]
    demo_seeds: int = 10
    notes: list[str] = field(default_factory=list)
    # the extended axes (new param names, so a base-space study's params are unchanged);
    # empty: the axis is not searched
    verbalizer: list[str] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    layout: list[str] = field(default_factory=list)
    # an extended axis the table of prompt axes gives its own levels (`Search.levels`), by
    # param name
    more: dict[str, list[str]] = field(default_factory=dict)
    # `--instruction-file`: "none" and each file's label; texts: label -> the file's text
    instruction_file: list[str] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)

    def grid(self) -> dict[str, list[Any]]:
        grid: dict[str, list[Any]] = {
            "instruction": self.instruction,
            "register": self.register,
            "demos": self.demos,
            "demo_seed": [0],
            "format": self.formats,
            "answer_hint": self.answer_hint,
        }
        grid.update(self.extra_axes())
        return grid

    def extra_axes(self) -> dict[str, list[str]]:
        """The extended axes searched (those with levels), by param name, in the table's
        order (`promptlib.variants.axes`), then the instruction files."""
        built_in = {"verbalizer": self.verbalizer, "order": self.order, "layout": self.layout}
        axes = {s.param: built_in.get(s.param) or self.more.get(s.param, [])
                for _, s in searches("extended")}  # fmt: skip
        axes[PARAM] = self.instruction_file
        return {name: levels for name, levels in axes.items() if levels}

    def to_dict(self) -> dict[str, Any]:
        """Each axis and its levels, and what was left out and why (printed and logged)."""
        axes: dict[str, Any] = self.grid()
        axes["demo_seed"] = list(range(self.demo_seeds))
        return {"axes": axes, "notes": list(self.notes)}


def search_space(
    task: Task, space: str = "base", files: tuple[InstructionFile, ...] = ()
) -> SearchSpace:
    """The axes this task supports; the notes say what was left out and why."""
    if space not in SPACES:
        raise WorkbenchError(f"--space must be one of {', '.join(SPACES)}, not {space!r}")
    found = _base_space(task)
    if space == "extended":
        _extend(found, task)
    if files:
        found.instruction_file = [NO_FILE, *(f.label for f in files)]
        found.texts = {f.label: f.text for f in files}
        for f in files:
            state = {None: "", True: ", reviewed", False: ", generated, NOT reviewed"}
            found.notes.append(
                f"instruction_file: {f.label} (sha256 {f.sha256[:12]}{state[f.reviewed]})"
            )
        found.notes.append(
            "instruction_file: a file replaces the instruction; only with instruction=base "
            "and register=default (no LegalBench prompt combines a file with another one)"
        )
    return found


def check_space_gold(
    space: SearchSpace, task: Task, split: str, rows: Sequence[dict[str, str]]
) -> None:
    """Every query template the search can propose (one per instruction and register level:
    the other axes keep the template's slots) checked before any call for a slot showing a
    row's own gold answer (`promptlib.gold`); a later trial would meet it mid-study."""
    data = str(task.files.split_path(split))
    for instruction in space.instruction:
        for register in space.register:
            if instruction != "base" and register != "default":
                continue  # no LegalBench prompt combines them (`invalid`)
            variant = PromptVariant(instruction=instruction, register=register, demos="none")
            try:
                compiled = compile_prompt(variant, task, split)
            except VariantError:
                continue  # no prompt for this task (a file it lacks): its trials never call
            check_gold_not_shown(task.name, compiled.query, compiled.source, rows, data)


def _extend(space: SearchSpace, task: Task) -> None:
    """Add the verbalizer, demonstration-order and format-grammar axes the task supports,
    and each extended axis of the table that lists its own levels (`Search.levels`)."""
    spec = task.spec
    if not spec.labels:
        space.notes.append("verbalizer/layout: left out (no label set)")
    else:
        space.verbalizer = [AS_WRITTEN]
        for scheme in SCHEMES:
            try:
                resolve(scheme, spec.labels, spec.name, spec.task_type)
            except WorkbenchError as e:
                space.notes.append(f"verbalizer: {scheme} left out ({e})")
                continue
            space.verbalizer.append(scheme)
        space.layout = [NO_LAYOUT, *draw_formats(LAYOUT_DRAWS, LAYOUT_SEED)]
        space.notes.append(
            f"layout: {LAYOUT_DRAWS} format grammar points drawn (seed {LAYOUT_SEED}); "
            "a layout with format=claude is no prompt (two formats)"
        )
    if space.demos == ["none"]:
        space.notes.append("order: left out (no demonstrations to order)")
    else:
        space.order = [AS_DRAWN, *(str(i) for i in range(1, ORDER_SEEDS + 1))]
        space.notes.append("order: a permutation seed of the demonstrations; not with demos=none")
    for _, search in searches("extended"):
        if search.levels is not None:
            levels = search.levels(task, space.notes)
            if levels:
                space.more[search.param] = levels


def invalid(params: dict[str, Any]) -> bool:
    """Levels no prompt combines: instruction x register, an instruction file with another
    instruction or a register, and an extended axis set with levels its `Search.conflicts`
    refuses (order without demos, two formats)."""
    if params["instruction"] != "base" and params["register"] != "default":
        return True
    if params.get(PARAM, NO_FILE) != NO_FILE and (
        params["instruction"] != "base" or params["register"] != "default"
    ):
        return True
    return any(
        s.conflicts is not None and params.get(s.param, s.unset) != s.unset and s.conflicts(params)
        for _, s in searches("extended")
    )


def _base_space(task: Task) -> SearchSpace:
    files = set(task.spec.prompt_files)
    notes = []
    instruction = ["base"] + [k for k, f in INSTRUCTION_FILES.items() if f in files]
    if len(instruction) == 1:
        notes.append("instruction: only base (no rule_reference/description prompt files)")
    register = ["default"] + [k for k, f in REGISTER_FILES.items() if f in files]
    if len(register) == 1:
        notes.append("register: only default (no zero_shot_simple/jargon prompt files)")
    labels = task.spec.labels or ()
    demos = ["none"] + (["base"] if "base_prompt.txt" in files else [])
    train = task.rows("train") if task.has_split("train") else []
    if labels and task.spec.task_type in ("binary", "multi-class"):
        per_class = {label: sum(r["answer"] == label for r in train) for label in labels}
        most = min(per_class.values()) if per_class else 0
        ks = [len(labels) * m for m in range(1, most + 1)]
        demos += [f"k{k}" for k in ks]
        if not ks:
            notes.append("demos: no resampled k (train has a class with no row)")
    else:
        notes.append("demos: no resampled k (class-balanced draws need a label set)")
    notes.append("pool: train only (train+test would draw held-out rows)")
    formats = ["base", "claude"] if labels else ["base"]
    hints = [False, True] if labels else [False]
    if not labels:
        notes.append("format/answer_hint: left out (no label set)")
    return SearchSpace(instruction, register, demos, formats, hints, notes=notes)


def variant_from_params(
    params: dict[str, Any], texts: dict[str, str] | None = None
) -> PromptVariant:
    """The variant a trial's params name; `texts` (`SearchSpace.texts`) reads the
    `instruction_file` level."""
    demos = str(params.get("demos", "base"))
    file = str(params.get(PARAM, NO_FILE))
    text = None
    if file != NO_FILE:
        if texts is None or file not in texts:
            raise WorkbenchError(
                f"{PARAM}={file}: not one of this study's --instruction-file files; give "
                "the same files as the study was created with"
            )
        text = texts[file]
    fields: dict[str, Any] = {
        "instruction": str(params.get("instruction", "base")) if text is None else "custom",
        "instruction_text": text,
        "register": str(params.get("register", "default")),
        "format": str(params.get("format", "base")),
        "answer_hint": bool(params.get("answer_hint", False)),
    }
    for name, search in searches("extended"):  # set: the level names the field's value
        level = str(params.get(search.param, search.unset))
        if level != search.unset:
            fields[name] = search.value(level)
    v = PromptVariant(**fields)
    if demos.startswith("k"):
        return v.with_demos(int(demos[1:]), seed=int(params.get("demo_seed", 0)), pool="train")
    return v.with_demos(demos)


def space_variants(space: SearchSpace, sampler: str = "tpe") -> set[str]:
    """The ids of the distinct prompts the search can propose (what `--trials` can count).

    Combinations LegalBench has no prompt for (a non-base instruction with a non-default
    register) are left out; the demonstration seed only matters for resampled demos, and the
    grid sampler fixes it at 0.
    """
    import itertools

    seeds = [0] if sampler == "grid" else list(range(space.demo_seeds))
    ids: set[str] = set()
    axes: dict[str, list[Any]] = {"instruction": space.instruction, "register": space.register,
            "demos": space.demos, "format": space.formats, "answer_hint": space.answer_hint,
            **space.extra_axes()}  # fmt: skip
    for levels in itertools.product(*axes.values()):
        params = dict(zip(axes, levels, strict=True))
        if invalid(params):
            continue
        for seed in seeds if str(params["demos"]).startswith("k") else [0]:
            ids.add(variant_from_params({**params, "demo_seed": seed}, space.texts).id)
    return ids


def _not_evaluated(trial: Any) -> bool:
    """A trial that evaluated no prompt: a reuse, or levels no prompt combines."""
    return REUSED_ATTR in trial.user_attrs or INVALID_ATTR in trial.user_attrs
