"""Cohen's kappa against a hand computation and sklearn; undefined cases say so; agreement
per grader pair does not depend on the order of the rows."""

from __future__ import annotations

import random

import pytest
from sklearn.metrics import cohen_kappa_score

from experiments.analysis.stats.agreement import cohen_kappa
from experiments.grading.agreement import grader_agreement
from experiments.grading.store import HandGrade


def test_kappa_by_hand() -> None:
    # table [[20, 5], [10, 15]] of 50 items: p_o = 35/50 = 0.7,
    # p_e = (25/50)(30/50) + (25/50)(20/50) = 0.3 + 0.2 = 0.5, kappa = 0.2 / 0.5 = 0.4
    a = [1] * 25 + [0] * 25
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    k = cohen_kappa(a, b)
    assert k.kappa == pytest.approx(0.4) and k.agreement == pytest.approx(0.7)
    assert k.valid and k.low is not None and k.high is not None
    assert k.low < 0.4 < k.high and k.low >= -1 and k.high <= 1


@pytest.mark.parametrize("seed", range(5))
def test_kappa_matches_sklearn(seed: int) -> None:
    rng = random.Random(seed)
    a = [rng.randint(0, 1) for _ in range(60)]
    b = [x if rng.random() < 0.75 else 1 - x for x in a]
    assert cohen_kappa(a, b).kappa == pytest.approx(cohen_kappa_score(a, b))


def test_perfect_agreement_still_has_an_interval_below_one() -> None:
    a = [1, 0] * 10
    k = cohen_kappa(a, a)
    assert k.kappa == pytest.approx(1.0) and k.high == 1.0
    assert k.low is not None and k.low < 0.9  # 20 items prove no perfect agreement


def test_a_grader_with_one_grade_gives_no_kappa() -> None:
    k = cohen_kappa([1] * 30, [1] * 20 + [0] * 10)
    assert k.kappa is None and not k.valid and "grader A gave the same grade" in k.reason
    assert k.agreement == pytest.approx(20 / 30)
    assert cohen_kappa([1], [1]).kappa is None
    few = cohen_kappa([1, 0, 1, 0], [1, 0, 0, 0])
    assert few.kappa is not None and few.low is None and not few.valid


def _grades(rows: list[tuple[str, int, int]]) -> list[HandGrade]:
    out = []
    for index, ga, gb in rows:
        for grader, g in (("ann", ga), ("bob", gb)):
            out.append(HandGrade("t" * 64, index, "correctness", g, grader, "s", index,
                                 "h", 0, "2025-01-01T00:00:00+00:00"))  # fmt: skip
    return out


def test_agreement_is_order_invariant_and_keeps_latest_regrade() -> None:
    rng = random.Random(3)
    rows = [(str(i), rng.randint(0, 1), rng.randint(0, 1)) for i in range(40)]
    grades = _grades(rows)
    base = grader_agreement(grades)
    shuffled = list(grades)
    rng.shuffle(shuffled)  # each (grader, row) graded once: order cannot matter
    assert [r.to_dict() for r in grader_agreement(shuffled)] == [r.to_dict() for r in base]
    (pair,) = base
    assert (pair.grader_a, pair.grader_b, pair.n) == ("ann", "bob", 40)
    assert pair.kappa.kappa == pytest.approx(
        cohen_kappa_score([a for _, a, _ in rows], [b for _, _, b in rows])
    )
    # a later re-grade by ann replaces her earlier grade of that row
    regrade = HandGrade("t" * 64, "0", "correctness", 1 - rows[0][1], "ann", "s", "0", "h", 0, "x")
    (after,) = grader_agreement([*grades, regrade])
    changed = [(i, 1 - a if i == "0" else a, b) for i, a, b in rows]
    assert after.kappa.kappa == pytest.approx(
        cohen_kappa_score([a for _, a, _ in changed], [b for _, _, b in changed])
    )
