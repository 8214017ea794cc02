"""Rendering: (variant, example) -> prompt text, or chat messages.

`compile_prompt` resolves a variant against a task once (which file frames the prompt, which
demonstrations, which separators); the resulting `CompiledPrompt` renders each example
cheaply. The frame file is chosen by the instruction/register axes:

=========================  ==============================
axis level                 frame file
=========================  ==============================
instruction=reference      rule_reference_prompt.txt
instruction=description    rule_description_prompt.txt
register=plain             zero_shot_simple.txt
register=technical         zero_shot_jargon.txt
instruction=application    application_prompt.txt
  with format=claude       claude_application_prompt.txt
otherwise                  base_prompt.txt
=========================  ==============================

An application frame (the paper's rule-application prompt: "Explain your reasoning") is
rendered exactly as LegalBench wrote it, the Claude file included (format=claude picks the
file and adds no reply list or example tags of its own): its demonstrations answer a shorter
question than its query, so they stay part of its text (see `PromptVariant`).

Demonstrations are rendered through the frame's query template, so the same demos can be
shown in any register or format. A format grammar point (`promptlib.formats`) re-renders the
frame's field names, separators and joiners; `CompiledPrompt.segments` gives a rendered prompt
as formatting and content pieces, so a test can strip the formatting and compare.

Rendering is per row; everything that does not depend on the row (the prefix, the query
template split at its placeholders, the demonstrations' content keys) is computed once per
compiled prompt, and the leakage and held-out checks run on every row as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from promptlib.demos import bind, demonstrations
from promptlib.errors import TemplateError, VariantError
from promptlib.formats import Segment, is_point, layout, template_segments
from promptlib.gold import refuse_gold_placeholder
from promptlib.leakage import ContentKey, check_heldout, check_no_leak, content_key
from promptlib.leakage import heldout_guard as heldout_guard  # its old home; re-exported
from promptlib.leakage import query_columns as query_columns  # its old home; re-exported
from promptlib.tasks import Task
from promptlib.templates import PLACEHOLDER, Demo, ParsedPrompt, fill, placeholders
from promptlib.variants import (
    APPLICATION,
    APPLICATION_TASKS,
    BASE_FILE,
    INSTRUCTION_FILES,
    REGISTER_FILES,
    PromptVariant,
    frame_file,
)
from promptlib.verbalizers import LabelMap, official_label, official_words_left, shown_answer

Message = dict[str, str]


@dataclass(frozen=True)
class CompiledPrompt:
    """A variant resolved against one task: everything needed to render any example."""

    task: str
    variant: PromptVariant
    instruction: str
    instruction_sep: str
    demos: tuple[Demo, ...]
    demo_sep: str
    query: str
    answer_join: str
    format: str
    labels: tuple[str, ...] | None  # the task's official labels
    source: str
    label_map: LabelMap | None = None  # (official, shown) when a verbalizer is set
    # what the prompt says that works against its variant (the instruction still naming the
    # official labels under a verbalizer): printed by the sweep and the run, never silent
    notes: tuple[str, ...] = ()
    #: a grammar point's text before and after the instruction (formatting, not content)
    instruction_wrap: tuple[str, str] = ("", "")
    #: a grammar point's query template as (formatting | content) pieces; () = as written
    query_pieces: tuple[Segment, ...] = ()

    @property
    def answer_labels(self) -> tuple[str, ...] | None:
        """The labels as the prompt shows them and the model is asked to answer with."""
        if self.label_map is None:
            return self.labels
        return tuple(shown for _, shown in self.label_map)

    def official(self, reply: str) -> str | None:
        """The official label a reply names (normalised exact match with a shown label), or
        None: with a verbalizer, a reply in the official words is no answer, never guessed."""
        if self.label_map is not None:
            return official_label(self.label_map, reply)
        if self.labels is None:
            return None
        return official_label(tuple((x, x) for x in self.labels), reply)

    def _query(self) -> str:
        if self.format != "claude":
            return self.query
        assert self.answer_labels is not None
        reply = "Reply with either: " + ", ".join(self.answer_labels)
        head, sep, prefix = self.query.rpartition("\n")
        if not sep:
            return f"{reply}\n{self.query}"
        return f"{head} {reply}\n{prefix}"

    def demo_block(self, demo: Demo) -> str:
        block = fill(self.query, demo.values, where=f"{self.source} (demonstration)")
        block = block + self.answer_join + demo.answer
        return f"<example>\n{block}\n</example>" if self.format == "claude" else block

    def prefix(self) -> str:
        """Everything before the query: identical for every example (the KV-cache prefix)."""
        return self._prefix

    @cached_property
    def _prefix(self) -> str:
        out = ""
        if self.instruction:
            before, after = self.instruction_wrap
            out += before + self.instruction + after + self.instruction_sep
        if self.demos:
            out += self.demo_sep.join(self.demo_block(d) for d in self.demos) + self.demo_sep
        return out

    @cached_property
    def _columns(self) -> tuple[str, ...]:
        return placeholders(self.query)

    @cached_property
    def _demo_keys(self) -> frozenset[ContentKey]:
        return frozenset(content_key(d.values, self._columns) for d in self.demos)

    @cached_property
    def _demo_values(self) -> tuple[dict[str, str], ...]:
        return tuple(d.values for d in self.demos)

    @cached_property
    def _query_parts(self) -> tuple[tuple[str, str | None], ...]:
        """The query template as (literal, None) and ("", column) parts, in order."""
        query = self._query()
        parts: list[tuple[str, str | None]] = []
        pos = 0
        for m in PLACEHOLDER.finditer(query):
            parts.append((query[pos : m.start()], None))
            parts.append(("", m.group(1)))
            pos = m.end()
        parts.append((query[pos:], None))
        return tuple(p for p in parts if p[0] or p[1] is not None)

    def template(self) -> str:
        """The whole prompt with the query's {{column}} placeholders left in (for registries)."""
        return self.prefix() + self._query()

    def render(self, example: Mapping[str, str]) -> str:
        if self.demos and content_key(example, self._columns) in self._demo_keys:
            check_no_leak(self.demos, dict(example), self.task, self._columns)  # raises
        check_heldout(self.task, example)
        for values in self._demo_values:  # a demonstration shows its row (and answer) too
            check_heldout(self.task, values)
        out = [self._prefix]
        for literal, column in self._query_parts:
            if column is None:
                out.append(literal)
            elif column in example:
                out.append(str(example[column]))
            else:
                fill(self._query(), example, where=self.source)  # raises, naming the column
        return "".join(out)

    def segments(self, example: Mapping[str, str]) -> list[Segment]:
        """`render(example)` as ("format" | "content", text) pieces that concatenate to it.

        Content is the instruction, placeholder values, the template's literal text after
        field names, and demo answers; formatting is everything a grammar point may change.
        Base-style formats only (``claude`` adds text of its own).
        """
        if self.format == "claude":
            raise VariantError("segments are defined for base-style formats, not format=claude")
        self.render(example)  # the same checks as a render
        pieces = self.query_pieces or layout(self.query, self.answer_join, self.demo_sep).query
        out: list[Segment] = []
        if self.instruction:
            before, after = self.instruction_wrap
            out += [("format", before), ("content", self.instruction), ("format", after)]
            out.append(("format", self.instruction_sep))
        for demo in self.demos:
            out += _filled(pieces, demo.values)
            out += [("format", self.answer_join), ("content", demo.answer)]
            out.append(("format", self.demo_sep))
        out += _filled(pieces, example)
        return [s for s in out if s[1]]

    def messages(self, example: Mapping[str, str]) -> list[Message]:
        """Chat form: the whole prompt as one user turn, as the paper's chat runs used it."""
        return [{"role": "user", "content": self.render(example)}]


def _filled(pieces: tuple[Segment, ...], values: Mapping[str, str]) -> list[Segment]:
    out: list[Segment] = []
    for kind, text in pieces:
        out += template_segments(text, values) if kind == "content" else [(kind, text)]
    return out


def _need(task: Task, filename: str, why: str) -> ParsedPrompt:
    task.files.require_prompts()
    if filename in task.files.empty_prompt_files():
        raise VariantError(
            f"{why} needs {filename}, which is empty for task {task.name!r} in this data "
            "(LegalBench ships it empty); pick another task or level"
        )
    if filename not in task.spec.prompt_files:
        raise VariantError(
            f"{why} needs {filename}, which task {task.name!r} lacks (its prompt files: "
            f"{', '.join(task.spec.prompt_files) or 'none'}); pick a task that has it"
        )
    return task.prompt(filename)


def _need_application(task: Task, filename: str) -> None:
    """A task without its application prompt file: say which tasks have one."""
    task.files.require_prompts()
    if filename not in task.spec.prompt_files or filename in task.files.empty_prompt_files():
        raise VariantError(
            f"instruction=application needs {filename}, which task {task.name!r} lacks; "
            "LegalBench ships the application prompts for these tasks only: "
            f"{', '.join(APPLICATION_TASKS)}"
        )


def compile_prompt(
    variant: PromptVariant, task: Task, split: str | None = "test"
) -> CompiledPrompt:
    """Resolve `variant` for `task`; check the template's columns against `split` if given."""
    variant = bind(variant, task)
    frame_name = frame_file(variant)
    application = variant.instruction == APPLICATION
    if application:
        _need_application(task, frame_name)
    why = (
        f"instruction={variant.instruction}"
        if variant.instruction in INSTRUCTION_FILES or application
        else f"register={variant.register}"
        if variant.register in REGISTER_FILES
        else "the base prompt"
    )
    frame = _need(task, frame_name, why)
    base = task.prompt(BASE_FILE) if BASE_FILE in task.spec.prompt_files else frame

    instruction = frame.instruction
    if variant.instruction_text is not None:
        instruction = variant.instruction_text.strip()
    label_map = variant.label_map
    shown = tuple(w for _, w in label_map) if label_map is not None else task.spec.labels
    if variant.answer_hint:
        if not shown:
            raise VariantError(
                f"answer_hint lists the label set, but task {task.name!r} is "
                f"{task.spec.task_type} and has none"
            )
        hint = "Answer with one of: " + ", ".join(shown) + "."
        instruction = f"{instruction}\n{hint}" if instruction else hint
    query = frame.query
    source = f"{task.name}/{frame_name}"
    if variant.register_text is not None:
        query = variant.register_text.rstrip()
        source = f"{task.name}/register_text"
        if not placeholders(query):
            raise TemplateError(
                "register_text is a query template and needs at least one {{column}} "
                f"placeholder (columns of {task.name}: {', '.join(task.spec.columns)})"
            )
    else:  # a prompt file in the user's own data may name it too
        where = f"prompt file {task.files.require_prompts() / frame_name}: its query template"
        refuse_gold_placeholder(query, where)
    if split is not None:
        task.check_columns(query, split, where=source)

    demos = demonstrations(variant, task)
    if label_map is not None:
        where = f"task {task.name!r} (verbalizer={variant.verbalizer})"
        demos = tuple(Demo(d.fields, shown_answer(label_map, d.answer, where)) for d in demos)
    demo_file: ParsedPrompt = frame
    if variant.demos == "base":
        demo_file = base
    elif variant.demos.startswith("icl:"):
        demo_file = task.prompt(f"icl_{variant.demos.split(':', 1)[1]}.txt")
    if not demo_file.demos:
        demo_file = frame if frame.demos else base
    # A frame without instruction (zero-shot files) borrows the base prompt's separator.
    instruction_sep = frame.instruction_sep if frame.instruction else base.instruction_sep

    if variant.format == "claude" and not task.spec.labels:
        raise VariantError(
            f"format=claude lists the label set, but task {task.name!r} is "
            f"{task.spec.task_type} and has none; use format=base"
        )
    notes: tuple[str, ...] = ()
    if label_map is not None:
        own_words = PLACEHOLDER.sub(" ", f"{instruction}\n{query}")
        left = official_words_left(label_map, own_words)
        if left:
            notes = (
                f"verbalizer={variant.verbalizer}: the prompt's own text still names "
                f"{', '.join(repr(x) for x in left)}; replies in those words are invalid here",
            )
    if task.files.meta is not None and not task.spec.labels:
        # a user's extraction or generation task: said on every run and sweep, never silent
        notes += (
            f"task {task.name!r} is {task.spec.task_type} with no label set: a reply that is "
            "no valid answer cannot be detected (no invalid rate; it is only scored wrong)",
        )
    demo_sep, answer_join = demo_file.demo_sep, demo_file.answer_join
    wrap: tuple[str, str] = ("", "")
    pieces: tuple[Segment, ...] = ()
    if is_point(variant.format):  # a grammar point re-renders the frame's formatting
        lay = layout(query, answer_join, demo_sep, variant.format)
        query, answer_join, demo_sep, pieces = (
            lay.template,
            lay.answer_join,
            lay.demo_sep,
            lay.query,
        )
        wrap = (lay.instruction_before, lay.instruction_after)
    return CompiledPrompt(
        task=task.name,
        variant=variant,
        instruction=instruction,
        instruction_sep=instruction_sep,
        demos=demos,
        demo_sep=demo_sep,
        query=query,
        answer_join=answer_join,
        # an application file is its format's own text: rendered as written (base-style)
        format="base" if application else variant.format,
        labels=task.spec.labels,
        source=source,
        label_map=label_map,
        notes=notes,
        instruction_wrap=wrap,
        query_pieces=pieces,
    )


def render(
    variant: PromptVariant, task: Task, example: Mapping[str, str], split: str = "test"
) -> str:
    """Render one example (convenience; compile once with `compile_prompt` for many)."""
    return compile_prompt(variant, task, split).render(example)
