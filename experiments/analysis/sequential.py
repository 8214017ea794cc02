"""Anytime-valid paired comparisons: stop evaluating rows as soon as the answer is clear.

A sequential comparison evaluates rows in a seeded, class-stratified random order
(`row_order`), in batches, on both arms, and after each batch updates a confidence sequence
(CS) for metric(A) - metric(B). It stops when the interval excludes 0 (A or B better), lies
inside +-delta (equivalent), or the planned rows run out (undecided, with the interval
reached). `PairedSequence` is one comparison; `Elimination` is adaptive best-of-k
(successive elimination). `simulate_paired` runs many comparisons at once on arrays (the
benchmarks; the same code as `PairedSequence`).

How the sequence works
----------------------
- Linear metrics only. Accuracy, balanced accuracy and the share-of-rows metrics are
  weighted means of per-row hits, metric = sum_c omega_c * recall_c, where c runs over the
  answer classes (strata) and the weights are known before any call: omega_c = 1/K for
  balanced accuracy, n_c / N for accuracy (the planned rows' class shares). The share-of-rows
  metrics (sara_numeric, citation_open, definition_extraction) have nearly unique answers,
  so they are one stratum of weight 1. F1 is a ratio of sums, not a mean of row terms: no
  sequence here covers it, and `NotSequential` says to use the fixed design.
- Per stratum c, the paired row difference d = hit_A - hit_B in {-1, 0, 1} is mapped to
  x = (d + 1) / 2 in [0, 1] and monitored with the hedged-capital betting CS of
  Waudby-Smith & Ramdas (2023, "Estimating means of bounded random variables by betting",
  JRSS-B 86(1), Thm 3 and the predictable plug-in of their eq. (26)): for each candidate
  mean m, K_t(m) = max(theta K+_t(m), (1 - theta) K-_t(m)), theta = 1/2, with
  K+-_t(m) = prod_i (1 +- lambda+-_i(m) (x_i - m)); lambda_i = sqrt(2 log(2/alpha_c) /
  (sigma^2_{i-1} i log(1 + i))), truncated at c/m (K+) and c/(1 - m) (K-), c = 1/2, where
  sigma^2 and the mean estimate are the paper's regularised running ones. The CS is
  {m : K_t(m) < 1/alpha_c}, on a grid of `GRID` candidate means, intersected over looks
  (running intersection). Each K_t(m) is a nonnegative martingale with initial value 1 when
  m is the stratum's true mean, so by Ville's inequality P(exists t: K_t(m) >= 1/alpha_c)
  <= alpha_c: the CS holds at every look at once, however often it is looked at and
  whenever one stops (any stopping time).
- Strata are combined by a union bound: each stratum's CS at alpha_c = alpha / K, so with
  probability >= 1 - alpha every stratum's CS holds at every look, and then
  [sum omega_c L_c, sum omega_c U_c] holds for the metric difference at every look. A
  stratum not yet seen contributes [-1, 1]. Grid endpoints are rounded outwards (the grid
  point just outside the accepted set), so the grid never narrows an interval.
- What is covered. The decisions "A" and "B" (0 excluded) are exact under the paired
  permutation test's own null (A's and B's replies exchangeable within each row): then
  every d_i is symmetric given everything before it, K_t(1/2) is a martingale whatever the
  order and the rows, and the test's size is <= alpha with no assumption about rows. The
  interval at m != 0 (and so "equivalent") is for the difference in expectation on a row
  of the task, rows within a class being exchangeable draws (the model the product's
  bootstrap interval assumes too). Deliberately not used: the without-replacement CS of
  the same paper, which covers the realised difference on these N rows and shrinks to it
  at t = N, so under equal arms it would exclude 0 at the end in most runs (the
  realised difference of two equal prompts is rarely exactly 0).
- The order. `row_order` permutes each class with a seeded generator and interleaves the
  classes so every prefix holds each class within one row of its share; the stratified
  order is what lets the strata be monitored in lockstep, and each stratum's rows are a
  uniformly random order of that class.

Adaptive best-of-k (`Elimination`): one `PairedSequence` per pair of arms at
alpha / (k (k - 1) / 2) (Bonferroni), updated while both arms are active. An arm is
eliminated when another active arm's interval of (other - arm) excludes 0. With
probability >= 1 - alpha every pair's interval holds at every look simultaneously, so the
final best-vs-worst interval (the pair's, whichever pair is chosen) keeps its level under
continuous monitoring and data-dependent selection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from experiments.analysis import stats
from promptlib.errors import WorkbenchError

SEQUENCE = (
    "hedged-capital betting confidence sequence (Waudby-Smith & Ramdas 2023), one per answer "
    "class at alpha/K, combined with the metric's known class weights"
)
GRID = 401  # candidate means per stratum: a step of 0.005 on the [-1, 1] difference scale
_THETA = 0.5  # the hedge between betting up and betting down
_TRUNC = 0.5  # c: bets truncated at c/m and c/(1 - m)
_LINEAR = ("accuracy", "balanced_accuracy")
_ONE_STRATUM = (
    "sara_numeric_within_10pct",
    "citation_open_contains",
    "definition_extraction_stemmed_match",
)
Decision = Literal["A", "B", "equivalent", "continue", "undecided"]
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
_CODES: tuple[Decision, ...] = ("continue", "A", "B", "equivalent", "undecided")


class NotSequential(WorkbenchError):
    """The metric has no valid confidence sequence here (F1): use the fixed design."""


@dataclass(frozen=True)
class Look:
    """One look at a sequential comparison: rows so far, the estimate, the interval, the call."""

    n_rows: int
    estimate: float
    lower: float
    upper: float
    decision: Decision


# ---- the order ------------------------------------------------------------------------------
def row_order(answers: Sequence[str], seed: int) -> list[int]:
    """A seeded random order of row indices, stratified by class (every prefix of length m
    holds each class in about its share), the same in every process."""
    labels = stats.normalized_labels(list(answers))
    names = sorted(set(labels))
    rng = np.random.default_rng(seed)
    offsets = rng.random(len(names))
    keys: list[tuple[float, int, int]] = []
    for c, name in enumerate(names):
        rows = [i for i, label in enumerate(labels) if label == name]
        perm = rng.permutation(len(rows))
        n_c = len(rows)
        keys.extend(((j + offsets[c]) / n_c, c, rows[int(perm[j])]) for j in range(n_c))
    keys.sort()
    return [row for _, _, row in keys]


# ---- strata ---------------------------------------------------------------------------------
def _check_metric(metric: str) -> None:
    if metric in _LINEAR or metric in _ONE_STRATUM:
        return
    if metric in stats.metric_names():
        raise NotSequential(
            f"metric {metric!r} is not a mean of per-row terms, so no confidence sequence "
            "covers it; compare these variants with the fixed design (every planned row)"
        )
    raise WorkbenchError(
        f"unknown metric {metric!r} for a sequential comparison; use one of "
        f"{', '.join((*_LINEAR, *_ONE_STRATUM))}"
    )


def strata(metric: str, answers: Sequence[str]) -> tuple[NDArray[np.intp], FloatArray]:
    """Each row's stratum and each stratum's weight in the metric (module docstring)."""
    _check_metric(metric)
    if not answers:
        raise WorkbenchError("a sequential comparison needs at least one planned row")
    if metric in _ONE_STRATUM:
        return np.zeros(len(answers), dtype=np.intp), np.ones(1)
    labels = stats.normalized_labels(list(answers))
    _, cls, counts = np.unique(
        np.asarray(labels, dtype=str), return_inverse=True, return_counts=True
    )
    if metric == "balanced_accuracy":
        weights = np.full(len(counts), 1.0 / len(counts))
    else:
        weights = counts / counts.sum()
    return np.asarray(cls, dtype=np.intp), weights.astype(np.float64)


class _Stratum:
    """The betting CS of one stratum's mean of x = (d + 1) / 2, for S sequences at once."""

    def __init__(self, n_seq: int, alpha: float) -> None:
        self.m = np.linspace(0.0, 1.0, GRID)
        self.log_alpha = float(np.log(1.0 / alpha))
        self.bet_scale = 2.0 * np.log(2.0 / alpha)
        self.n = np.zeros(n_seq)
        self.sum_x = np.zeros(n_seq)
        self.sum_sq = np.zeros(n_seq)
        self.log_up = np.zeros((n_seq, GRID))
        self.log_down = np.zeros((n_seq, GRID))
        self.rejected = np.zeros((n_seq, GRID), dtype=bool)
        with np.errstate(divide="ignore"):
            self.cap_up = _TRUNC / self.m
            self.cap_down = _TRUNC / (1.0 - self.m)

    def add(self, x: FloatArray, mask: BoolArray) -> None:
        """One row for every sequence where `mask` holds (the others skip it)."""
        t = self.n + 1.0
        var_prev = (0.25 + self.sum_sq) / t
        lam = np.sqrt(self.bet_scale / (var_prev * t * np.log1p(t)))
        lam = np.where(mask, lam, 0.0)[:, None]
        dev = x[:, None] - self.m[None, :]
        self.log_up += np.log1p(np.minimum(lam, self.cap_up) * dev)
        self.log_down += np.log1p(-np.minimum(lam, self.cap_down) * dev)
        n_new = np.where(mask, t, self.n)
        sum_new = np.where(mask, self.sum_x + x, self.sum_x)
        mean_new = (0.5 + sum_new) / (n_new + 1.0)
        self.sum_sq = np.where(mask, self.sum_sq + (x - mean_new) ** 2, self.sum_sq)
        self.n, self.sum_x = n_new, sum_new

    def look(self) -> tuple[FloatArray, FloatArray]:
        """Update the running intersection; the CS's (lower, upper) on the d scale."""
        log_k = np.maximum(self.log_up, self.log_down) + np.log(_THETA)
        self.rejected |= log_k >= self.log_alpha
        accepted = ~self.rejected
        g = np.arange(GRID)
        first = np.where(accepted, g, GRID).min(axis=1)
        last = np.where(accepted, g, -1).max(axis=1)
        empty = first == GRID  # the CS fell between two grid points: keep the best one's cell
        best = np.argmin(np.maximum(self.log_up, self.log_down), axis=1)
        first = np.where(empty, best, first)
        last = np.where(empty, best, last)
        lo = self.m[np.maximum(first - 1, 0)]
        hi = self.m[np.minimum(last + 1, GRID - 1)]
        return 2.0 * lo - 1.0, 2.0 * hi - 1.0


class _Core:
    """S paired comparisons over the same planned rows, monitored in lockstep (vectorised)."""

    def __init__(self, metric: str, answers: Sequence[str], alpha: float, n_seq: int) -> None:
        if not 0.0 < alpha < 1.0:
            raise WorkbenchError(f"alpha must lie strictly between 0 and 1, not {alpha}")
        self.cls, self.weights = strata(metric, answers)
        self.n_planned = len(self.cls)
        k = len(self.weights)
        self.strata = [_Stratum(n_seq, alpha / k) for _ in range(k)]
        self.sum_d = np.zeros((n_seq, k))
        self.seen = np.zeros((n_seq, k))
        self.pos = np.zeros(n_seq, dtype=np.int64)  # rows seen by each sequence

    def add(self, d: NDArray[np.int64], mask: BoolArray | None = None) -> None:
        """The next rows' differences, shape (S, b), for the sequences where `mask` holds."""
        n_seq, b = d.shape
        on = np.ones(n_seq, dtype=bool) if mask is None else mask
        for j in range(b):
            rows = self.pos + j
            if np.any(rows[on] >= self.n_planned):
                raise WorkbenchError(
                    f"more rows than planned ({self.n_planned}): a sequential comparison "
                    "sees each planned row once"
                )
            c = self.cls[np.minimum(rows, self.n_planned - 1)]
            for s_idx in np.unique(c[on]):
                m = on & (c == s_idx)
                self.strata[s_idx].add((d[:, j] + 1.0) / 2.0, m)
                self.sum_d[m, s_idx] += d[m, j]
                self.seen[m, s_idx] += 1
        self.pos = np.where(on, self.pos + b, self.pos)

    def look(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(estimate, lower, upper) of metric(A) - metric(B) for every sequence."""
        lo = np.zeros(len(self.pos))
        hi = np.zeros(len(self.pos))
        for s_idx, stratum in enumerate(self.strata):
            lo_s, hi_s = stratum.look()
            lo += self.weights[s_idx] * lo_s
            hi += self.weights[s_idx] * hi_s
        means = np.divide(self.sum_d, self.seen, out=np.zeros_like(self.sum_d), where=self.seen > 0)
        return means @ self.weights, np.maximum(lo, -1.0), np.minimum(hi, 1.0)


def _decide(
    lower: FloatArray, upper: FloatArray, done: BoolArray, delta: float | None
) -> NDArray[np.int64]:
    """Decision codes (index into `_CODES`) of each sequence at a look."""
    code = np.where(done, 4, 0)
    if delta is not None:
        code = np.where((lower >= -delta) & (upper <= delta), 3, code)
    code = np.where(upper < 0.0, 2, code)
    return np.where(lower > 0.0, 1, code)


def _check_delta(delta: float | None) -> None:
    if delta is not None and not 0.0 < delta < 1.0:
        raise WorkbenchError(f"delta must lie strictly between 0 and 1, not {delta}")


# ---- one comparison -------------------------------------------------------------------------
class PairedSequence:
    """An anytime-valid comparison of two arms on the same rows, looked at after every batch."""

    def __init__(
        self,
        metric: str,
        answers: Sequence[str],
        *,
        alpha: float = 0.05,
        delta: float | None = None,
    ) -> None:
        """answers: the official answers of ALL planned rows, in row_order (the finite
        population: N = len(answers)); metric: the official metric name as
        experiments/metrics.py names it. Raises NotSequential for non-linear metrics."""
        _check_delta(delta)
        self.metric = metric
        self.alpha = alpha
        self.delta = delta
        self._core = _Core(metric, answers, alpha, 1)
        self.n_planned = self._core.n_planned
        self.looks: list[Look] = []

    @property
    def n_rows(self) -> int:
        return int(self._core.pos[0])

    @property
    def stopped(self) -> bool:
        """True once a look decided (A, B, equivalent) or the planned rows ran out."""
        return bool(self.looks) and self.looks[-1].decision != "continue"

    def update(self, a_correct: Sequence[bool], b_correct: Sequence[bool]) -> Look:
        """The next batch of rows, in order (invalid/failed replies count as not correct;
        the engine decides that). After the last planned row, 'continue' becomes 'undecided'."""
        if self.stopped:
            raise WorkbenchError(
                f"this sequential comparison already stopped at {self.n_rows} rows "
                f"({self.looks[-1].decision}); start a new one to look again"
            )
        d = _differences(a_correct, b_correct)
        if self.n_rows + len(d) > self.n_planned:
            raise WorkbenchError(
                f"{self.n_rows} rows seen and {len(d)} more given, but only "
                f"{self.n_planned} were planned"
            )
        if len(d):
            self._core.add(d[None, :])
        est, lo, hi = self._core.look()
        done = np.array([self.n_rows >= self.n_planned])
        code = int(_decide(lo, hi, done, self.delta)[0])
        look = Look(self.n_rows, float(est[0]), float(lo[0]), float(hi[0]), _CODES[code])
        self.looks.append(look)
        return look


def _differences(a: Sequence[bool], b: Sequence[bool]) -> NDArray[np.int64]:
    if len(a) != len(b):
        raise WorkbenchError(
            f"a batch has {len(a)} rows for A but {len(b)} for B; both arms see the same rows"
        )
    return np.asarray([bool(x) for x in a], dtype=np.int64) - np.asarray(
        [bool(x) for x in b], dtype=np.int64
    )


# ---- many comparisons at once (benchmarks) --------------------------------------------------
@dataclass(frozen=True)
class Outcomes:
    """`simulate_paired`'s result: per sequence, the decision and where it stopped."""

    decision: NDArray[np.str_]
    rows: NDArray[np.int64]
    estimate: FloatArray
    lower: FloatArray
    upper: FloatArray


def simulate_paired(
    metric: str,
    answers: Sequence[str],
    a_correct: NDArray[np.bool_],
    b_correct: NDArray[np.bool_],
    *,
    batch: int = 10,
    alpha: float = 0.05,
    delta: float | None = None,
) -> Outcomes:
    """S comparisons (rows of the (S, N) hit arrays, columns in row order) run to their stop,
    looking after every `batch` rows: the same sequence as `PairedSequence`, vectorised."""
    _check_delta(delta)
    d = a_correct.astype(np.int64) - b_correct.astype(np.int64)
    n_seq, n = d.shape
    core = _Core(metric, answers, alpha, n_seq)
    code = np.zeros(n_seq, dtype=np.int64)
    out = [np.zeros(n_seq) for _ in range(3)]
    rows = np.zeros(n_seq, dtype=np.int64)
    for start in range(0, n, batch):
        live = code == 0
        core.add(d[:, start : start + batch], live)
        est, lo, hi = core.look()
        new = _decide(lo, hi, core.pos >= n, delta)
        newly = live & (new != 0)
        for arr, val in zip(out, (est, lo, hi), strict=True):
            arr[live] = val[live]
        rows[live] = core.pos[live]
        code[newly] = new[newly]
        if not np.any(code == 0):
            break
    labels = np.array(_CODES)[code]
    return Outcomes(labels, rows, out[0], out[1], out[2])


# ---- adaptive best-of-k ---------------------------------------------------------------------
class Elimination:
    """Adaptive best-of-k: successive elimination with anytime-valid pairwise intervals."""

    def __init__(
        self, metric: str, answers: Sequence[str], arms: Sequence[str], *, alpha: float = 0.05
    ) -> None:
        if len(set(arms)) != len(arms) or len(arms) < 2:
            raise WorkbenchError(f"best-of-k needs at least two distinct arms, not {list(arms)}")
        self.metric = metric
        self.alpha = alpha
        self.arms = tuple(arms)
        n_pairs = len(arms) * (len(arms) - 1) // 2
        self.pairs = {
            (a, b): PairedSequence(metric, answers, alpha=alpha / n_pairs)
            for i, a in enumerate(self.arms)
            for b in self.arms[i + 1 :]
        }
        self.n_planned = len(answers)
        self.active: tuple[str, ...] = self.arms
        self.eliminated: list[tuple[str, int, str]] = []
        self.rows: dict[str, int] = dict.fromkeys(self.arms, 0)
        self.hits: dict[str, int] = dict.fromkeys(self.arms, 0)

    @property
    def done(self) -> bool:
        """One arm left, or the planned rows ran out."""
        return len(self.active) == 1 or max(self.rows.values()) >= self.n_planned

    def update(self, correct: Mapping[str, Sequence[bool]]) -> None:
        """The next batch of rows, for the ACTIVE arms only (each arm's hits, in row order)."""
        if set(correct) != set(self.active):
            raise WorkbenchError(
                f"a batch must give exactly the active arms {list(self.active)}, "
                f"not {sorted(correct)}"
            )
        if self.done:
            raise WorkbenchError("this best-of-k comparison has already finished")
        sizes = {len(v) for v in correct.values()}
        if len(sizes) != 1:
            raise WorkbenchError("every active arm's batch must have the same rows")
        for (a, b), seq in self.pairs.items():
            if a in self.active and b in self.active:
                seq.update(correct[a], correct[b])
        n = sizes.pop()
        for arm in self.active:
            self.rows[arm] += n
            self.hits[arm] += sum(bool(x) for x in correct[arm])
        self._eliminate()

    def _interval(self, better: str, worse: str) -> Look:
        """The latest look at (better - worse), sign-adjusted."""
        if (better, worse) in self.pairs:
            return self.pairs[(better, worse)].looks[-1]
        look = self.pairs[(worse, better)].looks[-1]
        return Look(look.n_rows, -look.estimate, -look.upper, -look.lower, look.decision)

    def _eliminate(self) -> None:
        out: list[tuple[str, int, str]] = []
        for arm in self.active:
            for other in self.active:
                if other != arm and self._interval(other, arm).lower > 0.0:
                    out.append((arm, self.rows[arm], other))
                    break
        if len(out) == len(self.active):  # cannot happen when the intervals hold; keep one
            keep = max(self.active, key=lambda a: self.hits[a])
            out = [e for e in out if e[0] != keep]
        gone = {e[0] for e in out}
        self.eliminated.extend(out)
        self.active = tuple(a for a in self.active if a not in gone)

    def verdict(self) -> dict[str, Any]:
        """Best, worst, the best-vs-worst interval and decision at level alpha, rows per arm."""
        if not any(seq.looks for seq in self.pairs.values()):
            raise WorkbenchError("no rows evaluated yet: call update first")
        best = max(self.active, key=lambda a: (self.hits[a], a))
        others = [a for a in self.arms if a != best]
        worst = max(others, key=lambda a: self._interval(best, a).estimate)
        look = self._interval(best, worst)
        return {
            "sequence": SEQUENCE,
            "alpha": self.alpha,
            "best": best,
            "worst": worst,
            "n_rows": look.n_rows,
            "estimate": look.estimate,
            "lower": look.lower,
            "upper": look.upper,
            "decision": "best" if look.lower > 0.0 else "undecided",
            "eliminated": list(self.eliminated),
            "rows": dict(self.rows),
            "calls": sum(self.rows.values()),
            "full_grid_calls": self.n_planned * len(self.arms),
            "pairs": [
                {"a": a, "b": b, **vars(seq.looks[-1])}
                for (a, b), seq in self.pairs.items()
                if seq.looks
            ],
        }
