"""Does the sensitivity analysis recover known factor effects? (issue 11 acceptance, full size)

A simulated model answers each row of `ablations/sensitivity_grid.yaml` (3 tasks x 6
variants: instruction reference/description x 3 demonstration draws, 40 rows) correctly with
probability

    p = base(task) + row effect (uniform +-0.15) + instruction effect (+-delta/2)
        + draw effect (uniform +-0.05 per task and draw),

independently per (distinct prompt, variant) and simulation, through the sweep path the product
uses (spec, planning on paired rows, rendering, the runner, LegalBench scoring); otherwise it
gives a wrong label. It prints, for the variance shares, the mean, SD and largest error of each
factor's share against the true share, which comes from the generating parameters (rows random,
prompts and tasks fixed; see `true_shares`), never from the estimator's formula, and how often
its CI covers it; and for the pooled instruction effect (true delta on every task), the
coverage of its 95% CI over many simulations, beside the paired t-test's.
`benchmarks/sensitivity_coverage.py` measures the same over a grid of designs, directly on
`TrialRecord`s (faster).

With ``--tau T`` the instruction effect differs between tasks: task k's true effect is
delta + T * z_k (z_k standard normal), the pooled estimand is delta, and the coverage shown is
the Hartung-Knapp-Sidik-Jonkman interval's with few heterogeneous tasks. ``--k K`` (K other
than the grid's 3 tasks) measures that coverage on K simulated tasks of the same design (6
variants, 40 rows) directly on `TrialRecord`s, without the sweep path (the grid has 3 tasks).

    .venv/bin/python benchmarks/sensitivity_known.py [--sims 100] [--coverage-sims 500]
    .venv/bin/python benchmarks/sensitivity_known.py --sims 0 --coverage-sims 300 --tau 0.10
    .venv/bin/python benchmarks/sensitivity_known.py --k 5 --tau 0.10 --coverage-sims 300
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments.analysis import sensitivity as S
from experiments.analysis.sensitivity.groups import _group
from experiments.llm.types import Completion, Decoding, InGivenOrder
from experiments.trials.record import TrialRecord, parse_axes
from promptlib import Catalog, LocalSource

SPEC = Path(__file__).resolve().parent.parent / "ablations" / "sensitivity_grid.yaml"


class KnownFactorsLM(InGivenOrder):
    """Correct with probability p[(task, variant, row)]; the prompt tells which it is."""

    name = "sim/known-factors"
    mode = "completion"
    concurrency = 1

    def __init__(self, prompts: dict[str, tuple[str, str, str, str]], labels: dict[str, Any]):
        self.prompts = prompts  # prompt -> (task, variant, row index, answer)
        self.labels = labels
        self.p: dict[tuple[str, str, str], float] = {}
        self.seed = 0

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name, "seed": self.seed}

    def _uniform(self, *parts: str) -> float:
        h = hashlib.sha256("\0".join((str(self.seed), *parts)).encode()).digest()
        return int.from_bytes(h[:8], "big") / 2**64

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        task, variant, index, answer = self.prompts[prompt]
        if self._uniform(task, variant, index) < self.p[(task, variant, index)]:
            return Completion(" " + answer)
        wrong = [label for label in self.labels[task] if label != answer]
        return Completion(
            " " + wrong[int(self._uniform("wrong", task, variant, index) * len(wrong))]
        )

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        raise NotImplementedError("a simulated model answers by generation only")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sims", type=int, default=100, help="simulations for the variance shares")
    ap.add_argument("--coverage-sims", type=int, default=500, help="for the pooled effect's CI")
    ap.add_argument("--delta", type=float, default=0.10, help="true instruction effect")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--tau", type=float, default=0.0, help="SD of the effect between tasks")
    ap.add_argument("--k", type=int, default=0, help="simulated tasks (direct, no sweep path)")
    args = ap.parse_args()
    if args.k:
        direct_coverage(args.k, args.tau, args.delta, args.coverage_sims, args.resamples)
        return

    from experiments.sweeps.plan import plan_tasks, trial_plan
    from experiments.sweeps.spec import load_spec
    from experiments.trials.run import run_trial
    from experiments.trials.spec import resolve_trial

    catalog = Catalog(LocalSource(os.environ.get("LEGALBENCH_DIR", "../shared/legalbench")))
    spec = load_spec(SPEC)
    planned = plan_tasks(spec, catalog)
    plan = trial_plan(spec, planned, (KnownFactorsLM.name,))
    labels = {p.task: catalog.task(p.task).spec.labels for p in planned}
    lm = KnownFactorsLM({}, labels)
    resolved = [resolve_trial(t.spec, catalog, lm) for t in plan]
    lm.prompts = {
        rt.compiled.render(row): (t.planned.task, t.variant.name, row["index"], row["answer"])
        for t, rt in zip(plan, resolved, strict=True)
        for row in rt.rows
    }
    print(f"{len(plan)} trials, {len(lm.prompts)} distinct prompts ({SPEC.name})")

    def one(sim: int) -> tuple[list[Any], dict[str, float]]:
        rng = np.random.default_rng(sim)
        lm.seed = sim
        params = []
        for k, pt in enumerate(planned):
            row = dict(zip(pt.rows, rng.uniform(-0.15, 0.15, len(pt.rows)), strict=True))
            draws = rng.uniform(-0.05, 0.05, 3)
            delta_k = args.delta + args.tau * rng.standard_normal() if args.tau else args.delta
            params.append((0.5 + 0.05 * k, delta_k, draws))
            for nv in spec.variants:
                axes = parse_axes(nv.name)
                instr = delta_k / 2 * (1 if axes["instruction"] == "description" else -1)
                ps = np.array(
                    [0.5 + 0.05 * k + row[i] + instr + draws[int(axes["seed"])] for i in pt.rows]
                )
                for i, p in zip(pt.rows, np.clip(ps, 0, 1), strict=True):
                    lm.p[(pt.task, nv.name, i)] = float(p)
        outcomes = []
        for t, rt in zip(plan, resolved, strict=True):
            r = run_trial(rt, catalog, lm)
            outcomes.append(TrialRecord.from_result(r, variant=t.variant.name, run_id="-"))
        return outcomes, true_shares(params)

    t0 = time.perf_counter()
    errors: dict[str, list[float]] = {}
    covers: dict[str, list[bool]] = {}
    expects: dict[str, list[float]] = {}
    for sim in range(args.sims):
        outcomes, truth = one(sim)
        got = S.variance_shares(
            [_group([o for o in outcomes if o.task == pt.task])
             for pt in planned],
            n_resamples=args.resamples, seed=sim,
        )  # fmt: skip
        for f, e in truth.items():
            errors.setdefault(f, []).append(got["shares"][f] - e)
            expects.setdefault(f, []).append(e)
            lo, hi = got["ci"][f]
            covers.setdefault(f, []).append(lo <= e <= hi)
    t_shares = time.perf_counter() - t0
    print(f"\nvariance shares, {args.sims} simulations ({t_shares:.0f} s): share - true share")
    print(f"{'factor':<28} {'true':>9} {'mean err':>9} {'SD':>7} {'max |err|':>9} {'CI cover':>9}")
    for f in errors:
        err = np.asarray(errors[f])
        exp_share = float(np.mean(expects[f]))
        print(
            f"{f:<28} {exp_share:9.4f} {err.mean():+9.4f} {err.std(ddof=1):7.4f} "
            f"{np.abs(err).max():9.4f} {np.mean(covers[f]):9.3f}"
        )

    t0 = time.perf_counter()
    hit_re = hit_t = n = 0
    for sim in range(args.coverage_sims):
        outcomes, _ = one(100_000 + sim)
        (m,) = [r for r in S.pooled_effects(outcomes, n_resamples=args.resamples, seed=sim)
                if r["axis"] == "instruction"]  # fmt: skip
        n += 1
        # the effect is description - reference or reference - description (A: the level
        # listed first, `experiments.analysis.contrast`)
        truth = args.delta if m["a"] == "instruction=description" else -args.delta
        hit_re += m["ci"][0] <= truth <= m["ci"][1]
        d = np.asarray(m["effects"])
        from scipy.stats import t as t_dist

        half = t_dist.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
        hit_t += d.mean() - half <= truth <= d.mean() + half
    if not n:
        return
    se = np.sqrt(0.95 * 0.05 / n)
    print(
        f"\npooled instruction effect (true {args.delta:+.2f}, tau {args.tau:.2f} between "
        f"{len(planned)} tasks), {n} simulations ({time.perf_counter() - t0:.0f} s):\n"
        f"  random effects (Paule-Mandel, HKSJ) 95% CI coverage {hit_re / n:.3f}  |  "
        f"paired t-test 95% CI coverage {hit_t / n:.3f}   (MC s.e. at 0.95: {se:.3f})"
    )


def true_shares(params: list[tuple[float, float, np.ndarray]]) -> dict[str, float]:
    """The variance shares of the simulated model, from its parameters (base, instruction
    effect, draw effects per task; row effects uniform +-0.15; no clipping occurs: p stays in
    [0.25, 0.85]): rows random, prompts and tasks fixed, per observation (6 variants per task,
    equal rows)."""
    s2_row = 0.15**2 / 3
    mus, draw_vars, instr, resid = [], [], [], []
    for base, delta, draws in params:
        mus.append(base + float(np.mean(draws)))
        draw_vars.append(float(np.var(draws)))
        instr.append(delta / 2)
        c = np.array([base + s * delta / 2 + d for s in (-1, 1) for d in draws])
        resid.append(float(np.mean(c * (1 - c))) - s2_row)
    common = float(np.mean(instr))
    comp = {
        "task": float(np.var(mus)),
        S.ROW: s2_row,
        "instruction": common**2,
        "instruction x task": float(np.mean((np.asarray(instr) - common) ** 2)),
        S.draw_factor("seed"): float(np.mean(draw_vars)),
        S.AXIS_X_AXIS: 0.0,
        S.RESIDUAL: float(np.mean(resid)),
    }
    total = sum(comp.values())
    return {f: v / total for f, v in comp.items()}


def direct_coverage(k: int, tau: float, delta: float, sims: int, resamples: int) -> None:
    """Coverage of the pooled effect's CI on k simulated tasks (6 variants: instruction x 3
    draws, 40 rows, accuracy), task t's effect delta + tau * z_t; beside it the normal
    random-effects interval the HKSJ one replaced, on the same effects and variances."""
    from scipy.stats import norm
    from statsmodels.stats.meta_analysis import combine_effects

    from experiments.analysis.stats import metric_fn

    names = [f"instruction={i},seed={d}" for i in ("reference", "description") for d in "012"]
    rng = np.random.default_rng(321)
    acc = metric_fn("accuracy")
    hit = hit_normal = used = 0
    t0 = time.perf_counter()
    for sim in range(sims):
        trials = []
        for t in range(k):
            d_t = delta + tau * rng.standard_normal()
            base = rng.uniform(0.4, 0.6) + rng.uniform(-0.15, 0.15, 40)
            draws = rng.uniform(-0.05, 0.05, 3)
            answers = ["Yes" if i % 2 == 0 else "No" for i in range(40)]
            for name in names:
                axes = parse_axes(name)
                shift = d_t / 2 * (1 if axes["instruction"] == "description" else -1)
                p = np.clip(base + shift + draws[int(axes["seed"])], 0, 1)
                ok = rng.random(40) < p
                gens = [a if c else ("No" if a == "Yes" else "Yes")
                        for a, c in zip(answers, ok, strict=True)]  # fmt: skip
                y, g = np.asarray(answers, dtype=object), np.asarray(gens, dtype=object)
                trials.append(
                    TrialRecord.of(
                        task=f"t{t}", model="sim", variant=name, metric="accuracy",
                        complete=True, indices=[str(i) for i in range(40)], answers=answers,
                        generations=gens, correct=[bool(c) for c in ok], score=acc(y, g),
                        axes=axes,
                    )
                )  # fmt: skip
        (m,) = S.pooled_effects(trials, n_resamples=resamples, seed=sim)
        if m["pooled"] is None:
            continue
        used += 1
        truth = delta if m["a"] == "instruction=description" else -delta
        hit += m["ci"][0] <= truth <= m["ci"][1]
        res = combine_effects(np.asarray(m["effects"]), np.asarray(m["variances"]),
                              method_re="iterated")  # fmt: skip
        half = float(norm.ppf(0.975)) * float(res.sd_eff_w_re)
        hit_normal += res.mean_effect_re - half <= truth <= res.mean_effect_re + half
    print(
        f"pooled instruction effect, k={k} tasks, true {delta:+.2f}, tau {tau:.2f}, {used} "
        f"simulations ({time.perf_counter() - t0:.0f} s): HKSJ 95% CI coverage "
        f"{hit / used:.3f}  |  normal random-effects CI (before) {hit_normal / used:.3f}  "
        f"(MC s.e. at 0.95: {np.sqrt(0.95 * 0.05 / used):.3f})"
    )


if __name__ == "__main__":
    main()
