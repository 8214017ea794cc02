"""The one table of prompt axes: what each key of a variant spec sets, and how the rest of the
workbench reads it.

Each `Axis` names the key (``demos``, ``verbalizer``...), the `PromptVariant` field it sets,
how a level parses in a spec (``workbench run --variant``, a sweep spec's ``fixed:`` and
``axes:``), whether a sweep may vary it, whether and how the optimiser searches it (`Search`),
and the MLflow param a trial's run logs it as (`Track`). The places that once listed the axes
each read this table:

- `promptlib.variants.spec.parse_spec`: the keys a variant spec takes (`spec_keys`);
- `experiments.sweeps.spec`: the axes a sweep spec may fix or vary (`sweep_axes`);
- `experiments.optimize.space`: the params a study searches (`searches`);
- `experiments.tracking.trial_runs`: a trial run's axis params (`tracked_params`);
- `experiments.analysis.sensitivity`: the axes whose levels are draws (`draw_axes`).

A new axis is one entry here (appended: the order is the order keys are listed, parsed and
logged in) plus its renderer (`promptlib.render`) and, for a new field, `PromptVariant`'s.
The functions read `PROMPT_AXES` when called, so a test may register a throwaway axis by
patching the table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from promptlib.errors import VariantError
from promptlib.formats import canonical_format
from promptlib.variants.textfiles import read_text_file
from promptlib.variants.variant import (
    AS_DRAWN,
    MAX_K,
    MAX_SEED,
    NO_FILE,
    OFFICIAL_LABELS,
    PromptVariant,
)

NO_LAYOUT = "none"  # layout level: the `format` axis decides alone
#: The `PromptVariant` fields no axis sets: binding a variant to a task records them.
RECORDED = ("task", "demo_rows", "label_map")

Fields = dict[str, Any]
"""A variant's fields as a spec's levels set them, before `PromptVariant(**fields)`."""


@dataclass(frozen=True)
class Search:
    """How `workbench optimize` searches an axis (`experiments.optimize.space`)."""

    param: str  # the Optuna param (a new name for a new axis: old studies resume unchanged)
    # base: every study; extended: `--space extended`; files: `--instruction-file` gives the levels
    space: Literal["base", "extended", "files"]
    unset: str | None = None  # (extended) the level that leaves the field at its default
    value: Callable[[str], Any] = str  # (extended) a level -> the field's value
    # (extended) levels no prompt combines, given the trial's other params, when this one is set
    conflicts: Callable[[Mapping[str, Any]], bool] | None = None
    # (extended) the levels a task (a `promptlib.tasks.Task`: typed Any, as promptlib.tasks
    # imports this package) supports, the first the unset one, appending to the notes what
    # was left out and why; None: the built-in axes, whose levels (and notes, in the order
    # studies logged them) `experiments.optimize.space` works out itself
    levels: Callable[[Any, list[str]], list[str]] | None = None


@dataclass(frozen=True)
class Track:
    """How a trial's run logs an axis as an MLflow param (`experiments.tracking.trial_runs`)."""

    param: str
    value: Callable[[PromptVariant], Any]
    # False: logged only when the value is not None (an axis added after runs were logged:
    # a run of a variant without it keeps the params it always had)
    when_unset: bool = True


@dataclass(frozen=True)
class Axis:
    """One prompt axis: its spec key, the variant field it sets, and who reads it how."""

    name: str  # the key in a variant spec and a sweep spec
    field: str  # the `PromptVariant` field it sets
    # a spec level into the variant's fields; None: no spec key (an optimiser param only)
    parse: Callable[[str, Fields], None] | None
    also: tuple[str, ...] = ()  # other fields it sets (demos=4: k; instruction_file: instruction)
    sweep: bool = True  # a sweep spec may fix or vary it
    search: Search | None = None  # None: the optimiser does not search it
    track: Track | None = None  # None: not an MLflow param of its own
    # its levels are random draws (a seed): exchangeable, with no direction to pool across
    # tasks in the sensitivity analysis (`experiments.analysis.sensitivity`)
    draw: bool = False


_SIGNED_INT = re.compile(r"[+-]?\d+")


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


def _level(field: str) -> Callable[[str, Fields], None]:
    """A level taken as written (the variant checks it)."""

    def parse(value: str, fields: Fields) -> None:
        fields[field] = value

    return parse


def _demos(value: str, fields: Fields) -> None:
    if _SIGNED_INT.fullmatch(value):  # demos=4: four rows resampled (with a seed)
        fields["demos"] = "sample"
        fields["k"] = _int(value, "demos=k", minimum=1, maximum=MAX_K)
    else:
        fields["demos"] = value


def _seed(value: str, fields: Fields) -> None:
    fields["seed"] = _int(value, "seed", minimum=0, maximum=MAX_SEED)


def _format(value: str, fields: Fields) -> None:
    fields["format"] = canonical_format(value)


def _answer_hint(value: str, fields: Fields) -> None:
    hint = value.lower()
    if hint not in ("on", "off", "true", "false"):
        raise VariantError(f"answer_hint must be on or off, not {hint!r}")
    fields["answer_hint"] = hint in ("on", "true")


def _text_file(axis: str, key: str) -> Callable[[str, Fields], None]:
    """``instruction_file=PATH``: the file's text as the custom level of `axis` (unless the
    spec names that axis's level itself, which the variant then checks); ``none``: no file,
    the frame's own text, so one sweep axis can compare it with files."""

    def parse(value: str, fields: Fields) -> None:
        if value == NO_FILE:
            return
        fields.setdefault(axis, "custom")
        fields[f"{axis}_text"] = read_text_file(value, key)

    return parse


# the unset levels have names, so a sweep axis can list them beside the others
def _verbalizer(value: str, fields: Fields) -> None:
    if value != OFFICIAL_LABELS:
        fields["verbalizer"] = value


def _order(value: str, fields: Fields) -> None:
    if value != AS_DRAWN:
        fields["order"] = _int(value, f"order (or {AS_DRAWN})", minimum=0, maximum=MAX_SEED)


def _demos_param(v: PromptVariant) -> str:
    return v.demos if v.demos != "sample" else str(v.k)


PROMPT_AXES: tuple[Axis, ...] = (
    Axis(
        "instruction",
        "instruction",
        _level("instruction"),
        search=Search("instruction", "base"),
        track=Track("instruction", lambda v: v.instruction),
    ),
    Axis(
        "register",
        "register",
        _level("register"),
        search=Search("register", "base"),
        track=Track("register", lambda v: v.register),
    ),
    Axis(
        "demos",
        "demos",
        _demos,
        also=("k",),
        search=Search("demos", "base"),
        track=Track("demos", _demos_param),
    ),
    Axis(
        "seed",
        "seed",
        _seed,
        search=Search("demo_seed", "base"),
        track=Track("seed", lambda v: v.seed),
        draw=True,
    ),
    # the optimiser draws from train only (train+test would draw held-out rows)
    Axis("pool", "pool", _level("pool"), track=Track("pool", lambda v: v.pool)),
    Axis(
        "format",
        "format",
        _format,
        search=Search("format", "base"),
        track=Track("format", lambda v: v.format),
    ),
    # not a sweep axis, nor a param of its own (it is in the variant's id and name)
    Axis(
        "answer_hint",
        "answer_hint",
        _answer_hint,
        sweep=False,
        search=Search("answer_hint", "base"),
    ),
    # a YAML file with `text:`; a generated one not yet `reviewed: true` is named on the
    # sweep's output and parent run (`experiments.generate.review`)
    Axis(
        "instruction_file",
        "instruction_text",
        _text_file("instruction", "instruction_file"),
        also=("instruction",),
        search=Search("instruction_file", "files"),
    ),
    Axis(
        "register_file",
        "register_text",
        _text_file("register", "register_file"),
        also=("register",),
    ),
    # the labels' surface form (`promptlib.verbalizers`; official: as LegalBench writes them)
    Axis(
        "verbalizer",
        "verbalizer",
        _verbalizer,
        search=Search("verbalizer", "extended", unset=OFFICIAL_LABELS),
        track=Track("verbalizer", lambda v: v.verbalizer, when_unset=False),
    ),
    # a seed permuting the demonstrations (drawn: in the order drawn); a draw axis in the
    # sensitivity analysis, like seed
    Axis(
        "order",
        "order",
        _order,
        search=Search(
            "order", "extended", unset=AS_DRAWN, value=int, conflicts=lambda p: p["demos"] == "none"
        ),
        track=Track("order", lambda v: v.order, when_unset=False),
        draw=True,
    ),
    # format grammar points drawn for the optimiser (`--space extended`), a param of their
    # own beside `format` (a layout with format=claude would be two formats)
    Axis(
        "layout",
        "format",
        None,
        sweep=False,
        search=Search(
            "layout", "extended", unset=NO_LAYOUT, conflicts=lambda p: p["format"] != "base"
        ),
    ),
)


def draw_axes() -> tuple[str, ...]:
    """The axes whose levels are random draws (seed, order), in the table's order."""
    return tuple(a.name for a in PROMPT_AXES if a.draw)


def spec_parsers() -> dict[str, Callable[[str, Fields], None]]:
    """Each key a variant spec takes and how its level parses, in the table's order."""
    return {a.name: a.parse for a in PROMPT_AXES if a.parse is not None}


def spec_keys() -> tuple[str, ...]:
    """The keys a variant spec takes, in the table's order."""
    return tuple(spec_parsers())


def sweep_axes() -> tuple[str, ...]:
    """The axes a sweep spec may fix or vary, in the table's order."""
    return tuple(a.name for a in PROMPT_AXES if a.parse is not None and a.sweep)


def searches(space: str) -> tuple[tuple[str, Search], ...]:
    """(variant field, search) of each optimiser param of one kind of space (base, extended
    or files), in table order."""
    return tuple(
        (a.field, a.search) for a in PROMPT_AXES if a.search is not None and a.search.space == space
    )


def tracked_params(v: PromptVariant) -> dict[str, Any]:
    """A variant's axes as a trial run's MLflow params, in table order (the caller writes each
    value as MLflow takes it: None as ``none``)."""
    out: dict[str, Any] = {}
    for axis in PROMPT_AXES:
        if axis.track is None:
            continue
        value = axis.track.value(v)
        if value is not None or axis.track.when_unset:
            out[axis.track.param] = value
    return out
