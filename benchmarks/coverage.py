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
   per-class recall in {0.5, 0.7, 0.9, 0.95} for each class (16 scenarios).
2. Paired difference, rows distinct: simulated. Each class's rows fall into the four cells
   (both right, A only, B only, both wrong) with probabilities from a Gaussian copula of the
   two arms' per-class recalls with latent correlation rho = 0 (independent arms) or 0.7
   (shared row difficulty); 10 recall scenarios (equal arms, an effect in both classes, in
   the minority only, in the majority only, opposite effects).
3. Clusters: the same with clustered rows (a cluster's rows share one class and one
   outcome, as identical prompts do): cuad_audit_rights' 775 distinct texts with their real
   multiplicities (1,215 rows: 461 texts once, 213 twice, 79 three times, 20 four times, one
   five and one six times), and 20 distinct texts x 30 copies. Also the same interval
   ignoring the clusters, to show what that costs.
4. F1 (`ssla_f1`): through the real path (`metric_interval` -> `stats.bootstrap_ci`), rows
   with 1-3 answer names, each named by the generation with probability q, plus a wrong name
   with probability 0.2.

    nice -n 10 .venv/bin/python benchmarks/coverage.py            # the full table
    .venv/bin/python benchmarks/coverage.py --quick               # seconds; what the test runs
    .venv/bin/python benchmarks/coverage.py --emit                # the table for intervals.py
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.stats import binom, multivariate_normal, norm

from experiments.analysis import intervals, stats

FloatArray = NDArray[np.float64]
GRID_N = (20, 40, 50, 100, 200)
SHARES = (0.1, 0.2, 0.5)
RECALLS = (0.5, 0.7, 0.9, 0.95)
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
    weights = np.array([0.5, 0.5])
    lows, highs = np.empty(len(hits)), np.empty(len(hits))
    chunk = max(1, 2_000_000 // n_draws)
    for s in range(0, len(hits), chunk):
        d = intervals.single_draws(
            hits[s : s + chunk], sizes - hits[s : s + chunk], weights, rng, n_draws, prior
        )
        lows[s : s + chunk], highs[s : s + chunk] = intervals.equal_tailed(
            d, 0.95, est[s : s + chunk]
        )
    total = np.arange(n + 1.0)
    d = intervals.single_draws(total[:, None], n - total[:, None], np.ones(1), rng, n_draws, prior)
    tlow, thigh = intervals.equal_tailed(d, 0.95, total / n)
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
    both = float(
        multivariate_normal(mean=[0, 0], cov=[[1, rho], [rho, 1]]).cdf([za, zb])
        if rho > 0
        else r_a * r_b
    )
    p = np.clip(np.array([both, r_a - both, r_b - both, 1 - r_a - r_b + both]), 0, None)
    return np.asarray(p / p.sum(), dtype=np.float64)


def _cached_intervals(
    counts: FloatArray,
    draw: Callable[[FloatArray, np.random.Generator], FloatArray],
    estimate: FloatArray,
    rng: np.random.Generator,
    n_draws: int,
) -> tuple[FloatArray, FloatArray]:
    """Intervals for (S, G, c) effective counts: posterior draws once per distinct group
    outcome (as the seeded API would draw them), summed over groups with weight 1/G."""
    s, g, _ = counts.shape
    total = np.zeros((s, n_draws))
    for j in range(g):
        uniq, inv = np.unique(np.round(counts[:, j, :], 9), axis=0, return_inverse=True)
        total += draw(uniq, rng)[inv.ravel()] / g
    return intervals.equal_tailed(total, 0.95, estimate)


def _paired_draw(n_draws: int) -> Callable[[FloatArray, np.random.Generator], FloatArray]:
    def draw(u: FloatArray, rng: np.random.Generator) -> FloatArray:
        return intervals.paired_draws(
            u[:, None, 0], u[:, None, 1], u[:, None, 2], np.ones(1), rng, n_draws
        )

    return draw


def _single_draw(n_draws: int) -> Callable[[FloatArray, np.random.Generator], FloatArray]:
    def draw(u: FloatArray, rng: np.random.Generator) -> FloatArray:
        return intervals.single_draws(u[:, None, 0], u[:, None, 1], np.ones(1), rng, n_draws)

    return draw


def _covered(low: FloatArray, high: FloatArray, truth: float) -> float:
    return float(np.mean((low <= truth + 1e-12) & (high >= truth - 1e-12)))


def simulate_paired(
    sizes: list[NDArray[np.intp]],
    scenario: tuple[float, float, float, float],
    rho: float,
    sims: int,
    rng: np.random.Generator,
    n_draws: int,
    use_clusters: bool = True,
) -> tuple[float, float]:
    """(balanced, rows) coverage of the paired interval; sizes[c] = cluster sizes of class c.

    Every cluster draws one cell; its rows all share it. With use_clusters=False the
    interval treats every row as its own cluster (what ignoring the clusters does).
    """
    ra = (scenario[0], scenario[1])
    rb = (scenario[2], scenario[3])
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
    lo, hi = _cached_intervals(eff * n_eff[None, :, None], _paired_draw(n_draws), est, rng, n_draws)
    truth = float(np.mean(np.subtract(ra, rb)))
    bal = _covered(lo, hi, truth)
    # rows family: one group over all rows
    pooled = rows_c.sum(axis=1)
    n_all = n_rows.sum()
    sq = sum(np.sum(m.astype(float) ** 2) for m in sizes)
    n_eff_all = n_all**2 / sq if use_clusters else n_all
    sh = pooled / n_all
    eff_all = np.stack([sh[:, 1], sh[:, 2], sh[:, 0] + sh[:, 3]], -1)[:, None, :] * n_eff_all
    lo, hi = _cached_intervals(eff_all, _paired_draw(n_draws), sh[:, 1] - sh[:, 2], rng, n_draws)
    truth_rows = float(np.dot(n_rows, np.subtract(ra, rb)) / n_all)
    return bal, _covered(lo, hi, truth_rows)


def simulate_single(
    sizes: list[NDArray[np.intp]],
    recall: tuple[float, float],
    sims: int,
    rng: np.random.Generator,
    n_draws: int,
    use_clusters: bool = True,
) -> tuple[float, float]:
    """(balanced, rows) coverage of one variant's interval with clustered rows."""
    n_rows = np.array([m.sum() for m in sizes], dtype=float)
    hit_rows = np.stack(
        [((rng.random((sims, len(m))) < recall[c]) * m).sum(axis=1) for c, m in enumerate(sizes)],
        axis=1,
    ).astype(float)  # (S, G)
    kish = np.array([m.sum() ** 2 / np.sum(m.astype(float) ** 2) for m in sizes])
    n_eff = kish if use_clusters else n_rows
    share = hit_rows / n_rows
    eff = np.stack([share * n_eff, (1 - share) * n_eff], axis=-1)
    lo, hi = _cached_intervals(eff, _single_draw(n_draws), share.mean(axis=1), rng, n_draws)
    bal = _covered(lo, hi, float(np.mean(recall)))
    n_all = n_rows.sum()
    sq = sum(np.sum(m.astype(float) ** 2) for m in sizes)
    n_eff_all = n_all**2 / sq if use_clusters else n_all
    sh = hit_rows.sum(axis=1) / n_all
    eff_all = np.stack([sh * n_eff_all, (1 - sh) * n_eff_all], axis=-1)[:, None, :]
    lo, hi = _cached_intervals(eff_all, _single_draw(n_draws), sh, rng, n_draws)
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


def f1_rows(rng: np.random.Generator, n: int, q: float) -> tuple[list[str], list[str]]:
    """Answers of 1-3 names; the generation names each with probability q, plus a wrong name
    with probability SPURIOUS."""
    answers, gens = [], []
    for _ in range(n):
        k = int(rng.integers(1, 4))
        names = list(rng.choice(NAMES[:30], size=k, replace=False))
        said = [x for x in names if rng.random() < q]
        if rng.random() < SPURIOUS:
            said.append(str(rng.choice(NAMES[30:])))
        answers.append(",".join(names))
        gens.append(",".join(said))
    return answers, gens


def f1_truth(q: float) -> float:
    """Population ssla_f1 of the generating process: 2 E[tp] / (2 E[tp] + E[fp] + E[fn]),
    the expectations taken exactly over every row configuration (k names, which of them
    were said, a wrong name or not), each row counted by the official counting rule."""
    totals = np.zeros(3)
    for k in (1, 2, 3):
        names = NAMES[:k]
        for said in itertools.product((False, True), repeat=k):
            for extra in (False, True):
                gen = [x for x, s in zip(names, said, strict=True) if s]
                gen += [NAMES[30]] if extra else []
                prob = (
                    (1 / 3)
                    * math.prod(q if s else 1 - q for s in said)
                    * (SPURIOUS if extra else 1 - SPURIOUS)
                )
                totals += prob * np.array(stats._ssla_counts(",".join(gen), ",".join(names)))
    tp, fp, fn = totals
    return float(2 * tp / (2 * tp + fp + fn))


def f1_paired_rows(
    rng: np.random.Generator, n: int, qa: float, qb: float
) -> tuple[list[str], list[str], list[str]]:
    """Two arms on the same answers, each naming each answer name independently."""
    answers: list[str] = []
    ga: list[str] = []
    gb: list[str] = []
    for _ in range(n):
        k = int(rng.integers(1, 4))
        names = list(rng.choice(NAMES[:30], size=k, replace=False))
        for q, out in ((qa, ga), (qb, gb)):
            said = [x for x in names if rng.random() < q]
            if rng.random() < SPURIOUS:
                said.append(str(rng.choice(NAMES[30:])))
            out.append(",".join(said))
        answers.append(",".join(names))
    return answers, ga, gb


def f1_cells(ns: Iterable[int], sims: int, rng: np.random.Generator) -> list[Cell]:
    out = []
    qs = (0.6, 0.9)
    truths = {q: f1_truth(q) for q in qs}
    for n in ns:
        single: dict[str, float] = {}
        paired: dict[str, float] = {}
        for q in qs:
            hit = 0
            for _ in range(sims):
                ans, gen = f1_rows(rng, n, q)
                ci = intervals.metric_interval(
                    ans, gen, metric="ssla_f1", seed=int(rng.integers(1 << 31))
                )
                hit += ci.low <= truths[q] <= ci.high
            single[f"q {q} (F1 {truths[q]:.3f})"] = hit / sims
        for qa, qb in ((0.9, 0.6), (0.9, 0.9)):
            hit = 0
            truth = truths[qa] - truths[qb]
            for _ in range(sims):
                ans, ga, gb = f1_paired_rows(rng, n, qa, qb)
                ci = intervals.metric_interval(
                    ans, ga, gb, metric="ssla_f1", seed=int(rng.integers(1 << 31))
                )
                hit += ci.low <= truth <= ci.high
            paired[f"q {qa} vs {qb}"] = hit / sims
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
    out = ["| metric | interval | n | minority | min coverage | median | worst scenario |"]
    out.append("|---|---|---|---|---|---|---|")
    for c in sorted(cells, key=lambda c: (c.family, c.kind, c.n, c.share)):
        low, worst = c.worst
        flag = " **flagged**" if low < intervals.MIN_COVERAGE else ""
        share = "-" if c.family == "f1" else str(c.share)
        out.append(
            f"| {c.family} | {c.kind} | {c.n} | {share} | {low:.3f}{flag} | {c.median:.3f} | "
            f"{worst} |"
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


def emit(cells: list[Cell], sims: int) -> str:
    by: dict[tuple[str, str], dict[tuple[int, float], tuple[float, float, str]]] = {}
    for c in cells:
        low, worst = c.worst
        by.setdefault((c.family, c.kind), {})[(c.n, c.share)] = (
            round(low, 3),
            round(c.median, 3),
            worst,
        )
    lines = [
        f"COVERAGE_SIMS = {sims}  # simulations per paired cell (single-variant cells are exact)",
        "COVERAGE: dict[tuple[str, str], dict[tuple[int, float], tuple[float, float, str]]] = {",
    ]
    for key, table_ in sorted(by.items()):
        lines.append(f"    {key!r}: {{")
        for k, v in sorted(table_.items()):
            lines.append(f"        {k!r}: {v!r},")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines)


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
    ap.add_argument("--part", choices=("exact", "prior", "paired", "clusters", "f1", "all"),
                    default="all")  # fmt: skip
    ap.add_argument("--n", type=int, nargs="*", default=list(GRID_N))
    ap.add_argument("--sims", type=int, default=1000, help="simulations per paired/cluster cell")
    ap.add_argument("--f1-sims", type=int, default=400, help="simulations per F1 scenario")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="n = 20, 100; 200 sims; seconds")
    ap.add_argument("--out", help="save the cells as JSON (to --merge later)")
    ap.add_argument("--merge", nargs="*", help="print the table of saved JSON parts")
    ap.add_argument("--emit", action="store_true", help="print the COVERAGE literal")
    args = ap.parse_args(argv)
    t0 = time.time()
    meta: dict[str, object] = {"part": args.part, "n": args.n, "sims": args.sims,
                               "f1_sims": args.f1_sims, "seed": args.seed}  # fmt: skip
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
        print(emit(cells, int(args.sims)))
    print(f"\n({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
