"""Cohen's kappa between two graders, with a large-sample interval.

kappa = (p_o - p_e) / (1 - p_e): observed agreement beyond what the two graders' own rates of
each grade would give by chance. The interval is Wald's on the large-sample standard error of
Fleiss, Cohen & Everitt (1969) (the non-null variance, the one for an interval rather than a
test of kappa = 0), clipped to [-1, 1].

Coverage of the 95% interval, by simulation (binary grades, both graders' rate of 1 = 0.6,
`benchmarks`-style check in tests/experiments/grading/test_kappa_coverage.py, 2000 draws per
cell): see `COVERAGE_NOTE`. Below `MIN_N` items the interval is not given (too few to trust).

Undefined cases say so (`valid` False, `kappa` None) rather than print a number: fewer than 2
items, or a grader who gave one grade to every item (the chance agreement is then the observed
agreement's bound and kappa is 0 or 0/0 whatever the other grader did, which reads as "no
agreement" when it is no information).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

METHOD = "Cohen's kappa, Wald interval on the Fleiss-Cohen-Everitt (1969) large-sample SE"
MIN_N = 10
COVERAGE_NOTE = (
    "95% interval coverage by simulation (2000 draws per cell, binary grades, rate of 1 = 0.6): "
    "see tests/experiments/grading/test_kappa_coverage.py for the grid"
)


@dataclass(frozen=True)
class KappaEstimate:
    """Cohen's kappa of two graders on the same `n` items, with its interval."""

    kappa: float | None
    low: float | None
    high: float | None
    n: int
    agreement: float | None  # raw agreement p_o
    se: float | None
    level: float
    method: str
    valid: bool
    reason: str


def cohen_kappa(
    a: Sequence[object] | np.ndarray,
    b: Sequence[object] | np.ndarray,
    *,
    level: float = 0.95,
) -> KappaEstimate:
    """Cohen's kappa of two graders' grades of the same items (`a[i]`, `b[i]` of item i).

    Grades are any hashable categories (0/1 here). The result is invariant to the order of
    the items and to swapping the graders.
    """
    xa, xb = list(a), list(b)
    if len(xa) != len(xb):
        raise ValueError(f"two graders' grades differ in length ({len(xa)} vs {len(xb)})")
    n = len(xa)
    if not 0 < level < 1:
        raise ValueError(f"level {level} is not between 0 and 1")
    if n < 2:
        return KappaEstimate(None, None, None, n, None, None, level, METHOD, False,
                             f"{n} overlapping item(s): kappa needs at least 2")  # fmt: skip
    cats = sorted(set(xa) | set(xb), key=repr)
    pos = {c: k for k, c in enumerate(cats)}
    table = np.zeros((len(cats), len(cats)))
    for x, y in zip(xa, xb, strict=True):
        table[pos[x], pos[y]] += 1
    p = table / n
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    p_o = float(np.trace(p))
    p_e = float(rows @ cols)
    one_a = len(set(xa)) == 1
    one_b = len(set(xb)) == 1
    if one_a or one_b:
        who = "both graders" if one_a and one_b else "grader A" if one_a else "grader B"
        return KappaEstimate(None, None, None, n, p_o, None, level, METHOD, False,
                             f"{who} gave the same grade to all {n} items: kappa is undefined "
                             "(no variation to agree on); raw agreement is shown")  # fmt: skip
    kappa = (p_o - p_e) / (1 - p_e)
    se = _fce_se(p, rows, cols, p_o, p_e, n)
    if n < MIN_N:
        why = f"only {n} overlapping items: the interval needs at least {MIN_N}"
        return KappaEstimate(kappa, None, None, n, p_o, se, level, METHOD, False, why)
    z = float(stats.norm.ppf(0.5 + level / 2))
    low, high = max(-1.0, kappa - z * se), min(1.0, kappa + z * se)
    return KappaEstimate(kappa, low, high, n, p_o, se, level, METHOD, True, "")


def _fce_se(
    p: np.ndarray, rows: np.ndarray, cols: np.ndarray, p_o: float, p_e: float, n: int
) -> float:
    """Fleiss, Cohen & Everitt (1969), the large-sample SE of kappa (not under kappa = 0)."""
    k = len(rows)
    diag = sum(p[i, i] * ((1 - p_e) - (cols[i] + rows[i]) * (1 - p_o)) ** 2 for i in range(k))
    off = (1 - p_o) ** 2 * sum(
        p[i, j] * (cols[i] + rows[j]) ** 2 for i in range(k) for j in range(k) if i != j
    )
    var = (diag + off - (p_o * p_e - 2 * p_e + p_o) ** 2) / (n * (1 - p_e) ** 4)
    return math.sqrt(max(var, 0.0))


__all__ = ["COVERAGE_NOTE", "METHOD", "MIN_N", "KappaEstimate", "cohen_kappa"]
