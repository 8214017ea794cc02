"""Coverage of `experiments.analysis.intervals.metric_interval` against the generating parameters.

The truth is always the generating value: the mean of the per-class recalls set in the
simulation (balanced accuracy), the class-share-weighted recall (accuracy-type metrics
without classes), their difference between the arms, or the F1 of a 200,000-row sample of
the generating process (the official metric at a size where its error is ~0.001). Nothing
is computed from the estimator's own formula.

1. One variant, rows distinct: exact coverage. The interval depends only on the hit counts
   (h_min, h_maj) of the two classes, so every possible outcome's interval is computed once
   (with the shipped posterior-draw count) and coverage is the binomial-weighted share of
   outcomes whose interval contains the truth: no simulation error. Grid: n in {20, 40, 50,
   100, 200}, minority share in {0.1, 0.2, 0.5} (class sizes round(n * share) and the rest),
   per-class recall in {0.5, 0.7, 0.9, 0.95, 0.97, 0.99, 1.0} for each class (49
   scenarios; those with a recall above 0.95 form the "+ceiling" rows of the table).
2. Paired difference, rows distinct: simulated. Each class's rows fall into the four cells
   (both right, A only, B only, both wrong) with probabilities from a Gaussian copula of the
   two arms' per-class recalls with latent correlation rho = 0 (independent arms) or 0.7
   (shared row difficulty); 13 recall scenarios (equal arms, an effect in both classes, in
   the minority only, in the majority only, opposite effects, three at the ceiling).
3. Clusters: the same with clustered rows (a cluster's rows share one class and one
   outcome, as identical prompts do): cuad_audit_rights' 775 distinct texts with their real
   multiplicities (1,215 rows: 461 texts once, 213 twice, 79 three times, 20 four times, one
   five and one six times), and 20 distinct texts x 30 copies. Also the same interval
   ignoring the clusters, to show what that costs.
4. Many classes: 3, 5, 10 equal answer classes of 10, 20, 40 rows, one variant and paired
   (`part_classes`, simulated as in 2.).
5. Clusters spanning classes: documents holding rows of both classes with shared latent
   difficulty (ICC 1 and 0.5), through `metric_interval` with the document as cluster
   (`part_spanning`).
6. F1 (`ssla_f1`): through the real path (`metric_interval` -> `stats.bootstrap_ci`), rows
   with 1-3 answer names, each named by the generation with probability q, plus a wrong name
   with probability 0.2 (true F1 0.52-0.66), and rows of one name with rare wrong names
   (true F1 0.88-0.975, `F1_SINGLE`, `F1_PAIRED`): the "+ceiling" rows of the F1 table.

The paired bound treatment is decided over all classes of a sample
(`intervals.pooled_extra`), as `metric_interval` decides it.

    nice -n 10 .venv/bin/python benchmarks/coverage.py            # the full table
    # as measured for coverage_table.COVERAGE, the package data file
    # experiments/analysis/data/interval_coverage.csv (parts in parallel, then merged):
    #   --part exact --out e.json; --part paired --n 20 40 50 --sims 1000 --out p1.json
    #   (--n 100: p2.json, --n 200: p3.json); --part classes --classes 3 --sims 600 --seed 3
    #   --out c3.json (5: seed 5; 10: --sims 250 --seed 10); --part spanning --span-sims 300
    #   --seed 1 --out s.json (one variant: --span-sims 600, unchanged); --part f1 --n 20 40
    #   50 --f1-sims 300 --seed 21 (--n 100: seed 22; --n 200 --f1-sims 200 --seed 23);
    #   --merge e.json p1.json p2.json p3.json c3.json c5.json c10.json s.json f1*.json --emit
    .venv/bin/python benchmarks/coverage.py --quick               # seconds; what the test runs
    .venv/bin/python benchmarks/coverage.py --emit                # the full table, written to
    #   experiments/analysis/data/interval_coverage.csv (--emit PATH: elsewhere)
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import math
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from scipy.stats import binom, multivariate_normal, norm

from experiments.analysis import coverage_table, intervals
from experiments.metrics import ssla_counts

FloatArray = NDArray[np.float64]
DATA_FILE = Path(coverage_table.__file__).parent / coverage_table.COVERAGE_FILE
GRID_N = (20, 40, 50, 100, 200)
SHARES = (0.1, 0.2, 0.5)
RECALLS = (0.5, 0.7, 0.9, 0.95, 0.97, 0.99, 1.0)  # 0.97-1.0: the ceiling
RHOS = (0.0, 0.7)
# (A minority, A majority, B minority, B majority) per-class recalls
PAIRED: tuple[tuple[float, float, float, float], ...] = (
    (0.5, 0.5, 0.5, 0.5),
    (0.7, 0.7, 0.7, 0.7),
    (0.9, 0.9, 0.9, 0.9),
    (0.95, 0.95, 0.95, 0.95),
    (0.7, 0.7, 0.5, 0.5),
    (0.9, 0.9, 0.7, 0.7),
    (0.95, 0.95, 0.9, 0.9),
    (0.9, 0.95, 0.5, 0.95),
    (0.95, 0.7, 0.95, 0.9),
    (0.95, 0.5, 0.5, 0.95),
    (0.99, 0.99, 0.97, 0.97),
    (1.0, 1.0, 0.97, 0.97),
    (0.99, 0.99, 0.99, 0.99),
)
CUAD_SIZES = {1: 461, 2: 213, 3: 79, 4: 20, 5: 1, 6: 1}  # cuad_audit_rights test split


@dataclass
class Cell:
    """Coverage of one grid cell, per scenario."""

    family: str
    kind: str
    n: int
    share: float
    coverage: dict[str, float]

    @property
    def worst(self) -> tuple[float, str]:
        k = min(self.coverage, key=lambda s: self.coverage[s])
        return self.coverage[k], k

    @property
    def median(self) -> float:
        return float(np.median(list(self.coverage.values())))


def class_sizes(n: int, share: float) -> tuple[int, int]:
    n_min = round(n * share)
    return n_min, n - n_min


# ---- 1. one variant, exact -------------------------------------------------------------------
def exact_single(
    n: int, share: float, rng: np.random.Generator, n_draws: int, prior: float
) -> tuple[Cell, Cell]:
    """Exact coverage for balanced accuracy and for the classless (rows) interval."""
    n0, n1 = class_sizes(n, share)
    h0, h1 = np.meshgrid(np.arange(n0 + 1.0), np.arange(n1 + 1.0), indexing="ij")
    hits = np.stack([h0.ravel(), h1.ravel()], axis=1)
    sizes = np.array([n0, n1], dtype=float)
    est = (hits / sizes).mean(axis=1)
    lows, highs = cached_bounds(
        "single", np.stack([hits, sizes - hits], -1), est, rng, n_draws, prior
    )
    total = np.arange(n + 1.0)
    tlow, thigh = cached_bounds(
        "single", np.stack([total, n - total], -1)[:, None, :], total / n, rng, n_draws, prior
    )
    bal: dict[str, float] = {}
    rows: dict[str, float] = {}
    for r0 in RECALLS:
        for r1 in RECALLS:
            p = np.outer(binom.pmf(np.arange(n0 + 1), n0, r0), binom.pmf(np.arange(n1 + 1), n1, r1))
            truth = (r0 + r1) / 2
            inside = (lows <= truth + 1e-12) & (highs >= truth - 1e-12)
            label = f"recall {r0}/{r1}"
            bal[label] = float(p.ravel() @ inside)
            ptot = np.convolve(p.sum(axis=1), p.sum(axis=0))  # pmf of h0 + h1
            truth_rows = (n0 * r0 + n1 * r1) / n
            rows[label] = float(
                ptot @ ((tlow <= truth_rows + 1e-12) & (thigh >= truth_rows - 1e-12))
            )
    return Cell("balanced", "single", n, share, bal), Cell("rows", "single", n, share, rows)


# ---- 2./3. simulated (paired, clustered) -----------------------------------------------------
def cell_probs(r_a: float, r_b: float, rho: float) -> FloatArray:
    """(both right, A only, B only, both wrong) under a Gaussian copula with correlation rho."""
    za, zb = norm.ppf(r_a), norm.ppf(r_b)
    if min(r_a, r_b) <= 0 or max(r_a, r_b) >= 1 or rho == 0:  # a sure arm is independent
        both = r_a * r_b
    else:
        both = float(multivariate_normal(mean=[0, 0], cov=[[1, rho], [rho, 1]]).cdf([za, zb]))
    p = np.clip(np.array([both, r_a - both, r_b - both, 1 - r_a - r_b + both]), 0, None)
    return np.asarray(p / p.sum(), dtype=np.float64)


def cached_bounds(
    kind: str,
    counts: FloatArray,
    estimate: FloatArray,
    rng: np.random.Generator,
    n_draws: int,
    prior: float = intervals.PRIOR,
) -> tuple[FloatArray, FloatArray]:
    """95% intervals for (S, G, c) effective counts, as `metric_interval` computes them.

    The shipped `single_tails` / `paired_tails` draw once per distinct group outcome (a
    group's draws are independent of the other groups', as in the seeded API), summed over
    groups with weight 1/G, then `intervals.combine` centres and cuts them. c is (hits,
    misses) for "single" and (A only, B only, rest) for "paired".
    """
    s, g, _ = counts.shape
    centred = g >= intervals.CENTRE_FROM
    low = np.zeros((s, n_draws))
    high = np.zeros((s, n_draws))
    if kind == "paired":  # the pooled bound treatment, decided over all groups of a sample
        w = np.full(g, 1.0 / g)
        extra = np.stack(
            [intervals.pooled_extra(counts[..., 1], w), intervals.pooled_extra(counts[..., 0], w)],
            axis=-1,
        )
        counts = np.concatenate([counts, extra], axis=-1)
    for j in range(g):
        uniq, inv = np.unique(np.round(counts[:, j, :], 9), axis=0, return_inverse=True)
        cols = [uniq[:, k] for k in range(uniq.shape[1])]
        if kind == "single":
            lo, hi, ce, sc = intervals.single_tails(cols[0], cols[1], rng, n_draws, prior)
        else:
            lo, hi, ce, sc = intervals.paired_tails(
                cols[0], cols[1], cols[2], rng, n_draws, prior, cols[3], cols[4]
            )
        if centred:  # as intervals.combine does it, group by group
            lo = sc[:, None] * (lo - ce[:, None])
            hi = sc[:, None] * (hi - ce[:, None])
        inv = inv.ravel()
        low += lo[inv] / g
        high += hi[inv] / g
    bounds = (0.0, 1.0) if kind == "single" else (-1.0, 1.0)
    zero, one = np.zeros((min(s, 500), 1)), np.ones((min(s, 500), 1))
    out_low, out_high = np.empty(s), np.empty(s)
    for a in range(0, s, 500):  # quantiles in chunks
        z = slice(a, a + 500)
        m = len(low[z])
        out_low[z], out_high[z] = intervals.combine(
            low[z, None], high[z, None], zero[:m], one[:m], np.ones(1), estimate[z], 0.95,
            bounds, centred,
        )  # fmt: skip
    return out_low, out_high


def _covered(low: FloatArray, high: FloatArray, truth: float) -> float:
    return float(np.mean((low <= truth + 1e-12) & (high >= truth - 1e-12)))


def simulate_paired(
    sizes: list[NDArray[np.intp]],
    scenario: tuple[float, ...],
    rho: float,
    sims: int,
    rng: np.random.Generator,
    n_draws: int,
    use_clusters: bool = True,
) -> tuple[float, float]:
    """(balanced, rows) coverage of the paired interval; sizes[c] = cluster sizes of class c.

    `scenario` is A's per-class recalls followed by B's (2G numbers). Every cluster draws
    one cell; its rows all share it. With use_clusters=False the interval treats every row
    as its own cluster (what ignoring the clusters does).
    """
    g = len(sizes)
    ra, rb = scenario[:g], scenario[g:]
    per_class = []
    for c, m in enumerate(sizes):
        p = cell_probs(ra[c], rb[c], rho)
        if np.all(m == 1):  # distinct rows: the cell counts are multinomial
            rows = rng.multinomial(len(m), p, size=sims)
        else:
            cell = rng.choice(4, size=(sims, len(m)), p=p)
            rows = np.stack([(m * (cell == k)).sum(axis=1) for k in range(4)], axis=-1)
        per_class.append(rows.astype(float))  # (S, 4) row counts
    n_rows = np.array([m.sum() for m in sizes], dtype=float)
    kish = np.array([m.sum() ** 2 / np.sum(m.astype(float) ** 2) for m in sizes])
    n_eff = kish if use_clusters else n_rows
    rows_c = np.stack(per_class, axis=1)  # (S, G, 4)
    share = rows_c / n_rows[None, :, None]
    eff = np.stack([share[..., 1], share[..., 2], share[..., 0] + share[..., 3]], -1)
    est = (share[..., 1] - share[..., 2]).mean(axis=1)
    lo, hi = cached_bounds("paired", eff * n_eff[None, :, None], est, rng, n_draws)
    truth = float(np.mean(np.subtract(ra, rb)))
    bal = _covered(lo, hi, truth)
    # rows family: one group over all rows
    pooled = rows_c.sum(axis=1)
    n_all = n_rows.sum()
    sq = sum(np.sum(m.astype(float) ** 2) for m in sizes)
    n_eff_all = n_all**2 / sq if use_clusters else n_all
    sh = pooled / n_all
    eff_all = np.stack([sh[:, 1], sh[:, 2], sh[:, 0] + sh[:, 3]], -1)[:, None, :] * n_eff_all
    lo, hi = cached_bounds("paired", eff_all, sh[:, 1] - sh[:, 2], rng, n_draws)
    truth_rows = float(np.dot(n_rows, np.subtract(ra, rb)) / n_all)
    return bal, _covered(lo, hi, truth_rows)


def simulate_single(
    sizes: list[NDArray[np.intp]],
    recall: tuple[float, ...],
    sims: int,
    rng: np.random.Generator,
    n_draws: int,
    use_clusters: bool = True,
) -> tuple[float, float]:
    """(balanced, rows) coverage of one variant's interval with clustered rows (G classes)."""
    n_rows = np.array([m.sum() for m in sizes], dtype=float)
    hit_rows = np.stack(
        [((rng.random((sims, len(m))) < recall[c]) * m).sum(axis=1) for c, m in enumerate(sizes)],
        axis=1,
    ).astype(float)  # (S, G)
    kish = np.array([m.sum() ** 2 / np.sum(m.astype(float) ** 2) for m in sizes])
    n_eff = kish if use_clusters else n_rows
    share = hit_rows / n_rows
    eff = np.stack([share * n_eff, (1 - share) * n_eff], axis=-1)
    lo, hi = cached_bounds("single", eff, share.mean(axis=1), rng, n_draws)
    bal = _covered(lo, hi, float(np.mean(recall)))
    n_all = n_rows.sum()
    sq = sum(np.sum(m.astype(float) ** 2) for m in sizes)
    n_eff_all = n_all**2 / sq if use_clusters else n_all
    sh = hit_rows.sum(axis=1) / n_all
    eff_all = np.stack([sh * n_eff_all, (1 - sh) * n_eff_all], axis=-1)[:, None, :]
    lo, hi = cached_bounds("single", eff_all, sh, rng, n_draws)
    return bal, _covered(lo, hi, float(np.dot(n_rows, recall) / n_all))


def row_sizes(n: int, share: float) -> list[NDArray[np.intp]]:
    n0, n1 = class_sizes(n, share)
    return [np.ones(n0, dtype=np.intp), np.ones(n1, dtype=np.intp)]


def clustered_sizes(design: str, share: float, rng: np.random.Generator) -> list[NDArray[np.intp]]:
    """Cluster sizes per class: a random round(share * C) of the C clusters are the minority."""
    if design == "cuad_audit_rights":
        m = np.concatenate([np.full(c, s) for s, c in CUAD_SIZES.items()]).astype(np.intp)
    else:
        m = np.full(20, 30, dtype=np.intp)
    m = rng.permutation(m)
    k = round(share * len(m))
    return [m[:k], m[k:]]


# ---- 4. F1 through the real path -------------------------------------------------------------
NAMES = [f"alpha{i:02d}" for i in range(40)]  # fixed width: no name is a substring of another
SPURIOUS = 0.2


def f1_rows(
    rng: np.random.Generator, n: int, q: float, spurious: float = SPURIOUS, k_max: int = 3
) -> tuple[list[str], list[str]]:
    """Answers of 1-k_max names; the generation names each with probability q, plus a wrong
    name with probability `spurious`."""
    answers, gens = [], []
    for _ in range(n):
        k = int(rng.integers(1, k_max + 1))
        names = list(rng.choice(NAMES[:30], size=k, replace=False))
        said = [x for x in names if rng.random() < q]
        if rng.random() < spurious:
            said.append(str(rng.choice(NAMES[30:])))
        answers.append(",".join(names))
        gens.append(",".join(said))
    return answers, gens


def f1_truth(q: float, spurious: float = SPURIOUS, k_max: int = 3) -> float:
    """Population ssla_f1 of the generating process: 2 E[tp] / (2 E[tp] + E[fp] + E[fn]),
    the expectations taken exactly over every row configuration (k names, which of them
    were said, a wrong name or not), each row counted by the official counting rule."""
    totals = np.zeros(3)
    for k in range(1, k_max + 1):
        names = NAMES[:k]
        for said in itertools.product((False, True), repeat=k):
            for extra in (False, True):
                gen = [x for x, s in zip(names, said, strict=True) if s]
                gen += [NAMES[30]] if extra else []
                prob = (
                    (1 / k_max)
                    * math.prod(q if s else 1 - q for s in said)
                    * (spurious if extra else 1 - spurious)
                )
                totals += prob * np.array(ssla_counts(",".join(gen), ",".join(names)))
    tp, fp, fn = totals
    return float(2 * tp / (2 * tp + fp + fn))


def f1_paired_rows(
    rng: np.random.Generator,
    n: int,
    qa: float,
    qb: float,
    spurious: float = SPURIOUS,
    k_max: int = 3,
) -> tuple[list[str], list[str], list[str]]:
    """Two arms on the same answers, each naming each answer name independently."""
    answers: list[str] = []
    ga: list[str] = []
    gb: list[str] = []
    for _ in range(n):
        k = int(rng.integers(1, k_max + 1))
        names = list(rng.choice(NAMES[:30], size=k, replace=False))
        for q, out in ((qa, ga), (qb, gb)):
            said = [x for x in names if rng.random() < q]
            if rng.random() < spurious:
                said.append(str(rng.choice(NAMES[30:])))
            out.append(",".join(said))
        answers.append(",".join(names))
    return answers, ga, gb


# (q, spurious, most names per row): 1-3 names and a wrong name 1 in 5 give F1 0.52-0.66
# (the official rule counts a surplus name once per answer name); one name per row with
# rare wrong names reaches the ceiling (F1 0.88-0.975), where a bootstrap is weakest.
F1_SINGLE = ((0.6, 0.2, 3), (0.9, 0.2, 3), (0.9, 0.05, 1), (0.95, 0.03, 1), (0.97, 0.02, 1),
             (0.98, 0.01, 1))  # fmt: skip
F1_PAIRED = (((0.9, 0.6), 0.2, 3), ((0.9, 0.9), 0.2, 3), ((0.95, 0.9), 0.03, 1),
             ((0.97, 0.97), 0.02, 1))  # fmt: skip


def f1_cells(ns: Iterable[int], sims: int, rng: np.random.Generator) -> list[Cell]:
    """F1 coverage through `metric_interval`; the truth is `f1_truth` of the generation."""
    out = []
    for n in ns:
        single: dict[str, float] = {}
        paired: dict[str, float] = {}
        for q, sp, k in F1_SINGLE:
            truth = f1_truth(q, sp, k)
            hit = 0
            for _ in range(sims):
                ans, gen = f1_rows(rng, n, q, sp, k)
                ci = intervals.metric_interval(
                    ans, gen, metric="ssla_f1", seed=int(rng.integers(1 << 31))
                )
                hit += ci.low <= truth <= ci.high
            single[f"q {q}, wrong {sp}, 1-{k} names (F1 {truth:.3f})"] = hit / sims
        for (qa, qb), sp, k in F1_PAIRED:
            hit = 0
            fa, fb = f1_truth(qa, sp, k), f1_truth(qb, sp, k)
            for _ in range(sims):
                ans, ga, gb = f1_paired_rows(rng, n, qa, qb, sp, k)
                ci = intervals.metric_interval(
                    ans, ga, gb, metric="ssla_f1", seed=int(rng.integers(1 << 31))
                )
                hit += ci.low <= fa - fb <= ci.high
            paired[f"q {qa} vs {qb}, wrong {sp}, 1-{k} names (F1 {fa:.3f} vs {fb:.3f})"] = (
                hit / sims
            )
        out.append(Cell("f1", "single", n, 0.0, single))
        out.append(Cell("f1", "paired", n, 0.0, paired))
    return out


# ---- driver ----------------------------------------------------------------------------------
def part_exact(ns: Iterable[int], shares: Iterable[float], seed: int) -> list[Cell]:
    rng = np.random.default_rng(seed)
    cells: list[Cell] = []
    for n in ns:
        for share in shares:
            cells += list(exact_single(n, share, rng, intervals.N_DRAWS, intervals.PRIOR))
    return cells


def part_prior(ns: Iterable[int], shares: Iterable[float], seed: int) -> list[str]:
    """Jeffreys vs uniform prior, one variant's balanced accuracy (exact coverage)."""
    rng = np.random.default_rng(seed)
    lines = ["| n | minority | Jeffreys min | Jeffreys median | uniform min | uniform median |"]
    lines.append("|---|---|---|---|---|---|")
    for n in ns:
        for share in shares:
            jb, _ = exact_single(n, share, rng, intervals.N_DRAWS, 0.5)
            ub, _ = exact_single(n, share, rng, intervals.N_DRAWS, 1.0)
            lines.append(
                f"| {n} | {share} | {jb.worst[0]:.3f} | {jb.median:.3f} | "
                f"{ub.worst[0]:.3f} | {ub.median:.3f} |"
            )
    return lines


def part_paired(
    ns: Iterable[int],
    shares: Iterable[float],
    sims: int,
    seed: int,
    scenarios: tuple[tuple[float, float, float, float], ...] = PAIRED,
) -> list[Cell]:
    rng = np.random.default_rng(seed)
    cells: list[Cell] = []
    for n in ns:
        for share in shares:
            pb: dict[str, float] = {}
            pr: dict[str, float] = {}
            for sc in scenarios:
                for rho in RHOS:
                    b, r = simulate_paired(
                        row_sizes(n, share), sc, rho, sims, rng, intervals.N_DRAWS
                    )
                    label = f"A {sc[0]}/{sc[1]} vs B {sc[2]}/{sc[3]}, rho {rho}"
                    pb[label], pr[label] = b, r
            cells += [
                Cell("balanced", "paired", n, share, pb),
                Cell("rows", "paired", n, share, pr),
            ]
    return cells


CLASS_COUNTS = (3, 5, 10)
CLASS_ROWS = (10, 20, 40)  # rows per class


def class_scenarios(g: int) -> tuple[list[tuple[float, ...]], list[tuple[float, ...]]]:
    """(one-variant, paired) per-class recall scenarios for g equal classes."""
    spread = tuple(float(v) for v in np.round(np.linspace(0.5, 0.95, g), 3))
    single = [(r,) * g for r in (0.5, 0.7, 0.9, 0.95, 0.99, 1.0)]
    single += [spread, (0.5,) + (0.95,) * (g - 1)]
    paired = [
        (0.7,) * g + (0.5,) * g,
        (0.9,) * g + (0.7,) * g,
        (0.9,) * g + (0.9,) * g,
        (0.95,) * g + (0.9,) * g,
        (0.99,) * g + (0.97,) * g,
        spread + spread[::-1],
    ]
    return single, paired


def _label(rec: tuple[float, ...]) -> str:
    g = len(rec)
    if len(set(rec)) == 1:
        return f"{rec[0]:g} x {g}"
    if g > 5:  # an even spread over many classes: its ends
        return f"{rec[0]:g}..{rec[-1]:g} over {g}"
    return "/".join(f"{v:g}" for v in rec)


def part_classes(sims: int, seed: int, counts: Iterable[int] = CLASS_COUNTS) -> list[Cell]:
    """Balanced accuracy with 3, 5, 10 equal answer classes of 10, 20, 40 rows (simulated).

    Cell key: n = number of classes, share = rows per class (`coverage_table.classes_cell`)."""
    rng = np.random.default_rng(seed)
    cells: list[Cell] = []
    for g in counts:
        single, paired = class_scenarios(g)
        for m in CLASS_ROWS:
            sizes = [np.ones(m, dtype=np.intp)] * g
            cs = {
                f"recall {_label(r)}": simulate_single(sizes, r, sims, rng, intervals.N_DRAWS)[0]
                for r in single
            }
            cp: dict[str, float] = {}
            for sc in paired:
                for rho in RHOS:
                    label = f"A {_label(sc[:g])} vs B {_label(sc[g:])}, rho {rho}"
                    cp[label] = simulate_paired(sizes, sc, rho, sims, rng, intervals.N_DRAWS)[0]
            cells += [
                Cell("classes", "single", g, float(m), cs),
                Cell("classes", "paired", g, float(m), cp),
            ]
    return cells


def _latent(rng: np.random.Generator, ids: NDArray[np.intp], icc: float) -> FloatArray:
    """Row latents with a shared per-document part of variance `icc`."""
    z = rng.standard_normal(int(ids.max()) + 1)[ids]
    return np.asarray(np.sqrt(icc) * z + np.sqrt(1 - icc) * rng.standard_normal(len(ids)))


SPAN_DESIGNS = ((20, 5), (40, 3), (100, 2))  # documents x (rows of class a = rows of class b)


def part_spanning(sims: int, seed: int) -> list[Cell]:
    """Clusters (documents) that hold rows of both answer classes, through `metric_interval`.

    Each document has `per` rows of each class; a row's hit is latent z < Phi^-1(recall),
    z = sqrt(icc) z_document + sqrt(1 - icc) e (icc 1: a document's rows share one
    difficulty). Arm B (paired) has a latent correlated 0.5 with A's. Truth: the generating
    per-class recalls. Cell key: n = documents, share = rows per document."""
    rng = np.random.default_rng(seed)
    lab = np.array(["a", "b"], dtype=object)
    cells: list[Cell] = []
    single_sc = ((0.8, 0.8), (0.95, 0.95), (0.7, 0.9))
    paired_sc = (((0.8, 0.8), (0.8, 0.8)), ((0.9, 0.9), (0.7, 0.7)), ((0.95, 0.95), (0.9, 0.9)))
    for docs, per in SPAN_DESIGNS:
        ids = np.repeat(np.arange(docs), 2 * per)
        yi = np.tile(np.repeat([0, 1], per), docs)
        y = list(lab[yi])
        wrong = lab[1 - yi]
        cov: dict[str, dict[str, float]] = {"single": {}, "paired": {}}
        for icc in (1.0, 0.5):
            for ra in single_sc:
                thr = norm.ppf(np.asarray(ra)[yi])
                hit = 0
                for _ in range(sims):
                    pa = np.where(_latent(rng, ids, icc) < thr, lab[yi], wrong)
                    ci = intervals.metric_interval(y, list(pa), clusters=ids, seed=None)
                    hit += ci.low <= float(np.mean(ra)) <= ci.high
                cov["single"][f"recall {_label(ra)}, ICC {icc}"] = hit / sims
            for ra, rb in paired_sc:
                ta, tb = norm.ppf(np.asarray(ra)[yi]), norm.ppf(np.asarray(rb)[yi])
                truth = float(np.mean(ra) - np.mean(rb))
                hit = 0
                for _ in range(sims):
                    za = _latent(rng, ids, icc)
                    zb = 0.5 * za + np.sqrt(0.75) * _latent(rng, ids, icc)
                    pa = np.where(za < ta, lab[yi], wrong)
                    pb = np.where(zb < tb, lab[yi], wrong)
                    ci = intervals.metric_interval(y, list(pa), list(pb), clusters=ids, seed=None)
                    hit += ci.low <= truth <= ci.high
                cov["paired"][f"A {_label(ra)} vs B {_label(rb)}, ICC {icc}"] = hit / sims
        cells += [Cell("spanning", k, docs, float(per), v) for k, v in cov.items()]
    return cells


CLUSTER_SINGLE = ((0.5, 0.5), (0.9, 0.9), (0.95, 0.95), (0.5, 0.95), (0.95, 0.7), (0.7, 0.9))
CLUSTER_PAIRED = (PAIRED[0], PAIRED[3], PAIRED[5], PAIRED[6], PAIRED[7], PAIRED[9])


def part_clusters(shares: Iterable[float], sims: int, seed: int) -> list[str]:
    """Coverage with clustered rows, honouring and ignoring the clusters."""
    rng = np.random.default_rng(seed)
    lines = [
        "| design | minority | interval | metric | min coverage | median | "
        "min coverage, clusters ignored | median, ignored |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for design in ("cuad_audit_rights", "20 texts x 30"):
        for share in shares:
            sizes = clustered_sizes(design, share, rng)
            for kind in ("single", "paired"):
                vals = []
                if kind == "single":
                    for rec in CLUSTER_SINGLE:
                        on = simulate_single(sizes, rec, sims, rng, intervals.N_DRAWS)
                        off = simulate_single(sizes, rec, sims, rng, intervals.N_DRAWS, False)
                        vals.append((*on, *off))
                else:
                    for sc in CLUSTER_PAIRED:
                        for rho in RHOS:
                            on = simulate_paired(sizes, sc, rho, sims, rng, intervals.N_DRAWS)
                            off = simulate_paired(
                                sizes, sc, rho, sims, rng, intervals.N_DRAWS, False
                            )
                            vals.append((*on, *off))
                v = np.array(vals)
                for j, fam in ((0, "balanced_accuracy"), (1, "accuracy-type (rows)")):
                    lines.append(
                        f"| {design} | {share} | {kind} | {fam} | {v[:, j].min():.3f} | "
                        f"{np.median(v[:, j]):.3f} | {v[:, j + 2].min():.3f} | "
                        f"{np.median(v[:, j + 2]):.3f} |"
                    )
    return lines


def table(cells: list[Cell]) -> list[str]:
    out = [
        "| metric | interval | n (classes) | minority (rows per class) | min coverage | "
        f"min, recalls <= {CEILING} | median | worst scenario |"
    ]
    out.append("|---|---|---|---|---|---|---|---|")
    inner = {(c.family, c.kind, c.n, c.share): c for c in interior(cells)}
    for c in sorted(cells, key=lambda c: (c.family, c.kind, c.n, c.share)):
        low, worst = c.worst
        flag = " **flagged**" if round(low, 3) < coverage_table.MIN_COVERAGE else ""
        share = "-" if c.family == "f1" else f"{c.share:g}"
        i = inner.get((c.family, c.kind, c.n, c.share))
        if i is None or len(i.coverage) == len(c.coverage):
            mid = "(same)"
        else:
            i_low, _ = i.worst
            mid = f"{i_low:.3f}" + (
                " **flagged**" if round(i_low, 3) < coverage_table.MIN_COVERAGE else ""
            )
        out.append(
            f"| {c.family} | {c.kind} | {c.n} | {share} | {low:.3f}{flag} | {mid} | "
            f"{c.median:.3f} | {worst} |"
        )
    return out


def summary(cells: list[Cell]) -> list[str]:
    out = ["| metric | interval | n | min over cells | median over scenarios |"]
    out.append("|---|---|---|---|---|")
    keys = sorted({(c.family, c.kind, c.n) for c in cells})
    for fam, kind, n in keys:
        sel = [c for c in cells if (c.family, c.kind, c.n) == (fam, kind, n)]
        allv = [v for c in sel for v in c.coverage.values()]
        out.append(f"| {fam} | {kind} | {n} | {min(allv):.3f} | {float(np.median(allv)):.3f} |")
    return out


CEILING = 0.95  # a scenario with a true rate above this is "near the bound"


def near_bound(label: str) -> bool:
    """Whether a scenario label's generating recalls include one above CEILING."""
    if "(F1 " in label:  # F1 scenarios: near the ceiling when an arm's true F1 is high
        f1 = re.findall(r"\d\.\d+", label.split("(F1 ")[1])
        return any(float(v) > coverage_table.F1_NEAR for v in f1)
    head = label.split(", rho")[0].split(", ICC")[0]
    return any(
        float(v) > CEILING for v in re.findall(r"\d+(?:\.\d+)?", head) if "." in v or v == "1"
    )


def interior(cells: list[Cell]) -> list[Cell]:
    """The cells restricted to scenarios whose recalls all lie in [0.5, CEILING]."""
    out = []
    for c in cells:
        cov = {k: v for k, v in c.coverage.items() if not near_bound(k)}
        if cov:
            out.append(Cell(c.family, c.kind, c.n, c.share, cov))
    return out


def coverage_table_of(cells: list[Cell]) -> coverage_table.CoverageTable:
    """`coverage_table.COVERAGE` from measured cells: per (family, kind) the interior
    scenarios, and per (family + "+ceiling", kind) every scenario (the ceiling included);
    sorted by family and kind, then by cell."""
    by: coverage_table.CoverageTable = {}
    for c in interior(cells):
        low, worst = c.worst
        by.setdefault((c.family, c.kind), {})[(c.n, c.share)] = (
            round(low, 3),
            round(c.median, 3),
            worst,
        )
    for c in cells:
        if any(near_bound(k) for k in c.coverage):
            low, worst = c.worst
            by.setdefault((c.family + "+ceiling", c.kind), {})[(c.n, c.share)] = (
                round(low, 3),
                round(c.median, 3),
                worst,
            )
    return {key: dict(sorted(table_.items())) for key, table_ in sorted(by.items())}


def coverage_csv(table_: coverage_table.CoverageTable) -> str:
    """The package data file's text (`coverage_table.read_coverage` reads it back exactly:
    floats are written in their shortest round-trip form)."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(coverage_table.COVERAGE_COLUMNS)
    for (family, kind), cells in table_.items():
        for (n, share), (low, median, worst) in cells.items():
            out.writerow((family, kind, n, share, low, median, worst))
    return buf.getvalue()


def emit(cells: list[Cell], sims: int, path: Path = DATA_FILE) -> str:
    """Write the measured table to `path` (the package data file by default); what to say."""
    path.write_text(coverage_csv(coverage_table_of(cells)), encoding="utf-8")
    return (
        f"wrote {path}; simulations per paired cell: {sims} "
        f"(coverage_table.COVERAGE_SIMS is {coverage_table.COVERAGE_SIMS})"
    )


def _save(path: str, cells: list[Cell], lines: list[str], meta: dict[str, object]) -> None:
    with open(path, "w") as f:
        json.dump({"cells": [c.__dict__ for c in cells], "lines": lines, "meta": meta}, f)


def _load(paths: Iterable[str]) -> tuple[list[Cell], list[str], list[dict[str, object]]]:
    cells, lines, metas = [], [], []
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        cells += [Cell(**c) for c in d["cells"]]
        lines += d["lines"]
        metas.append(d["meta"])
    return cells, lines, metas


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--part", choices=("exact", "prior", "paired", "clusters", "classes",
                                       "spanning", "f1", "all"),
                    default="all")  # fmt: skip
    ap.add_argument("--n", type=int, nargs="*", default=list(GRID_N))
    ap.add_argument("--sims", type=int, default=1000, help="simulations per paired/cluster cell")
    ap.add_argument("--classes", type=int, nargs="*", default=list(CLASS_COUNTS))
    ap.add_argument("--span-sims", type=int, default=400, help="per spanning scenario")
    ap.add_argument("--f1-sims", type=int, default=400, help="simulations per F1 scenario")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="n = 20, 100; 200 sims; seconds")
    ap.add_argument("--out", help="save the cells as JSON (to --merge later)")
    ap.add_argument("--merge", nargs="*", help="print the table of saved JSON parts")
    ap.add_argument(
        "--emit",
        nargs="?",
        const=str(DATA_FILE),
        metavar="CSV",
        help=f"write the measured table (default: the package data file, {DATA_FILE.name})",
    )
    args = ap.parse_args(argv)
    t0 = time.time()
    meta: dict[str, object] = {"part": args.part, "n": args.n, "sims": args.sims,
                               "f1_sims": args.f1_sims,
                               "span_sims": args.span_sims,
                               "classes": args.classes, "seed": args.seed}  # fmt: skip
    if args.merge:
        cells, lines, metas = _load(args.merge)
        print("parts:", "; ".join(json.dumps(m) for m in metas))
    elif args.quick:
        cells = part_exact((20, 100), (0.1, 0.5), args.seed)
        cells += part_paired((20, 100), (0.1, 0.5), 200, args.seed, PAIRED[:4])
        lines = []
        meta.update(sims=200, n=[20, 100])
    else:
        ns, parts = tuple(args.n), args.part
        cells, lines = [], []
        if parts in ("exact", "all"):
            cells += part_exact(ns, SHARES, args.seed)
        if parts in ("prior", "all"):
            lines += ["", "Prior, one variant's balanced accuracy (exact coverage):"]
            lines += part_prior(ns, SHARES, args.seed)
        if parts in ("paired", "all"):
            cells += part_paired(ns, SHARES, args.sims, args.seed)
        if parts in ("classes", "all"):
            cells += part_classes(args.sims, args.seed, args.classes)
        if parts in ("spanning", "all"):
            cells += part_spanning(args.span_sims, args.seed)
        if parts in ("clusters", "all"):
            lines += ["", f"Clustered rows ({args.sims} simulations per scenario):"]
            lines += part_clusters(SHARES, args.sims, args.seed)
        if parts in ("f1", "all"):
            cells += f1_cells(ns, args.f1_sims, np.random.default_rng(args.seed))
    if args.out:
        _save(args.out, cells, lines, meta)
    print(
        "95% intervals of analysis.intervals.metric_interval; one variant (rows distinct) "
        "exact; paired and clustered simulated (meta above / below); "
        f"{intervals.N_DRAWS} posterior draws"
    )
    print(json.dumps(meta))
    print()
    print("\n".join(table(cells)))
    print()
    print("\n".join(summary(cells)))
    print("\n".join(lines))
    if args.emit:
        print()
        print(emit(cells, int(args.sims), Path(args.emit)))
    print(f"\n({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
