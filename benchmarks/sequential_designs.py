"""Fixed, group-sequential and anytime-valid designs side by side: power, rows, size, coverage.

One run, the same simulated data for every design (array level, the product's functions):
each row has a difficulty p_i ~ U(0.5, 0.95) shared by the arms; arm A is right with
probability p_i, arm B with p_i - effect, so the true metric difference is `effect` exactly,
in every class (accuracy and balanced accuracy alike). N = 1,000 planned rows, looks after
every 10 rows (100 looks), alpha = 0.05, two-sided.

- fixed: the product's paired permutation test (`stats.paired_permutation_test`) on all N
  rows (its power; it always uses N rows);
- group: `design: sequential` with `method: group` (`simulate_paired(method="group")`: the
  permutation test at the planned looks with Lan-DeMets O'Brien-Fleming spending; the
  product draws 10,000 null paths, this benchmark `--paths`, which only coarsens the
  boundary: the size is exact for any number);
- anytime: `method: anytime` (the betting confidence sequence, bets tuned to the budget).

Cells: 50/50, 80/20 and five classes (60/20/10/6/4) under balanced accuracy, and the five
classes under accuracy. Effects 0, 0.5x, 1x and 2x the fixed design's MDE80 as the product
computes it (`power.minimum_detectable_effect` on one null draw of the cell). Printed per
cell and effect: the share deciding A (power; at 0 the share deciding A or B: size), the
mean rows used (an undecided run counts its N), and for the group design the coverage of
its repeated confidence interval at the stop. Then equivalence (group design, delta = the
MDE): the share ending "equivalent" when the true difference is 0 and when it is delta.

Goals (issue 29): at 1x MDE the group design's power within 0.03 of the fixed test's at no
more than 75% of its rows on average; at 2x MDE no more than 40%; size <= alpha everywhere.

    python benchmarks/sequential_designs.py                    # ~25 min on 2 cores
    python benchmarks/sequential_designs.py --sims 200 --fixed-sims 100 --cells 50/50
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from experiments.analysis import power, stats
from experiments.analysis.sequential import row_order, simulate_paired

ALPHA = 0.05
BATCH = 10
Hits = NDArray[np.bool_]


@dataclass(frozen=True)
class Cell:
    name: str
    shares: tuple[float, ...]
    metric: str
    n: int = 1000


CELLS = (
    Cell("50/50", (0.5, 0.5), "balanced_accuracy"),
    Cell("80/20", (0.8, 0.2), "balanced_accuracy"),
    Cell("5 classes", (0.6, 0.2, 0.1, 0.06, 0.04), "balanced_accuracy"),
    Cell("5 classes acc", (0.6, 0.2, 0.1, 0.06, 0.04), "accuracy"),
)


def answers_of(cell: Cell, seed: int) -> list[str]:
    """The cell's answers (exact class counts) in the design's order (`row_order`)."""
    counts = [round(s * cell.n) for s in cell.shares]
    counts[0] += cell.n - sum(counts)
    raw = [f"c{c}" for c, k in enumerate(counts) for _ in range(k)]
    return [raw[i] for i in row_order(raw, seed)]


def draw(rng: np.random.Generator, n: int, sims: int, effect: float) -> tuple[Hits, Hits]:
    p = rng.uniform(0.5, 0.95, (sims, n))
    a: Hits = rng.random((sims, n)) < p
    b: Hits = rng.random((sims, n)) < np.clip(p - effect, 0.0, 1.0)
    return a, b


def predictions(answers: list[str], hits: Hits, labels: list[str]) -> NDArray[Any]:
    """Labels: the answer where right, the next label where wrong."""
    y = np.asarray(answers, dtype=object)
    nxt = {lab: labels[(i + 1) % len(labels)] for i, lab in enumerate(labels)}
    wrong = np.asarray([nxt[v] for v in answers], dtype=object)
    return np.where(hits, y, wrong)


def mde(cell: Cell, seed: int) -> float:
    answers = answers_of(cell, seed)
    labels = sorted(set(answers))
    a, b = draw(np.random.default_rng(seed), cell.n, 1, 0.0)
    res = power.minimum_detectable_effect(
        answers, predictions(answers, a[0], labels), predictions(answers, b[0], labels),
        metric=cell.metric, by_class=False,
    )  # fmt: skip
    if res.value is None:
        raise RuntimeError(f"no MDE for {cell.name}: {res.note}")
    return float(res.value)


def fixed(cell: Cell, effect: float, sims: int, seed: int) -> float:
    """The fixed test's rejection rate in the direction of A (any direction at effect 0)."""
    answers = answers_of(cell, seed)
    labels = sorted(set(answers))
    a, b = draw(np.random.default_rng(seed + 2), cell.n, sims, effect)
    hit = 0
    for s in range(sims):
        pa, pb = predictions(answers, a[s], labels), predictions(answers, b[s], labels)
        res = stats.paired_permutation_test(answers, pa, pb, metric=cell.metric, seed=s)
        hit += res.p_value <= ALPHA and (effect == 0 or res.statistic > 0)
    return hit / sims


def sequential(
    cell: Cell, effect: float, sims: int, seed: int, method: str, paths: int,
    delta: float | None = None, chunk: int = 100,
) -> dict[str, float]:  # fmt: skip
    answers = answers_of(cell, seed)
    a, b = draw(np.random.default_rng(seed + 1), cell.n, sims, effect)
    decisions, rows, cover = [], [], []
    for lo in range(0, sims, chunk):
        out = simulate_paired(
            cell.metric, answers, a[lo : lo + chunk], b[lo : lo + chunk], batch=BATCH,
            alpha=ALPHA, delta=delta, method=method, n_paths=paths,  # type: ignore[arg-type]
        )  # fmt: skip
        decisions.append(out.decision)
        rows.append(out.rows)
        cover.append((out.lower <= effect) & (effect <= out.upper))
    dec, rw, cov = np.concatenate(decisions), np.concatenate(rows), np.concatenate(cover)
    return {
        "A": float((dec == "A").mean()),
        "B": float((dec == "B").mean()),
        "equivalent": float((dec == "equivalent").mean()),
        "rows": float(rw.mean()),
        "coverage": float(cov.mean()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--fixed-sims", type=int, default=500)
    ap.add_argument("--paths", type=int, default=10_000, help="group design null paths")
    ap.add_argument("--seed", type=int, default=4242)
    ap.add_argument("--cells", action="append", default=None, help="cell names (default all)")
    args = ap.parse_args()
    t0 = time.time()
    cells = [c for c in CELLS if args.cells is None or c.name in args.cells]
    print(
        f"{'cell':<14} {'metric':<18} {'MDE':>6} {'effect':>7} | {'fixed':>6} | "
        f"{'group':>6} {'rows':>5} {'%N':>4} {'cover':>5} | {'anytime':>7} {'rows':>5} {'%N':>4}"
    )
    for cell in cells:
        m = mde(cell, args.seed)
        for mult in (0.0, 0.5, 1.0, 2.0):
            eff = mult * m
            f = fixed(cell, eff, args.fixed_sims, args.seed)
            g = sequential(cell, eff, args.sims, args.seed, "group", args.paths)
            y = sequential(cell, eff, args.sims, args.seed, "anytime", args.paths)
            gp = g["A"] + (g["B"] if mult == 0 else 0.0)
            yp = y["A"] + (y["B"] if mult == 0 else 0.0)
            print(
                f"{cell.name:<14} {cell.metric:<18} {m:>6.3f} {mult:>6.1f}x | {f:>6.3f} | "
                f"{gp:>6.3f} {g['rows']:>5.0f} {100 * g['rows'] / cell.n:>4.0f} "
                f"{g['coverage']:>5.3f} | {yp:>7.3f} {y['rows']:>5.0f} "
                f"{100 * y['rows'] / cell.n:>4.0f}",
                flush=True,
            )
    print("(at 0x: size, deciding A or B; else power, deciding A. s.e. of a rate r over S "
          f"sims: sqrt(r(1-r)/S), S = {args.sims} (fixed: {args.fixed_sims}))")  # fmt: skip
    print(f"\nequivalence, group design, delta = MDE ({args.sims} sims each)")
    print(f"{'cell':<14} {'delta':>6} {'true diff':>9} {'equivalent':>10} {'s.e.':>6} {'rows':>5}")
    for cell in cells:
        m = mde(cell, args.seed)
        for eff in (0.0, m):
            e = sequential(cell, eff, args.sims, args.seed + 7, "group", args.paths, delta=m)
            se = math.sqrt(max(e["equivalent"] * (1 - e["equivalent"]), 1e-12) / args.sims)
            print(f"{cell.name:<14} {m:>6.3f} {eff:>9.3f} {e['equivalent']:>10.3f} {se:>6.3f} "
                  f"{e['rows']:>5.0f}", flush=True)  # fmt: skip
    print(f"wall time: {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
