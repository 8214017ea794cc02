"""A word-level diff of two rendered prompts that shows what the variant changed.

Why: two arms' prompts on one row share the row's text (often most of the prompt); a plain
diff would show it again and again. Each occurrence of the row's input is replaced by one
token first, and long equal runs are collapsed, so what is left is the variants' difference.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

ROW_INPUT = "⟨row input⟩"
MIN_HIDDEN = 6  # fewer equal words than this are shown, not collapsed
_TOKENS = re.compile(r"\s+|\S+")

Op = tuple[str, str]  # ("=" | "-" | "+" | "~", text)


def prompt_diff(
    a: str, b: str, mask: str | Sequence[str] | None = None, context: int = 8
) -> tuple[Op, ...]:
    """The word diff of prompt `a` into prompt `b`: ("=", text), ("-", text) removed from a,
    ("+", text) added in b, and ("~", "… N words the same …") for an equal run longer than
    2*`context` words (its first and last `context` words kept as "="), when that hides at
    least `MIN_HIDDEN` words (a marker hiding two words is longer than they are).

    `mask`: the row's input text (or several: a task with several input columns); each
    occurrence in a and b becomes the token "⟨row input⟩" before diffing (longest first, so
    a value inside another is not cut out of it). Adjacent pieces of one kind are merged.
    """
    masks = [mask] if isinstance(mask, str) else list(mask or ())
    ta, tb = _tokens(a, masks), _tokens(b, masks)
    out: list[Op] = []
    matcher = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out += _equal_around_input(ta[i1:i2], context)
            continue
        if tag in ("delete", "replace"):
            out.append(("-", "".join(ta[i1:i2])))
        if tag in ("insert", "replace"):
            out.append(("+", "".join(tb[j1:j2])))
    return _merged(out)


def _tokens(text: str, masks: Sequence[str]) -> list[str]:
    """Whitespace-kept word tokens, each masked text one token."""
    pieces = [text]
    for m in sorted({m for m in masks if m and m.strip()}, key=lambda m: (-len(m), m)):
        split: list[str] = []
        for p in pieces:
            if p == ROW_INPUT:
                split.append(p)
                continue
            parts = p.split(m)
            for k, part in enumerate(parts):
                if k:
                    split.append(ROW_INPUT)
                if part:
                    split.append(part)
        pieces = split
    return [t for p in pieces for t in ([p] if p == ROW_INPUT else _TOKENS.findall(p))]


def _equal_around_input(tokens: list[str], context: int) -> list[Op]:
    """An equal run, the row input's token always shown (where the row goes in the prompt):
    the pieces between its occurrences are collapsed each on its own."""
    out: list[Op] = []
    piece: list[str] = []
    for t in [*tokens, None]:
        if t is None or t == ROW_INPUT:
            if piece:
                out += _equal(piece, context)
            if t is not None:
                out.append(("=", t))
            piece = []
        else:
            piece.append(t)
    return out


def _equal(tokens: list[str], context: int) -> list[Op]:
    """An equal run: whole, or its first and last `context` words around a "~" marker."""
    words = [k for k, t in enumerate(tokens) if not t.isspace()]
    if len(words) <= 2 * context or len(words) - 2 * context < MIN_HIDDEN:
        return [("=", "".join(tokens))]
    head_end = words[context - 1] + 1 if context else 0
    tail_start = words[len(words) - context] if context else len(tokens)
    # the whitespace after the head and before the tail stays with them, as written
    while head_end < len(tokens) and tokens[head_end].isspace():
        head_end += 1
    while tail_start > head_end and tokens[tail_start - 1].isspace():
        tail_start -= 1
    hidden = len(words) - 2 * context
    out: list[Op] = []
    if head_end:
        out.append(("=", "".join(tokens[:head_end])))
    out.append(("~", f"… {hidden} word{'s' if hidden != 1 else ''} the same …"))
    if tail_start < len(tokens):
        out.append(("=", "".join(tokens[tail_start:])))
    return out


def _merged(ops: list[Op]) -> tuple[Op, ...]:
    """Adjacent pieces of one kind as one; empty pieces dropped."""
    out: list[Op] = []
    for op, text in ops:
        if not text:
            continue
        if out and out[-1][0] == op and op != "~":
            out[-1] = (op, out[-1][1] + text)
        else:
            out.append((op, text))
    return tuple(out)
