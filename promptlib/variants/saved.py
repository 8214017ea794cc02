"""Variants saved as JSON: a variant's canonical JSON, or an optimize report holding one
(``best_variant_json``), read back with the same id (``workbench run --variant-file``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from promptlib import inputs
from promptlib.data import read_text
from promptlib.errors import VariantError, VariantFileError
from promptlib.variants.variant import PromptVariant

#: The JSON types each field of a saved variant may take (None: the field may be null).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "instruction": (str,),
    "instruction_text": (str, type(None)),
    "register": (str,),
    "register_text": (str, type(None)),
    "demos": (str,),
    "k": (int, type(None)),
    "seed": (int, type(None)),
    "pool": (str,),
    "format": (str,),
    "answer_hint": (bool,),
    "task": (str, type(None)),
    "demo_rows": (list, type(None)),
    "verbalizer": (str, type(None)),
    "label_map": (list, type(None)),
    "order": (int, type(None)),
}
REPORT_FIELD = "best_variant_json"


# How deep a variant file's JSON may nest. A variant needs 3 levels (demo_rows: a list of
# pairs), an optimize report a few more; far deeper is not a saved variant, and parsing it
# would exhaust Python's stack (RecursionError) instead of saying so.
MAX_JSON_DEPTH = 32


def _loads(text: str, where: str) -> Any:
    """`json.loads` within `promptlib.inputs`' bounds (nested deeper than MAX_JSON_DEPTH, a
    huge integer or a key given twice is one clear line)."""
    return inputs.loads(text, where, VariantFileError, max_depth=MAX_JSON_DEPTH)


def variant_from_saved(doc: object, where: str = "variant") -> PromptVariant:
    """A variant from parsed JSON: its canonical form, or an optimize report holding one.

    Accepts the object `PromptVariant.canonical_json()` writes, or a `workbench optimize
    --json` report, whose `best_variant_json` field holds the winner's canonical JSON.
    Anything else raises `VariantFileError` naming what is wrong.
    """
    if isinstance(doc, dict) and REPORT_FIELD in doc:
        inner = doc[REPORT_FIELD]
        if isinstance(inner, str):
            try:
                inner = _loads(inner, f"{where} ({REPORT_FIELD})")
            except json.JSONDecodeError as e:
                raise VariantFileError(
                    f"{where}: {REPORT_FIELD} is not valid JSON ({e.msg} at line {e.lineno} "
                    f"column {e.colno})"
                ) from None
        if isinstance(inner, dict) and REPORT_FIELD in inner:
            # a report inside a report, and so on, is not what optimize writes (and would
            # recurse once per level)
            raise VariantFileError(
                f"{where}: {REPORT_FIELD} holds another report's {REPORT_FIELD}; expected the "
                "canonical JSON of the winning variant itself"
            )
        return variant_from_saved(inner, f"{where} ({REPORT_FIELD})")
    shape = (
        "the canonical JSON of a variant (PromptVariant.canonical_json()) or a "
        f"'workbench optimize --json' report with {REPORT_FIELD}"
    )
    if not isinstance(doc, dict):
        raise VariantFileError(f"{where}: expected {shape}, not a JSON {_json_type(doc)}")
    unknown = sorted(set(doc) - set(_FIELD_TYPES))
    if unknown:
        raise VariantFileError(
            f"{where}: unknown variant field(s) {', '.join(map(repr, unknown))}; expected {shape}"
        )
    for key, value in doc.items():
        types = _FIELD_TYPES[key]
        wrong = not isinstance(value, types) or (isinstance(value, bool) and bool not in types)
        if wrong:
            raise VariantFileError(
                f"{where}: field {key!r} must be "
                + " or ".join(_JSON_NAMES[t] for t in types)
                + f", not a JSON {_json_type(value)}"
            )
    rows = doc.get("demo_rows")
    if rows is not None and not all(
        isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) for x in r) for r in rows
    ):
        raise VariantFileError(
            f"{where}: demo_rows must be a list of [split, index] pairs of strings, "
            'e.g. [["train", "3"], ["train", "7"]]'
        )
    pairs = doc.get("label_map")
    if pairs is not None and not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs
    ):
        raise VariantFileError(
            f"{where}: label_map must be a list of [official, shown] pairs of strings, "
            'e.g. [["Yes", "True"], ["No", "False"]]'
        )
    try:
        return PromptVariant.from_dict(doc)
    except VariantError as e:
        raise VariantFileError(f"{where}: {e}") from None


def load_variant_file(path: str | Path) -> PromptVariant:
    """Read a variant saved as JSON (see `variant_from_saved`); errors are one clear line."""
    p = Path(path).expanduser()
    text = read_text(p, "variant file", VariantFileError)
    try:
        doc = _loads(text, f"variant file {p}")
    except json.JSONDecodeError as e:
        raise VariantFileError(
            f"variant file {p} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"
        ) from None
    return variant_from_saved(doc, f"variant file {p}")


_JSON_NAMES: dict[type, str] = {
    str: "a string",
    int: "an integer",
    bool: "true or false",
    list: "a list",
    type(None): "null",
}


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object"
