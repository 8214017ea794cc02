"""The variant spec grammar: ``key=value,...`` strings (``workbench run --variant``, a sweep
spec's levels) parsed into a `PromptVariant`, and the YAML text files its ``instruction_file``
and ``register_file`` keys name."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from promptlib.data import read_text
from promptlib.errors import VariantError, did_you_mean
from promptlib.formats import canonical_format, is_point
from promptlib.gold import refuse_gold_placeholder
from promptlib.variants.variant import (
    AS_DRAWN,
    MAX_K,
    MAX_SEED,
    NO_FILE,
    OFFICIAL_LABELS,
    PromptVariant,
)
from promptlib.yamlsafe import safe_yaml_load

_SIGNED_INT = re.compile(r"[+-]?\d+")

_SPEC_KEYS = (
    "instruction",
    "register",
    "demos",
    "seed",
    "pool",
    "format",
    "answer_hint",
    "instruction_file",
    "register_file",
    "verbalizer",
    "order",
)


def _read_text_file(path: str, key: str) -> str:
    """User text for an axis, from a YAML file with a `text:` entry (e.g. under ablations/)."""
    # the workbench's one YAML loader (no aliases, bounded depth); imported here, not at the
    # top, so importing promptlib does not import experiments

    p = Path(path).expanduser()
    doc = safe_yaml_load(read_text(p, f"{key}: file", VariantError), str(p), VariantError)
    if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
        raise VariantError(f"{p}: expected a YAML mapping with a string field 'text'")
    text: str = doc["text"]
    refuse_gold_placeholder(text, f"{key} {p}: its field 'text'", VariantError)
    return text


def text_file_review(path: str | Path, key: str = "instruction_file") -> bool | None:
    """A text file's `reviewed:` flag: None for a file that has neither it nor a
    `generator:` (the user's own text), False for a generated file no one has marked
    `reviewed: true` yet (`workbench variants generate` writes `reviewed: false`)."""
    p = Path(path).expanduser()
    doc = safe_yaml_load(read_text(p, f"{key}: file", VariantError), str(p), VariantError)
    if not isinstance(doc, dict) or ("reviewed" not in doc and "generator" not in doc):
        return None
    flag = doc.get("reviewed", False)
    if not isinstance(flag, bool):
        raise VariantError(f"{p}: 'reviewed' must be true or false, not {flag!r}")
    return flag


def parse_spec(spec: str | None) -> PromptVariant:
    """Parse 'key=value,...' (e.g. 'demos=4,seed=3,pool=train+test'); 'base' is the base prompt."""
    if spec is None or spec.strip() in ("", "base"):
        return PromptVariant()
    kv: dict[str, str] = {}
    last = ""
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item and last == "format" and is_point(kv["format"]) and ":" in item:
            kv["format"] += "," + item  # 'format=sep:dash,case:upper': the point goes on
            continue
        if "=" not in item:
            raise VariantError(
                f"variant spec item {item!r} is not key=value; e.g. "
                "'instruction=description,demos=none' or 'demos=4,seed=3,pool=train+test'"
            )
        key, value = (x.strip() for x in item.split("=", 1))
        if key not in _SPEC_KEYS:
            raise VariantError(
                f"unknown variant key {key!r}{did_you_mean(key, _SPEC_KEYS)} "
                f"(keys: {', '.join(_SPEC_KEYS)})"
            )
        if key in kv:
            raise VariantError(f"variant key {key!r} given twice")
        kv[key] = value
        last = key
    fields: dict[str, Any] = {}
    # `none`: no file (the frame's own text), so one sweep axis can compare it with files
    if kv.get("instruction_file") == NO_FILE:
        del kv["instruction_file"]
    if kv.get("register_file") == NO_FILE:
        del kv["register_file"]
    if "instruction_file" in kv:
        fields["instruction"] = "custom"
        fields["instruction_text"] = _read_text_file(kv.pop("instruction_file"), "instruction_file")
    if "register_file" in kv:
        fields["register"] = "custom"
        fields["register_text"] = _read_text_file(kv.pop("register_file"), "register_file")
    for key in ("instruction", "register", "format", "pool"):
        if key in kv:
            fields[key] = kv.pop(key)
    if "format" in fields:
        fields["format"] = canonical_format(fields["format"])
    if "answer_hint" in kv:
        hint = kv.pop("answer_hint").lower()
        if hint not in ("on", "off", "true", "false"):
            raise VariantError(f"answer_hint must be on or off, not {hint!r}")
        fields["answer_hint"] = hint in ("on", "true")
    if "seed" in kv:
        fields["seed"] = _int(kv.pop("seed"), "seed", minimum=0, maximum=MAX_SEED)
    # the unset levels have names, so a sweep axis can list them beside the others
    if "verbalizer" in kv:
        scheme = kv.pop("verbalizer")
        if scheme != OFFICIAL_LABELS:
            fields["verbalizer"] = scheme
    if "order" in kv:
        order = kv.pop("order")
        if order != AS_DRAWN:
            fields["order"] = _int(order, f"order (or {AS_DRAWN})", minimum=0, maximum=MAX_SEED)
    demos = kv.pop("demos", None)
    if demos is not None:
        if _SIGNED_INT.fullmatch(demos):
            fields["demos"] = "sample"
            fields["k"] = _int(demos, "demos=k", minimum=1, maximum=MAX_K)
        else:
            fields["demos"] = demos
    return PromptVariant(**fields)


def _int(value: str, key: str, minimum: int, maximum: int) -> int:
    try:
        n = int(value)
    except ValueError as e:
        raise VariantError(f"{key} must be an integer >= {minimum}, got {value!r}") from e
    if n < minimum:
        hint = "; use demos=none for zero-shot" if key == "demos=k" else ""
        raise VariantError(f"{key} must be an integer >= {minimum}, got {value!r}{hint}")
    if n > maximum:
        raise VariantError(f"{key} must be an integer from {minimum} to {maximum}, got {value!r}")
    return n
