"""The report's per-look intervals (`experiments.sweeps.looks`) cover the truth at every look.

Each simulation runs a `design: sequential` pair through the product's path
(`experiments.testing.sequential_sim`: the YAML spec, planning, the design's row order,
rendering, the runner and its LegalBench scoring, the sequence), logs each arm's trial on its
prefix from the loop's cache as the driver does, and recomputes the looks from those records
(`sequential_section`). The model is `SetAccuracy`: row i's difficulty p_i = 0.5 + 0.45 u_i
shared by both arms, arm A right with probability min(1, p_i + e). The truth is the expected
metric difference on the planned rows, sum_c w_c mean_{i in c} (min(1, p_i + e) - p_i) with
the metric's class weights w_c (`betting.strata`): 0 under the null.

Counted per cell: the share of simulations whose intervals held the truth at EVERY look up to
the stop ("simultaneous"), and at the last look only. For the anytime sequence both must be
>= 1 - alpha = 0.95 (Ville's inequality); the group design's repeated confidence intervals
are normal-theory approximations, shown for comparison.

    python benchmarks/sequential_looks.py [--sims 300] [--out FILE]
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

from experiments import ids
from experiments.analysis.sequential import strata
from experiments.sweeps.looks import sequential_section
from experiments.sweeps.sequential import MemoryCache, run_sequential, sequential_rows
from experiments.testing.sequential_sim import (
    MODEL,
    Prepared,
    SetAccuracy,
    SetAccuracyLM,
    prepare,
    task_dir,
)
from experiments.trials.record import TrialRecord
from experiments.trials.run import run_trial
from promptlib import Catalog, LocalSource

TASK = "overruling"
N_ROWS = 400
PAIR = """name: looks
tasks: [{task}]
limit: {n}
fixed: {{demos: none}}
axes: {{format: [base, claude]}}
comparisons: [[format=base, format=claude]]
design: sequential
sequential: {{batch: 20{more}}}
"""
A = "format=base"


def truth(prepared: Prepared, metric: str, effect: float, seed: int) -> float:
    """The expected metric difference A - B on the planned rows (module docstring)."""
    rows = prepared.resolved[0].rows
    p = np.array([0.5 + 0.45 * ids.seed_uniform(seed, "difficulty", r["index"]) for r in rows])
    delta = np.minimum(1.0, p + effect) - p
    cls, w = strata(metric, [r["answer"] for r in rows])
    return float(sum(w[c] * delta[cls == c].mean() for c in range(len(w))))


def one(prepared: Prepared, catalog: Catalog, effect: float, seed: int) -> dict[str, Any]:
    """One simulation: the loop, the arms' records, the looks and whether they cover."""
    model = SetAccuracy(prepared.prompts, {A: effect}, prepared.labels, seed)
    lm = SetAccuracyLM(model)
    cache = MemoryCache()
    design = prepared.spec.sequential
    assert design is not None
    run = run_sequential(
        design, prepared.spec.comparisons, prepared.plan, prepared.resolved,
        lms={MODEL: lm}, catalog=catalog, cache=cache,
    )  # fmt: skip
    records = []
    for t, rt in zip(run.plan, run.resolved, strict=True):
        result = run_trial(rt, catalog, lm, cache=cache)  # type: ignore[arg-type]
        records.append(TrialRecord.from_result(result, variant=t.variant.name))
    entry = sequential_section(sequential_rows(run), records)[0]
    row, looks = entry["row"], entry["looks"]
    assert looks and looks[-1]["low"] == row["ci_low"] and looks[-1]["high"] == row["ci_high"]
    sign = 1.0 if row["a"] == A else -1.0
    target = sign * truth(prepared, row["metric"], effect, seed)
    held = [x["low"] <= target <= x["high"] for x in looks]
    return {"all": all(held), "last": held[-1], "looks": len(looks), "n": row["n"],
            "decision": row["decision"], "truth": target}  # fmt: skip


def cell(rows: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    k = len(rows)
    rate = sum(r["all"] for r in rows) / k
    return {
        **kw,
        "sims": k,
        "simultaneous_coverage": rate,
        "mc_se": math.sqrt(max(rate * (1 - rate), 1e-12) / k),
        "last_look_coverage": sum(r["last"] for r in rows) / k,
        "mean_looks": float(np.mean([r["looks"] for r in rows])),
        "mean_rows": float(np.mean([r["n"] for r in rows])),
        "mean_truth": float(np.mean([r["truth"] for r in rows])),
        "decided": sum(r["decision"] in ("A", "B") for r in rows) / k,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=300, help="simulations per cell")
    ap.add_argument("--methods", default="anytime,group")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    source = Path(os.environ.get("LEGALBENCH_DIR", "../shared/legalbench"))
    start = time.perf_counter()
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for minority in (0.5, 0.2):
            catalog = Catalog(
                LocalSource(task_dir(root / f"d{minority}", source, TASK, N_ROWS, minority))
            )
            for method in args.methods.split(","):
                more = "" if method == "anytime" else f", method: {method}"
                spec = root / f"{method}{minority}.yaml"
                spec.write_text(PAIR.format(task=TASK, n=N_ROWS, more=more))
                prepared = prepare(spec, catalog)
                for effect in (0.0, 0.1, 0.2):
                    base = int(1e6 * (1 + minority * 10) + effect * 1e4)
                    rows = [one(prepared, catalog, effect, base + s) for s in range(args.sims)]
                    out.append(cell(rows, method=method, minority=minority, effect=effect))
                    print(json.dumps(out[-1]), flush=True)
                    if args.out:
                        args.out.write_text(json.dumps(out, indent=1))
    print(f"wall {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
