"""Prediction-powered inference (PPI++) of a variant's mean hand grade and of paired differences.

A judge scores every row (f_i in [0, 1]); a person grades a uniformly random subset (a prefix
of a seeded shuffled sheet). Judge means alone are biased by however the judge errs, and the
bias can differ between variants (one prompt's style pleases it): PPI combines the two so the
estimate stays unbiased for the mean TRUE grade while the judge narrows the interval.

The estimator (Angelopoulos, Duchi, Zrnic 2024, "PPI++"), in influence-function (IPW) form per
row, which fits our sampling (the graded rows are a random subset OF the N judged rows, not a
separate sample) and allows known per-row inclusion probabilities pi_i (active sampling):

    psi_i = lambda f_i + c + (L_i / pi_i) (Y_i - lambda f_i - c),   theta_hat = mean_i psi_i

L_i = 1 where row i is hand-graded. (lambda, c) are the inverse-probability-weighted least
squares fit of Y on f over the graded rows, so the graded residuals sum to zero and theta_hat
= mean(lambda f) + c (for uniform sampling: the judge mean over all rows plus the graded rows'
mean rectifier Y - lambda f, PPI++'s form). Any fixed lambda gives an unbiased estimator; the
fitted one converges to the variance-minimising lambda* = Cov(Y, f) / Var(f) (our sampling:
Var = Var(Y)/N + (1/n - 1/N) Var(Y - lambda f), whose first term does not involve lambda,
so no (1 + n/N) shrinkage as in PPI++'s separate-sample case), clipped to [0, 1] (1: classical
PPI, 0: hand grades alone). The variance is the cluster-robust variance of psi's mean; it
contains the covariance between the all-rows judge mean and the graded rectifier.

Small samples (measured by benchmarks/ppi_coverage.py): the graded residuals' variance is
inflated by n_h / (n_h - 2) (lambda and c were fitted on them), floored at q(1 - q) / n_h with
q = 1 / (n_h + 2) (near the ceiling every sampled grade may be 1 and the naive variance 0),
and the interval uses Student t quantiles with n_h - 2 degrees of freedom, n_h the number of
graded clusters. Below `MIN_HAND` graded clusters per variant no CLT interval is trustworthy:
the result says `valid=False`, why, and how many more grades it needs.

Paired differences subtract A's psi_i from B's row by row (rows paired by position), so A and
B may be graded on different, overlapping or the same rows. The hand-only interval is the
same estimator with lambda = 0 (every hand grade, nothing from the judge); the judge-only one
is the plain judge mean difference, biased by construction, labelled as judge scores.

An unparsed judge reply (NaN in `judge`) scores `UNPARSED_JUDGE_SCORE`: any fixed value keeps
the estimate unbiased (the rectifier corrects it), it only costs width.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from experiments.analysis.clusters import checked, sums
from promptlib.errors import WorkbenchError

FloatArray = NDArray[np.float64]
Clusters = Sequence[Hashable] | NDArray[Any] | None

UNPARSED_JUDGE_SCORE = 0.5  # an unparsed judge reply's score: unbiased for any fixed value
MIN_HAND = 10  # graded clusters per variant below which no interval is given (benchmark)
_FITTED = 2  # parameters fitted on the graded rows when lambda is tuned: lambda and c

PPI_METHOD = "PPI++ (power-tuned lambda)"
HAND_METHOD = "hand grades only (inverse-probability weighted mean)"
JUDGE_METHOD = "judge scores only (NOT calibrated: biased wherever the judge errs)"


class PPIInputError(WorkbenchError, ValueError):
    """Judge scores, hand grades, inclusion probabilities or clusters that cannot be used."""


@dataclass(frozen=True)
class PPIEstimate:
    """One variant's mean true grade, estimated from hand grades and judge scores.

    `low`/`high` are NaN when `valid` is False (`reason` says why, `needed` how many more
    hand grades make it valid). `lambda_` is the power tuning (0: hand grades alone, 1:
    classical PPI); `effective_n` the number of hand grades alone that would give the same
    variance. `var_rows`/`var_rect` split the variance into the part more grades cannot
    shrink (the rows' own sampling) and the graded rectifier's (for `hand_grades_needed`)."""

    estimate: float
    low: float
    high: float
    level: float
    se: float
    df: float
    n_rows: int
    n_hand: int
    n_clusters: int
    lambda_: float
    effective_n: float
    method: str
    valid: bool
    reason: str
    needed: int
    judge_mean: float
    n_unparsed: int
    var_rows: float
    var_rect: float
    floored: bool

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


@dataclass(frozen=True)
class PPIDifference:
    """theta_A - theta_B over paired rows, with a two-sided p-value of no difference.

    `n_hand` counts hand-graded clusters over both variants (`n_hand_a`, `n_hand_b`,
    `n_hand_both` on rows graded for both); `lambda_` is (lambda_A, lambda_B). `effective_n`:
    the hand grades that alone, on the same rows and pairing, would give the same variance
    (`_effective_n`). Fields otherwise as `PPIEstimate`."""

    estimate: float
    low: float
    high: float
    p_value: float
    level: float
    se: float
    df: float
    n_rows: int
    n_hand: int
    n_hand_a: int
    n_hand_b: int
    n_hand_both: int
    n_clusters: int
    lambda_: tuple[float, float]
    effective_n: float
    method: str
    valid: bool
    reason: str
    needed: int
    judge_difference: float
    var_rows: float
    var_rect: tuple[float, float]
    floored: bool

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


@dataclass(frozen=True)
class _Arm:
    """One variant's fitted pieces: psi per row, its variance form, and the counts."""

    psi: FloatArray  # per-row influence terms; mean = the estimate
    judge_part: FloatArray  # lambda f_i + c
    rect_part: FloatArray  # (L_i / pi_i) R_i, inflated for the fitted parameters
    lam: float
    n_hand: int  # graded clusters
    labelled: NDArray[np.bool_]
    var_y: float  # the graded rows' variance of Y (floored), for effective_n
    floor: float  # the rectifier variance floor q(1 - q) / n_h
    judge_mean: float
    n_unparsed: int


def _cluster_ids(clusters: Clusters, n: int) -> tuple[NDArray[np.intp], int]:
    """Cluster ids 0..G-1 (integer arrays take numpy's fast path; any keys otherwise)."""
    if isinstance(clusters, np.ndarray) and clusters.dtype.kind in "iu":
        if len(clusters) != n:
            raise PPIInputError(f"clusters has {len(clusters)} entries for {n} rows")
        _, inverse = np.unique(clusters, return_inverse=True)
        ids = np.asarray(inverse, dtype=np.intp).ravel()
    else:
        ids = checked(clusters, n)
    return ids, int(ids.max()) + 1


def _t_quantile(level: float, df: float) -> float:
    return float(special.stdtrit(df, 0.5 + level / 2))


def _level(level: float) -> float:
    if not 0 < level < 1:
        raise PPIInputError(f"level must be between 0 and 1 (e.g. 0.95), not {level}")
    return float(level)


def _vector(values: ArrayLike, name: str, n: int | None = None) -> FloatArray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or not len(arr):
        raise PPIInputError(f"{name} must be a non-empty 1-d array of scores, one per row")
    if n is not None and len(arr) != n:
        raise PPIInputError(f"{name} has {len(arr)} rows, the judge scores {n}: align them by row")
    return arr


def _inclusion(pi: ArrayLike | None, labelled: NDArray[np.bool_], name: str) -> FloatArray:
    """Per-row inclusion probabilities: given, or n/N (a uniform random subset)."""
    n = len(labelled)
    if pi is None:
        return np.full(n, max(int(labelled.sum()), 1) / n)
    p = _vector(pi, name, n)
    if np.any(~np.isfinite(p)) or np.any(p <= 0) or np.any(p > 1):
        raise PPIInputError(f"{name}: inclusion probabilities must be in (0, 1] for every row")
    return p


def _fit_arm(
    judge: ArrayLike,
    hand: ArrayLike,
    ids: NDArray[np.intp],
    n_clusters: int,
    *,
    pi: ArrayLike | None,
    lam: float | None,
    label: str,
) -> _Arm:
    f = _vector(judge, f"judge scores{label}")
    y = _vector(hand, f"hand grades{label}", len(f))
    if len(ids) != len(f):
        raise PPIInputError(f"clusters has {len(ids)} entries for {len(f)} rows{label}")
    unparsed = np.isnan(f)
    f = np.where(unparsed, UNPARSED_JUDGE_SCORE, f)
    if np.any(f < 0) or np.any(f > 1):
        raise PPIInputError(f"judge scores{label} must lie in [0, 1] (NaN: unparsed)")
    labelled = ~np.isnan(y)
    if np.any(y[labelled] < 0) or np.any(y[labelled] > 1):
        raise PPIInputError(f"hand grades{label} must lie in [0, 1] (NaN: not graded)")
    p = _inclusion(pi, labelled, f"inclusion probabilities{label}")
    n_hand = int(np.unique(ids[labelled]).size)
    w = np.where(labelled, 1.0 / p, 0.0)
    yl = np.where(labelled, y, 0.0)
    if n_hand == 0:
        lam_hat, c = 0.0, float(np.mean(f))  # no hand grade: the point estimate is the judge's
    else:
        sw = w.sum()
        fbar = float((w * f).sum() / sw)
        ybar = float((w * yl).sum() / sw)
        if lam is None:
            sxx = float((w * (f - fbar) ** 2).sum())
            sxy = float((w * (f - fbar) * (yl - ybar)).sum())
            lam_hat = float(np.clip(sxy / sxx, 0.0, 1.0)) if sxx > 1e-12 else 0.0
        else:
            lam_hat = float(lam)
        c = ybar - lam_hat * fbar
    resid = np.where(labelled, yl - lam_hat * f - c, 0.0)
    fitted = _FITTED if lam is None else 1
    inflate = n_hand / (n_hand - fitted) if n_hand > fitted else math.inf
    judge_part = lam_hat * f + c
    rect = w * resid
    psi = judge_part + rect
    q = 1.0 / (n_hand + 2)
    if n_hand:
        sw = w.sum()
        ybar = float((w * yl).sum() / sw)
        var_y = float((w * (yl - ybar) ** 2).sum() / sw) * (n_hand / max(n_hand - 1, 1))
    else:
        var_y = 0.0
    return _Arm(
        psi=psi,
        judge_part=judge_part,
        rect_part=rect * math.sqrt(inflate) if math.isfinite(inflate) else rect,
        lam=lam_hat,
        n_hand=n_hand,
        labelled=labelled,
        var_y=max(var_y, q * (1 - q)),
        floor=q * (1 - q) / max(n_hand, 1),
        judge_mean=float(np.mean(f)),
        n_unparsed=int(unparsed.sum()),
    )


def _cluster_var(values: FloatArray, ids: NDArray[np.intp], n_clusters: int) -> float:
    """Cluster-robust variance of the mean of `values` (G / (G - 1) small-sample factor)."""
    n = len(values)
    if n_clusters < 2:
        return math.nan
    dev = sums(values - values.mean(), ids, n_clusters)
    return float(n_clusters / (n_clusters - 1) * (dev**2).sum() / n**2)


def _method(base: str, what: str, clustered: bool) -> str:
    return f"{base}, {what}, " + ("cluster-robust by prompt" if clustered else "rows independent")


def _needed_for_validity(
    arms: Sequence[_Arm], names: Sequence[str], clusters: int
) -> tuple[int, str]:
    """More graded clusters for a valid interval, and why; said to be out of reach when the
    rows hold fewer than `MIN_HAND` clusters (texts) at all."""
    short = [(name, arm.n_hand) for name, arm in zip(names, arms, strict=True)]
    need = sum(max(0, MIN_HAND - n) for _, n in short)
    if not need:
        return 0, ""
    parts = ", ".join(f"{n} for {name}" for name, n in short if n < MIN_HAND)
    if clusters < MIN_HAND:
        return need, (
            f"too few rows for a valid interval: {clusters} distinct rows (texts), and at "
            f"least {MIN_HAND} graded per variant are needed ({parts} graded); evaluate more "
            "rows (a larger limit), then grade them"
        )
    return need, (
        f"too few hand grades for a valid interval ({parts}; at least {MIN_HAND} graded "
        f"rows per variant are needed): grade {need} more"
    )


MEAN_BOUNDS = (0.0, 1.0)  # a share of rows passing a criterion
DIFF_BOUNDS = (-1.0, 1.0)  # a difference of two such shares


def _interval(
    estimate: float, var: float, df: float, level: float, bounds: tuple[float, float]
) -> tuple[float, float, float, float]:
    """se, the t interval cut to the parameter's range `bounds` (the truth lies in it, so
    the cut loses no coverage; a share's interval past 0 or 1 would say an impossible
    value), and the two-sided p-value of 0."""
    se = math.sqrt(var)
    tq = _t_quantile(level, df)
    stat = abs(estimate) / se if se > 0 else math.inf
    p = float(2 * special.stdtr(df, -stat)) if se > 0 else (0.0 if estimate else 1.0)
    low, high = bounds
    return se, max(estimate - tq * se, low), min(estimate + tq * se, high), p


def _effective_n(n_hand: int, var: float, lam: float | None, hand_only: Callable[[], Any]) -> float:
    """The hand grades the estimate is worth: the graded clusters that, read alone by the
    same estimator on the same design (lambda 0: the same rows, pairing and clusters), give
    its variance: n_hand x Var(hand only) / Var(this one). Below n_hand the judge cost
    width (fitting lambda on few rows); the pairing's own gain is not counted as the judge's."""
    if not (var > 0 and math.isfinite(var)):
        return math.nan
    if lam == 0:
        return float(n_hand)
    alone = hand_only().se ** 2
    return float(n_hand * alone / var) if math.isfinite(alone) else math.nan


def ppi_mean(
    judge: ArrayLike,
    hand: ArrayLike,
    *,
    clusters: Clusters = None,
    level: float = 0.95,
    pi: ArrayLike | None = None,
    lam: float | None = None,
) -> PPIEstimate:
    """A variant's mean true grade by PPI++: `judge` on every row, `hand` NaN where ungraded.

    `pi`: per-row inclusion probabilities when the graded rows were not a uniform random
    subset (active sampling); `lam`: a fixed lambda instead of the power-tuned one (0: hand
    grades alone)."""
    level = _level(level)
    n = len(_vector(judge, "judge scores"))
    ids, g = _cluster_ids(clusters, n)
    arm = _fit_arm(judge, hand, ids, g, pi=pi, lam=lam, label="")
    estimate = float(arm.psi.mean())
    var_rect = _cluster_var(arm.rect_part, ids, g)
    var_all = _cluster_var(arm.judge_part + arm.rect_part, ids, g)
    var_rows = max(var_all - var_rect, 0.0) if math.isfinite(var_all) else math.nan
    floored = var_rect < arm.floor
    var = var_all + max(arm.floor - var_rect, 0.0)
    fitted = _FITTED if lam is None else 1
    df = float(max(min(arm.n_hand - fitted, g - 1), 1))
    needed, reason = _needed_for_validity([arm], ["the variant"], g)
    valid = not needed and math.isfinite(var) and var > 0
    if valid:
        se, low, high, _ = _interval(estimate, var, df, level, MEAN_BOUNDS)
    else:
        se = math.sqrt(var) if math.isfinite(var) else math.nan
        low = high = math.nan
        reason = reason or "no variance estimate (fewer than two clusters of rows)"
    base = HAND_METHOD if lam == 0 else PPI_METHOD if lam is None else f"PPI (lambda={lam})"
    return PPIEstimate(
        estimate=estimate,
        low=low,
        high=high,
        level=level,
        se=se,
        df=df,
        n_rows=n,
        n_hand=arm.n_hand,
        n_clusters=g,
        lambda_=arm.lam,
        effective_n=_effective_n(
            arm.n_hand, var, lam, lambda: ppi_mean(judge, hand, clusters=clusters, pi=pi, lam=0.0)
        ),
        method=_method(base, "one variant", clusters is not None),
        valid=valid,
        reason=reason,
        needed=needed,
        judge_mean=arm.judge_mean,
        n_unparsed=arm.n_unparsed,
        var_rows=var_rows,
        var_rect=max(var_rect, arm.floor),
        floored=bool(floored),
    )


def ppi_paired_difference(
    judge_a: ArrayLike,
    hand_a: ArrayLike,
    judge_b: ArrayLike,
    hand_b: ArrayLike,
    *,
    clusters: Clusters = None,
    level: float = 0.95,
    pi_a: ArrayLike | None = None,
    pi_b: ArrayLike | None = None,
    lam: float | None = None,
) -> PPIDifference:
    """theta_A - theta_B by PPI++ on rows paired by position (A and B each power-tuned).

    A and B may be hand-graded on different rows; `pi_a`/`pi_b` as `ppi_mean`'s `pi`."""
    level = _level(level)
    n = len(_vector(judge_a, "judge scores of A"))
    if len(_vector(judge_b, "judge scores of B")) != n:
        raise PPIInputError("A and B must have the same rows (paired by position)")
    ids, g = _cluster_ids(clusters, n)
    a = _fit_arm(judge_a, hand_a, ids, g, pi=pi_a, lam=lam, label=" of A")
    b = _fit_arm(judge_b, hand_b, ids, g, pi=pi_b, lam=lam, label=" of B")
    estimate = float(a.psi.mean() - b.psi.mean())
    rect = a.rect_part - b.rect_part
    var_all = _cluster_var(a.judge_part - b.judge_part + rect, ids, g)
    var_ra = _cluster_var(a.rect_part, ids, g)
    var_rb = _cluster_var(b.rect_part, ids, g)
    var_rect = _cluster_var(rect, ids, g)
    var_rows = max(var_all - var_rect, 0.0) if math.isfinite(var_all) else math.nan
    extra = max(a.floor - var_ra, 0.0) + max(b.floor - var_rb, 0.0)
    var = var_all + extra
    fitted = _FITTED if lam is None else 1
    df = float(max(min(a.n_hand - fitted, b.n_hand - fitted, g - 1), 1))
    needed, reason = _needed_for_validity([a, b], ["A", "B"], g)
    valid = not needed and math.isfinite(var) and var > 0
    if valid:
        se, low, high, p = _interval(estimate, var, df, level, DIFF_BOUNDS)
    else:
        se = math.sqrt(var) if math.isfinite(var) else math.nan
        low = high = p = math.nan
        reason = reason or "no variance estimate (fewer than two clusters of rows)"
    base = HAND_METHOD if lam == 0 else PPI_METHOD if lam is None else f"PPI (lambda={lam})"
    both = int(np.unique(ids[a.labelled & b.labelled]).size)
    return PPIDifference(
        estimate=estimate,
        low=low,
        high=high,
        p_value=p,
        level=level,
        se=se,
        df=df,
        n_rows=n,
        n_hand=a.n_hand + b.n_hand,
        n_hand_a=a.n_hand,
        n_hand_b=b.n_hand,
        n_hand_both=both,
        n_clusters=g,
        lambda_=(a.lam, b.lam),
        effective_n=_effective_n(
            a.n_hand + b.n_hand,
            var,
            lam,
            lambda: ppi_paired_difference(
                judge_a, hand_a, judge_b, hand_b, clusters=clusters, pi_a=pi_a, pi_b=pi_b, lam=0.0
            ),
        ),
        method=_method(base, "paired rows", clusters is not None),
        valid=valid,
        reason=reason,
        needed=needed,
        judge_difference=a.judge_mean - b.judge_mean,
        var_rows=var_rows,
        var_rect=(max(var_ra, a.floor), max(var_rb, b.floor)),
        floored=extra > 0,
    )


def hand_only_difference(
    hand_a: ArrayLike,
    hand_b: ArrayLike,
    *,
    clusters: Clusters = None,
    level: float = 0.95,
    pi_a: ArrayLike | None = None,
    pi_b: ArrayLike | None = None,
) -> PPIDifference:
    """theta_A - theta_B from hand grades alone (lambda = 0): every grade of either variant,
    paired where rows are graded for both, unpaired otherwise; the width PPI is compared to."""
    ya = _vector(hand_a, "hand grades of A")
    zeros = np.zeros(len(ya))
    return ppi_paired_difference(
        zeros, ya, zeros, hand_b, clusters=clusters, level=level, pi_a=pi_a, pi_b=pi_b, lam=0.0
    )


@dataclass(frozen=True)
class JudgeDifference:
    """mean(judge A) - mean(judge B): a difference of JUDGE SCORES, not of correctness.

    Its interval covers the judge's own difference; where the judge is biased toward one
    variant it misses the true difference however many rows there are."""

    estimate: float
    low: float
    high: float
    p_value: float
    level: float
    se: float
    n_rows: int
    n_clusters: int
    n_unparsed: int
    method: str
    valid: bool
    reason: str


def judge_only_difference(
    judge_a: ArrayLike,
    judge_b: ArrayLike,
    *,
    clusters: Clusters = None,
    level: float = 0.95,
) -> JudgeDifference:
    """The naive paired interval of judge scores (normal, cluster-robust), labelled as such."""
    level = _level(level)
    fa = _vector(judge_a, "judge scores of A")
    fb = _vector(judge_b, "judge scores of B", len(fa))
    unparsed = int(np.isnan(fa).sum() + np.isnan(fb).sum())
    d = np.where(np.isnan(fa), UNPARSED_JUDGE_SCORE, fa) - np.where(
        np.isnan(fb), UNPARSED_JUDGE_SCORE, fb
    )
    ids, g = _cluster_ids(clusters, len(d))
    var = _cluster_var(d, ids, g)
    estimate = float(d.mean())
    if not (math.isfinite(var) and var > 0):
        return JudgeDifference(
            estimate, math.nan, math.nan, math.nan, level, math.nan, len(d), g, unparsed,
            _method(JUDGE_METHOD, "paired rows", clusters is not None), False,
            "no variance (the judge scores A and B alike on every row, or one cluster)",
        )  # fmt: skip
    se, low, high, p = _interval(estimate, var, float(max(g - 1, 1)), level, DIFF_BOUNDS)
    return JudgeDifference(
        estimate=estimate,
        low=low,
        high=high,
        p_value=p,
        level=level,
        se=se,
        n_rows=len(d),
        n_clusters=g,
        n_unparsed=unparsed,
        method=_method(JUDGE_METHOD, "paired rows", clusters is not None),
        valid=True,
        reason="",
    )


def _per_arm(
    result: PPIEstimate | PPIDifference,
) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Graded clusters and rectifier variance per variant."""
    if isinstance(result, PPIEstimate):
        return (result.n_hand,), (result.var_rect,)
    return (result.n_hand_a, result.n_hand_b), result.var_rect


def _projected_half_width(
    result: PPIEstimate | PPIDifference, extra: Sequence[int], level: float
) -> float:
    """Half-width if each arm got `extra` more graded rows: the rectifier variance shrinks
    as 1/n (Var = lambda^2 Var(f)/N + Var(R)/n), the judge rows' own part stays."""
    hands, rects = _per_arm(result)
    big_n = result.n_clusters
    var = result.var_rows if math.isfinite(result.var_rows) else 0.0
    dfs = []
    for n_h, v_rect, more in zip(hands, rects, extra, strict=True):
        n_new = min(n_h + more, big_n)
        shrink = n_h / n_new if n_new > 0 else math.inf
        var += v_rect * shrink if math.isfinite(shrink) else math.inf
        dfs.append(n_new - _FITTED)
    df = max(min(dfs), 1)
    return _t_quantile(level, df) * math.sqrt(var)


def hand_grades_needed(
    result: PPIEstimate | PPIDifference, *, target_half_width: float | None = None
) -> int:
    """How many more hand grades until the interval is valid at all (`target_half_width`
    None), or also no wider than `target_half_width` on each side.

    For a difference the grades are split between A and B (each next grade goes to the
    variant whose rectifier shrinks the variance most). Projected from the current variance
    split: a plan, not a promise. When even grading every row would not reach the target
    (the rows' own sampling variance is wider), it returns the number of ungraded rows."""
    if target_half_width is not None and not target_half_width > 0:
        raise PPIInputError(f"target half-width must be positive, not {target_half_width}")
    hands, _ = _per_arm(result)
    extra = [max(0, MIN_HAND - n) for n in hands]
    if target_half_width is None:
        return sum(extra)
    cap = result.n_clusters
    while _projected_half_width(result, extra, result.level) > target_half_width:
        open_arms = [i for i, n in enumerate(hands) if n + extra[i] < cap]
        if not open_arms:
            break
        best = min(
            open_arms,
            key=lambda i: _projected_half_width(
                result, [e + (j == i) for j, e in enumerate(extra)], result.level
            ),
        )
        extra[best] += 1
    return sum(extra)
