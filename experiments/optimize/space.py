"""The search space: the prompt axes a task supports, and the variant a trial's params name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from promptlib.tasks import Task
from promptlib.variants import INSTRUCTION_FILES, REGISTER_FILES, PromptVariant

VARIANT_ATTR = "variant_id"  # the trial's PromptVariant id: what makes two trials the same
REUSED_ATTR = "reused_from"  # a proposal already completed: the trial whose value it took
# a proposal of levels no LegalBench prompt combines (PRUNED at once, never evaluated)
INVALID_ATTR = "invalid_combination"
NO_PROMPT = "no LegalBench prompt combines these levels"


@dataclass
class SearchSpace:
    instruction: list[str]
    register: list[str]
    demos: list[str]  # "base", "none", "k2", "k4", ...
    formats: list[str]
    answer_hint: list[bool]
    demo_seeds: int = 10
    notes: list[str] = field(default_factory=list)

    def grid(self) -> dict[str, list[Any]]:
        return {
            "instruction": self.instruction,
            "register": self.register,
            "demos": self.demos,
            "demo_seed": [0],
            "format": self.formats,
            "answer_hint": self.answer_hint,
        }


def search_space(task: Task) -> SearchSpace:
    """The axes this task supports; the notes say what was left out and why."""
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


def variant_from_params(params: dict[str, Any]) -> PromptVariant:
    demos = str(params.get("demos", "base"))
    v = PromptVariant(
        instruction=str(params.get("instruction", "base")),
        register=str(params.get("register", "default")),
        format=str(params.get("format", "base")),
        answer_hint=bool(params.get("answer_hint", False)),
    )
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
    axes = (space.instruction, space.register, space.demos, space.formats, space.answer_hint)
    for ins, reg, demos, fmt, hint in itertools.product(*axes):
        if ins != "base" and reg != "default":
            continue
        for seed in seeds if demos.startswith("k") else [0]:
            params = {"instruction": ins, "register": reg, "demos": demos, "demo_seed": seed,
                      "format": fmt, "answer_hint": hint}  # fmt: skip
            ids.add(variant_from_params(params).id)
    return ids


def _not_evaluated(trial: Any) -> bool:
    """A trial that evaluated no prompt: a reuse, or levels no prompt combines."""
    return REUSED_ATTR in trial.user_attrs or INVALID_ATTR in trial.user_attrs
