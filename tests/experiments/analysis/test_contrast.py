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


def test_a_pooled_effect_of_variants_not_a_full_grid_has_the_table_rows_sign() -> None:
    """An import's variants in name order: ``instr=b`` is listed first overall (fmt=1 has only
    b), but the only pair contrasting the two levels alone is (fmt=2,instr=a; fmt=2,instr=b),
    so the table's row is a − b and the pooled effect must be a − b too (it said b − a)."""
    variants = ["fmt=1,instr=b", "fmt=2,instr=a", "fmt=2,instr=b"]
    row = next(c for c in all_pairs(variants) if {c.a, c.b} == set(variants[1:]))
    assert (row.a, row.b) == ("fmt=2,instr=a", "fmt=2,instr=b")
    order = LevelOrder.of(variants)
    assert order.contrast("instr", "b", "a") == Contrast("a", "b")
    # a declared pair still wins over the listed order
    declared = LevelOrder.of(variants, [("fmt=2,instr=b", "fmt=2,instr=a")])
    assert declared.contrast("instr", "a", "b") == Contrast("b", "a")
    # a full grid: the level listed first, as before, whatever the axis order
    grid = ["x=2,y=q", "x=2,y=p", "x=1,y=q", "x=1,y=p"]
    assert LevelOrder.of(grid).contrast("y", "p", "q") == Contrast("q", "p")
    assert LevelOrder.of(grid).contrast("x", "1", "2") == Contrast("2", "1")


def test_a_pooled_effect_of_an_import_like_order_agrees_with_the_tables_sign() -> None:
    """End to end: the sensitivity report's pooled effect of instr over two tasks whose
    variants are not a full grid is a − b, its per-task effects the score differences."""
    from experiments.analysis import sensitivity as S
    from tests.experiments.analysis.test_sensitivity import _trial

    hits = {"fmt=1,instr=b": [1, 0] * 10, "fmt=2,instr=a": [1] * 16 + [0] * 4,
            "fmt=2,instr=b": [1] * 8 + [0] * 12}  # fmt: skip
    trials = [_trial(t, "m", v, h) for t in ("t1", "t2") for v, h in hits.items()]
    rep = S.sensitivity_report(trials, n_resamples=200, order=list(hits))
    (row,) = [r for r in rep.meta_analysis if r["axis"] == "instr"]
    assert (row["a"], row["b"]) == ("instr=a", "instr=b")
    by = {(t.task, t.variant): float(t.score or 0.0) for t in trials}
    for task, effect in zip(row["tasks"], row["effects"], strict=True):
        assert effect == pytest.approx(by[(task, "fmt=2,instr=a")] - by[(task, "fmt=2,instr=b")])
    assert row["pooled"] > 0
