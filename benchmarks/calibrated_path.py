"""The calibrated comparison's acceptance grid through the real path (issue 33).

Each simulated set (`experiments.testing.calibrated_sim.run_set`) runs two trials of a task's
first n rows with a model whose answers are right with a set probability per variant, judges
them with a judge that agrees with the truth on 80% of rows and adds `bias` to variant A's
mean score (one judge run per bias), grades a blind sheet of both trials top to bottom from
the truth (a prefix of its shuffled order: each share of the grid a longer prefix), and reads
`calibrated_report`'s comparison of A − B. Scenarios: a true null (0.6, 0.6), where a biased
judge makes A look better, and a known effect (0.7, 0.55).

Per (scenario, n, share, bias): the share of sets the report refused (too few hand grades:
"not decided: grade N more"); over the rest, the PPI interval's coverage of the true A − B
and its rejection rate at 0.05 (size under the null); the judge-only interval's coverage
(over all sets: it needs no grades); the median width ratio hand-only / PPI (above 1: the
judge's scores narrowed the interval); the mean PPI width.

    python benchmarks/calibrated_path.py --reps 100
    python benchmarks/calibrated_path.py --reps 20 --n 200 --share 0.1 --scenario null

Prints a table and the wall time; `--out FILE` also writes it as JSON (after each n).

Measured (160 sets per (scenario, n): two runs of --reps 80, seeds 0 and 1; 128 cells):
- refused, "not decided: grade N more" (fewer than 10 graded per variant): n=40 at 5-20%
  always, at 30% 21-25% of sets; n=100 at 5% always, at 10% 82-84%; n=200 at 5% 81-85%;
- PPI coverage of the true A − B where the report said valid: 0.903-1.000, median 0.950;
  the lowest, 0.903, at null n=200 5% (31 valid sets, each at the 10-grade floor); effect
  n=200 at 0.912-0.931 (the same 160 sets in every share and bias: one draw, not 12;
  benchmarks/ppi_coverage.py measures that cell at 0.947-0.952 over 2,000 reps);
- size under the null 0.000-0.097 (0.019-0.069 where every set was valid);
- judge-only coverage (its own interval, no grades needed) at n=400: null 0.93 / 0.75 /
  0.22 / 0.01 at bias 0 / .05 / .10 / .15; effect 0.70 at bias 0 (an 80% judge shrinks a
  real difference to 0.6 of it) and 0.27 at .15: the judge's interval is not one for
  correctness;
- hand-only width / PPI width: 1.04-1.21, median 1.13: an 80%-agreeing judge is worth
  about 28% more hand grades (1.13 squared).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from experiments.testing.calibrated_sim import Outcome, run_set
from promptlib import Catalog, LocalSource

GRID_N = (40, 100, 200, 400)
GRID_SHARE = (0.05, 0.10, 0.20, 0.30)
GRID_BIAS = (0.0, 0.05, 0.10, 0.15)
SCENARIOS = {"null": (0.6, 0.6), "effect": (0.7, 0.55)}
HEAD = (
    f"{'scenario':<8} {'n':>4} {'share':>5} {'bias':>5} {'sets':>5} {'too few':>7} "
    f"{'cover':>6} {'reject':>6} {'judge cov':>9} {'hand/PPI':>8} {'width':>6}"
)


def _rate(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else math.nan


def summarize(scenario: str, cell: Sequence[Outcome]) -> dict[str, float | int | str]:
    """One grid cell's figures (see the module)."""
    valid = [o for o in cell if o.covered is not None]
    judged = [o.judge_covered for o in cell if o.judge_covered is not None]
    ratios = [r for o in valid if (r := o.hand_over_ppi) is not None]
    widths = [
        o.row.high - o.row.low for o in valid if o.row.high is not None and o.row.low is not None
    ]
    return {
        "scenario": scenario,
        "n": cell[0].n,
        "share": cell[0].share,
        "bias": cell[0].bias,
        "sets": len(cell),
        "too_few": 1 - len(valid) / len(cell),
        "coverage": _rate([bool(o.covered) for o in valid]),
        "reject": _rate([o.row.p_value is not None and o.row.p_value < 0.05 for o in valid]),
        "judge_coverage": _rate([bool(j) for j in judged]),
        "hand_over_ppi": statistics.median(ratios) if ratios else math.nan,
        "width": statistics.fmean(widths) if widths else math.nan,
    }


def line(s: dict[str, float | int | str]) -> str:
    return (
        f"{s['scenario']:<8} {s['n']:>4} {s['share']:>5.2f} {s['bias']:>5.2f} {s['sets']:>5} "
        f"{s['too_few']:>7.3f} {s['coverage']:>6.3f} {s['reject']:>6.3f} "
        f"{s['judge_coverage']:>9.3f} {s['hand_over_ppi']:>8.2f} {s['width']:>6.3f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=100, help="simulated sets per (scenario, n)")
    ap.add_argument("--n", type=int, nargs="+", default=list(GRID_N))
    ap.add_argument("--share", type=float, nargs="+", default=list(GRID_SHARE))
    ap.add_argument("--bias", type=float, nargs="+", default=list(GRID_BIAS))
    ap.add_argument("--scenario", nargs="+", choices=tuple(SCENARIOS), default=list(SCENARIOS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", type=Path, default=None, help="LegalBench folder ($LEGALBENCH_DIR)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import os

    data = args.data or Path(os.environ.get("LEGALBENCH_DIR", "../shared/legalbench"))
    catalog = Catalog(LocalSource(data))
    start = time.perf_counter()
    rows: list[dict[str, float | int | str]] = []
    print(HEAD, flush=True)
    for scenario in args.scenario:
        for n in args.n:
            outcomes: list[Outcome] = []
            with tempfile.TemporaryDirectory(prefix="calibrated-path-") as tmp:
                for rep in range(args.reps):
                    seed = args.seed * 10**7 + n * 10**4 + rep + (0 if scenario == "null" else 5000)
                    outcomes += run_set(
                        catalog, Path(tmp) / str(rep), n=n, p=SCENARIOS[scenario],
                        shares=args.share, biases=args.bias, seed=seed,
                    )  # fmt: skip
            for share in sorted(args.share):
                for bias in args.bias:
                    cell = [o for o in outcomes if (o.share, o.bias) == (share, bias)]
                    rows.append(summarize(scenario, cell))
                    print(line(rows[-1]), flush=True)
            if args.out:
                args.out.write_text(json.dumps(rows, indent=1) + "\n")
    valid = [r for r in rows if not math.isnan(float(r["coverage"]))]
    if valid:
        cov = [float(r["coverage"]) for r in valid]
        print(
            f"PPI coverage where valid: min {min(cov):.3f}, median {statistics.median(cov):.3f}, "
            f"max {max(cov):.3f} over {len(valid)} cells"
        )
        for b in args.bias:
            jc = [float(r["judge_coverage"]) for r in rows if r["bias"] == b and int(r["n"]) >= 200]
            if jc:
                mean = statistics.fmean(jc)
                print(f"judge-only coverage at bias {b:.2f}, n >= 200: mean {mean:.3f}")
        ratio = [
            float(r["hand_over_ppi"]) for r in valid if not math.isnan(float(r["hand_over_ppi"]))
        ]
        if ratio:
            print(
                f"hand-only width / PPI width: median {statistics.median(ratio):.2f} "
                f"(range {min(ratio):.2f}-{max(ratio):.2f})"
            )
    print(f"{time.perf_counter() - start:.0f}s")


if __name__ == "__main__":
    main()
