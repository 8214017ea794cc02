"""One sequential comparison of two arms, and many at once on arrays (the benchmarks)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from experiments.analysis.sequential.betting import BoolArray, Core, FloatArray, IntArray
from experiments.analysis.sequential.group import N_PATHS, GroupCore
from promptlib.errors import WorkbenchError

Decision = Literal["A", "B", "equivalent", "continue", "undecided"]
CODES: tuple[Decision, ...] = ("continue", "A", "B", "equivalent", "undecided")
Method = Literal["anytime", "group"]
METHODS: tuple[Method, ...] = ("anytime", "group")


@dataclass(frozen=True)
class Planned:
    """A group-sequential plan: the looks (rows seen on both arms at each), the null paths
    and their seed (`group.GroupCore`)."""

    looks: tuple[int, ...]
    n_paths: int = N_PATHS
    seed: int = 0


def planned_looks(batch: int, cap: int) -> tuple[int, ...]:
    """Looks after every `batch` rows up to the budget `cap` (the last one at `cap`)."""
    if batch < 1 or cap < 1:
        raise WorkbenchError(f"batch and budget must be >= 1, not {batch} and {cap}")
    return tuple(sorted({*range(batch, cap, batch), cap}))


@dataclass(frozen=True)
class Look:
    """One look at a sequential comparison: rows so far, the estimate, the interval, the call."""

    n_rows: int  # rows evaluated on both arms so far
    estimate: float  # point estimate of metric(A) - metric(B) over the planned rows
    lower: float  # the anytime-valid (1 - alpha) interval at this look
    upper: float
    decision: Decision


def decide(
    lower: FloatArray, upper: FloatArray, done: BoolArray, delta: float | None
) -> NDArray[np.int64]:
    """Decision codes (index into `CODES`) at a look: 0 excluded, inside +-delta, or not."""
    code = np.where(done, 4, 0)
    if delta is not None:
        code = np.where((lower >= -delta) & (upper <= delta), 3, code)
    code = np.where(upper < 0.0, 2, code)
    return np.where(lower > 0.0, 1, code)


def decide_group(
    sign: NDArray[np.int64], equivalent: BoolArray | None, done: BoolArray
) -> NDArray[np.int64]:
    """Decision codes of the group-sequential test: its permutation test rejected (A or B),
    the two one-sided tests said equivalent, the last planned look, or go on."""
    code = np.where(done, 4, 0)
    if equivalent is not None:
        code = np.where(equivalent, 3, code)
    code = np.where(sign < 0, 2, code)
    return np.where(sign > 0, 1, code)


def check_delta(delta: float | None) -> None:
    if delta is not None and not 0.0 < delta < 1.0:
        raise WorkbenchError(f"delta must lie strictly between 0 and 1, not {delta}")


def differences(a: Sequence[bool], b: Sequence[bool]) -> NDArray[np.int64]:
    """hit_A - hit_B per row of a batch; raises when the arms' batches differ in length."""
    if len(a) != len(b):
        raise WorkbenchError(
            f"a batch has {len(a)} rows for A but {len(b)} for B; both arms see the same rows"
        )
    hits_a = np.asarray([bool(x) for x in a], dtype=np.int64)
    return hits_a - np.asarray([bool(x) for x in b], dtype=np.int64)


class PairedSequence:
    """An anytime-valid comparison of two arms on the same rows, looked at after every batch."""

    def __init__(
        self,
        metric: str,
        answers: Sequence[str],
        *,
        alpha: float = 0.05,
        delta: float | None = None,
        clusters: Sequence[int] | IntArray | None = None,
        plan: Planned | None = None,
        budget: int | None = None,
    ) -> None:
        """answers: the official answers of ALL planned rows, in row_order (the finite
        population: N = len(answers)); metric: the official metric name as
        experiments/metrics.py names it; clusters: a cluster id per row (repeated texts,
        together in the order), so whole clusters are the units; plan: the group-sequential
        design's looks (None: the anytime-valid sequence, its bets tuned to the `budget`
        rows, default every planned row). Raises NotSequential for non-linear metrics."""
        check_delta(delta)
        self.metric = metric
        self.alpha = alpha
        self.delta = delta
        self.plan = plan
        self._core: Core | GroupCore
        if plan is None:
            self._core = Core(metric, answers, alpha, 1, clusters, budget)
            self._last = len(answers)
        else:
            self._core = GroupCore(
                metric, answers, plan.looks, alpha, 1, clusters=clusters,
                n_paths=plan.n_paths, seed=plan.seed,
            )  # fmt: skip
            self._last = self._core.looks[-1]
        self.n_planned = self._core.n_planned
        self.looks: list[Look] = []

    @property
    def n_rows(self) -> int:
        """Rows evaluated on both arms so far."""
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
        d = differences(a_correct, b_correct)
        if self.n_rows + len(d) > self._last:
            raise WorkbenchError(
                f"{self.n_rows} rows seen and {len(d)} more given, but only "
                f"{self._last} were planned"
            )
        if len(d):
            self._core.add(d[None, :])
        done = np.array([self.n_rows >= self._last])
        if isinstance(self._core, GroupCore):
            est, lo, hi = self._core.look()
            equivalent = self._core.equivalent(est, self.delta) if self.delta is not None else None
            code = int(decide_group(self._core.sign, equivalent, done)[0])
            if CODES[code] == "equivalent":  # show the interval the two one-sided tests used
                lo, hi = self._core.one_sided_interval(est)
        else:
            est, lo, hi = self._core.look()
            code = int(decide(lo, hi, done, self.delta)[0])
        look = Look(self.n_rows, float(est[0]), float(lo[0]), float(hi[0]), CODES[code])
        self.looks.append(look)
        return look


@dataclass(frozen=True)
class Outcomes:
    """`simulate_paired`'s result: per sequence, the decision and the look it stopped at."""

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
    clusters: Sequence[int] | IntArray | None = None,
    method: Method = "anytime",
    cap: int | None = None,
    n_paths: int = N_PATHS,
    seed: int = 0,
) -> Outcomes:
    """S comparisons (rows of the (S, N) hit arrays, columns in row order) run to their stop,
    looking after every `batch` rows up to `cap` (default: every row): the same sequence
    as `PairedSequence`, vectorised (`method` "group": the group-sequential test over those
    planned looks)."""
    check_delta(delta)
    d = a_correct.astype(np.int64) - b_correct.astype(np.int64)
    n_seq, n = d.shape
    cap = n if cap is None else min(cap, n)
    core: Core | GroupCore
    if method == "group":
        looks = planned_looks(batch, cap)
        core = GroupCore(
            metric, answers, looks, alpha, n_seq, clusters=clusters, n_paths=n_paths, seed=seed
        )
    else:
        core = Core(metric, answers, alpha, n_seq, clusters, cap)
    code = np.zeros(n_seq, dtype=np.int64)
    out = [np.zeros(n_seq) for _ in range(3)]
    rows = np.zeros(n_seq, dtype=np.int64)
    for start in range(0, cap, batch):
        live = code == 0
        core.add(d[:, start : min(start + batch, cap)], live)
        if isinstance(core, GroupCore):
            est, lo, hi = core.look(live)
            eq = core.equivalent(est, delta) if delta is not None else None
            new = decide_group(core.sign, eq, core.pos >= cap)
            lo1, hi1 = core.one_sided_interval(est)
            lo, hi = np.where(new == 3, lo1, lo), np.where(new == 3, hi1, hi)
        else:
            est, lo, hi = core.look()
            new = decide(lo, hi, core.pos >= cap, delta)
        for arr, val in zip(out, (est, lo, hi), strict=True):
            arr[live] = val[live]
        rows[live] = core.pos[live]
        code[live] = new[live]
        if not np.any(code == 0):
            break
    return Outcomes(np.array(CODES)[code], rows, out[0], out[1], out[2])
