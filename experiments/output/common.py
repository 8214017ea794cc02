"""What every part of the output shares: a number or "-", one JSON document, a
planned variant's notes.
"""

from __future__ import annotations

import json
from typing import Any


def _f(x: Any, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


def as_json(obj: Any, indent: int | None = None) -> str:
    """One JSON document (non-JSON values such as paths shown with str)."""
    return json.dumps(obj, ensure_ascii=False, default=str, indent=indent)


def note_lines(notes: list[dict[str, str]]) -> list[str]:
    """A planned variant's prompt working against it (`experiments.sweeps.plan.note_items`)."""
    return [f"note {n['task']}: variant {n['variant']}: {n['note']}" for n in notes]
