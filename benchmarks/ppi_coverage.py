"""Validity of `experiments.analysis.stats.ppi` by simulation: coverage, size, power, width.

The acceptance setting of issue 33, through the real estimator functions:

- a stub model answers each row correctly with a set probability per variant (A, B); the two
  variants' rows share difficulty (with probability RHO a row's two outcomes come from one
  uniform draw, else from two), so the pairing matters as it does for real prompts;
- a stub judge agrees with the truth on 80% of rows and is biased toward A by b: it marks a
  wrong answer of A, that it would have marked wrong, correct with extra probability b;
- hand grades (the truth) on a uniform random share of each variant's rows, drawn apart for
  A and B (a sheet's shuffled prefix mixes both);
- clustered rows: texts repeated 1-4 times (mean 2.5), a text's rows sharing answer, judge
  score and grade, as a temperature-0 model and a cached judge give.

Scenarios (p_A, p_B): a true null (0.7, 0.7), a known effect (0.8, 0.65), the ceiling (0.98,
0.95) and a rare criterion (0.12, 0.08). The truth is p_A - p_B (the superpopulation mean),
never the estimator's own formula. Per cell: the share of reps the estimator refused
(`valid=False`, too few hand grades), and over the valid reps: PPI coverage of the true
difference, rejection rate at 0.05 (size under the null, power otherwise), mean width,
hand-only width / PPI width, hand-only coverage, and judge-only coverage (the judge's
difference, which misses the truth once b > 0: that is the point).

`--part active`: uniform vs active grading at the same expected number of grades. Active:
row i is graded with probability proportional to the residual sd of its judge stratum
(Neyman allocation with the TRUE sd, the best case), IPW-corrected through the estimator's
`pi_a`/`pi_b`. Naive: the rows the judge is least sure of (the stratum with the larger
residual sd) graded first, then estimated as if uniform (no IPW).

    nice -n 10 .venv/bin/python benchmarks/ppi_coverage.py --reps 2000          # the full grid
    .venv/bin/python benchmarks/ppi_coverage.py --reps 200 --n 100 --share 0.1   # a corner
    .venv/bin/python benchmarks/ppi_coverage.py --part active --reps 2000

tests/experiments/analysis/test_ppi.py runs `simulate_cell` on a few cells.

Measured (2000 reps per cell, 512 cells: the grid above x 4 scenarios x rows distinct or
clustered; MIN_HAND = 10):
- no cell where the estimator claimed validity covered below 93% (min 0.933); null and effect
  cells 0.934-0.970 where every rep was valid, up to 0.986 where only the reps that happened
  to reach 10 graded clusters were valid; ceiling and rare cells over-cover (0.97-1.00: the
  variance floor and t quantiles are conservative there, wider than needed, never narrower);
- refused (valid=False): n=40 at 5-20% and n=100 at 5% always (2-8 graded per variant);
  with clustered rows also whenever fewer than 10 distinct texts were graded;
- size under the null 0.014-0.066; power for the 0.15 effect at n=400: 0.24/0.42/0.70/0.87
  at 5/10/20/30% graded;
- judge-only coverage at n=400 (rows distinct): null 0.94/0.93/0.87/0.79 at b=0/.05/.10/.15,
  rare 0.91/0.90/0.57/0.18, effect 0.53-0.79 (an 80% judge also shrinks a real difference
  by 40%): the judge's own interval is not an interval for correctness;
- hand-only width / PPI width: 1.01-1.21 for null/effect (median 1.14), ~1.02 near the
  ceiling: an 80%-agreeing judge is worth ~15-45% more hand grades, not more;
- active (oracle Neyman pi, IPW): 1-3% narrower, coverage 0.938-0.958; naive
  least-sure-first without IPW: 0.879-0.961, breaking at n=400 with an effect. Uniform is
  the recommendation for `grade next` (the sheet's shuffled prefix).
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from experiments.analysis.stats import ppi

FloatArray = NDArray[np.float64]
AGREE = 0.8
RHO = 0.5
ALPHA = 0.05
GRID_N = (40, 100, 200, 400)
GRID_SHARE = (0.05, 0.10, 0.20, 0.30)
GRID_BIAS = (0.0, 0.05, 0.10, 0.15)
SCENARIOS: dict[str, tuple[float, float]] = {
    "null": (0.7, 0.7),
    "effect": (0.8, 0.65),
    "ceiling": (0.98, 0.95),
    "rare": (0.12, 0.08),
}


@dataclass(frozen=True)
class Cell:
    scenario: str
    n: int
    share: float
    bias: float
    clustered: bool = False
    sampling: str = "uniform"  # "uniform" | "active" | "naive"

    @property
    def truth(self) -> float:
        pa, pb = SCENARIOS[self.scenario]
        return pa - pb


@dataclass(frozen=True)
class CellResult:
    cell: Cell
    reps: int
    invalid: float  # share of reps refused for too few hand grades
    coverage: float  # PPI, over valid reps
    reject: float  # PPI p < ALPHA, over valid reps (size under the null, power otherwise)
    width: float  # PPI mean width
    hand_ratio: float  # mean hand-only width / mean PPI width (reps where both are valid)
    hand_coverage: float
    judge_coverage: float
    judge_bias: float  # mean judge-only estimate - truth

    @property
    def flag(self) -> str:
        """'!' where the estimator claimed validity and coverage left 93-97% by more than
        the simulation error allows (three standard errors)."""
        if math.isnan(self.coverage):
            return ""
        valid_reps = self.reps * (1 - self.invalid)
        tol = 3 * math.sqrt(0.95 * 0.05 / max(valid_reps, 1))
        return "!" if not (0.93 - tol <= self.coverage <= 0.97 + tol) else ""


def _texts(rng: np.random.Generator, n: int, clustered: bool) -> NDArray[np.intp]:
    """Text id per row: distinct rows, or texts repeated 1-4 times (shuffled)."""
    if not clustered:
        return np.arange(n, dtype=np.intp)
    mult = rng.integers(1, 5, size=n)
    ids = np.repeat(np.arange(n), mult)[:n]
    return np.asarray(rng.permutation(ids), dtype=np.intp)


def draw(
    rng: np.random.Generator, cell: Cell
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, NDArray[np.intp]]:
    """(Y_A, f_A, Y_B, f_B, text ids) for one rep: truth and judge per row."""
    pa, pb = SCENARIOS[cell.scenario]
    text = _texts(rng, cell.n, cell.clustered)
    g = int(text.max()) + 1
    u = rng.random(g)
    shared = rng.random(g) < RHO
    ua = u
    ub = np.where(shared, u, rng.random(g))
    ya = (ua < pa).astype(float)
    yb = (ub < pb).astype(float)
    fa = np.where(rng.random(g) < AGREE, ya, 1 - ya)
    fb = np.where(rng.random(g) < AGREE, yb, 1 - yb)
    fa = np.where((ya == 0) & (fa == 0) & (rng.random(g) < cell.bias), 1.0, fa)
    return ya[text], fa[text], yb[text], fb[text], text


def _uniform(rng: np.random.Generator, y: FloatArray, share: float) -> FloatArray:
    hand = np.full(len(y), np.nan)
    rows = rng.permutation(len(y))[: round(share * len(y))]
    hand[rows] = y[rows]
    return hand


def _residual_sd(y: FloatArray, f: FloatArray) -> FloatArray:
    """Per row: the TRUE sd of Y within its judge stratum (the oracle of active sampling)."""
    sd = np.zeros(len(y))
    for s in (0.0, 1.0):
        m = f == s
        if m.any():
            p = y[m].mean()
            sd[m] = math.sqrt(p * (1 - p))
    return sd


def _active(
    rng: np.random.Generator, y: FloatArray, f: FloatArray, share: float
) -> tuple[FloatArray, FloatArray]:
    """Poisson sampling with pi_i proportional to the residual sd (capped at 1)."""
    sd = np.maximum(_residual_sd(y, f), 0.05)
    budget = share * len(y)
    pi = np.minimum(1.0, budget * sd / sd.sum())
    for _ in range(5):  # re-spread the capped rows' budget
        free = pi < 1
        left = budget - (~free).sum()
        pi[free] = np.minimum(1.0, left * sd[free] / sd[free].sum())
    hand = np.where(rng.random(len(y)) < pi, y, np.nan)
    return hand, pi


def _naive(rng: np.random.Generator, y: FloatArray, f: FloatArray, share: float) -> FloatArray:
    """The rows the judge is least sure of (the larger residual sd) first, no IPW."""
    sd = _residual_sd(y, f)
    order = np.lexsort((rng.random(len(y)), -sd))
    hand = np.full(len(y), np.nan)
    rows = order[: round(share * len(y))]
    hand[rows] = y[rows]
    return hand


def simulate_cell(cell: Cell, reps: int, seed: int) -> CellResult:
    """`reps` seeded repetitions of one cell through the real estimator functions."""
    rng = np.random.default_rng(seed)
    truth = cell.truth
    n_valid = covered = rejected = hand_cov = hand_n = judge_cov = 0
    widths: list[float] = []
    hand_widths: list[float] = []
    ppi_widths_paired: list[float] = []
    judge_err = 0.0
    for _ in range(reps):
        ya, fa, yb, fb, text = draw(rng, cell)
        clusters = text if cell.clustered else None
        pi_a = pi_b = None
        if cell.sampling == "active":
            ha, pi_a = _active(rng, ya, fa, cell.share)
            hb, pi_b = _active(rng, yb, fb, cell.share)
        elif cell.sampling == "naive":
            ha, hb = _naive(rng, ya, fa, cell.share), _naive(rng, yb, fb, cell.share)
        else:
            ha, hb = _uniform(rng, ya, cell.share), _uniform(rng, yb, cell.share)
        res = ppi.ppi_paired_difference(fa, ha, fb, hb, clusters=clusters, pi_a=pi_a, pi_b=pi_b)
        judge = ppi.judge_only_difference(fa, fb, clusters=clusters)
        judge_err += judge.estimate - truth
        judge_cov += judge.valid and judge.low <= truth <= judge.high
        if not res.valid:
            continue
        n_valid += 1
        covered += res.low <= truth <= res.high
        rejected += res.p_value < ALPHA
        widths.append(res.high - res.low)
        hand = ppi.hand_only_difference(ha, hb, clusters=clusters, pi_a=pi_a, pi_b=pi_b)
        if hand.valid:
            hand_n += 1
            hand_cov += hand.low <= truth <= hand.high
            hand_widths.append(hand.high - hand.low)
            ppi_widths_paired.append(res.high - res.low)
    nan = math.nan
    return CellResult(
        cell=cell,
        reps=reps,
        invalid=1 - n_valid / reps,
        coverage=covered / n_valid if n_valid else nan,
        reject=rejected / n_valid if n_valid else nan,
        width=float(np.mean(widths)) if widths else nan,
        hand_ratio=(
            float(np.mean(hand_widths) / np.mean(ppi_widths_paired)) if hand_widths else nan
        ),
        hand_coverage=hand_cov / hand_n if hand_n else nan,
        judge_coverage=judge_cov / reps,
        judge_bias=judge_err / reps,
    )


HEADER = (
    f"{'scenario':8} {'n':>4} {'share':>5} {'bias':>4} {'clu':>3} {'samp':>7} "
    f"{'invalid':>7} {'cover':>6} {'reject':>6} {'width':>6} {'hand/ppi':>8} "
    f"{'handcov':>7} {'judgecov':>8} {'judgebias':>9}"
)


def row(r: CellResult) -> str:
    c = r.cell
    return (
        f"{c.scenario:8} {c.n:4d} {c.share:5.2f} {c.bias:4.2f} {'yes' if c.clustered else 'no':>3} "
        f"{c.sampling:>7} {r.invalid:7.3f} {r.coverage:6.3f} {r.reject:6.3f} {r.width:6.3f} "
        f"{r.hand_ratio:8.2f} {r.hand_coverage:7.3f} {r.judge_coverage:8.3f} "
        f"{r.judge_bias:+9.3f} {r.flag}"
    )


def grid(
    scenarios: Sequence[str],
    ns: Sequence[int],
    shares: Sequence[float],
    biases: Sequence[float],
    clustered: Sequence[bool],
    sampling: Sequence[str] = ("uniform",),
) -> list[Cell]:
    return [
        Cell(s, n, sh, b, cl, sa)
        for s, cl, n, sh, b, sa in itertools.product(
            scenarios, clustered, ns, shares, biases, sampling
        )
    ]


def summary(results: Sequence[CellResult]) -> str:
    valid = [r for r in results if not math.isnan(r.coverage)]
    if not valid:
        return "no cell had a valid interval"
    covs = [r.coverage for r in valid]
    flagged = [r for r in valid if r.flag]
    nulls = [r.reject for r in valid if r.cell.scenario in ("null",)]
    lines = [
        f"cells {len(results)}, with valid reps {len(valid)}; PPI coverage where valid: "
        f"min {min(covs):.3f}, median {float(np.median(covs)):.3f}, max {max(covs):.3f}; "
        f"outside 93-97% beyond simulation error: {len(flagged)}",
        "size under the null (reject at 0.05): "
        + (f"min {min(nulls):.3f} max {max(nulls):.3f}" if nulls else "n/a"),
    ]
    for b in sorted({r.cell.bias for r in results}):
        js = [r.judge_coverage for r in results if r.cell.bias == b]
        lines.append(f"judge-only coverage at bias {b:.2f}: mean {float(np.mean(js)):.3f}")
    ratios = [r.hand_ratio for r in valid if not math.isnan(r.hand_ratio)]
    if ratios:
        lines.append(
            f"hand-only width / PPI width: median {float(np.median(ratios)):.2f} "
            f"(range {min(ratios):.2f}-{max(ratios):.2f})"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("grid", "active"), default="grid")
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, nargs="+", default=list(GRID_N))
    ap.add_argument("--share", type=float, nargs="+", default=list(GRID_SHARE))
    ap.add_argument("--bias", type=float, nargs="+", default=list(GRID_BIAS))
    ap.add_argument("--scenario", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    ap.add_argument("--clustered", choices=("no", "yes", "both"), default="both")
    ap.add_argument("--min-hand", type=int, help="try another MIN_HAND (the refusal threshold)")
    args = ap.parse_args(argv)
    if args.min_hand is not None:
        ppi.MIN_HAND = args.min_hand
    clustered = {"no": (False,), "yes": (True,), "both": (False, True)}[args.clustered]
    if args.part == "active":
        cells = grid(
            args.scenario, args.n, args.share, args.bias, clustered, ("uniform", "active", "naive")
        )
    else:
        cells = grid(args.scenario, args.n, args.share, args.bias, clustered)
    print(f"MIN_HAND = {ppi.MIN_HAND} graded clusters per variant; reps per cell {args.reps}")
    print(HEADER, flush=True)
    results = []
    start = time.perf_counter()
    for k, cell in enumerate(cells):
        res = simulate_cell(cell, args.reps, seed=args.seed * 1_000_003 + k)
        results.append(res)
        print(row(res), flush=True)
    print(summary(results))
    print(f"{time.perf_counter() - start:.0f}s")


if __name__ == "__main__":
    main()
