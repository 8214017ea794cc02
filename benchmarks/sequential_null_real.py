"""Sequential designs under the null on LegalBench's real repeated texts, through the real path.

cuad_audit_rights (1,215 test rows, 775 distinct texts) and overruling (2,385 rows, 1,499
texts) repeat texts under several row indices; identical prompts get identical answers (the
simulated model answers by prompt, as a model at temperature 0 and the response cache do).
Each simulation runs a `design: sequential` spec's loop as the product runs it (the YAML
spec, planning, the design's clustered row order, rendering, the runner and its scoring,
the sequence, the group-sequential test or the elimination: `experiments.testing.
sequential_sim`) against two or five variants of equal accuracy (every row has a difficulty
shared by the variants, U(0.5, 0.95); each variant draws its answer independently).

Printed per task and design: the share of runs that decide A or B (a pair at alpha 0.01, the
share of a family of 0.05 split over five pairs; and at 0.05) or say "best" (best-of-5 at
0.05), with its Monte Carlo s.e., and whether it is within alpha + 2 s.e.; plus the same with
clusters ignored (every row its own unit, the old behaviour), to show the simulation can see
the failure it guards against.

    python benchmarks/sequential_null_real.py --sims 1000            # ~35 min on 2 cores
    python benchmarks/sequential_null_real.py --sims 100 --task cuad_audit_rights

tests/experiments/sweeps/test_sequential_clusters.py runs a reduced version.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from experiments.testing.sequential_sim import Prepared, prepare, simulate
from promptlib import Catalog, LocalSource

PAIR = """name: null_pair
tasks: [{task}]
fixed: {{demos: none}}
axes: {{format: [base, claude]}}
comparisons: [[format=base, format=claude]]
design: sequential
sequential: {{batch: {batch}, alpha: {alpha}, method: {method}, max_rows: {cap}}}
"""
BEST_OF_5 = """name: null_bok
tasks: [{task}]
fixed: {{demos: none}}
axes: {{format: {{draw: 4, seed: 0, with: [base]}}}}
comparisons: best_vs_worst
design: sequential
sequential: {{batch: {batch}, alpha: {alpha}, method: {method}, max_rows: {cap}}}
"""


@contextmanager
def rows_as_units() -> Iterator[None]:
    """The old behaviour, for contrast: every row its own cluster."""
    import experiments.sweeps.sequential as seq

    def singletons(resolved: Any) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for rt in resolved:
            out.setdefault(rt.spec.task, {}).update({r["index"]: i for i, r in enumerate(rt.rows)})
        return out

    with mock.patch.object(seq, "task_clusters", singletons):
        yield


def prepared(template: str, task: str, method: str, alpha: float, cap: int, batch: int,
             catalog: Catalog, folder: Path) -> Prepared:  # fmt: skip
    path = folder / f"{task}-{method}-{alpha}-{hash(template) & 0xFFFF}.yaml"
    path.write_text(template.format(task=task, method=method, alpha=alpha, cap=cap, batch=batch))
    return prepare(path, catalog)


def rate(rows: list[dict[str, Any]], decided: set[str], alpha: float) -> dict[str, Any]:
    k = sum(r["decision"] in decided for r in rows)
    p = k / len(rows)
    se = math.sqrt(max(alpha * (1 - alpha), 1e-12) / len(rows))
    return {"sims": len(rows), "rate": p, "se": se, "ok": p <= alpha + 2 * se,
            "mean_rows": sum(r["n"] for r in rows) / len(rows)}  # fmt: skip


def run_case(prep: Prepared, catalog: Catalog, sims: int, seed0: int) -> list[dict[str, Any]]:
    return [simulate(prep, catalog, {}, seed0 + s) for s in range(sims)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--bok-sims", type=int, default=None, help="best-of-5 sims (default --sims)")
    ap.add_argument("--task", action="append", default=None)
    ap.add_argument("--cap", type=int, default=400, help="max_rows (the budget)")
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--contrast", action="store_true", help="also rows as units (old)")
    ap.add_argument("--method", action="append", default=None, help="anytime, group")
    ap.add_argument("--pair-05", action="store_true", help="also a pair at alpha 0.05")
    args = ap.parse_args()
    catalog = Catalog(LocalSource(os.environ.get("LEGALBENCH_DIR", "../shared/legalbench")))
    tasks = args.task or ["cuad_audit_rights", "overruling"]
    bok = args.bok_sims or args.sims
    t0 = time.time()
    print(f"{'task':<18} {'design':<8} {'case':<22} {'units':<8} {'sims':>5} {'rate':>7} "
          f"{'s.e.':>6} {'<=a+2se':>7} {'rows':>6}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for task in tasks:
            for method in args.method or ("anytime", "group"):
                cases = [
                    ("pair at alpha 0.01", PAIR, 0.01, {"A", "B"}, args.sims),
                    ("best-of-5 at 0.05", BEST_OF_5, 0.05, {"best"}, bok),
                ]
                if args.pair_05:
                    cases.insert(1, ("pair at alpha 0.05", PAIR, 0.05, {"A", "B"}, args.sims))
                for name, template, alpha, decided, n in cases:
                    units: list[tuple[str, Any]] = [("clusters", None)]
                    if args.contrast:
                        units.append(("rows", rows_as_units))
                    for label, patch in units:
                        ctx = patch() if patch else mock.patch.dict(os.environ, {})
                        with ctx:
                            prep = prepared(template, task, method, alpha, args.cap,
                                            args.batch, catalog, Path(tmp))  # fmt: skip
                            rows = run_case(prep, catalog, n, args.seed)
                        r = rate(rows, decided, alpha)
                        print(f"{task:<18} {method:<8} {name:<22} {label:<8} {r['sims']:>5} "
                              f"{r['rate']:>7.4f} {r['se']:>6.4f} {r['ok']!s:>7} "
                              f"{r['mean_rows']:>6.0f}", flush=True)  # fmt: skip
    print(f"wall time: {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
