"""Naming a trial's variant or model from a field of another tool's results (`--variant-from`,
`--model-from`): one dotted-path lookup shared by the harness readers, so each names fields
the same way and a missing field gets the same one-line error."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.imports.records import ImportInputError

_MISSING = object()


def lookup(data: Any, dotted: str) -> Any:
    """The value at `dotted` ("a.b.0.c": keys, and list indices as numbers) in nested
    mappings and lists, or `_MISSING`."""
    value = data
    for part in dotted.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, Sequence) and not isinstance(value, str) and part.isdigit():
            index = int(part)
            if index >= len(value):
                return _MISSING
            value = value[index]
        else:
            return _MISSING
    return value


def named_by(
    path: Path,
    sources: Sequence[tuple[str, Mapping[str, Any]]],
    dotted: str,
    option: str,
) -> str:
    """The text at `dotted` in the first of `sources` (``(what, data)`` pairs, searched in
    order) that has it; a one-line error naming the file, the option and where it looked."""
    for _what, data in sources:
        value = lookup(data, dotted)
        if value is _MISSING or value is None:
            continue
        text = value if isinstance(value, str) else _compact(value)
        if text.strip():
            return text.strip()
    where = " or ".join(what for what, _ in sources)
    keys = sorted({str(k) for _what, data in sources for k in data})
    raise ImportInputError(
        f"{path}: {option} {dotted}: no such field (or it is empty) in {where}; name a field "
        f"that is there, dotted for nested ones (top-level fields: {', '.join(keys)})"
    )


def _compact(value: Any) -> str:
    """A non-string field as short, stable text (numbers, lists, mappings sorted by key)."""
    if isinstance(value, Mapping):
        return ",".join(f"{k}={_compact(v)}" for k, v in sorted(value.items(), key=str))
    if isinstance(value, list | tuple):
        return ",".join(_compact(v) for v in value)
    return str(value)


def call_text(name: str, args: Mapping[str, Any]) -> str:
    """``name`` alone, or ``name(k=v, ...)`` with the arguments sorted by name."""
    if not args:
        return name
    return f"{name}({', '.join(f'{k}={_compact(v)}' for k, v in sorted(args.items()))})"


# a row's fields that are not its input: its id and its gold answer (lm-eval's doc, a jsonl row)
NOT_INPUT = ("index", "answer", "label", "target", "idx", "id")


def shown_input(data: Any) -> str | None:
    """A row's input as the import's report shows it: a text as it is; of a mapping (lm-eval's
    doc, promptfoo's vars) its one field, or each field as ``name: value``, the id and gold
    answer left out; None when there is nothing to show."""
    if isinstance(data, str):
        return data if data.strip() else None
    if not isinstance(data, Mapping):
        return None
    fields = [(str(k), v) for k, v in data.items() if str(k) not in NOT_INPUT]
    texts = [(k, v if isinstance(v, str) else _compact(v)) for k, v in fields if v is not None]
    if not texts:
        return None
    if len(texts) == 1:
        return texts[0][1]
    return "\n\n".join(f"{k}: {v}" for k, v in texts)
