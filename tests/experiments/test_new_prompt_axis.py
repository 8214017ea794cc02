"""A new prompt axis is one entry in the table of axes (`promptlib.variants.axes`): a
throwaway axis patched into the table is taken by the variant spec grammar, the sweep spec,
the optimiser's space and a trial run's MLflow params, with no other edit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from experiments.optimize.space import invalid, search_space, space_variants, variant_from_params
from experiments.sweeps.spec import SpecError, load_spec
from experiments.tracking.trial_runs import _trial_params
from promptlib import PromptVariant, VariantError, parse_spec
from promptlib.tasks import Catalog
from promptlib.variants import axes


def _hint(value: str, fields: dict[str, Any]) -> None:
    fields["answer_hint"] = value == "on"


def _hint_levels(task: Any, notes: list[str]) -> list[str]:
    if not task.spec.labels:
        notes.append("hint: left out (no label set)")
        return []
    return ["off", "on"]


#: `hint=on|off`: another name for the answer hint, searched by `--space extended`
HINT = axes.Axis(
    "hint",
    "answer_hint",
    _hint,
    search=axes.Search(
        "hint",
        "extended",
        unset="off",
        value=lambda level: level == "on",
        conflicts=lambda p: p["demos"] == "none",
        levels=_hint_levels,
    ),
    track=axes.Track("hint", lambda v: "on" if v.answer_hint else "off"),
)
BASE = {"instruction": "base", "register": "default", "demos": "base", "demo_seed": 0,
        "format": "base", "answer_hint": False}  # fmt: skip


@pytest.fixture
def with_hint(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(axes, "PROMPT_AXES", (*axes.PROMPT_AXES, HINT))
    yield


def _sweep(tmp_path: Path) -> Path:
    path = tmp_path / "hint.yaml"
    path.write_text(
        'name: hint\ntasks: [hearsay]\nfixed: {demos: none}\naxes: {hint: ["off", "on"]}\n'
    )
    return path


def _result(variant: PromptVariant) -> Any:
    spec = SimpleNamespace(
        task="hearsay", model="m", split="test", limit=None, variant=variant,
        scoring="generate", definition="d",
    )  # fmt: skip
    return SimpleNamespace(
        spec=spec, lm_identity={}, predictions=[], metric="accuracy", decoding={}
    )


def test_without_the_entry_no_place_takes_the_axis(tmp_path: Path) -> None:
    with pytest.raises(VariantError, match="unknown variant key 'hint'"):
        parse_spec("hint=on")
    with pytest.raises(SpecError, match="unknown axis 'hint'"):
        load_spec(_sweep(tmp_path))
    assert "hint" not in variant_from_params({**BASE, "hint": "on"}).to_dict()
    assert "hint" not in _trial_params(_result(PromptVariant()), "base", None)


@pytest.mark.usefixtures("with_hint")
def test_the_variant_spec_and_the_sweep_spec_take_a_new_axis(tmp_path: Path) -> None:
    assert parse_spec("hint=on") == PromptVariant(answer_hint=True)
    assert parse_spec("demos=none,hint=off") == PromptVariant(demos="none")
    with pytest.raises(VariantError, match=r"\(keys: .*, order, hint\)"):
        parse_spec("hnt=on")
    spec = load_spec(_sweep(tmp_path))
    assert [v.name for v in spec.variants] == ["hint=off", "hint=on"]
    assert [v.variant.answer_hint for v in spec.variants] == [False, True]


@pytest.mark.usefixtures("with_hint")
def test_a_trial_run_logs_a_new_axis_as_a_param() -> None:
    params = _trial_params(_result(PromptVariant(answer_hint=True)), "hint=on", None)
    assert params["hint"] == "on"
    assert list(params).index("hint") == list(params).index("format") + 1


@pytest.mark.data
@pytest.mark.usefixtures("with_hint")
def test_the_optimiser_searches_a_new_extended_axis(catalog: Catalog) -> None:
    task = catalog.task("hearsay")
    assert "hint" not in search_space(task).grid()  # the base space is what it was
    space = search_space(task, "extended")
    assert list(space.extra_axes()) == ["verbalizer", "order", "layout", "hint"]
    assert space.grid()["hint"] == ["off", "on"]
    assert space.to_dict()["axes"]["hint"] == ["off", "on"]
    assert variant_from_params({**BASE, "hint": "on"}) == PromptVariant(answer_hint=True)
    assert variant_from_params({**BASE, "hint": "off"}) == PromptVariant()
    assert invalid({**BASE, "demos": "none", "hint": "on"})
    assert not invalid({**BASE, "demos": "none", "hint": "off"})
    space.answer_hint = [False]  # the new axis is then the one way to the hint
    with_hint = space_variants(space)
    space.more.clear()
    assert len(with_hint) > len(space_variants(space))
