"""Sequential sweeps through the real path: size, rows saved, adaptive best-of-k, calls.

Each simulation runs a `design: sequential` spec's loop as the product runs it: the YAML
spec, planning, the design's row order, rendering, the runner and its LegalBench scoring,
and the sequence or the elimination (`experiments.testing.sequential_sim`), against a model
of set accuracies: each row has a difficulty shared by every variant, U(0.5, 0.95), and a
variant is right with that probability plus its effect. Looks after every batch of 10 rows
up to 1,000 rows (overruling's texts, one row per distinct text; answers set 50/50 or 80/20
by `sequential_sim.task_dir`); the pair is format=base vs format=claude.

- size: equal accuracies; the share of simulations that decide A or B (alpha = 0.05);
- savings: a true difference of 0.5x, 1x and 2x the fixed design's MDE at 1,000 rows (the
  product's `minimum_detectable_effect`, 80% power), the mean rows to a correct verdict and
  the power, against the fixed test's predicted power at that MDE (`power_from_mde`);
- best-of-k: k = 5 format draws, one better by 2x the MDE: the calls the model received
  against the full grid's 5 x 1,000, and under the null the best-vs-worst statement's size;
- at the stub: a few best-of-k simulations through the OpenAI-compatible stub server, the
  calls counted at the stub equal to those the in-process model counts.

    python benchmarks/sequential_path.py [--null 1000] [--effect 150] [--bok 60] [--bok-null 100]

Prints a table and the wall time; `--out FILE` also writes the figures as JSON (written after
each part, so a long run stopped early keeps what it measured).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from experiments.testing.sequential_sim import Prepared, prepare, simulate, task_dir
from experiments.testing.validation import power_from_mde
from promptlib import Catalog, LocalSource

N_ROWS = 1000
TASK = "overruling"  # 1,499 distinct texts; base and Claude prompts
PAIR = """name: seq_path
tasks: [{task}]
limit: {n}
fixed: {{demos: none}}
axes: {{format: [base, claude]}}
comparisons: [[format=base, format=claude]]
design: sequential
sequential: {{batch: 10}}
"""
BEST_OF_K = """name: seq_bok
tasks: [{task}]
limit: {n}
fixed: {{demos: none}}
axes: {{format: {{draw: 4, seed: 0, with: [base]}}}}
comparisons: best_vs_worst
design: sequential
sequential: {{batch: 10}}
"""


def mde_at(n: int, minority: float, seed: int = 0) -> float:
    """The fixed design's MDE (80% power, balanced accuracy) at `n` rows of this model, as
    the product computes it (`minimum_detectable_effect`) on one draw of two equal arms."""
    from experiments.analysis.power import minimum_detectable_effect

    rng = np.random.default_rng(seed)
    y = np.array(["Yes"] * round(n * minority) + ["No"] * (n - round(n * minority)))
    p = rng.uniform(0.5, 0.95, n)
    flip = np.where(y == "Yes", "No", "Yes")
    a = np.where(rng.random(n) < p, y, flip)
    b = np.where(rng.random(n) < p, y, flip)
    mde = minimum_detectable_effect(list(y), list(a), list(b), metric="balanced_accuracy")
    assert mde.value is not None
    return float(mde.value)


def effect_for(target: float) -> float:
    """The added probability e with E[min(1, p + e)] - E[p] = target, p ~ U(0.5, 0.95)."""
    lo, hi = 0.0, 0.5
    for _ in range(60):
        e = (lo + hi) / 2
        # E[min(1, p+e) - p] = e - E[(p + e - 1)+]; (p+e-1)+ > 0 for p > 1 - e
        top = 0.95 + e - 1.0
        loss = (top**2 / 2) / 0.45 if top > 0 else 0.0
        lo, hi = (e, hi) if e - loss < target else (lo, e)
    return (lo + hi) / 2


def run_many(
    prepared: Prepared, catalog: Catalog, effects: dict[str, float], n_sims: int, seed0: int
) -> list[dict[str, Any]]:
    return [simulate(prepared, catalog, effects, seed0 + s) for s in range(n_sims)]


def size_row(name: str, rows: list[dict[str, Any]], decided: set[str]) -> dict[str, Any]:
    k = sum(r["decision"] in decided for r in rows)
    rate = k / len(rows)
    return {
        "case": name,
        "sims": len(rows),
        "rejection_rate": rate,
        "mc_se": math.sqrt(max(rate * (1 - rate), 1e-12) / len(rows)),
        "mean_rows": float(np.mean([r["n"] for r in rows])),
        "mean_calls": float(np.mean([r["calls"] for r in rows])),
        "grid_calls": rows[0]["grid_calls"],
    }


def effect_row(
    name: str, rows: list[dict[str, Any]], effect: float, mde: float, correct: str
) -> dict[str, Any]:
    right = [r for r in rows if r["decision"] == correct]
    power = len(right) / len(rows)
    fixed = power_from_mde(effect, mde)
    return {
        "case": name,
        "sims": len(rows),
        "true_difference": effect,
        "power": power,
        "fixed_power_predicted": fixed,
        "power_ratio": power / fixed,
        "mean_rows_correct": float(np.mean([r["n"] for r in right])) if right else None,
        "mean_rows_all": float(np.mean([r["n"] for r in rows])),
        "mean_calls": float(np.mean([r["calls"] for r in rows])),
        "grid_calls": rows[0]["grid_calls"],
    }


def at_the_stub(prepared: Prepared, catalog: Catalog, effects: dict[str, float], n: int) -> Any:
    """Best-of-k through the stub server: the calls counted at the stub, per simulation."""
    from experiments.llm.gateway import LiteLLMModel
    from experiments.sweeps.sequential import run_sequential
    from experiments.testing.sequential_sim import SetAccuracy
    from experiments.testing.stub_server import StubOpenAI

    os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")
    out = []
    for s in range(n):
        model = SetAccuracy(prepared.prompts, effects, prepared.labels, 50_000 + s)
        with StubOpenAI(reply_fn=model.reply) as stub:
            lm = LiteLLMModel("openai/stub", api_base=stub.url, concurrency=4)
            design = prepared.spec.sequential
            assert design is not None
            run = run_sequential(
                design, prepared.spec.comparisons, prepared.plan, prepared.resolved,
                lms={p.model: lm for p in prepared.plan}, catalog=catalog, cache=None,
            )  # fmt: skip
            row = run.groups[0].comparisons[0]
            out.append(
                {"stub_requests": len(stub.requests), "engine_calls": run.cost.model_calls,
                 "rows": sum(row.rows_per_arm.values()), "grid": run.grid_calls,
                 "best": row.a, "decision": row.decision}
            )  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--null", type=int, default=1000, help="simulations per null case")
    ap.add_argument("--effect", type=int, default=150, help="simulations per effect size")
    ap.add_argument("--bok", type=int, default=60, help="best-of-k simulations at 2x MDE")
    ap.add_argument("--bok-null", type=int, default=100, help="best-of-k simulations, null")
    ap.add_argument("--stub", type=int, default=3, help="best-of-k simulations at the stub")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    source = Path(os.environ.get("LEGALBENCH_DIR", "../shared/legalbench"))
    start = time.perf_counter()
    results: dict[str, Any] = {"n_rows": N_ROWS, "batch": 10}

    def save() -> None:
        results["wall_s"] = round(time.perf_counter() - start, 1)
        if args.out:
            args.out.write_text(json.dumps(results, indent=1))

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        preps: dict[float, tuple[Catalog, Prepared, Prepared]] = {}
        for minority in (0.5, 0.2):
            data = task_dir(root / f"data{minority}", source, TASK, N_ROWS, minority)
            catalog = Catalog(LocalSource(data))
            for name, text in (("pair", PAIR), ("bok", BEST_OF_K)):
                (root / f"{name}{minority}.yaml").write_text(text.format(task=TASK, n=N_ROWS))
            preps[minority] = (
                catalog,
                prepare(root / f"pair{minority}.yaml", catalog),
                prepare(root / f"bok{minority}.yaml", catalog),
            )
        mde = mde_at(N_ROWS, 0.5)
        results["mde_80_fixed_1000_rows"] = mde
        print(f"fixed design's MDE80 at {N_ROWS} rows (balanced accuracy, 50/50): {mde:.4f}")

        results["size"] = []
        for minority, label in ((0.2, "null, 80/20 classes"), (0.5, "null, 50/50 classes")):
            catalog, pair, _ = preps[minority]
            rows = run_many(pair, catalog, {}, args.null, 1_000_000 * int(minority * 10))
            results["size"].append({**size_row(label, rows, {"A", "B"}), "minority": minority})
            print(results["size"][-1])
            save()

        results["savings"] = []
        catalog, pair, bok = preps[0.5]
        for mult in (0.5, 1.0, 2.0):
            e = effect_for(mult * mde)
            rows = run_many(pair, catalog, {"format=base": e}, args.effect, 2_000_000)
            results["savings"].append(
                {**effect_row(f"{mult}x MDE", rows, mult * mde, mde, "A"), "added_p": e}
            )
            print(results["savings"][-1])
            save()

        e2 = effect_for(2 * mde)
        rows = run_many(bok, catalog, {"format=base": e2}, args.bok, 3_000_000)
        best = sum(r["a"] == "format=base" and r["decision"] == "best" for r in rows)
        calls = [r["calls"] / r["grid_calls"] for r in rows]
        results["best_of_k"] = {
            "k": 5, "sims": len(rows), "true_difference": 2 * mde,
            "mean_share_of_grid_calls": float(np.mean(calls)),
            "max_share_of_grid_calls": float(np.max(calls)),
            "found_the_better_draw": best / len(rows),
        }  # fmt: skip
        print(results["best_of_k"])
        save()
        rows = run_many(bok, catalog, {}, args.bok_null, 4_000_000)
        results["best_of_k_null"] = {
            **size_row("best-of-k null (range statement)", rows, {"best"}), "k": 5,
        }  # fmt: skip
        print(results["best_of_k_null"])
        save()
        if args.stub:
            results["at_the_stub"] = at_the_stub(bok, catalog, {"format=base": e2}, args.stub)
            print(results["at_the_stub"])
        save()
    print(f"wall time: {results['wall_s']} s")


if __name__ == "__main__":
    main()
