"""Which generated text files a sweep or a run uses that no one has reviewed yet: generated
texts are never used silently (their files say `reviewed: false` until a person edits it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from promptlib.variants import NO_FILE, text_file_review

#: The variant keys whose value is a text file (`promptlib.variants.parse_spec`).
TEXT_FILE_KEYS = ("instruction_file", "register_file")


def files_in_variant(spec: str | None) -> list[tuple[str, str]]:
    """(key, path) of each text file a `--variant` string names, in order."""
    found = []
    for item in (spec or "").split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip() in TEXT_FILE_KEYS and value.strip() != NO_FILE:
            found.append((key.strip(), value.strip()))
    return found


def files_in_sweep(raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, path) of each text file a sweep spec's `fixed:` and `axes:` name, in order; a
    path naming ``{task}`` is each task's own file, listed for the tasks that have one (a
    task without it skips that variant, and the sweep says so)."""
    found: list[tuple[str, str]] = []
    fixed = raw.get("fixed") or {}
    axes = raw.get("axes") or {}
    for key in TEXT_FILE_KEYS:
        if isinstance(fixed, Mapping) and key in fixed:
            found += _per_task(key, str(fixed[key]), raw)
        levels = axes.get(key) if isinstance(axes, Mapping) else None
        if isinstance(levels, list):
            for level in levels:
                found += _per_task(key, str(level), raw)
    return found


def _per_task(key: str, path: str, raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    if path == NO_FILE:  # the prompt file's own text: nothing generated
        return []
    if "{task}" not in path:
        return [(key, path)]
    tasks = raw.get("tasks") if isinstance(raw.get("tasks"), list) else []
    paths = [path.replace("{task}", str(t)) for t in tasks or []]
    return [(key, p) for p in paths if Path(p).expanduser().is_file()]


def unreviewed(files: Iterable[tuple[str, str]]) -> list[str]:
    """The paths among `files` whose file is generated and not marked `reviewed: true`, once
    each, in order (a hand-written file, without `reviewed:` or `generator:`, is not)."""
    out: list[str] = []
    for key, path in files:
        if path not in out and text_file_review(path, key) is False:
            out.append(path)
    return out
