"""Which arm is A: one rule (`experiments.analysis.contrast`) for the comparisons' pairs and the
pooled effects' level contrasts (issue 31: the forest plot said description − reference at
−0.09 where the table said reference − description at +0.088)."""

from __future__ import annotations

import pytest

from experiments.analysis.compare import pairs_of
from experiments.analysis.contrast import Contrast, LevelOrder, all_pairs


def test_a_contrast_is_a_minus_b_and_says_so() -> None:
    c = Contrast("instruction=reference", "instruction=description")
    assert c.diff(0.7, 0.6) == pytest.approx(0.1)
    assert c.diff(None, 0.6) is None
    assert c.label == "instruction=reference − instruction=description"


def test_all_pairs_take_the_variant_listed_first_as_a() -> None:
    names = ["reference", "description", "base"]
    assert [(c.a, c.b) for c in all_pairs(names)] == [
        ("reference", "description"), ("reference", "base"), ("description", "base")
    ]  # fmt: skip
    assert pairs_of("all_pairs", names) == [(c.a, c.b) for c in all_pairs(names)]
    declared = [("description", "reference")]
    assert pairs_of(declared, names) == declared  # a declared pair as written


def test_a_level_contrast_takes_the_level_listed_first_not_the_first_by_name() -> None:
    order = LevelOrder.of(["instruction=reference,seed=0", "instruction=description,seed=0"])
    c = order.contrast("instruction", "description", "reference")
    assert (c.a, c.b) == ("reference", "description")
    # a level no variant lists comes after, by name
    assert order.contrast("instruction", "zeta", "alpha") == Contrast("alpha", "zeta")
    assert order.contrast("instruction", "zeta", "reference") == Contrast("reference", "zeta")


def test_a_declared_pair_of_one_axis_orients_its_pooled_effect() -> None:
    """The spec lists reference first but declares [description, reference]: the table's
    row is description − reference, so the pooled effect of the axis is too."""
    variants = ["instruction=reference,seed=0", "instruction=description,seed=0",
                "instruction=reference,seed=1", "instruction=description,seed=1"]  # fmt: skip
    pairs = [("instruction=description,seed=0", "instruction=reference,seed=0")]
    c = LevelOrder.of(variants, pairs).contrast("instruction", "reference", "description")
    assert (c.a, c.b) == ("description", "reference")
    # a pair that differs on two axes orients neither
    mixed = [("instruction=description,seed=1", "instruction=reference,seed=0")]
    c = LevelOrder.of(variants, mixed).contrast("instruction", "description", "reference")
    assert (c.a, c.b) == ("reference", "description")
    # names that are not axis=level pairs (an import) orient nothing and break nothing
    assert LevelOrder.of(["gpt prompt v1", "v2"], [("gpt prompt v1", "v2")]).rank == {}
