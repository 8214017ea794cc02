"""Cohen's kappa against a hand computation and sklearn; undefined cases say so; agreement
per grader pair does not depend on the order of the rows."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy.stats import multinomial
from sklearn.metrics import cohen_kappa_score

from experiments.analysis.stats.agreement import MIN_N, cohen_kappa
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
    a = [1, 0] * 15
    k = cohen_kappa(a, a)
    assert k.kappa == pytest.approx(1.0) and k.high == 1.0  # the interval holds its estimate
    assert k.low is not None and k.low < 0.9  # 30 items prove no perfect agreement


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


# --- the interval's coverage (benchmarks/kappa_coverage.py measures the whole grid) ---


def _cell_probs(q: float, kappa: float) -> np.ndarray:
    """Both graders give a 1 with probability q; Cohen's kappa of this law is `kappa`."""
    pq = q * (1 - q)
    return np.array([q * q + kappa * pq, pq * (1 - kappa), pq * (1 - kappa),
                     (1 - q) ** 2 + kappa * pq])  # fmt: skip


def _exact_coverage(n: int, q: float, kappa: float) -> tuple[float, float]:
    """Coverage among the tables that print an interval, and the share that print one: every
    table of n items with probability above 1e-7, weighted by it (no simulation error; the
    interval's own draws use a fixed seed)."""
    p = _cell_probs(q, kappa)
    shown = covered = total = 0.0
    for n11 in range(n + 1):
        for n10 in range(n + 1 - n11):
            for n01 in range(n + 1 - n11 - n10):
                t = (n11, n10, n01, n - n11 - n10 - n01)
                w = float(multinomial.pmf(t, n, p))
                if w < 1e-7:
                    continue
                total += w
                a = [1] * (t[0] + t[1]) + [0] * (t[2] + t[3])
                b = [1] * t[0] + [0] * t[1] + [1] * t[2] + [0] * t[3]
                e = cohen_kappa(a, b)
                if e.low is None or e.high is None:
                    continue
                shown += w
                covered += w * (e.low <= kappa <= e.high)
    return covered / shown, shown / total


@pytest.mark.parametrize(
    ("n", "q", "kappa"),
    [
        (30, 0.8, 0.2),  # the previous interval (Wald on log(1 - kappa)) covered 0.895 here
        (50, 0.9, 0.2),  # and 0.862 here
        (30, 0.7, 0.8),  # near the ceiling
    ],
)
def test_interval_covers_93_to_97_percent_where_printed(n: int, q: float, kappa: float) -> None:
    coverage, printed = _exact_coverage(n, q, kappa)
    assert printed > 0.9
    assert 0.93 <= coverage <= 0.97, (n, q, kappa, coverage)


def test_few_items_withhold_the_interval_and_say_how_many_are_needed() -> None:
    k = cohen_kappa([1, 0] * 10, [1, 0] * 9 + [0, 1])  # 20 items
    assert k.kappa is not None and k.low is None and k.high is None and not k.valid
    assert k.items_needed == MIN_N and f"at least {MIN_N}" in k.reason
    # 40 items, grader A gave a 0 once: kappa rests on one item
    rare = cohen_kappa([1] * 39 + [0], [1] * 37 + [0, 0, 0])
    assert rare.kappa is not None and rare.low is None and not rare.valid
    assert rare.items_needed == 80 and "rarer grade only 1 time" in rare.reason
    assert "80 shared items" in rare.reason


def test_interval_is_deterministic_symmetric_and_holds_its_estimate() -> None:
    rng = random.Random(7)
    a = [rng.randint(0, 1) for _ in range(60)]
    b = [x if rng.random() < 0.8 else 1 - x for x in a]
    k = cohen_kappa(a, b)
    assert k.valid and k.low is not None and k.high is not None and k.kappa is not None
    assert k.low <= k.kappa <= k.high
    assert cohen_kappa(a, b) == k  # the same grades, the same interval
    swapped = cohen_kappa(b, a)
    assert (swapped.low, swapped.high) == (k.low, k.high)
    order = list(range(60))
    rng.shuffle(order)
    shuffled = cohen_kappa([a[i] for i in order], [b[i] for i in order])
    assert (shuffled.low, shuffled.high) == (k.low, k.high)
    assert "Jeffreys posterior" in k.method and "withheld" in k.method
