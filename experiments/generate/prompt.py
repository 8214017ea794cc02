"""The generation prompt: what a generator model is asked for each kind of text, built from
the task's own instruction, query template, labels and README, so the text it writes starts
from the task's rule, not from nothing."""

from __future__ import annotations

from dataclasses import dataclass

from promptlib.errors import WorkbenchError, did_you_mean
from promptlib.gold import refuse_gold_placeholder
from promptlib.tasks import Task
from promptlib.templates import placeholders
from promptlib.variants import BASE_FILE

#: kind -> the variant key its file is for (`instruction_file` or `register_file`)
KINDS = {
    "description": "instruction_file",
    "paraphrase": "instruction_file",
    "plain": "register_file",
    "technical": "register_file",
}
#: the README is cut to this many characters in the prompt (a local model's context is 4096
#: tokens; the rule and the labels are at the README's start)
README_CHARS = 4000

_ASKS = {
    "description": (
        "Write a rule description for this task: in your own words, state the legal rule the "
        "task applies, its elements or tests, and how each answer follows from them. Do not "
        "copy the current instruction."
    ),
    "paraphrase": (
        "Paraphrase the task's current instruction: say the same thing in other words, keeping "
        "its rule, its meaning and its answer labels exactly."
    ),
    "plain": (
        "Rewrite the query template in plain language that a reader with no legal training "
        "understands: everyday words, no legal terms of art."
    ),
    "technical": (
        "Rewrite the query template in precise technical legal language, as a lawyer would "
        "write it, using the legal terms of art of this area of law."
    ),
}
_REPLY_AS = {
    "instruction_file": "Instruction",
    "register_file": "Query template",
}


class GenerateError(WorkbenchError):
    """A generation request that cannot be made or written; nothing was written."""


@dataclass(frozen=True)
class TaskBrief:
    """What the prompt tells the generator about the task."""

    name: str
    instruction: str
    query: str
    labels: tuple[str, ...] | None
    readme: str
    columns: tuple[str, ...]

    @classmethod
    def of(cls, task: Task) -> TaskBrief:
        spec = task.spec
        if BASE_FILE not in spec.prompt_files:
            raise GenerateError(
                f"task {task.name!r} has no {BASE_FILE}, the prompt a generated text starts "
                "from; choose a task that has one (workbench tasks)"
            )
        base = task.prompt(BASE_FILE)
        # a text started from it would keep it: refused before any call, not per candidate
        where = f"prompt file {task.files.require_prompts() / BASE_FILE}: its query template"
        refuse_gold_placeholder(base.query, where, GenerateError)
        # no trailing blanks: the prompt then reads as a block in the generated file
        readme = "\n".join(line.rstrip() for line in (task.files.readme() or "").splitlines())
        readme = readme.strip()
        if len(readme) > README_CHARS:
            readme = readme[:README_CHARS].rstrip() + "\n[... README cut here]"
        return cls(
            task.name,
            base.instruction.strip(),
            base.query.strip(),
            spec.labels,
            readme,
            spec.columns,
        )

    @property
    def placeholders(self) -> tuple[str, ...]:
        """The {{column}} placeholders of the task's query template, which a register text
        must keep."""
        return placeholders(self.query)


def check_kind(kind: str) -> str:
    """The variant key of `kind`; an unknown kind is one clear line."""
    if kind not in KINDS:
        raise GenerateError(
            f"unknown --kind {kind!r}{did_you_mean(kind, tuple(KINDS))} (kinds: {', '.join(KINDS)})"
        )
    return KINDS[kind]


def generation_prompt(brief: TaskBrief, kind: str, candidate: int, n: int) -> str:
    """The prompt asking for candidate `candidate` (1-based) of `n` of kind `kind`."""
    key = check_kind(kind)
    parts = [
        f'You write prompts for the LegalBench task "{brief.name}".',
        f"The task's README:\n<<<\n{brief.readme or '(no README)'}\n>>>",
        f"The task's current instruction:\n<<<\n{brief.instruction or '(none)'}\n>>>",
        f"The task's query template:\n<<<\n{brief.query}\n>>>",
    ]
    if brief.labels:
        parts.append("The answer is exactly one of: " + ", ".join(brief.labels) + ".")
    parts.append(_ASKS[kind])
    if key == "register_file":
        kept = ", ".join("{{" + c + "}}" for c in brief.placeholders)
        parts.append(
            f"Keep every placeholder in double braces exactly as written ({kept}): each is "
            "replaced by the case's text. End the template with the answer cue, as the "
            "current template does."
        )
    elif brief.labels:
        parts.append("End by saying that the answer is one of: " + ", ".join(brief.labels) + ".")
    if n > 1:
        parts.append(f"This is version {candidate} of {n}: word it differently from the others.")
    parts.append("Reply with the text only: no preamble, no explanation, no quotes.")
    return "\n\n".join(parts) + f"\n\n{_REPLY_AS[key]}:\n"
