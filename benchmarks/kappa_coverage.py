"""Coverage of `experiments.analysis.stats.agreement.cohen_kappa`'s interval, where it is printed.

Two graders grade n items 0/1. Both give a 1 with probability q and agree beyond chance by a
set kappa: the four cells (1,1), (1,0), (0,1), (0,0) have probabilities q^2 + k q(1-q),
q(1-q)(1-k), q(1-q)(1-k), (1-q)^2 + k q(1-q) (so Cohen's kappa of the law is exactly k).
Grid: n in {10, 20, 30, 50, 100, 200}, kappa in {0, 0.2, 0.4, 0.6, 0.8, 0.9}, q in {0.5,
0.7, 0.8, 0.9, 0.95}. Each draw's grades go through the real `cohen_kappa` (memoised by the
table: the function depends on nothing else). Per cell it reports the coverage among the
draws that print an interval and the share that print one.

The tool decides from the data whether to print, so a cell can print in some draws and not
others; coverage is then the coverage of the intervals a user would see there. A cell counts
as "printed" when at least `PRINTED` of its draws print (below that its coverage rests on
under 100 of 2000 draws); the rest are listed as withheld.

    .venv/bin/python benchmarks/kappa_coverage.py              # 2000 draws per cell
    .venv/bin/python benchmarks/kappa_coverage.py --reps 500   # quicker
    .venv/bin/python benchmarks/kappa_coverage.py --exact      # every table, no draw error

`--exact` weighs every possible table by its multinomial probability instead of drawing
(tables below 1e-9 in every cell of the grid are dropped; minutes at n = 200).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from experiments.analysis.stats.agreement import KappaEstimate, cohen_kappa

NS = (10, 20, 30, 50, 100, 200)
KAPPAS = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9)
RATES = (0.5, 0.7, 0.8, 0.9, 0.95)
PRINTED = 0.05  # a cell whose draws print an interval less often than this is "withheld"
BAND = (0.93, 0.97)


@dataclass(frozen=True)
class Cell:
    n: int
    q: float
    kappa: float
    coverage: float | None  # among the draws that print an interval
    printed: float  # share of draws that print one
    undefined: float  # share where kappa itself is undefined (a grader gave one grade)


def cell_probs(q: float, kappa: float) -> np.ndarray:
    """The four cells (1,1), (1,0), (0,1), (0,0) for both graders' rate q and this kappa."""
    pq = q * (1 - q)
    return np.array([q * q + kappa * pq, pq * (1 - kappa), pq * (1 - kappa),
                     (1 - q) ** 2 + kappa * pq])  # fmt: skip


def grades(table: tuple[int, int, int, int]) -> tuple[list[int], list[int]]:
    n11, n10, n01, n00 = table
    a = [1] * (n11 + n10) + [0] * (n01 + n00)
    b = [1] * n11 + [0] * n10 + [1] * n01 + [0] * n00
    return a, b


class Memo:
    """`cohen_kappa` of a table, computed once."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, int, int, int], KappaEstimate] = {}

    def __call__(self, table: tuple[int, int, int, int]) -> KappaEstimate:
        if table not in self.seen:
            self.seen[table] = cohen_kappa(*grades(table))
        return self.seen[table]


def _tally(
    tables: np.ndarray, weights: np.ndarray, kappa: float, est: Callable[..., KappaEstimate]
) -> tuple[float | None, float, float]:
    shown = covered = undefined = 0.0
    for t, w in zip(tables, weights, strict=True):
        e = est(tuple(int(x) for x in t))
        if e.kappa is None:
            undefined += w
        if e.low is None or e.high is None:
            continue
        shown += w
        covered += w * (e.low <= kappa <= e.high)
    total = float(weights.sum())
    return (covered / shown if shown else None), shown / total, undefined / total


def simulate(reps: int, seed: int) -> list[Cell]:
    rng = np.random.default_rng(seed)
    est = Memo()
    out = []
    for n in NS:
        for q in RATES:
            for k in KAPPAS:
                draws = rng.multinomial(n, cell_probs(q, k), size=reps)
                tables, counts = np.unique(draws, axis=0, return_counts=True)
                out.append(Cell(n, q, k, *_tally(tables, counts.astype(float), k, est)))
    return out


def _all_tables(n: int) -> np.ndarray:
    a, b, c = np.meshgrid(*(np.arange(n + 1),) * 3, indexing="ij")
    keep = a + b + c <= n
    a, b, c = a[keep], b[keep], c[keep]
    return np.stack([a, b, c, n - a - b - c], axis=1)


def _pmf(tables: np.ndarray, p: np.ndarray) -> np.ndarray:
    n = int(tables[0].sum())
    logp = np.log(np.where(p > 0, p, 1.0))
    terms = np.where(tables > 0, tables * logp, 0.0)
    out = np.exp(gammaln(n + 1) - gammaln(tables + 1).sum(axis=1) + terms.sum(axis=1))
    return np.where(((tables > 0) & (p == 0)).any(axis=1), 0.0, out)


def exact() -> list[Cell]:
    est = Memo()
    out = []
    for n in NS:
        tables = _all_tables(n)
        w = {(q, k): _pmf(tables, cell_probs(q, k)) for q in RATES for k in KAPPAS}
        keep = np.max(np.stack(list(w.values())), axis=0) > 1e-9
        for q in RATES:
            for k in KAPPAS:
                out.append(Cell(n, q, k, *_tally(tables[keep], w[q, k][keep], k, est)))
    return out


def report(cells: list[Cell]) -> str:
    lines = []
    for n in NS:
        for q in RATES:
            row = [c for c in cells if c.n == n and c.q == q]
            parts = []
            for c in row:
                cov = "  -  " if c.coverage is None else f"{c.coverage:.3f}"
                parts.append(f"k={c.kappa:.1f}: {cov} ({c.printed:4.0%})")
            lines.append(f"n={n:<3} q={q:<4}  " + "  ".join(parts))
    shown = [c for c in cells if c.printed >= PRINTED and c.coverage is not None]
    held = [c for c in cells if c.printed < PRINTED]
    out_band = [c for c in shown if not BAND[0] <= (c.coverage or 0) <= BAND[1]]
    lines.append("")
    lines.append(
        f"printed in >= {PRINTED:.0%} of draws: {len(shown)} of {len(cells)} cells, coverage "
        f"{min(c.coverage or 0 for c in shown):.3f}-{max(c.coverage or 0 for c in shown):.3f}"
    )
    lines.append(
        f"outside {BAND[0]}-{BAND[1]}: {len(out_band)}"
        + "".join(
            f"\n  n={c.n} q={c.q} kappa={c.kappa}: {c.coverage:.3f}, printed {c.printed:.0%}"
            for c in out_band
        )
    )
    by_n: dict[int, list[str]] = {}
    for c in held:
        by_n.setdefault(c.n, []).append(f"q={c.q}/k={c.kappa}")
    lines.append(f"withheld (printed in < {PRINTED:.0%} of draws): {len(held)} cells")
    lines.extend(f"  n={n}: {', '.join(v)}" for n, v in by_n.items())
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=2000, help="draws per cell (default 2000)")
    ap.add_argument("--seed", type=int, default=20250633)
    ap.add_argument("--exact", action="store_true", help="weigh every table, no draws")
    args = ap.parse_args()
    t0 = time.perf_counter()
    cells = exact() if args.exact else simulate(args.reps, args.seed)
    how = "exact" if args.exact else f"{args.reps} draws per cell, seed {args.seed}"
    print(f"Cohen's kappa, 95% interval: coverage where printed (share printed), {how}")
    print(report(cells))
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
