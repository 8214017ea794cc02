"""Parse LegalBench prompt files into instruction, demonstrations and query template.

A LegalBench prompt file is laid out as::

    <instruction>            (optional)
    <blank line>
    <demo 1>                 the query template filled in, followed by its answer
    <blank line>
    ...
    <query template>         with {{column}} placeholders, ending in an answer prefix ("A:")

Demonstrations are parsed *against the query template*: each demo is matched by a regular
expression built from the template, which yields the values of its placeholders and its
answer. Demos are therefore data (fields + answer), not pasted text, and can be re-rendered
through another template (plain or technical language, Claude format, ...). The round trip
`render(parse(file)) == file` is what the tests use to prove the parser faithful.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from promptlib.errors import TemplateError

PLACEHOLDER = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")

#: Separator LegalBench uses between blocks when a file gives no better evidence.
DEFAULT_SEP = "\n\n"
_NEWLINES = re.compile(r"\n+")


def placeholders(template: str) -> tuple[str, ...]:
    """Column names a template uses, in order of first appearance."""
    seen: dict[str, None] = {}
    for m in PLACEHOLDER.finditer(template):
        seen.setdefault(m.group(1), None)
    return tuple(seen)


def fill(template: str, values: Mapping[str, str], *, where: str = "template") -> str:
    """Substitute every {{column}}; a missing column is an error, never an empty string."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in values:
            raise TemplateError(
                f"{where} uses the placeholder {{{{{name}}}}} but the example has no column "
                f"{name!r} (columns: {', '.join(sorted(values))}); use a split that has it "
                "or a template that does not need it"
            )
        return str(values[name])

    return PLACEHOLDER.sub(sub, template)


@dataclass(frozen=True)
class Demo:
    """One demonstration: the values of the template's placeholders, and its answer."""

    fields: tuple[tuple[str, str], ...]
    answer: str

    @classmethod
    def of(cls, fields: Mapping[str, str], answer: str) -> Demo:
        return cls(tuple(sorted((k, str(v)) for k, v in fields.items())), str(answer))

    @property
    def values(self) -> dict[str, str]:
        return dict(self.fields)


@dataclass(frozen=True)
class ParsedPrompt:
    """A prompt file taken apart. Rendering it with its own demos reproduces the file."""

    name: str
    instruction: str
    demos: tuple[Demo, ...]
    query: str
    instruction_sep: str = DEFAULT_SEP
    demo_sep: str = DEFAULT_SEP
    answer_join: str = " "
    columns: tuple[str, ...] = field(default=())

    @cached_property
    def answer_prefix(self) -> str:
        """The last line of the query template, e.g. 'A:' or 'Label:'."""
        return self.query.rstrip().rsplit("\n", 1)[-1]


def parse_prompt(text: str, name: str = "<prompt>") -> ParsedPrompt:
    """Split a LegalBench prompt file into its parts; raise `TemplateError` if it has no query."""
    text = text.rstrip()
    first = PLACEHOLDER.search(text)
    if first is None:
        raise TemplateError(
            f"{name}: no {{{{column}}}} placeholder found, so there is no query template; "
            "a LegalBench prompt must end with a query such as 'Q: {{text}}\\nA:'"
        )
    query_start = text.rfind("\n", 0, first.start()) + 1
    head, query = text[:query_start], text[query_start:]
    columns = placeholders(query)
    if PLACEHOLDER.search(head):
        raise TemplateError(f"{name}: placeholders appear before the query template")

    if not head.strip():
        return ParsedPrompt(name, "", (), query, columns=columns)

    # head = instruction + sep + demo (+ sep + demo)* + sep
    matcher = _demo_regex(query)
    for start in _block_starts(head):
        parsed = _parse_demos(head, start, matcher)
        if parsed is None:
            continue
        demos, seps, join = parsed
        instruction_part = head[:start]
        instruction = instruction_part.rstrip("\n")
        instruction_sep = instruction_part[len(instruction) :] or DEFAULT_SEP
        demo_sep = seps[0] if len(seps) > 1 else seps[-1]
        if any(s != demo_sep for s in seps):
            raise TemplateError(f"{name}: demonstrations are separated inconsistently")
        return ParsedPrompt(
            name, instruction, demos, query, instruction_sep, demo_sep, join, columns
        )

    # No demonstrations: everything before the query is instruction.
    instruction = head.rstrip("\n")
    sep = head[len(instruction) :]
    return ParsedPrompt(name, instruction, (), query, sep or DEFAULT_SEP, columns=columns)


@dataclass(frozen=True)
class _DemoMatcher:
    regex: re.Pattern[str]
    columns: dict[str, str]  # regex group name -> column


def _demo_regex(query: str) -> _DemoMatcher:
    """A regex matching one demonstration: the query filled in, then the answer line."""
    parts: list[str] = []
    groups: dict[str, str] = {}
    pos = 0
    for i, m in enumerate(PLACEHOLDER.finditer(query)):
        parts.append(re.escape(query[pos : m.start()]))
        col = m.group(1)
        if col in groups:
            parts.append(f"(?P={groups[col]})")
        else:
            groups[col] = f"f{i}"
            parts.append(f"(?P<f{i}>.*?)")
        pos = m.end()
    parts.append(re.escape(query[pos:]))
    parts.append(r"(?P<join>[ \t]*)(?P<answer>[^\n]*)")
    regex = re.compile("".join(parts), re.DOTALL)
    return _DemoMatcher(regex, {g: c for c, g in groups.items()})


def _block_starts(head: str) -> list[int]:
    """Candidate positions where the first demo may start: 0, and after each blank line."""
    starts = [0]
    for m in re.finditer(r"\n\n+", head):
        starts.append(m.end())
    for m in re.finditer(r"(?<!\n)\n(?!\n)", head):  # single-newline instruction separators
        starts.append(m.end())
    return sorted(set(s for s in starts if s < len(head)))


def _parse_demos(
    head: str, start: int, matcher: _DemoMatcher
) -> tuple[tuple[Demo, ...], list[str], str] | None:
    """Parse head[start:] as a sequence of demos, each followed by a newline separator."""
    demos: list[Demo] = []
    seps: list[str] = []
    join = " "
    pos = start
    while pos < len(head):
        m = matcher.regex.match(head, pos)
        if m is None:
            return None
        sep_m = _NEWLINES.match(head, m.end())
        if sep_m is None:
            return None
        fields = {col: m.group(g) for g, col in matcher.columns.items()}
        demos.append(Demo.of(fields, m.group("answer")))
        if len(demos) == 1:
            join = m.group("join")
        seps.append(sep_m.group())
        pos = sep_m.end()
    return (tuple(demos), seps, join) if demos else None
