"""The format grammar: re-render a parsed prompt's formatting, never its content (issue 21).

After FormatSpread (Sclar et al., ICLR 2024), a *format point* names one value on each of
these dimensions (``asis`` keeps what the prompt file wrote):

============  ===========================================================================
dimension     values
============  ===========================================================================
sep           separator between a field name and its value: asis, colon_space ``": "``,
              colon_newline ``":\\n"``, dash ``" - "``, double_colon ``" :: "``,
              equals ``" = "``, pipe ``" | "``
case          casing of field names: asis, title, upper, lower
join          joiner between the lines of the query template: asis, newline, blank_line,
              space, semicolon ``"; "``, pipe ``" || "``
demo_join     joiner between demonstrations (and before the query): asis, newline,
              blank_line, double_blank ``"\\n\\n\\n"``, rule ``"\\n---\\n"``
answer        name of the answer field: asis, Answer, A
instruction   text around the instruction: asis, label ``"Instruction: ..."``,
              header ``"## Instructions\\n..."``, tags ``"<instructions>\\n...\\n</instructions>"``
============  ===========================================================================

A *field* is a query-template line that starts with a short name (letters first, at most five
words) followed by a colon, e.g. ``Q: {{text}} Is there hearsay?`` or ``Clause: {{text}}``; the
last line, ``A:`` or ``Label:``, is the answer field (its value is the demonstration's answer).
Lines without a name (``{{contract}}``, ``Supportive?``) are left alone, and so is everything
after a field's separator: placeholder values, literal question text, demo answers and the
instruction are content. A dimension with nothing to act on (``answer`` when the last line is
no field, ``instruction`` for a prompt without one) leaves the prompt as it is.

A point is written ``sep:colon_newline,case:upper``; its canonical form lists the dimensions
in the order above and only those that differ from ``asis`` (the all-asis point is ``base``),
so equal points have equal variant ids. Grammar points are base-style: they do not combine
with ``format=claude``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from promptlib.errors import VariantError, did_you_mean
from promptlib.templates import PLACEHOLDER

ASIS = "asis"

#: Each dimension's values, in a fixed order (the draw and the canonical form depend on it).
GRAMMAR: dict[str, dict[str, str]] = {
    "sep": {
        ASIS: "",
        "colon_space": ": ",
        "colon_newline": ":\n",
        "dash": " - ",
        "double_colon": " :: ",
        "equals": " = ",
        "pipe": " | ",
    },
    "case": {ASIS: "", "title": "", "upper": "", "lower": ""},
    "join": {
        ASIS: "",
        "newline": "\n",
        "blank_line": "\n\n",
        "space": " ",
        "semicolon": "; ",
        "pipe": " || ",
    },
    "demo_join": {
        ASIS: "",
        "newline": "\n",
        "blank_line": "\n\n",
        "double_blank": "\n\n\n",
        "rule": "\n---\n",
    },
    "answer": {ASIS: "", "Answer": "Answer", "A": "A"},
    "instruction": {
        ASIS: "",
        "label": "Instruction: {}",
        "header": "## Instructions\n{}",
        "tags": "<instructions>\n{}\n</instructions>",
    },
}
DIMENSIONS = tuple(GRAMMAR)
BASE = "base"

#: A field line: a short name (letters first, up to five words), a colon, then the value.
_FIELD = re.compile(
    r"(?P<name>[A-Za-z][A-Za-z0-9'()\-]*(?: [A-Za-z0-9'()\-]+){0,4})(?P<sep>[ \t]*:[ \t]*)"
    r"(?P<rest>.*)",
    re.DOTALL,
)
_NEWLINES = re.compile(r"\n+")

Point = tuple[tuple[str, str], ...]  # (dimension, value) for every dimension, in order
Kind = Literal["format", "content"]
Segment = tuple[Kind, str]


def is_point(fmt: str) -> bool:
    """Whether a `format` level is a grammar point (rather than ``base`` or ``claude``)."""
    return ":" in fmt


def parse_point(text: str) -> Point:
    """Read ``dim:value,...`` into a full point (missing dimensions are ``asis``)."""
    chosen: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        dim, colon, value = (x.strip() for x in item.partition(":"))
        if not colon:
            raise VariantError(
                f"format item {item!r} is not dimension:value; e.g. "
                f"'format=sep:colon_newline,case:upper' (dimensions: {', '.join(DIMENSIONS)})"
            )
        if dim not in GRAMMAR:
            raise VariantError(
                f"unknown format dimension {dim!r}{did_you_mean(dim, DIMENSIONS)} "
                f"(dimensions: {', '.join(DIMENSIONS)})"
            )
        values = tuple(GRAMMAR[dim])
        if value not in values:
            raise VariantError(
                f"unknown format {dim} {value!r}{did_you_mean(value, values)} "
                f"(values: {', '.join(values)})"
            )
        if dim in chosen:
            raise VariantError(f"format dimension {dim!r} given twice in {text!r}")
        chosen[dim] = value
    return tuple((d, chosen.get(d, ASIS)) for d in DIMENSIONS)


def point_name(point: Point) -> str:
    """The canonical string of a point: fixed order, only non-asis dimensions; else 'base'."""
    return ",".join(f"{d}:{v}" for d, v in point if v != ASIS) or BASE


def canonical_format(fmt: str) -> str:
    """``base``/``claude`` as they are; a grammar point in its canonical spelling."""
    return point_name(parse_point(fmt)) if is_point(fmt) else fmt


def check_format(fmt: str, levels: tuple[str, ...]) -> None:
    """Raise `VariantError` unless `fmt` is one of `levels` or a canonical grammar point."""
    if not is_point(fmt):
        if fmt not in levels:
            raise VariantError(
                f"unknown format level {fmt!r}{did_you_mean(fmt, levels)} (levels: "
                f"{', '.join(levels)}, or a grammar point such as sep:colon_newline,case:upper)"
            )
        return
    canonical = point_name(parse_point(fmt))
    if canonical != fmt:
        raise VariantError(
            f"format {fmt!r} is not in canonical form; write {canonical!r} (dimensions in the "
            f"order {', '.join(DIMENSIONS)}, asis left out) so equal points have equal ids"
        )


# ---- the seeded draw -----------------------------------------------------------------------
def grammar_size() -> int:
    """How many points the grammar has (the as-written point included)."""
    n = 1
    for values in GRAMMAR.values():
        n *= len(values)
    return n


def _point_at(index: int) -> Point:
    """The point at a mixed-radix index (0 is the all-asis point)."""
    out = []
    for dim, values in GRAMMAR.items():
        index, i = divmod(index, len(values))
        out.append((dim, tuple(values)[i]))
    return tuple(out)


def _below(rng: random.Random, n: int) -> int:
    """A uniform integer in [0, n) from raw bits: the same in every Python version."""
    bits = n.bit_length()
    while True:
        r = rng.getrandbits(bits)
        if r < n:
            return r


def draw_formats(k: int, seed: int) -> tuple[str, ...]:
    """k distinct canonical points, drawn with `seed`; never the as-written point (``base``).

    Stable across processes and Python versions: `random.Random(seed)`'s Mersenne Twister
    bits, rejection-sampled by this module (no `hash()`, no library sampling routine).
    """
    total = grammar_size() - 1
    if not 1 <= k <= total:
        raise VariantError(f"draw_formats needs 1 <= k <= {total} (the grammar's size), not {k}")
    if seed < 0:
        raise VariantError(f"draw_formats needs a seed >= 0, not {seed}")
    rng = random.Random(seed)
    seen: dict[int, None] = {}
    while len(seen) < k:
        seen.setdefault(1 + _below(rng, total), None)
    return tuple(point_name(_point_at(i)) for i in seen)


# ---- applying a point ----------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """A prompt's frame under one point, in pieces: formatting and content kept apart.

    `query` is the query template as (kind, text) pieces whose texts concatenate to the
    template (placeholders included, as content); the rest are the separators around it.
    """

    query: tuple[Segment, ...]
    answer_join: str
    demo_sep: str
    instruction_before: str
    instruction_after: str

    @property
    def template(self) -> str:
        return "".join(text for _, text in self.query)


def _case(name: str, how: str) -> str:
    if how == "upper":
        return name.upper()
    if how == "lower":
        return name.lower()
    if how == "title":
        return " ".join(w[:1].upper() + w[1:].lower() for w in name.split(" "))
    return name


def _field(line: str, last: bool) -> re.Match[str] | None:
    """The field-name match of a template line, or None when the line has no name."""
    m = _FIELD.fullmatch(line)
    if m is None or PLACEHOLDER.search(m.group("name")):
        return None
    if not m.group("rest") and not last:
        return None  # 'Choices:' heading a list: not a name-value field
    glued = not m.group("sep").endswith((" ", "\t"))
    if m.group("rest") and glued and not PLACEHOLDER.match(m.group("rest")):
        return None  # 'see http://...': a colon inside text, not a field's separator
    return m


def layout(query: str, answer_join: str, demo_sep: str, fmt: str = BASE) -> Layout:
    """Re-render a query template, its answer join and demo joiner under point `fmt`."""
    point = dict(parse_point(fmt)) if is_point(fmt) else {d: ASIS for d in DIMENSIONS}
    sep = GRAMMAR["sep"][point["sep"]]
    joiner = GRAMMAR["join"][point["join"]]
    pieces: list[Segment] = []
    parts = _NEWLINES.split(query)
    breaks = _NEWLINES.findall(query)
    for i, line in enumerate(parts):
        last = i == len(parts) - 1
        m = _field(line, last)
        if m is None:
            pieces.append(("content", line))
        else:
            name = m.group("name")
            if last and point["answer"] != ASIS and not m.group("rest"):
                # the answer field only: a last line with a value ('Clause: {{text}}' of a
                # register text) is a field like the others (found in review)
                name = GRAMMAR["answer"][point["answer"]]
            name = _case(name, point["case"])
            line_sep = m.group("sep")
            if sep:
                line_sep = sep.rstrip() if last and not m.group("rest") else sep
                if last and not m.group("rest") and "\n" in sep[len(sep.rstrip()) :]:
                    # 'Label:\n': the prompt itself ends with the newline, so a model that
                    # follows the demonstrations answers at once instead of stopping at the
                    # newline generation stops at (an empty reply on every row; review)
                    line_sep = sep
            pieces.append(("format", name + line_sep))
            if m.group("rest"):
                pieces.append(("content", m.group("rest")))
        if not last:
            pieces.append(("format", joiner or breaks[i]))
    answer_field = _field(parts[-1], True)
    if sep and answer_field is not None and not answer_field.group("rest"):
        answer_join = sep[len(sep.rstrip()) :]  # 'A:' + ' ' + answer, as the point's sep
        if "\n" in answer_join:
            answer_join = ""  # the newline ends the query itself (above)
    demo_join = GRAMMAR["demo_join"][point["demo_join"]] or demo_sep
    before, _, after = GRAMMAR["instruction"][point["instruction"]].partition("{}")
    return Layout(tuple(p for p in pieces if p[1]), answer_join, demo_join, before, after)


def template_segments(template: str, values: Mapping[str, str]) -> list[Segment]:
    """A template filled with `values`, as content pieces (placeholder values and literal text)."""
    out: list[Segment] = []
    pos = 0
    for m in PLACEHOLDER.finditer(template):
        if m.start() > pos:
            out.append(("content", template[pos : m.start()]))
        out.append(("content", str(values[m.group(1)])))
        pos = m.end()
    if pos < len(template):
        out.append(("content", template[pos:]))
    return out


def strip_formatting(segments: list[Segment]) -> str:
    """The content of a segmented prompt: what stays when the formatting is taken out."""
    return "".join(text for kind, text in segments if kind == "content")
