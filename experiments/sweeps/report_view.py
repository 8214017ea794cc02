"""`workbench report --model M`: a sweep's comparisons document cut down to one model.

Why: a sweep run on several models reports them all; one model's rows are what a reader
deciding about that model wants. Nothing is recomputed: every number is the sweep's. In
particular a corrected p-value stays corrected over the whole sweep's family (every
model's comparisons: `family_size` on each row, which the table's footnote states), and a
sequential comparison's level stays the sweep's Bonferroni share; the cut changes only
what is shown. Rank stability compares models with each other, so it is left out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from promptlib.errors import WorkbenchError, did_you_mean

RANK_LEFT_OUT = "rank stability of models across prompts left out: it compares the sweep's models"


class UnknownModel(WorkbenchError):
    """`--model` names no model of the sweep run (exit 2)."""


@dataclass(frozen=True)
class ModelView:
    """One model's part of a sweep run's document, and how much of the whole it is."""

    model: str
    doc: dict[str, Any]
    trial_rows: list[dict[str, Any]]
    shown: int  # comparisons (or sequential comparisons) of this model
    total: int  # ... of the whole sweep run


def sweep_models(
    doc: dict[str, Any], trial_rows: Sequence[dict[str, Any]], params: Any
) -> list[str]:
    """The models of a sweep run: its parent's `models` param, then any its rows name."""
    listed = [m for m in str((params or {}).get("models") or "").split(",") if m]
    rows = [
        *(doc.get("comparisons") or ()),
        *(doc.get("sequential") or ()),
        *(doc.get("incomplete") or ()),
        *trial_rows,
    ]
    return list(dict.fromkeys([*listed, *(str(r["model"]) for r in rows if r.get("model"))]))


def only_model(
    doc: dict[str, Any],
    trial_rows: Sequence[dict[str, Any]],
    model: str,
    models: Sequence[str],
) -> ModelView:
    """`doc` and `trial_rows` with only `model`'s rows; `models` are the sweep run's (an
    unknown `model` is refused, naming them)."""
    if model not in models:
        raise UnknownModel(
            f"--model {model!r}: this sweep run has no such model; its models: "
            f"{', '.join(models) or 'none'}{did_you_mean(model, models)}"
        )
    out = {key: _rows_of(value, model) for key, value in doc.items()}
    if doc.get("sensitivity"):
        out["sensitivity"] = _sensitivity(doc["sensitivity"], model, models)
    kind = "sequential" if doc.get("sequential") is not None else "comparisons"
    out["model_shown"] = model
    return ModelView(
        model=model,
        doc=out,
        trial_rows=[r for r in trial_rows if r.get("model") == model],
        shown=len(out.get(kind) or ()),
        total=len(doc.get(kind) or ()),
    )


def _sensitivity(sens: dict[str, Any], model: str, models: Sequence[str]) -> dict[str, Any]:
    """The sensitivity report's parts about `model`; its notes that name only other models
    are dropped."""
    out = {key: _rows_of(value, model) for key, value in sens.items()}
    if sens.get("variance_shares") is not None:
        out["variance_shares"] = {m: v for m, v in sens["variance_shares"].items() if m == model}
    notes = [n for n in sens.get("notes") or () if _about(str(n), model, models)]
    if sens.get("rank_stability"):
        out["rank_stability"] = []
        notes.append(RANK_LEFT_OUT)
    out["notes"] = notes
    return out


def _rows_of(value: Any, model: str) -> Any:
    """`value` itself, or, when it is a list of rows that each name a model (comparisons,
    across-task tests, incomplete trials, sequential comparisons, sensitivity measures),
    `model`'s rows of it."""
    if (
        isinstance(value, list)
        and value
        and all(isinstance(r, dict) and "model" in r for r in value)
    ):
        return [r for r in value if r["model"] == model]
    return value


def _about(note: str, model: str, models: Sequence[str]) -> bool:
    """Whether a note concerns `model`: it names it, or names no model of the sweep."""
    named = {m for m in models if _names(note, m)}
    return not named or model in named


def _names(text: str, model: str) -> bool:
    """`model` appears in `text` as a whole name (not inside a longer model name)."""
    return re.search(rf"(?<![\w/.:-]){re.escape(model)}(?![\w/:-]|\.\w)", text) is not None
