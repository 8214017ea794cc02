"""Bias and 95% coverage of the sensitivity analysis against the generating parameters.

Simulated sweeps of the README's design, directly on `TrialRecord`s through the real path
(`sensitivity._group`, `variance_shares`, `task_measures`): 3 tasks x 6 variants (instruction
reference/description x 3 demonstration draws) x n rows, one model. Row i of task t under
variant j is correct with probability

    p = 0.45 + 0.05 t + row effect (uniform +-0.15) + instruction (+-delta/2)
        + draw effect (uniform +-0.05 per task and draw),

independently per (distinct text, variant); with ``clustered`` designs some texts repeat
under several row indices (as LegalBench's cuad tasks and overruling do), and a repeated text
gets the same answer every time (prompt hashes tell the analysis so). Without a prompt effect
(``null``) delta = 0 and every draw effect is 0. Answers are Yes/No, balanced or 90/10;
p does not depend on the class, so each class's recall is E[p].

The truth comes from those parameters, never from the estimator (rows random, prompts and
tasks fixed): task = variance of the task means base_t + mean draw effect; instruction =
(delta/2)^2; seed (within task) = mean over tasks of the variance (ddof 0) of the realised draw
effects; row = 0.15^2 / 3; residual = mean over cells of E[p (1 - p)] over rows; axis x task and
axis x axis = 0; share = component / their sum. PromptSensiScore = mean over variant pairs of
E[p_i + p_j - 2 p_i p_j]; prompt-dependent share = E[1 - prod p_j - prod (1 - p_j)] (Gauss-
Legendre over the row effect, exact); AvgP = mean over variants of E[p].

It prints, per cell of the grid (rows 40 / 100 x classes balanced / 90-10 x prompt effect /
null, plus a clustered cell), the bias of each variance share (new estimator, and the raw
SS_f / SS_total it replaced) and the 95% coverage of each interval, and the Python table
`experiments.analysis.sensitivity.CI_COVERAGE` takes (the minimum over effect / null).

The table in the code came from these runs (each under 1 min of CPU; cells 0-7 are the grid,
8-9 the clustered checks; run together they print one table):

    nice -n 10 .venv/bin/python benchmarks/sensitivity_coverage.py --sims 1000 --cell 0 1
    ... --cell 2 3;  ... --cell 4;  ... --cell 5;  ... --cell 6;  ... --cell 7
    ... --sims 300 --cell 8;  ... --sims 300 --cell 9
    ... --sims 200 --resamples 500 --methods  (the other interval methods, to choose)
"""

from __future__ import annotations

import argparse
import itertools
import time
from typing import Any

import numpy as np

from experiments.analysis import sensitivity as S
from experiments.analysis.sensitivity.groups import _group
from experiments.analysis.sensitivity.variance import _sums_of_squares
from experiments.metrics import balanced_accuracy
from experiments.trials.record import TrialRecord, parse_axes

INSTR = ("reference", "description")
DRAWS = ("0", "1", "2")
NAMES = [f"instruction={i},seed={d}" for i, d in itertools.product(INSTR, DRAWS)]
ROW_HALF = 0.15
DRAW_HALF = 0.05
SIGMA2_ROW = ROW_HALF**2 / 3
NODES, WEIGHTS = np.polynomial.legendre.leggauss(16)  # exact for polynomials of degree <= 31
FACTORS = (
    "task", S.ROW, "instruction", "instruction x task", S.draw_factor("seed"), S.AXIS_X_AXIS,
    S.RESIDUAL,
)  # fmt: skip


def cluster_sizes(n_rows: int, clustered: bool) -> list[int]:
    """Rows per distinct text: all 1, or about LegalBench's cuad mix (1.5-1.6 rows per text)."""
    if not clustered:
        return [1] * n_rows
    sizes: list[int] = []
    pattern = [1, 1, 2, 1, 3, 2, 1, 2]
    while sum(sizes) < n_rows:
        sizes.append(min(pattern[len(sizes) % len(pattern)], n_rows - sum(sizes)))
    return sizes


def simulate(
    rng: np.random.Generator, n_rows: int, minority: float, effect: bool, clustered: bool
) -> tuple[list[TrialRecord], dict[str, Any]]:
    """One sweep's trials and its truth."""
    delta = 0.10 if effect else 0.0
    trials: list[TrialRecord] = []
    sizes = cluster_sizes(n_rows, clustered)
    text_of_row = np.repeat(np.arange(len(sizes)), sizes)
    truth: dict[str, Any] = {"tasks": {}}
    mus, draw_vars, resid = [], [], []
    for t in range(3):
        n_texts = len(sizes)
        n_min = max(1, round(minority * n_texts)) if minority < 0.5 else n_texts // 2
        text_class = np.array(["No"] * n_min + ["Yes"] * (n_texts - n_min), dtype=object)
        rng.shuffle(text_class)
        answers = [str(text_class[c]) for c in text_of_row]
        row = rng.uniform(-ROW_HALF, ROW_HALF, n_texts)
        draws = rng.uniform(-DRAW_HALF, DRAW_HALF, 3) if effect else np.zeros(3)
        c = np.array(
            [0.45 + 0.05 * t + delta / 2 * (1 if i == "description" else -1) + draws[int(d)]
             for i, d in itertools.product(INSTR, DRAWS)]
        )  # fmt: skip
        hits_text = rng.random((n_texts, len(c))) < (c[None, :] + row[:, None])
        hits = hits_text[text_of_row]
        for j, name in enumerate(NAMES):
            gens = [a if hits[k, j] else ("No" if a == "Yes" else "Yes")
                    for k, a in enumerate(answers)]  # fmt: skip
            trials.append(
                TrialRecord.of(
                    task=f"task{t}", model="sim", variant=name, metric="balanced_accuracy",
                    complete=True, indices=[str(k) for k in range(n_rows)], answers=answers,
                    generations=gens, correct=[bool(h) for h in hits[:, j]],
                    score=balanced_accuracy(gens, answers), axes=parse_axes(name),
                    prompt_hashes=[f"{t}/{text_of_row[k]}/{name}" for k in range(n_rows)],
                )
            )  # fmt: skip
        r = ROW_HALF * NODES
        p = c[None, :] + r[:, None]  # (nodes, variants)
        dependent = 1 - np.prod(p, axis=1) - np.prod(1 - p, axis=1)
        pairs = [
            c[i] + c[j] - 2 * (c[i] * c[j] + SIGMA2_ROW)
            for i, j in itertools.combinations(range(len(c)), 2)
        ]
        truth["tasks"][f"task{t}"] = {
            "avgp": float(c.mean()),
            "sensitiscore": float(np.mean(pairs)),
            "share_prompt_dependent": float(WEIGHTS @ dependent / 2),
        }
        mus.append(0.45 + 0.05 * t + float(draws.mean()))
        draw_vars.append(float(draws.var()))
        resid.append(float(np.mean(c * (1 - c) - SIGMA2_ROW)))
    comp = {
        "task": float(np.var(mus)),
        S.ROW: SIGMA2_ROW,
        "instruction": (delta / 2) ** 2,
        "instruction x task": 0.0,
        S.draw_factor("seed"): float(np.mean(draw_vars)),
        S.AXIS_X_AXIS: 0.0,
        S.RESIDUAL: float(np.mean(resid)),
    }
    total = sum(comp.values())
    truth["shares"] = {f: v / total for f, v in comp.items()}
    return trials, truth


def groups_of(trials: list[TrialRecord]) -> list[S.Group]:
    tasks = sorted({t.task for t in trials})
    return [_group([t for t in trials if t.task == task]) for task in tasks]


def raw_shares(groups: list[S.Group]) -> dict[str, float]:
    """SS_f / SS_total: the share the estimator replaced (for its bias)."""
    sums = _sums_of_squares(groups)
    total = float(sums.ss["total"][0])
    return {f: float(v[0]) / total for f, v in sums.ss.items() if f != "total"}


def run_cell(
    n_rows: int, minority: float, effect: bool, clustered: bool, sims: int, resamples: int,
    methods: bool,
) -> dict[str, Any]:  # fmt: skip
    rng = np.random.default_rng(
        [n_rows, int(minority * 100), int(effect), int(clustered), 20261201]
    )
    share_methods: tuple[str | None, ...] = (
        ("percentile", "bc", "recentred") if methods else (None,)  # None: the product's choice
    )
    measure_methods: dict[str, tuple[str, ...]] = {
        "avgp": ("percentile", "bc", "boot_t") if methods else (S.CI_METHODS["avgp"],),
        "sensitiscore": ("t", "student", "bc") if methods else (S.CI_METHODS["sensitiscore"],),
        "share_prompt_dependent": ("wilson", "student", "bc")
        if methods
        else (S.CI_METHODS["share_prompt_dependent"],),
    }
    err: dict[str, list[float]] = {f: [] for f in FACTORS}
    err_raw: dict[str, list[float]] = {f: [] for f in FACTORS}
    truths: dict[str, list[float]] = {f: [] for f in FACTORS}
    cover: dict[str, list[bool]] = {}
    for sim in range(sims):
        trials, truth = simulate(rng, n_rows, minority, effect, clustered)
        groups = groups_of(trials)
        raw = raw_shares(groups)
        for m in share_methods:
            got = S.variance_shares(groups, n_resamples=resamples, seed=sim, ci_method=m)
            for f in FACTORS:
                true = truth["shares"][f]
                if m == share_methods[0]:
                    err[f].append(got["shares"][f] - true)
                    err_raw[f].append(raw[f] - true)
                    truths[f].append(true)
                lo, hi = got["ci"][f]
                label = m or f"chosen ({S.SHARE_CI_METHODS.get(f, S.SHARE_CI_METHOD)})"
                cover.setdefault(f"share:{f}:{label}", []).append(lo - 1e-12 <= true <= hi + 1e-12)
        for g in groups:
            true_t = truth["tasks"][g.task]
            for i in range(max(len(o) for o in measure_methods.values())):
                pick = {k: o[i] for k, o in measure_methods.items() if i < len(o)}
                row, _, _ = S.task_measures(
                    g, n_resamples=resamples, seed=sim, range_test=False, ci_methods=pick
                )
                for measure, m in pick.items():
                    lo, hi = row[f"{measure}_ci"]
                    cover.setdefault(f"{measure}:{m}", []).append(
                        lo - 1e-12 <= true_t[measure] <= hi + 1e-12
                    )
    return {
        "bias": {f: float(np.mean(v)) for f, v in err.items()},
        "bias_raw": {f: float(np.mean(v)) for f, v in err_raw.items()},
        "sd": {f: float(np.std(v, ddof=1)) for f, v in err.items()},
        "truth": {f: float(np.mean(v)) for f, v in truths.items()},
        "coverage": {k: float(np.mean(v)) for k, v in cover.items()},
        "n": {k: len(v) for k, v in cover.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sims", type=int, default=400, help="simulated sweeps per cell")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--methods", action="store_true", help="measure every candidate interval")
    ap.add_argument("--rows", type=int, nargs="*", default=[40, 100])
    ap.add_argument("--clustered-only", action="store_true")
    ap.add_argument("--cell", type=int, nargs="*", help="run only these cells (0-based)")
    args = ap.parse_args()
    cells = [
        (n, mino, eff, False) for n in args.rows for mino in (0.5, 0.1) for eff in (True, False)
    ] + [(100, 0.5, True, True), (100, 0.1, False, True)]
    if args.clustered_only:
        cells = [c for c in cells if c[3]]
    if args.cell:
        cells = [cells[i] for i in args.cell]
    table: dict[tuple[int, float], dict[str, float]] = {}
    for n, mino, eff, clu in cells:
        t0 = time.perf_counter()
        res = run_cell(n, mino, eff, clu, args.sims, args.resamples, args.methods)
        texts = f" (clustered: {len(cluster_sizes(n, True))} texts)" if clu else ""
        name = (
            f"{n} rows{texts}, minority {mino:.1f}, "
            f"{'prompt effect' if eff else 'null (no prompt effect)'}"
        )
        print(f"\n== {name}: {args.sims} sims, {args.resamples} resamples "
              f"({time.perf_counter() - t0:.0f} s)")  # fmt: skip
        print(f"{'share':<28} {'true':>7} {'bias':>8} {'SD':>7} {'raw bias':>9}")
        for f in FACTORS:
            print(
                f"{f:<28} {res['truth'][f]:7.4f} {res['bias'][f]:+8.4f} {res['sd'][f]:7.4f} "
                f"{res['bias_raw'][f]:+9.4f}"
            )
        print(f"{'interval':<48} {'coverage':>8} {'n':>6}")
        for k, v in sorted(res["coverage"].items()):
            print(f"{k:<48} {v:8.3f} {res['n'][k]:>6}")
        if clu:
            continue
        cell = table.setdefault((n, mino), {})
        for k, v in res["coverage"].items():
            parts = k.split(":")
            key = f"share:{S.share_kind(parts[1])}" if parts[0] == "share" else parts[0]
            chosen = parts[-1].startswith("chosen") if parts[0] == "share" else (
                parts[-1] == S.CI_METHODS.get(parts[0])
            )  # fmt: skip
            if not chosen:
                continue
            cell[key] = round(min(cell.get(key, 1.0), v), 3)
    print("\n# experiments.analysis.sensitivity.CI_COVERAGE (minimum over prompt effect / null):")
    print(f"COVERAGE_SIMS = {args.sims}")
    print("CI_COVERAGE = {")
    for key, cell in table.items():
        print(f"    {key}: {{")
        for k, v in cell.items():
            print(f"        {k!r}: {v},")
        print("    },")
    print("}")


if __name__ == "__main__":
    main()
