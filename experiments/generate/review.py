"""Which generated text files a sweep or a run uses that no one has reviewed yet: generated
texts are never used silently (their files say `reviewed: false` until a person edits it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from promptlib.variants import text_file_review

#: The variant keys whose value is a text file (`promptlib.variants.parse_spec`).
TEXT_FILE_KEYS = ("instruction_file", "register_file")


def files_in_variant(spec: str | None) -> list[tuple[str, str]]:
    """(key, path) of each text file a `--variant` string names, in order."""
    found = []
    for item in (spec or "").split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip() in TEXT_FILE_KEYS:
            found.append((key.strip(), value.strip()))
    return found


def files_in_sweep(raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, path) of each text file a sweep spec's `fixed:` and `axes:` name, in order."""
    found: list[tuple[str, str]] = []
    fixed = raw.get("fixed") or {}
    axes = raw.get("axes") or {}
    for key in TEXT_FILE_KEYS:
        if isinstance(fixed, Mapping) and key in fixed:
            found.append((key, str(fixed[key])))
        levels = axes.get(key) if isinstance(axes, Mapping) else None
        if isinstance(levels, list):
            found += [(key, str(level)) for level in levels]
    return found


def unreviewed(files: Iterable[tuple[str, str]]) -> list[str]:
    """The paths among `files` whose file is generated and not marked `reviewed: true`, once
    each, in order (a hand-written file, without `reviewed:` or `generator:`, is not)."""
    out: list[str] = []
    for key, path in files:
        if path not in out and text_file_review(path, key) is False:
            out.append(path)
    return out
