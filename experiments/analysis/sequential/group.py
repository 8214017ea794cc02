"""Group-sequential design: a test at planned looks that keeps the fixed design's power.

The anytime-valid sequence (`betting`) holds however often one looks, and pays for it in
power at small effects. When the looks are planned (every `batch` rows up to the budget), a
group-sequential test spends alpha over those looks only, and loses almost nothing against
the fixed test at the budget while stopping early on larger effects.

The test (`GroupCore`): a permutation test at each planned look with alpha spending.
- Statistic: the metric difference on the rows seen so far, S_k = sum_c w_c * (mean over
  the seen class-c rows of d), d = hit_A - hit_B, w_c the metric's class weights
  (renormalised over the classes seen), as the fixed design's estimate. The row order and
  so every look's class counts are fixed before any call.
- Null: the paired permutation test's (A's and B's replies exchangeable within each
  cluster of repeated texts): given the |d| seen up to look k, every cluster's sign is an
  independent fair coin. `n_paths` sign patterns per cluster are drawn once from the seed
  (independent of the data) and give R null paths (S_1, ..., S_k) next to the observed one.
- Spending: the power family alpha(t) = alpha t^RHO (Kim & DeMets 1987; RHO = 2.5, close
  to O'Brien-Fleming, see `RHO` for why not OBF itself), t = rows seen / the budget's rows.
  Of the R + 1 paths (the observed one among them), at most floor(alpha(t_k) (R + 1)) may
  have crossed by look k: at each look the paths still uncrossed whose |S_k| is strictly
  above the (allowed + 1)-th largest such value cross. The rule is a symmetric function of
  the R + 1 paths, which are exchangeable under the null, so P(the observed path ever
  crosses) <= alpha exactly, for any data, clusters, class mix or number of looks, and
  however the run stops otherwise (an equivalence stop, an eliminated arm or a failure only
  removes chances to reject). Mehta, Patel, Senchaudhuri & Tsiatis (1994), "Exact
  permutational tests for group sequential clinical trials", Biometrics 50(4), use the same
  conditional construction.
- Interval: a repeated confidence interval (Jennison & Turnbull 1989), est_k +- b_k se_k,
  with b_k the normal-theory boundary of the same spending function at the same
  information fractions (`normal_boundaries`, recursive numerical integration, checked in
  the tests against published Lan-DeMets O'Brien-Fleming boundaries, `family="obf"`) and
  se_k the stratified, cluster-robust standard error of S_k (every cluster's weighted deviations
  summed before squaring) plus two pseudo-rows (+1 and -1) per class, each the size of a
  mean cluster, so a run of
  concordant rows does not give a zero-width interval. Approximate (normal theory); its
  coverage is measured by benchmarks/sequential_designs.py. The decisions A and B come from
  the permutation test, not from the interval.
- Equivalence (two one-sided tests at the looks): "equivalent" when est_k - b1_k se_k >
  -delta and est_k + b1_k se_k < delta, b1_k the one-sided level-alpha boundary of the same
  spending function: each one-sided test keeps level alpha over the looks, so "equivalent"
  is said with probability <= alpha (approximately) when |true difference| >= delta.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from experiments.analysis.sequential.betting import BoolArray, FloatArray, IntArray, strata
from promptlib.errors import WorkbenchError

N_PATHS = 10_000  # null sign patterns: the observed path is one of N_PATHS + 1
# the spending function alpha * t^RHO (Kim & DeMets 1987): 3 is close to O'Brien-Fleming;
# 2.5 spends a little more early, where OBF's first amounts (1e-6 at t = 0.2) are below what
# 10,000 null paths can resolve (1e-4), so OBF could not stop before t ~ 0.31. Chosen on
# seed 2026 (50/50 classes, 1x and 2x the MDE: power within 0.02 of the fixed test's,
# 74% / 38% of the rows; rho 3: 0.01, 75% / 40%; Lan-DeMets OBF: 0.01, 77% / 45%);
# benchmarks/sequential_designs.py evaluates it on other seeds and cells
RHO = 2.5
SPENDING = f"power-family alpha spending alpha t^{RHO} (Kim & DeMets 1987)"
_TIE = 1e-12  # |S| values this close count as equal (float noise of equal sums)
_GRID = 801  # points of the numerical integration in `normal_boundaries`


def obf_spent(fractions: Sequence[float] | FloatArray, alpha: float, sides: int = 2) -> FloatArray:
    """Alpha spent by information fraction t. Per side, at level a (alpha / 2 for a
    two-sided test, alpha for a one-sided one), Lan-DeMets' O'Brien-Fleming-type
    a(t) = 2 - 2 Phi(z_{1 - a / 2} / sqrt(t)) (gsDesign's sfLDOF, ldbounds' iuse = 1);
    a two-sided test spends both sides' amounts."""
    from scipy.stats import norm

    side = alpha / sides
    t = np.clip(np.asarray(fractions, dtype=np.float64), 1e-12, 1.0)
    z = float(norm.ppf(1.0 - side / 2.0))
    spent: FloatArray = sides * (2.0 - 2.0 * norm.cdf(z / np.sqrt(t)))
    return np.where(t >= 1.0, alpha, spent)


def _crossing(b: float, t: float, sd: float, x: FloatArray, g: FloatArray, sides: int) -> float:
    """P(no crossing before this look, crossing at it) at z-boundary b: the sub-density g of
    the score on the grid x (empty at the first look) moved by an N(0, sd^2) increment."""
    from scipy.stats import norm

    c = b * math.sqrt(t)
    if not len(x):  # the first look
        return float(norm.sf(c / sd)) * sides
    up = norm.sf((c - x) / sd)
    down = norm.cdf((-c - x) / sd) if sides == 2 else 0.0
    return float(np.trapezoid(g * (up + down), x))


def power_spent(
    fractions: Sequence[float] | FloatArray, alpha: float, sides: int = 2
) -> FloatArray:
    """Alpha spent by information fraction t: alpha t^RHO in all (both sides together for a
    two-sided test; `sides` is accepted for symmetry with `obf_spent`)."""
    t = np.clip(np.asarray(fractions, dtype=np.float64), 0.0, 1.0)
    out: FloatArray = alpha * t**RHO
    return out


SPENDERS = {"power": power_spent, "obf": obf_spent}


@lru_cache(maxsize=256)
def _boundaries(
    fractions: tuple[float, ...], alpha: float, sides: int, family: str = "power"
) -> tuple[float, ...]:
    from scipy.optimize import brentq
    from scipy.stats import norm

    spent = SPENDERS[family](fractions, alpha, sides)
    out: list[float] = []
    # the sub-density of the score S_k (variance t_k) on the continuation region, on a grid
    x: FloatArray = np.zeros(0)
    g: FloatArray = np.zeros(0)
    prev_t, prev_spent = 0.0, 0.0
    for t, cum in zip(fractions, spent, strict=True):
        inc = float(cum) - prev_spent
        sd = math.sqrt(t - prev_t)
        b = math.inf
        if inc > 1e-15:
            b = float(
                brentq(
                    lambda v, t=t, sd=sd, x=x, g=g, inc=inc: _crossing(v, t, sd, x, g, sides) - inc,
                    1e-6,
                    40.0,
                    xtol=1e-10,
                )
            )
        out.append(b)
        # the density on the new continuation region
        c = (b if math.isfinite(b) else 12.0) * math.sqrt(t)
        lo = -c if sides == 2 else -12.0 * math.sqrt(t)
        new_x = np.linspace(lo, c, _GRID)
        if not len(x):
            new_g = norm.pdf(new_x / sd) / sd
        else:
            kern = norm.pdf((new_x[:, None] - x[None, :]) / sd) / sd
            new_g = np.trapezoid(kern * g[None, :], x, axis=1)
        x, g = new_x, new_g
        prev_t, prev_spent = t, float(cum)
    return tuple(out)


def normal_boundaries(
    fractions: Sequence[float], alpha: float, sides: int = 2, family: str = "power"
) -> FloatArray:
    """Z-scale boundaries b_k of the spending function at information fractions t_k
    (increasing, last 1): for a standard Brownian score S with Z_k = S(t_k) / sqrt(t_k),
    P(first |Z_k| >= b_k at look k) = alpha(t_k) - alpha(t_{k-1}) (sides=2; sides=1: Z_k
    >= b_k, one-sided level alpha). Recursive numerical integration (Armitage, McPherson &
    Rowe 1969; Jennison & Turnbull 2000, ch. 19). Inf where a look spends nothing."""
    t = tuple(float(v) for v in fractions)
    if not t or any(b <= a for a, b in itertools.pairwise(t)) or t[0] <= 0:
        raise WorkbenchError(f"information fractions must increase from above 0, not {t}")
    if sides not in (1, 2):
        raise WorkbenchError(f"sides must be 1 or 2, not {sides}")
    if family not in SPENDERS:
        raise WorkbenchError(f"spending family must be one of {sorted(SPENDERS)}, not {family!r}")
    return np.asarray(_boundaries(t, float(alpha), sides, family))


@lru_cache(maxsize=8)
def _signs(seed: int, n_paths: int, n_clusters: int) -> NDArray[np.float64]:
    """The null paths' signs per cluster, from the seed alone (shared, read-only: the pairs
    of one elimination may share them; each pair's test is exact on its own)."""
    rng = np.random.default_rng([seed, 29])
    drawn = rng.integers(0, 2, size=(n_paths, n_clusters), dtype=np.int8) * 2 - 1
    out = np.ascontiguousarray(drawn.T, dtype=np.float64)  # (clusters, paths): rows by cluster
    out.setflags(write=False)
    return out


class GroupCore:
    """S group-sequential comparisons over the same planned rows and looks (vectorised)."""

    def __init__(
        self,
        metric: str,
        answers: Sequence[str],
        looks: Sequence[int],
        alpha: float,
        n_seq: int,
        *,
        clusters: Sequence[int] | IntArray | None = None,
        n_paths: int = N_PATHS,
        seed: int = 0,
    ) -> None:
        if not 0.0 < alpha < 1.0:
            raise WorkbenchError(f"alpha must lie strictly between 0 and 1, not {alpha}")
        self.cls, self.weights = strata(metric, answers)
        self.n_planned = n = len(self.cls)
        planned = sorted(set(int(v) for v in looks))
        if not planned or planned[0] < 1 or planned[-1] > n:
            raise WorkbenchError(f"planned looks must lie in 1..{n} rows, not {list(looks)}")
        self.looks = planned
        t = np.asarray(planned, dtype=np.float64) / planned[-1]
        self.allowed = np.floor(power_spent(t, alpha) * (n_paths + 1) + 1e-9).astype(np.int64)
        self.z2 = normal_boundaries(t.tolist(), alpha, 2)
        self.z1 = normal_boundaries(t.tolist(), alpha, 1)
        self.alpha, self.n_paths = alpha, n_paths
        ids = np.arange(n) if clusters is None else np.asarray(clusters)
        if len(ids) != n:
            raise WorkbenchError(f"{len(ids)} cluster ids for {n} planned rows; give one per row")
        _, self.cid = np.unique(ids, return_inverse=True)
        n_cl = int(self.cid.max()) + 1
        k = len(self.weights)
        # R sign patterns per cluster, drawn from the seed alone (never from the data)
        self.signs = _signs(seed, n_paths, n_cl)
        self.paths = np.zeros((n_seq, n_paths, k))  # each null path's per-class sums
        self.obs = np.zeros((n_seq, k))  # the observed per-class sums of d
        self.cl_sum = np.zeros((n_seq, n_cl, k))  # per cluster and class: sum of d
        self.cl_n = np.zeros((n_cl, k))  # per cluster and class: rows seen (all sequences)
        self.seen = np.zeros(k)
        self.alive = np.ones((n_seq, n_paths + 1), dtype=bool)  # last column: observed
        self.crossed = np.zeros(n_seq, dtype=np.int64)
        self.pos = np.zeros(n_seq, dtype=np.int64)
        self.sign = np.zeros(n_seq, dtype=np.int64)  # +1 A, -1 B, 0 not rejected
        self.n_looked = np.zeros(n_seq, dtype=np.int64)
        self._counted = 0  # row positions whose class and cluster counts are in

    def add(self, d: NDArray[np.int64], mask: BoolArray | None = None) -> None:
        """The next rows' differences hit_A - hit_B, shape (S, b), where `mask` holds; every
        masked sequence must be at the same row (they share the planned looks)."""
        n_seq, b = d.shape
        on = np.ones(n_seq, dtype=bool) if mask is None else mask
        if not np.any(on):
            return
        at = np.unique(self.pos[on])
        if len(at) != 1:
            raise WorkbenchError("the sequences given a batch must be at the same row")
        start = int(at[0])
        if start + b > self.n_planned:
            raise WorkbenchError(
                f"more rows than planned ({self.n_planned}): a sequential comparison "
                "sees each planned row once"
            )
        rows = np.arange(start, start + b)
        cls, cid = self.cls[rows], self.cid[rows]
        dd = d[on].astype(np.float64)
        signs = self.signs[cid]  # (b, R)
        for c in np.unique(cls):
            m = cls == c
            part = dd[:, m]  # (S_on, b_c)
            self.paths[on, :, c] += part @ signs[m]
            self.obs[on, c] += part.sum(axis=1)
            np.add.at(self.cl_sum, (np.flatnonzero(on)[:, None], cid[m][None, :], c), part)
        # class counts and cluster counts are shared: count them once per row position
        if start + b > self._counted:
            new = rows[rows >= self._counted]
            np.add.at(self.cl_n, (self.cid[new], self.cls[new]), 1.0)
            np.add.at(self.seen, self.cls[new], 1.0)
            self._counted = start + b
        self.pos = np.where(on, start + b, self.pos)

    def _weights(self) -> FloatArray:
        """Per class, the weight of a seen row's d in S: w_c / n_c, renormalised over the
        classes seen so far (an unseen class has no estimate yet)."""
        seen = self.seen > 0
        w = np.where(seen, self.weights, 0.0)
        w = w / max(float(w.sum()), 1e-300)
        out: FloatArray = np.divide(w, self.seen, out=np.zeros_like(w), where=seen)
        return out

    def look(self, mask: BoolArray | None = None) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(estimate, lower, upper) of metric(A) - metric(B) at a planned look, for the masked
        sequences (the others keep their last values in `sign`); updates `sign`."""
        n_seq = self.obs.shape[0]
        on = np.ones(n_seq, dtype=bool) if mask is None else mask
        idx = np.flatnonzero(on)
        w = self._weights()
        est = self.obs @ w
        lo, hi = np.full(n_seq, -1.0), np.full(n_seq, 1.0)
        if not len(idx):
            return est, lo, hi
        at = int(self.pos[idx[0]])
        if at not in self.looks:
            raise WorkbenchError(f"row {at} is not a planned look ({self.looks})")
        k = self.looks.index(at)
        stat = np.abs(self.paths[idx] @ w)  # (S_on, R)
        values = np.concatenate([stat, np.abs(est[idx])[:, None]], axis=1)
        alive = self.alive[idx]
        values = np.where(alive, values, -np.inf)
        allowed = np.clip(self.allowed[k] - self.crossed[idx], 0, self.n_paths + 1)
        ranked = -np.sort(-values, axis=1)
        padded = np.concatenate([ranked, np.full((len(idx), 1), -np.inf)], axis=1)
        threshold = padded[np.arange(len(idx)), allowed]
        scale = np.maximum(np.abs(threshold), 1.0)
        crossing = alive & (
            values > np.where(np.isfinite(threshold), threshold + _TIE * scale, -np.inf)[:, None]
        )
        self.crossed[idx] += crossing.sum(axis=1)
        self.alive[idx] = alive & ~crossing
        obs_cross = crossing[:, -1]
        e = est[idx]
        new_sign = np.where(obs_cross, np.where(e > 0, 1, np.where(e < 0, -1, 0)), 0)
        self.sign[idx] = np.where(self.sign[idx] != 0, self.sign[idx], new_sign)
        se = self.se()[idx]
        half = self.z2[k] * se
        lo[idx] = np.maximum(e - half, -1.0)
        hi[idx] = np.minimum(e + half, 1.0)
        self.n_looked[idx] = k + 1
        return est, lo, hi

    def se(self) -> FloatArray:
        """The stratified, cluster-robust standard error of the estimate, with two pseudo-rows
        (+1, -1) per seen class (module docstring)."""
        w = self._weights()  # (k,)
        mu = np.divide(
            self.obs, self.seen + 2.0, out=np.zeros_like(self.obs), where=self.seen > 0
        )  # (S, k), shrunk by the pseudo-rows
        dev = self.cl_sum - self.cl_n[None, :, :] * mu[:, None, :]  # (S, C, k)
        totals = dev @ w  # (S, C)
        n_cl = int(np.count_nonzero(self.cl_n.sum(axis=1)))
        factor = n_cl / (n_cl - 1) if n_cl > 1 else 1.0
        # two pseudo-rows per class, each as large as a mean cluster (rows per cluster seen):
        # row-sized ones would shrink against clusters of repeated texts (review finding)
        per_cluster = float(self.seen.sum()) / max(n_cl, 1)
        pseudo = 2.0 * per_cluster * float((w**2 * (self.seen > 0)).sum())
        var = factor * (totals**2).sum(axis=1) + pseudo
        out: FloatArray = np.sqrt(var)
        return out

    def one_sided_interval(self, est: FloatArray) -> tuple[FloatArray, FloatArray]:
        """The interval of the two one-sided tests at this look, est +- b1_k se_k (what an
        'equivalent' verdict rests on; call right after `look`)."""
        k = np.maximum(self.n_looked - 1, 0)
        half = self.z1[k] * self.se()
        return np.maximum(est - half, -1.0), np.minimum(est + half, 1.0)

    def equivalent(self, est: FloatArray, delta: float) -> BoolArray:
        """Two one-sided tests at this look: the one-sided boundary's interval inside
        +-delta (call right after `look`, on the same sequences)."""
        k = np.maximum(self.n_looked - 1, 0)
        half = self.z1[k] * self.se()
        out: BoolArray = (est - half > -delta) & (est + half < delta)
        return out
