"""The statistics the calibrated comparison takes, in the one shape it reads them.

The estimators are `experiments.analysis.stats.ppi` (PPI++, power-tuned, cluster-robust) and
`experiments.analysis.stats.agreement` (Cohen's kappa); this module only turns their records
into the few fields a calibrated row carries, so a change of theirs is one edit here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from experiments.analysis.clusters import ClusterIds
from experiments.analysis.stats import agreement as ag
from experiments.analysis.stats import ppi
from experiments.calibrated.frames import FloatArray


@dataclass(frozen=True)
class Estimate:
    """An estimate with its interval; `valid` False when there are too few hand grades
    (`reason`, and `hand_needed` more would do)."""

    estimate: float
    low: float
    high: float
    se: float | None
    p_value: float | None
    lam: tuple[float, ...]
    effective_n: float | None
    method: str
    valid: bool
    reason: str | None
    hand_needed: int | None


@dataclass(frozen=True)
class Plain:
    """An interval that is not calibrated (judge-only or hand-only): None when not defined."""

    estimate: float | None
    low: float | None
    high: float | None
    p_value: float | None
    method: str | None


@dataclass(frozen=True)
class Kappa:
    kappa: float | None
    low: float | None
    high: float | None
    note: str | None


#: the smallest half-width `hand_needed` aims at for an undecided difference near 0
MIN_TARGET = 0.01


def _estimate(r: Any, to_decide: bool = False) -> Estimate:
    """`to_decide`: for a valid difference whose interval holds 0, `hand_needed` is how many
    more grades would narrow it to the current |estimate| (a plan, not a promise)."""
    lam = r.lambda_
    valid = bool(r.valid)
    needed = None if valid else int(r.needed)
    if valid and to_decide and r.low <= 0 <= r.high:
        needed = ppi.hand_grades_needed(r, target_half_width=max(abs(r.estimate), MIN_TARGET))
    return Estimate(
        estimate=float(r.estimate),
        low=float(r.low),
        high=float(r.high),
        se=None if r.se is None else float(r.se),
        p_value=getattr(r, "p_value", None),
        lam=tuple(float(x) for x in lam) if isinstance(lam, tuple) else (float(lam),),
        effective_n=getattr(r, "effective_n", None),
        method=str(r.method),
        valid=valid,
        reason=None if valid else str(r.reason),
        hand_needed=needed,
    )


def mean(judge: FloatArray, hand: FloatArray, clusters: ClusterIds, level: float) -> Estimate:
    """The PPI++ mean of the criterion over all rows."""
    return _estimate(ppi.ppi_mean(judge, hand, clusters=clusters, level=level))


def paired_difference(
    judge_a: FloatArray,
    hand_a: FloatArray,
    judge_b: FloatArray,
    hand_b: FloatArray,
    clusters: ClusterIds,
    level: float,
) -> Estimate:
    """The PPI++ paired difference A − B."""
    r = ppi.ppi_paired_difference(judge_a, hand_a, judge_b, hand_b, clusters=clusters, level=level)
    return _estimate(r, to_decide=True)


def hand_difference(
    hand_a: FloatArray, hand_b: FloatArray, clusters: ClusterIds, level: float
) -> Plain:
    """The hand grades alone (rows graded on both, else unpaired)."""
    if np.sum(~np.isnan(hand_a)) < 2 or np.sum(~np.isnan(hand_b)) < 2:
        return Plain(None, None, None, None, None)
    r = ppi.hand_only_difference(hand_a, hand_b, clusters=clusters, level=level)
    if not getattr(r, "valid", True):
        return Plain(None, None, None, None, str(r.method))
    return Plain(float(r.estimate), float(r.low), float(r.high), r.p_value, str(r.method))


def judge_difference(
    judge_a: FloatArray, judge_b: FloatArray, clusters: ClusterIds, level: float
) -> Plain:
    """The judge's scores alone: a judge score, never the criterion."""
    r = ppi.judge_only_difference(judge_a, judge_b, clusters=clusters, level=level)
    return Plain(float(r.estimate), float(r.low), float(r.high), r.p_value, str(r.method))


def judge_mean(judge: FloatArray, clusters: ClusterIds, level: float) -> Plain:
    """The judge's mean score with a cluster-robust normal interval (judge score only)."""
    n = len(judge)
    if n == 0:
        return Plain(None, None, None, None, None)
    m = float(np.mean(judge))
    k = int(clusters.max()) + 1 if n else 0
    sums = np.zeros(k)
    np.add.at(sums, clusters, judge - m)
    se = float(np.sqrt(np.sum(sums**2) * k / max(k - 1, 1))) / n
    z = float(sps.norm.ppf(0.5 + level / 2))
    return Plain(
        m, max(0.0, m - z * se), min(1.0, m + z * se), None, "judge score, cluster-robust normal"
    )


def kappa(judge: FloatArray, hand: FloatArray, level: float) -> Kappa:
    """Cohen's kappa of judge against hand grades, with its interval."""
    r = ag.cohen_kappa(judge, hand, level=level)
    return Kappa(r.kappa, r.low, r.high, None if r.valid else r.reason)


def fisher_p(first: tuple[int, int], second: tuple[int, int]) -> float:
    """Two-sided Fisher's exact test of two (agree, disagree) counts."""
    return float(sps.fisher_exact([list(first), list(second)]).pvalue)
