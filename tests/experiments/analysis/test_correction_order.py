"""The correction and the recommendations are attached by position (`dataclasses.replace` on
frozen records, issue 32): each row must get its own corrected p and line whatever the order
of the table, as the old in-place mutation gave them."""

from __future__ import annotations

import random

import pytest

from experiments.analysis import compare as cmp
from experiments.analysis import decision
from experiments.analysis.records import Comparison


def _table(seed: int) -> list[Comparison]:
    rng = random.Random(seed)
    rows = []
    for model in ("m1", "m2"):
        for task in ("t1", "t2", "t3"):
            for a, b in (("v1", "v0"), ("v2", "v0")):
                if rng.random() < 0.15:  # an incomplete arm: untested, in no family of tests
                    rows.append(
                        Comparison(a, b, "v1: incomplete", "accuracy", model=model, task=task)
                    )
                    continue
                sa, sb = rng.choice([0.5, 0.6, 0.7, 0.8]), rng.choice([0.5, 0.6, 0.7, 0.8])
                rows.append(
                    Comparison(
                        a, b, "tested", "accuracy", score_a=sa, score_b=sb,
                        statistic=round(sa - sb, 6), n=40,
                        p_value=rng.choice([0.0005, 0.004, 0.01, 0.03, 0.2, 0.9]),
                        model=model, task=task,
                    )
                )  # fmt: skip
    return rows


def _run(table: list[Comparison], final: bool) -> dict[tuple[str, ...], dict[str, object]]:
    corrected = cmp.correct(table, "holm")
    across = cmp.across_tasks(corrected, kind="pairs", test="t", all_tasks=["t1", "t2", "t3"])
    rows, tests = decision.annotate(corrected, across, "holm", final)
    out: dict[tuple[str, ...], dict[str, object]] = {
        (str(r.model), str(r.task), r.a, r.b): r.to_dict() for r in rows
    }
    # an across-task row follows the table's task order (its list, its sums' last bits), as
    # before the records: only its call is compared
    out |= {
        (t.model, "across", t.a, t.b): {"action": t.recommendation.action}
        for t in tests
        if t.recommendation
    }
    return out


@pytest.mark.parametrize("final", [True, False])
@pytest.mark.parametrize("seed", range(5))
def test_shuffled_table_gives_every_row_the_same_correction_and_line(
    seed: int, final: bool
) -> None:
    table = _table(seed)
    shuffled = list(table)
    random.Random(seed + 100).shuffle(shuffled)
    assert _run(shuffled, final) == _run(table, final)


def test_each_row_gets_its_own_holm_p() -> None:
    """By hand: Holm over the tested p-values 0.01, 0.04, 0.03 (the untested row in none)."""
    rows = [
        Comparison("a", "b", "tested", "accuracy", statistic=0.1, p_value=0.04, task="t2"),
        Comparison("a", "b", "x: incomplete", "accuracy", task="t4"),
        Comparison("a", "b", "tested", "accuracy", statistic=0.1, p_value=0.01, task="t1"),
        Comparison("a", "b", "tested", "accuracy", statistic=0.1, p_value=0.03, task="t3"),
    ]
    got = {r.task: (r.p_corrected, r.family_size) for r in cmp.correct(rows, "holm")}
    # sorted 0.01, 0.03, 0.04 -> 3*0.01, max(0.03, 2*0.03), max(0.06, 1*0.04)
    assert got == {
        "t1": (pytest.approx(0.03), 3),
        "t3": (pytest.approx(0.06), 3),
        "t2": (pytest.approx(0.06), 3),
        "t4": (None, None),
    }
