"""The table of prompt axes (`promptlib.variants.axes`): it covers every field a spec sets,
and the keys, axes and params read from it are the ones the workbench always had."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from promptlib import PromptVariant, VariantError, parse_spec
from promptlib.variants import axes


def test_the_table_covers_every_variant_field_that_is_an_axis() -> None:
    """A new `PromptVariant` field is set by an axis of the table or recorded by binding:
    one that is neither would be a level no spec, sweep, study or run could name."""
    fields = {f.name for f in dataclasses.fields(PromptVariant)}
    set_by_axes = {a.field for a in axes.PROMPT_AXES} | {
        f for a in axes.PROMPT_AXES for f in a.also
    }
    assert set_by_axes <= fields
    assert fields - set(axes.RECORDED) == set_by_axes
    assert not set(axes.RECORDED) & set_by_axes
    names = [a.name for a in axes.PROMPT_AXES]
    assert len(names) == len(set(names))
    params = [s.param for kind in ("base", "extended", "files") for _, s in axes.searches(kind)]
    assert len(params) == len(set(params))
    tracked = [a.track.param for a in axes.PROMPT_AXES if a.track is not None]
    assert len(tracked) == len(set(tracked))


def test_the_keys_axes_and_params_read_from_the_table_are_unchanged() -> None:
    assert axes.spec_keys() == (
        "instruction", "register", "demos", "seed", "pool", "format", "answer_hint",
        "instruction_file", "register_file", "verbalizer", "order",
    )  # fmt: skip
    assert axes.sweep_axes() == (
        "instruction", "register", "demos", "seed", "pool", "format", "instruction_file",
        "register_file", "verbalizer", "order",
    )  # fmt: skip
    assert axes.draw_axes() == ("seed", "order")
    assert [s.param for _, s in axes.searches("base")] == [
        "instruction", "register", "demos", "demo_seed", "format", "answer_hint"
    ]  # fmt: skip
    assert [(f, s.param) for f, s in axes.searches("extended")] == [
        ("verbalizer", "verbalizer"), ("order", "order"), ("format", "layout")
    ]  # fmt: skip
    # a trial run's params, in the order they were always logged; None is logged as `none`
    assert list(axes.tracked_params(PromptVariant()).items()) == [
        ("instruction", "base"), ("register", "default"), ("demos", "base"), ("seed", None),
        ("pool", "train"), ("format", "base"),
    ]  # fmt: skip
    v = parse_spec("demos=4,seed=3,pool=train+test,verbalizer=letters,order=2,answer_hint=on")
    assert list(axes.tracked_params(v).items()) == [
        ("instruction", "base"), ("register", "default"), ("demos", "4"), ("seed", 3),
        ("pool", "train+test"), ("format", "base"), ("verbalizer", "letters"), ("order", 2),
    ]  # fmt: skip


def test_an_unknown_key_lists_the_tables_keys() -> None:
    with pytest.raises(VariantError, match=r"\(keys: instruction, register, demos, .*, order\)"):
        parse_spec("layout=sep:dash")  # an optimiser param, not a spec key


def test_a_text_file_key_leaves_a_level_given_beside_it_to_the_variant(tmp_path: Path) -> None:
    """The spec's keys parse in the table's order whatever order the spec writes them in: a
    file sets the custom level, unless the spec names that axis's level itself."""
    path = tmp_path / "mine.yaml"
    path.write_text("text: Decide whether the statement is hearsay.\n")
    for spec in (
        f"instruction_file={path},instruction=base",
        f"instruction=base,instruction_file={path}",
    ):
        with pytest.raises(VariantError, match="instruction=custom needs instruction_text"):
            parse_spec(spec)
    a = parse_spec(f"instruction_file={path},demos=none")
    assert a == parse_spec(f"demos=none,instruction=custom,instruction_file={path}")
    assert (a.instruction, a.instruction_text) == (
        "custom",
        "Decide whether the statement is hearsay.",
    )
    assert parse_spec("instruction_file=none,verbalizer=official,order=drawn") == PromptVariant()
