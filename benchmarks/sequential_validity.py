"""Size, savings and adaptive best-of-k of experiments/analysis/sequential, by simulation.

Array-level simulation (the engine's real-path version runs against the stub server): each
row has a difficulty p_i shared by the arms (as `stats_validity.exchangeable_variants`), arm
A is right on row i with probability p_i and every other arm with p_i - effect, so the true
metric difference is `effect` exactly, in every class (accuracy and balanced accuracy alike).
Rows run in `row_order`, looks after every batch of 10 rows, up to N rows.

1. Size under the null (effect 0): the rate of "A"/"B" verdicts, with its Monte Carlo s.e.,
   for accuracy and balanced accuracy with 80/20 classes (target <= alpha = 0.05).
2. Savings: the fixed design's MDE at N rows is computed the way the product computes it
   (`analysis.power.minimum_detectable_effect` on one null draw, seed `--mde-seed`); at 0,
   0.5x, 1x and 2x that MDE: the sequential design's power and mean rows (over all runs,
   an undecided run counting N; and over the runs with the correct verdict), against the
   fixed test's power: the product's `paired_permutation_test` at N rows, simulated on
   `--fixed-sims` draws. Targets at 2x: mean rows <= 40% of N, power >= 0.9 x fixed power.
3. Adaptive best-of-k (k = 5, arm A better by 2x MDE): calls (rows x active arms) against the
   full grid k x N (target <= 50%), and the best-vs-worst size with 5 equal arms (<= 0.05),
   for both stopping rules (until="best": one arm left; until="range": first elimination).
4. Grid: small N (100), near ceiling (p ~ U(0.9, 1.0), A at 0.95), 90/10 classes.
5. Equivalence with delta = 2x MDE: the rate of "equivalent" verdicts when the true
   difference is delta (an error; target <= alpha) and the rows used when it is 0.
6. Shuffle check: the class pattern of the order, and so every simulated result, is the same
   whether the answers came sorted or shuffled (row_order fixes it from the seed); and rates
   with difficulty attached to the input rows agree within Monte Carlo error.

Evaluation seeds (`--seed`, default 2026) are not the tuning seed (777) the bet truncation
was chosen on.

    .venv/bin/python benchmarks/sequential_validity.py              # everything (~5 min)
    .venv/bin/python benchmarks/sequential_validity.py --part size --sims 1000

tests/experiments/analysis/test_anytime_valid.py runs reduced versions of these functions.
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
from experiments.analysis.sequential import EliminationCore, row_order, simulate_paired
from experiments.analysis.sequential.elimination import Until

ALPHA = 0.05
BATCH = 10
Hits = NDArray[np.bool_]


@dataclass(frozen=True)
class Cell:
    """One simulated setting: rows, minority share and the range of row difficulty."""

    name: str
    n: int = 1000
    minority: float = 0.2
    p_low: float = 0.5
    p_high: float = 0.95


BASE = Cell("80/20, N=1000")
GRID = (
    Cell("small N=100", n=100),
    Cell("ceiling p~0.95", p_low=0.9, p_high=1.0),
    Cell("90/10, N=1000", minority=0.1),
)


def ordered_answers(cell: Cell, seed: int) -> list[str]:
    """The cell's answers (exact class counts) in `row_order`."""
    n_min = round(cell.n * cell.minority)
    raw = ["No"] * n_min + ["Yes"] * (cell.n - n_min)
    return [raw[i] for i in row_order(raw, seed)]


def draw(rng: np.random.Generator, cell: Cell, sims: int, k: int, effect: float) -> Hits:
    """Hits of shape (sims, k, n): shared difficulty p_i; arm 0 right w.p. p_i, the others
    w.p. p_i - effect."""
    p = rng.uniform(cell.p_low, cell.p_high, (sims, 1, cell.n))
    shift = np.full((1, k, 1), effect)
    shift[0, 0, 0] = 0.0
    out: Hits = rng.random((sims, k, cell.n)) < np.clip(p - shift, 0.0, 1.0)
    return out


def _predictions(answers: list[str], hits: Hits) -> NDArray[Any]:
    y = np.asarray(answers, dtype=object)
    return np.where(hits, y, np.where(y == "Yes", "No", "Yes"))


def mde(cell: Cell, metric: str, seed: int) -> float:
    """The product's MDE80 (simulated, calibrated) at the cell's N, from one null draw."""
    answers = ordered_answers(cell, seed)
    hits = draw(np.random.default_rng(seed), cell, 1, 2, 0.0)[0]
    pa, pb = _predictions(answers, hits[0]), _predictions(answers, hits[1])
    res = power.minimum_detectable_effect(answers, pa, pb, metric=metric, by_class=False)
    if res.value is None:
        raise RuntimeError(f"no MDE for {cell.name} {metric}: {res.note}")
    return float(res.value)


def sequential_runs(
    cell: Cell, metric: str, effect: float, sims: int, seed: int, answers: list[str] | None = None
) -> dict[str, float]:
    """Sequential verdicts at `effect`: rate of each verdict and rows used."""
    answers = answers or ordered_answers(cell, seed)
    hits = draw(np.random.default_rng(seed + 1), cell, sims, 2, effect)
    out = simulate_paired(metric, answers, hits[:, 0], hits[:, 1], batch=BATCH, alpha=ALPHA)
    correct = out.decision == ("A" if effect > 0 else "undecided")
    rejected = np.isin(out.decision, ("A", "B"))
    rate = float(rejected.mean())
    return {
        "power": float((out.decision == "A").mean()),
        "reject": rate,
        "se": math.sqrt(rate * (1 - rate) / sims),
        "wrong_sign": float((out.decision == "B").mean()),
        "rows": float(out.rows.mean()),
        "rows_correct": float(out.rows[correct].mean()) if correct.any() else float("nan"),
    }


def equivalence_runs(
    cell: Cell, metric: str, effect: float, delta: float, sims: int, seed: int
) -> dict[str, float]:
    """With +-delta set: the rate of "equivalent" verdicts at `effect` and rows used."""
    answers = ordered_answers(cell, seed)
    hits = draw(np.random.default_rng(seed + 4), cell, sims, 2, effect)
    out = simulate_paired(
        metric, answers, hits[:, 0], hits[:, 1], batch=BATCH, alpha=ALPHA, delta=delta
    )
    rate = float((out.decision == "equivalent").mean())
    return {
        "equivalent": rate,
        "se": math.sqrt(rate * (1 - rate) / sims),
        "rows": float(out.rows.mean()),
    }


def fixed_power(cell: Cell, metric: str, effect: float, sims: int, seed: int) -> float:
    """Rejection rate of the product's paired permutation test at all N rows."""
    answers = ordered_answers(cell, seed)
    hits = draw(np.random.default_rng(seed + 2), cell, sims, 2, effect)
    hits_rejected = 0
    for s in range(sims):
        pa, pb = _predictions(answers, hits[s, 0]), _predictions(answers, hits[s, 1])
        res = stats.paired_permutation_test(answers, pa, pb, metric=metric, seed=s)
        hits_rejected += res.p_value <= ALPHA
    return hits_rejected / sims


def best_of_k(
    cell: Cell,
    metric: str,
    effect: float,
    sims: int,
    seed: int,
    k: int = 5,
    until: Until = "best",
) -> dict[str, float]:
    """Successive elimination over k arms (arm 0 better by `effect`): calls and verdicts."""
    answers = ordered_answers(cell, seed)
    hits = draw(np.random.default_rng(seed + 3), cell, sims, k, effect)
    core = EliminationCore(metric, answers, k, ALPHA, sims, until)
    for start in range(0, cell.n, BATCH):
        if not core.live.any():
            break
        core.update(hits[:, :, start : start + BATCH])
    best, worst = core.best_vs_worst()
    lower = core.lo[np.arange(sims), best, worst]
    decided = lower > 0.0
    rate = float(decided.mean())
    return {
        "calls": float(core.rows.sum(axis=1).mean()),
        "calls_share": float(core.rows.sum(axis=1).mean() / (k * cell.n)),
        "best_vs_worst_rate": rate,
        "se": math.sqrt(rate * (1 - rate) / sims),
        "best_is_0": float((best == 0).mean()),
    }


def shuffle_check(cell: Cell, sims: int, seed: int) -> dict[str, Any]:
    """Sorted vs shuffled input answers: the same ordered class pattern, the same results."""
    n_min = round(cell.n * cell.minority)
    raw = ["No"] * n_min + ["Yes"] * (cell.n - n_min)
    shuffled = [raw[i] for i in np.random.default_rng(seed + 9).permutation(cell.n)]
    a = [raw[i] for i in row_order(raw, seed)]
    b = [shuffled[i] for i in row_order(shuffled, seed)]
    same = {
        m: sequential_runs(cell, m, 0.0, sims, seed, answers=a)
        == sequential_runs(cell, m, 0.0, sims, seed, answers=b)
        for m in ("accuracy", "balanced_accuracy")
    }
    # difficulty attached to the input rows: the sorted input's first rows are all "No"
    rng = np.random.default_rng(seed + 10)
    rates = {}
    for label, answers in (("sorted", raw), ("shuffled", shuffled)):
        order = row_order(answers, seed)
        p = rng.uniform(cell.p_low, cell.p_high, (sims, cell.n))[:, order]
        ha, hb = rng.random((sims, cell.n)) < p, rng.random((sims, cell.n)) < p
        ordered = [answers[i] for i in order]
        out = simulate_paired("balanced_accuracy", ordered, ha, hb, batch=BATCH, alpha=ALPHA)
        rates[label] = float(np.isin(out.decision, ("A", "B")).mean())
    return {"pattern_equal": a == b, "results_equal": same, "rates": rates}


def _paired_table(cells: tuple[Cell, ...], args: argparse.Namespace) -> None:
    print(
        f"{'cell':<16} {'metric':<18} {'xMDE':>5} {'diff':>6} {'reject':>7} {'s.e.':>6} "
        f"{'fixed':>6} {'rows':>6} {'rows ok':>7} {'%N':>5}"
    )
    for cell in cells:
        for metric in ("accuracy", "balanced_accuracy"):
            value = mde(cell, metric, args.mde_seed)
            for mult in (0.0, 0.5, 1.0, 2.0):
                effect = mult * value
                sims = args.sims if mult == 0 else args.alt_sims
                r = sequential_runs(cell, metric, effect, sims, args.seed)
                fixed = (
                    fixed_power(cell, metric, effect, args.fixed_sims, args.seed)
                    if mult > 0 and args.fixed_sims
                    else float("nan")
                )
                print(
                    f"{cell.name:<16} {metric:<18} {mult:>5.1f} {effect:>6.3f} "
                    f"{r['reject']:>7.3f} {r['se']:>6.3f} {fixed:>6.3f} {r['rows']:>6.0f} "
                    f"{r['rows_correct']:>7.0f} {100 * r['rows'] / cell.n:>5.1f}",
                    flush=True,
                )


def _best_of_k_table(args: argparse.Namespace) -> None:
    print(
        f"{'until':<6} {'metric':<18} {'effect':>7} {'calls':>7} {'% grid':>7} "
        f"{'bvw rate':>8} {'s.e.':>6}"
    )
    for until in ("best", "range"):
        for metric in ("accuracy", "balanced_accuracy"):
            value = mde(BASE, metric, args.mde_seed)
            for effect, sims in ((0.0, args.sims), (2 * value, args.alt_sims)):
                r = best_of_k(BASE, metric, effect, sims, args.seed, until=until)
                print(
                    f"{until:<6} {metric:<18} {effect:>7.3f} {r['calls']:>7.0f} "
                    f"{100 * r['calls_share']:>7.1f} {r['best_vs_worst_rate']:>8.3f} "
                    f"{r['se']:>6.3f}   best is arm A: {r['best_is_0']:.3f}",
                    flush=True,
                )


def _equivalence_table(args: argparse.Namespace) -> None:
    print(f"{'metric':<18} {'delta':>6} {'diff':>6} {'equiv':>7} {'s.e.':>6} {'rows':>6}")
    for metric in ("accuracy", "balanced_accuracy"):
        delta = 2 * mde(BASE, metric, args.mde_seed)
        for effect in (0.0, delta):
            r = equivalence_runs(BASE, metric, effect, delta, args.alt_sims, args.seed)
            print(
                f"{metric:<18} {delta:>6.3f} {effect:>6.3f} {r['equivalent']:>7.3f} "
                f"{r['se']:>6.3f} {r['rows']:>6.0f}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part", choices=("all", "size", "grid", "best", "equivalence", "shuffle"), default="all"
    )
    parser.add_argument("--sims", type=int, default=2000, help="simulations under the null")
    parser.add_argument("--alt-sims", type=int, default=1000, help="simulations with an effect")
    parser.add_argument("--fixed-sims", type=int, default=300, help="fixed-test simulations")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--mde-seed", type=int, default=101)
    args = parser.parse_args()
    start = time.perf_counter()
    print(f"alpha {ALPHA}, looks every {BATCH} rows; diff = true metric(A) - metric(B)")
    if args.part in ("all", "size"):
        print("\n1-2. size and savings (reject: share of A/B verdicts; fixed: permutation test)")
        _paired_table((BASE,), args)
    if args.part in ("all", "grid"):
        print("\n4. grid")
        _paired_table(GRID, args)
    if args.part in ("all", "best"):
        print("\n3. adaptive best-of-k (k = 5), 80/20, N = 1000")
        _best_of_k_table(args)
    if args.part in ("all", "equivalence"):
        print(
            "\n5. equivalence (delta = 2x MDE): 'equivalent' at diff = delta is an error (<= 0.05)"
        )
        _equivalence_table(args)
    if args.part in ("all", "shuffle"):
        print("\n6. shuffle check:", shuffle_check(BASE, min(args.sims, 500), args.seed))
    print(f"\nwall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
