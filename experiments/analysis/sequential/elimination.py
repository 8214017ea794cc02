"""Adaptive best-of-k: rows go only to the arms still in contention (successive elimination).

One paired sequence per pair of arms at alpha / (k (k - 1) / 2) (Bonferroni), updated on the
rows both arms were evaluated on while both were active. An arm is eliminated at a look when
another active arm's interval of (other - arm) lies above 0. With probability >= 1 - alpha
every pair's interval holds at every look at once (each is anytime-valid, a frozen pair is a
stopped one), so the final best-vs-worst interval keeps its level whichever pair the data
pick and however often they were looked at. `EliminationCore` runs S of these at once (the
benchmarks); `Elimination` is one, by arm name.

Two stopping rules: `until="best"` eliminates until one arm is left (or the rows run out),
which names the best; `until="range"` stops at the first elimination, when the best-vs-worst
statement (the range test's question: do the arms differ?) is already made at level alpha,
for fewer calls (benchmarks/sequential_validity.py measures both).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from experiments.analysis.sequential.betting import BoolArray, Core, FloatArray, IntArray
from experiments.analysis.sequential.group import GroupCore
from experiments.analysis.sequential.paired import Planned
from promptlib.errors import WorkbenchError

Until = Literal["best", "range"]


class EliminationCore:
    """S successive eliminations over k arms and the same planned rows (vectorised)."""

    def __init__(
        self,
        metric: str,
        answers: Sequence[str],
        k: int,
        alpha: float,
        n_seq: int,
        until: Until = "best",
        clusters: Sequence[int] | IntArray | None = None,
        plan: Planned | None = None,
        budget: int | None = None,
    ) -> None:
        if k < 2:
            raise WorkbenchError(f"best-of-k needs at least two arms, not {k}")
        if until not in ("best", "range"):
            raise WorkbenchError(f"until must be 'best' or 'range', not {until!r}")
        self.k, self.n_planned, self.alpha, self.until = k, len(answers), alpha, until
        self.pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
        level = alpha / len(self.pairs)
        self.cores: dict[tuple[int, int], Core | GroupCore] = {}
        for p in self.pairs:
            if plan is None:
                self.cores[p] = Core(metric, answers, level, n_seq, clusters, budget)
            else:
                self.cores[p] = GroupCore(
                    metric, answers, plan.looks, level, n_seq, clusters=clusters,
                    n_paths=plan.n_paths, seed=plan.seed,
                )  # fmt: skip
        # the last row a look is planned at: every planned row, or the group design's budget
        self.n_last = self.n_planned if plan is None else plan.looks[-1]
        shape = (n_seq, k, k)
        self.est, self.lo, self.hi = np.zeros(shape), np.full(shape, -1.0), np.full(shape, 1.0)
        # +1 where arm i beats arm j at level alpha / pairs (the pair's test rejected), -1
        # where j beats i: the anytime interval excluding 0, or the group design's test
        self.sgn = np.zeros(shape, dtype=np.int64)
        self.active = np.ones((n_seq, k), dtype=bool)
        self.rows = np.zeros((n_seq, k), dtype=np.int64)
        self.hits = np.zeros((n_seq, k), dtype=np.int64)
        self.out_at = np.full((n_seq, k), -1, dtype=np.int64)  # rows seen when eliminated
        self.out_by = np.full((n_seq, k), -1, dtype=np.int64)

    @property
    def live(self) -> BoolArray:
        """Sequences still running: more than one arm active (with until="range": none
        eliminated yet) and rows left."""
        n_active = self.active.sum(axis=1)
        left = n_active > 1 if self.until == "best" else n_active == self.k
        live: BoolArray = left & (self.rows.max(axis=1) < self.n_last)
        return live

    def update(self, hits: NDArray[np.bool_]) -> None:
        """The next batch, shape (S, k, b): each arm's hits (ignored for inactive arms)."""
        live = self.live
        for i, j in self.pairs:
            both = live & self.active[:, i] & self.active[:, j]
            if not np.any(both):
                continue
            d = hits[:, i, :].astype(np.int64) - hits[:, j, :].astype(np.int64)
            core = self.cores[(i, j)]
            core.add(d, both)
            if isinstance(core, GroupCore):
                est, lo, hi = core.look(both)
                sign = core.sign
            else:
                est, lo, hi = core.look()
                sign = (lo > 0.0).astype(np.int64) - (hi < 0.0).astype(np.int64)
            self._store(i, j, both, est, lo, hi)
            self.sgn[both, i, j], self.sgn[both, j, i] = sign[both], -sign[both]
        on = live[:, None] & self.active
        self.rows += on * hits.shape[2]
        self.hits += on * hits.sum(axis=2)
        self._eliminate(live)

    def _store(
        self, i: int, j: int, m: BoolArray, est: FloatArray, lo: FloatArray, hi: FloatArray
    ) -> None:
        self.est[m, i, j], self.lo[m, i, j], self.hi[m, i, j] = est[m], lo[m], hi[m]
        self.est[m, j, i], self.lo[m, j, i], self.hi[m, j, i] = -est[m], -hi[m], -lo[m]

    def _eliminate(self, live: BoolArray) -> None:
        """Drop each active arm that some active arm beats (lo[other, arm] > 0)."""
        beats = (self.sgn > 0) & self.active[:, :, None] & self.active[:, None, :]
        beaten = beats.any(axis=1) & live[:, None]
        everyone = beaten.sum(axis=1) == self.active.sum(axis=1)
        if np.any(everyone):  # cannot happen while the intervals hold; keep the top scorer
            top = np.argmax(np.where(self.active, self.hits, -1), axis=1)
            beaten[everyone, top[everyone]] = False
        by = np.argmax(beats, axis=1)
        self.out_at = np.where(beaten, self.rows, self.out_at)
        self.out_by = np.where(beaten, by, self.out_by)
        self.active &= ~beaten

    def best_vs_worst(self) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """Per sequence, the pair the statement is about. Where some pair's test rejected
        (for the anytime sequence: its interval excludes 0): best = the active arm with the
        highest lower bound over an arm it beats, worst = that arm. Else best = the active
        arm with most hits (all active arms saw the same rows), worst = the arm it leads by
        most on their common rows. Any choice keeps the level: every pair's test holds at
        once."""
        s = np.arange(self.active.shape[0])
        eye = np.eye(self.k, dtype=bool)[None]
        wins = self.sgn > 0
        margin = np.where(self.active[:, :, None] & ~eye & wins, self.lo, -np.inf).max(axis=2)
        by_hits = np.argmax(np.where(self.active, self.hits, -1), axis=1)
        decided = np.isfinite(margin).any(axis=1)
        best = np.where(decided, np.argmax(margin, axis=1), by_hits)
        won = wins[s, best, :] & ~eye[0][best]
        lo = np.where(won, self.lo[s, best, :], -np.inf)
        lead = np.where(eye[0][best], -np.inf, self.est[s, best, :])
        worst = np.where(won.any(axis=1), np.argmax(lo, axis=1), np.argmax(lead, axis=1))
        return best, worst

    def beats(self, i: NDArray[np.intp], j: NDArray[np.intp]) -> BoolArray:
        """Per sequence, whether arm i[s] beat arm j[s] (the pair's test rejected)."""
        s = np.arange(self.active.shape[0])
        out: BoolArray = self.sgn[s, i, j] > 0
        return out


class Elimination:
    """Adaptive best-of-k, successive elimination with anytime-valid intervals."""

    def __init__(
        self,
        metric: str,
        answers: Sequence[str],
        arms: Sequence[str],
        *,
        alpha: float = 0.05,
        until: Until = "best",
        clusters: Sequence[int] | IntArray | None = None,
        plan: Planned | None = None,
        budget: int | None = None,
    ) -> None:
        if len(set(arms)) != len(arms) or len(arms) < 2:
            raise WorkbenchError(f"best-of-k needs at least two distinct arms, not {list(arms)}")
        self.metric, self.alpha, self.arms = metric, alpha, tuple(arms)
        self._core = EliminationCore(
            metric,
            answers,
            len(arms),
            alpha,
            1,
            until,
            clusters=clusters,
            plan=plan,
            budget=budget,
        )
        self.n_planned = len(answers)

    @property
    def active(self) -> tuple[str, ...]:
        """Arms still in contention."""
        return tuple(a for a, on in zip(self.arms, self._core.active[0], strict=True) if on)

    @property
    def done(self) -> bool:
        """One arm left (until="range": one eliminated), or the planned rows ran out."""
        return not bool(self._core.live[0])

    @property
    def eliminated(self) -> list[tuple[str, int, str]]:
        """(arm, rows seen when eliminated, by which arm), in the order they went."""
        at, by = self._core.out_at[0], self._core.out_by[0]
        gone = sorted((int(at[i]), i) for i in range(len(self.arms)) if at[i] >= 0)
        return [(self.arms[i], n, self.arms[int(by[i])]) for n, i in gone]

    def update(self, correct: Mapping[str, Sequence[bool]]) -> None:
        """The next batch of rows, for the ACTIVE arms only (each arm's hits, in row order)."""
        if self.done:
            raise WorkbenchError("this best-of-k comparison has already finished")
        if set(correct) != set(self.active):
            raise WorkbenchError(
                f"a batch must give exactly the active arms {list(self.active)}, "
                f"not {sorted(correct)}"
            )
        sizes = {len(v) for v in correct.values()}
        if len(sizes) != 1:
            raise WorkbenchError("every active arm's batch must have the same rows")
        hits = np.zeros((1, len(self.arms), sizes.pop()), dtype=bool)
        for i, arm in enumerate(self.arms):
            if arm in correct:
                hits[0, i] = [bool(x) for x in correct[arm]]
        self._core.update(hits)

    def verdict(self) -> dict[str, Any]:
        """Best, worst, the best-vs-worst interval and decision at level alpha, rows per arm.

        decision "best" says best beats worst at level alpha, not that `best` is the best arm:
        that holds only when `best_identified` (one arm left in contention); otherwise the
        arms in `in_contention` are not told apart and `best` is only one of them."""
        core = self._core
        if not core.rows.any():
            raise WorkbenchError("no rows evaluated yet: call update first")
        best_i, worst_i = (int(v[0]) for v in core.best_vs_worst())
        lower, upper = float(core.lo[0, best_i, worst_i]), float(core.hi[0, best_i, worst_i])
        pairs = [
            {
                "a": self.arms[i],
                "b": self.arms[j],
                "n_rows": int(core.cores[(i, j)].pos[0]),
                "estimate": float(core.est[0, i, j]),
                "lower": float(core.lo[0, i, j]),
                "upper": float(core.hi[0, i, j]),
            }
            for i, j in core.pairs
        ]
        return {
            "alpha": self.alpha,
            "best": self.arms[best_i],
            "worst": self.arms[worst_i],
            "n_rows": int(core.cores[(min(best_i, worst_i), max(best_i, worst_i))].pos[0]),
            "estimate": float(core.est[0, best_i, worst_i]),
            "lower": lower,
            "upper": upper,
            "decision": "best" if bool(core.sgn[0, best_i, worst_i] > 0) else "undecided",
            "best_identified": len(self.active) == 1,
            "in_contention": list(self.active),
            "eliminated": self.eliminated,
            "rows": {a: int(n) for a, n in zip(self.arms, core.rows[0], strict=True)},
            "calls": int(core.rows[0].sum()),
            "full_grid_calls": self.n_planned * len(self.arms),
            "pairs": pairs,
        }
