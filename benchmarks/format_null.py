"""Size, power and known-effect scores of the range test over drawn formats and verbalizers.

Each cell of the grid runs many k-variant sweeps (best vs worst, `comparisons: best_vs_worst`)
through the whole path: spec, planning, resolving and rendering, the runner, LegalBench
scoring with verbalized replies mapped back to the official labels, and the report's
comparison (`experiments.testing.validation.simulate_variants`). The simulated model answers
in the words each variant shows, right with probability p (rows share a difficulty across
variants), and a share of its wrong replies is invalid (no shown label; under a verbalizer,
often the right answer in the official words, which must not count).

Grid: n in {30, 100} rows; overruling (balanced, 50/50) and diversity_1 (imbalanced, 76/24 in
its test rows: the most imbalanced binary LegalBench task); p in {0.7, 0.95}; k = 3
(verbalizers official, true_false, letters) and k = 5 (the base format and 4 drawn formats;
`--axis both` runs each k on both axes). Per cell: the rejection rate with no effect (size;
target <= 0.05 + 2 MC s.e.) and with the first variant better by `effect` (power), and the
largest |mean score - set accuracy| over the variants with its MC s.e. Then: a model right on
every row in the verbalized words scores exactly 1.0 under every verbalizer, and one whose
every reply is invalid scores 0.0 with every row invalid.

    .venv/bin/python benchmarks/format_null.py [--sims 150] [--power-sims 50] [--axis both]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from experiments import ids
from experiments.testing.validation import (
    VariantLM,
    VariantSimulation,
    run_variants,
    simulate_variants,
    variant_setup,
)
from promptlib import Catalog, LocalSource
from promptlib.verbalizers import SCHEMES

TASKS = (("overruling", "balanced 50/50"), ("diversity_1", "imbalanced 76/24"))
LEVELS = {
    ("verbalizer", 3): "[official, true_false, letters]",
    ("verbalizer", 5): "[official, lower, true_false, letters, numbers]",
    ("format", 3): "{draw: 2, seed: 0, with: [base]}",
    ("format", 5): "{draw: 4, seed: 0, with: [base]}",
}
INVALID_RATE = 0.3  # share of wrong replies that name no shown label
N_RESAMPLES = 1000  # the sweep spec's default (experiments.sweeps.spec)


def effect_for(p: float) -> float:
    """The known effect: +0.15 at p = 0.7; at the ceiling, 0.95 -> 0.99."""
    return 0.15 if p < 0.9 else 0.04


def _worst_bias(r: VariantSimulation) -> tuple[float, float]:
    errs = r.score_errors()
    v = max(errs, key=lambda name: abs(errs[name][0]))
    return errs[v]


def _z_scores(r: VariantSimulation) -> list[float]:
    return [bias / se for bias, se in r.score_errors().values() if se > 0]


def _cell(
    catalog: Catalog, tmp: Path, cell: tuple[Any, ...], args: argparse.Namespace
) -> tuple[str, list[float]]:
    n, (task, _), p, k, axis = cell
    setup = variant_setup(
        catalog, task=task, n_rows=n, axis=axis, levels=LEVELS[(axis, k)], workdir=tmp,
        sample_seed=n, n_resamples=N_RESAMPLES,
    )  # fmt: skip
    seed = ids.seed_int(0, str(n), task, str(p), str(k), axis) % 10_000  # fixed per cell
    null = simulate_variants(
        catalog, setup, n_sims=args.sims, p=p, invalid_rate=INVALID_RATE, seed=seed
    )
    eff = effect_for(p)
    alt = simulate_variants(
        catalog, setup, n_sims=args.power_sims, p=p, effect=eff, invalid_rate=INVALID_RATE,
        seed=seed + 1,
    )  # fmt: skip
    bias, bias_se = _worst_bias(null)
    abias, abias_se = _worst_bias(alt)
    target = null.alpha + 2 * null.mc_se
    flag = "" if null.rate <= target else "  SIZE ABOVE TARGET"
    flag += "" if abs(bias) <= 3 * bias_se + 1e-9 else "  SCORE OFF"
    flag += "" if abs(abias) <= 3 * abias_se + 1e-9 else "  SCORE OFF (effect)"
    return (
        f"{n:>4} {task:<12} {p:>4.2f} {k:>2} {axis:<10} {null.rate:>6.3f} {null.mc_se:>6.3f} "
        f"{eff:>+5.2f} {alt.rate:>6.3f} {alt.mc_se:>6.3f} {bias:>+8.4f} {bias_se:>6.4f} "
        f"{abias:>+8.4f} {abias_se:>6.4f} {null.invalid_rate:>5.3f} "
        f"{','.join(map(str, null.rows_used + alt.rows_used))}{flag}"
    ), _z_scores(null) + _z_scores(alt)


def _ceiling_checks(catalog: Catalog, tmp: Path) -> list[str]:
    """Right on every row in the shown words -> 1.0; every reply invalid -> 0.0, all invalid."""
    out = []
    levels = "[official, " + ", ".join(SCHEMES) + "]"
    for task, _ in TASKS:
        setup = variant_setup(
            catalog, task=task, n_rows=100, axis="verbalizer", levels=levels, workdir=tmp
        )
        right = VariantLM(setup.prompts, {v: 1.0 for v in setup.variants}, 1)
        records, _ = run_variants(setup, catalog, right)
        scores = {o.variant: o.score for o in records}
        invalid = VariantLM(setup.prompts, {v: 0.0 for v in setup.variants}, 2, invalid_rate=1.0)
        bad, _ = run_variants(setup, catalog, invalid)
        zero = {o.variant: (o.score, sum(r.parsed is None for r in o.rows)) for o in bad}
        ok = all(s == 1.0 for s in scores.values()) and all(
            s == 0.0 and m == 100 for s, m in zero.values()
        )
        out.append(f"{task}: always right -> {scores}")
        out.append(f"{task}: always invalid -> (score, invalid rows of 100) {zero}")
        out.append(f"{task}: {'OK' if ok else 'WRONG NUMBER'}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sims", type=int, default=150, help="simulations with no effect, per cell")
    ap.add_argument("--power-sims", type=int, default=50, help="simulations with the effect")
    ap.add_argument("--axis", choices=("alternate", "both"), default="alternate")
    args = ap.parse_args()
    catalog = Catalog(LocalSource(os.environ.get("LEGALBENCH_DIR", "../shared/legalbench")))
    t0, cpu0 = time.perf_counter(), time.process_time()
    zs: list[float] = []
    print(
        f"range test at alpha 0.05, {N_RESAMPLES} resamples; {args.sims} null and "
        f"{args.power_sims} effect simulations per cell; invalid share of wrong replies "
        f"{INVALID_RATE}; bias = largest |mean score - set accuracy| over the variants"
    )
    print(
        "   n task            p  k axis         size  MC.se effect  power  MC.se "
        "null.bias     se eff.bias     se  inv  rows used"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in (30, 100):
            for task in TASKS:
                for p in (0.7, 0.95):
                    for k in (3, 5):
                        axes = ("verbalizer", "format") if args.axis == "both" else (
                            ("verbalizer",) if k == 3 else ("format",)
                        )  # fmt: skip
                        for axis in axes:
                            line, z = _cell(catalog, Path(tmp), (n, task, p, k, axis), args)
                            print(line, flush=True)
                            zs += z
        mean_z2 = sum(z * z for z in zs) / len(zs)
        print(
            f"score check over all {len(zs)} (cell, variant) means: mean z^2 = {mean_z2:.2f} "
            f"(1 expected if every score is unbiased), largest |z| = {max(map(abs, zs)):.2f}"
        )
        for line in _ceiling_checks(catalog, Path(tmp)):
            print(line)
    print(
        f"wall time {time.perf_counter() - t0:.0f} s, CPU time {time.process_time() - cpu0:.0f} s"
    )


if __name__ == "__main__":
    main()
