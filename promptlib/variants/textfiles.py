"""The YAML text files a variant's ``instruction_file`` and ``register_file`` keys name: the
user's own words (or a generated text) in a `text:` entry, and whether someone reviewed it."""

from __future__ import annotations

from pathlib import Path

from promptlib.data import read_text
from promptlib.errors import VariantError
from promptlib.gold import refuse_gold_placeholder
from promptlib.yamlsafe import safe_yaml_load


def read_text_file(path: str, key: str) -> str:
    """User text for an axis, from a YAML file with a `text:` entry (e.g. under ablations/)."""
    # the workbench's one YAML loader (no aliases, bounded depth)
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


_read_text_file = read_text_file  # the name callers outside promptlib used first
