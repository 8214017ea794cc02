"""Validity of experiments/analysis/stats/ by simulation: size, power and interval coverage.

1. Best vs worst of k = 5 interchangeable variants (n = 100 rows, balanced and 80/20
   classes, balanced accuracy): rejection rate at alpha = 0.05 of
   - `range_permutation_test` (target 2%-8%), and
   - `post_selection_pair_test`, the paper's best-vs-worst pair test (anti-conservative);
   the same for ssla_f1 (entity lists), and the range test's power when one variant is
   better by a set amount.
2. Coverage of 95% `bootstrap_ci` intervals with 90/10 classes at n = 50 and 200, for one
   variant's balanced accuracy and for a paired difference, whose true values are known
   (per-class recalls are set); every interval method, three recall scenarios.

Every simulation is seeded (`--seed`, then one seed per simulation), so a run reproduces.

    .venv/bin/python benchmarks/stats_validity.py                    # everything (~10 min)
    .venv/bin/python benchmarks/stats_validity.py --part range       # ~1 min
    .venv/bin/python benchmarks/stats_validity.py --part coverage --methods bc --seed 7

tests/experiments/analysis/test_stats.py runs reduced versions of these functions.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from experiments.analysis import stats

ALPHA = 0.05


def labels(n: int, minority: float) -> NDArray[Any]:
    """Answers with exact class counts: round(minority * n) "No", the rest "Yes"."""
    n_min = round(n * minority)
    return np.array(["No"] * n_min + ["Yes"] * (n - n_min), dtype=object)


def _flip(y: NDArray[Any]) -> NDArray[Any]:
    return np.where(y == "Yes", "No", "Yes")


def exchangeable_variants(
    rng: np.random.Generator, n: int, k: int, minority: float, effect: float = 0.0
) -> tuple[NDArray[Any], list[NDArray[Any]]]:
    """k variants that are interchangeable under H0: each row has a difficulty p_i shared by
    all variants (so they are correlated, as real prompt variants are), and each variant is
    right on row i with probability p_i, independently. Variant 0 gets `effect` added to p_i
    (capped at 1): with effect = 0 the variants are exchangeable within every row."""
    y = labels(n, minority)
    p = rng.uniform(0.5, 0.95, n)
    preds = []
    for j in range(k):
        pj = np.minimum(1.0, p + (effect if j == 0 else 0.0))
        preds.append(np.where(rng.random(n) < pj, y, _flip(y)))
    return y, preds


NAMES = ("Alpha Corp", "Bravo LLC", "Charlie Inc", "Delta Bank", "Echo Ltd", "Foxtrot Co")


def exchangeable_entity_variants(
    rng: np.random.Generator, n: int, k: int
) -> tuple[NDArray[Any], list[NDArray[Any]]]:
    """ssla-style rows: 1-3 true names; each variant finds each name with a per-row
    probability shared by the variants and adds a spurious name with probability 0.2."""
    answers: list[str] = []
    preds: list[list[str]] = [[] for _ in range(k)]
    for _ in range(n):
        true = list(rng.choice(NAMES, size=int(rng.integers(1, 4)), replace=False))
        answers.append(",".join(true))
        p_find = rng.uniform(0.4, 0.95)
        for j in range(k):
            found = [t for t in true if rng.random() < p_find]
            if rng.random() < 0.2:
                found.append(str(rng.choice([x for x in NAMES if x not in true])))
            preds[j].append(", ".join(found))
    return np.array(answers, dtype=object), [np.array(p, dtype=object) for p in preds]


@dataclass(frozen=True)
class Rate:
    rate: float
    sims: int

    @property
    def se(self) -> float:
        return math.sqrt(max(self.rate * (1 - self.rate), 1e-12) / self.sims)

    def __str__(self) -> str:
        return f"{self.rate:.3f} (+-{1.96 * self.se:.3f}, {self.sims} sims)"


def rejection_rates(
    sims: int,
    seed: int,
    make: Callable[[np.random.Generator], tuple[NDArray[Any], list[NDArray[Any]]]],
    metric: str = "balanced_accuracy",
    n_resamples: int = 999,
    post_selection: bool = True,
) -> tuple[Rate, Rate | None]:
    """Share of simulations where the range test (and the post-selection pair test) reject
    at ALPHA. Data for simulation s come from `make(default_rng([seed, s]))`; the tests
    use seed s."""
    reject_range = reject_post = 0
    for s in range(sims):
        y, preds = make(np.random.default_rng([seed, s]))
        r = stats.range_permutation_test(y, preds, metric=metric, n_resamples=n_resamples, seed=s)
        reject_range += r.p_value <= ALPHA
        if post_selection:
            post = stats.post_selection_pair_test(
                y, preds, metric=metric, n_resamples=n_resamples, seed=s
            )
            reject_post += post.p_value <= ALPHA
    return Rate(reject_range / sims, sims), (
        Rate(reject_post / sims, sims) if post_selection else None
    )


# ---- coverage --------------------------------------------------------------------------------
SCENARIOS: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {
    # name: ((A's recall on minority, majority), (B's recall on minority, majority))
    "S1 minority 0.70/0.55, majority 0.90/0.85": ((0.70, 0.90), (0.55, 0.85)),
    "S2 near 1: minority 0.80/0.65, majority 0.95/0.92": ((0.80, 0.95), (0.65, 0.92)),
    "S3 minority 0.50/0.40, majority 0.90/0.80": ((0.50, 0.90), (0.40, 0.80)),
}


@dataclass(frozen=True)
class Coverage:
    coverage: Rate
    mean_width: float
    unreliable: float  # share of intervals flagged unreliable
    degenerate: float  # share flagged degenerate


def coverage(
    n: int,
    sims: int,
    seed: int,
    paired: bool,
    interval: Literal["bc", "bca", "percentile", "studentized"] = "bc",
    scenario: str = next(iter(SCENARIOS)),
    small_sample: bool = True,
    n_resamples: int = 1000,
) -> Coverage:
    """Coverage of the 95% interval of balanced accuracy (or of a paired difference) with
    90/10 classes. Recalls per class are fixed, so the true value is known: the mean of A's
    recalls (minus the mean of B's). B's correctness shares A's uniform draw on half of the
    rows (paired and correlated, as two prompts on the same rows are)."""
    (a_min, a_maj), (b_min, b_maj) = SCENARIOS[scenario]
    y = labels(n, 0.10)
    minority = y == "No"
    ra = np.where(minority, a_min, a_maj)
    rb = np.where(minority, b_min, b_maj)
    truth = (a_min + a_maj) / 2 - ((b_min + b_maj) / 2 if paired else 0.0)
    hits = widths = unreliable = degenerate = 0.0
    for s in range(sims):
        rng = np.random.default_rng([seed, s])
        u = rng.random(n)
        a = np.where(u < ra, y, _flip(y))
        b = None
        if paired:
            v = np.where(rng.random(n) < 0.5, u, rng.random(n))
            b = np.where(v < rb, y, _flip(y))
        ci = stats.bootstrap_ci(
            y, a, b, n_resamples=n_resamples, seed=s, interval=interval, small_sample=small_sample
        )
        hits += ci.low - 1e-12 <= truth <= ci.high + 1e-12
        widths += ci.high - ci.low
        unreliable += ci.unreliable
        degenerate += ci.degenerate
    return Coverage(Rate(hits / sims, sims), widths / sims, unreliable / sims, degenerate / sims)


# ---- report ----------------------------------------------------------------------------------
def _range_part(sims: int, seed: int, power_sims: int) -> None:
    print(f"== best vs worst of k = 5 variants, n = 100, alpha = {ALPHA}, R = 999 (seed {seed})")
    for minority, label in ((0.5, "balanced"), (0.2, "80/20")):
        t0 = time.perf_counter()
        rng_, post = rejection_rates(
            sims, seed, partial(exchangeable_variants, n=100, k=5, minority=minority)
        )
        print(
            f"  H0, {label:8s} balanced_accuracy: range test {rng_}   "
            f"post-selection pair test {post}   [{time.perf_counter() - t0:.0f}s]",
            flush=True,
        )
    f1_sims = max(100, sims // 4)
    t0 = time.perf_counter()
    rng_, post = rejection_rates(
        f1_sims, seed, partial(exchangeable_entity_variants, n=100, k=5), metric="ssla_f1"
    )
    print(
        f"  H0, entity lists, ssla_f1:          range test {rng_}   "
        f"post-selection pair test {post}   [{time.perf_counter() - t0:.0f}s]",
        flush=True,
    )
    for effect in (0.10, 0.20):
        t0 = time.perf_counter()
        power, _ = rejection_rates(
            power_sims,
            seed,
            partial(exchangeable_variants, n=100, k=5, minority=0.5, effect=effect),
            post_selection=False,
        )
        print(
            f"  power, balanced, variant 0 right +{effect:.2f} more often: range test {power}"
            f"   [{time.perf_counter() - t0:.0f}s]",
            flush=True,
        )


def _coverage_part(sims: int, seed: int, methods: Sequence[str]) -> None:
    print(f"== 95% bootstrap_ci coverage, 90/10 classes, R = 1000 per interval (seed {seed})")
    first = next(iter(SCENARIOS))
    cells: list[tuple[str, int, bool, Any, bool]] = []
    for n in (50, 200):
        for paired in (False, True):
            for interval in methods:
                cells.append((first, n, paired, interval, True))
            if "bc" in methods:
                cells.append((first, n, paired, "bc", False))
    for scenario in list(SCENARIOS)[1:]:
        for paired in (False, True):
            for interval in methods:
                if interval != "studentized":
                    cells.append((scenario, 200, paired, interval, True))
    for scenario, n, paired, interval, small in cells:
        t0 = time.perf_counter()
        c = coverage(n, sims, seed, paired, interval, scenario, small_sample=small)
        what = "paired difference" if paired else "one variant      "
        how = f"{interval}{'' if small else ' (no small-sample correction)'}"
        print(
            f"  {scenario[:2]} n={n:<3d} {what} {how:44s} coverage {c.coverage}  "
            f"width {c.mean_width:.3f}  unreliable {c.unreliable:.2f}  "
            f"degenerate {c.degenerate:.3f}   [{time.perf_counter() - t0:.0f}s]",
            flush=True,
        )
    for name, ((a_min, a_maj), (b_min, b_maj)) in SCENARIOS.items():
        print(
            f"  {name}: true BA(A) = {(a_min + a_maj) / 2:.3f}, "
            f"difference {(a_min + a_maj - b_min - b_maj) / 2:.3f}"
        )


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--part", choices=["all", "range", "coverage"], default="all")
    ap.add_argument("--sims", type=int, default=1000, help="simulations per size estimate")
    ap.add_argument("--power-sims", type=int, default=300)
    ap.add_argument("--coverage-sims", type=int, default=1000, help="simulations per cell")
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument(
        "--methods",
        default="bc,bca,percentile,studentized",
        help="interval methods to measure, comma-separated (bc is bootstrap_ci's default)",
    )
    args = ap.parse_args(argv)
    if args.part in ("all", "range"):
        _range_part(args.sims, args.seed, args.power_sims)
    if args.part in ("all", "coverage"):
        _coverage_part(args.coverage_sims, args.seed, args.methods.split(","))


if __name__ == "__main__":
    main()
