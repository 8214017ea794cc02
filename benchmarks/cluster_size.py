"""Size of the comparisons on LegalBench's repeated texts, through the real path.

The test splits of cuad_* and overruling repeat texts under several row indices; identical
prompts get identical answers, so rows are clusters. This simulates the null the statistics
review used: both variants have the same per-text accuracy (half the distinct texts easy,
p = 0.9, half hard, p = 0.3), each variant answering each distinct prompt once. The rows,
their rendered prompts and prompt hashes are the real ones (`compile_prompt` on the task's
test split); the answers go through `experiments.analysis.compare` exactly as a sweep's do:

- `compare.pair` (paired permutation test, 1000 resamples) and its 95% interval;
- `compare.best_vs_worst` over k = 5 draws (range permutation test, 1000 resamples);
- Fisher's combination over 3 cuad tasks (`compare.across_tasks`, best_vs_worst);
- a synthetic task of 20 distinct texts repeated 30 times.

Each is run with `cluster_by: rows` (every row its own unit, as before) and the default
`cluster_by: prompt`, on the same simulated answers. Size at alpha = 0.05 should be within
[0.03, 0.06] with clusters; the CI row gives how often the interval of the difference covers
0 (the true difference).

    python benchmarks/cluster_size.py [--sims 1000] [--seed 0] [--tasks ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time

import numpy as np

from experiments.analysis import compare, stats
from experiments.analysis.align import same_rows
from experiments.trials.record import TrialRecord
from experiments.trials.spec import prompt_hash
from promptlib import Catalog, compile_prompt, default_source, evaluation_rows, parse_spec

EASY, HARD, ALPHA, K = 0.9, 0.3, 0.05, 5


def real_rows(catalog: Catalog, task: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """Indices, answers, prompt hashes and the answer's alternative label of the test split."""
    t = catalog.task(task)
    compiled = compile_prompt(parse_spec("base"), t, "test")
    rows, _ = evaluation_rows(compiled.variant, t, "test")
    labels = list(t.spec.labels or ())
    idx = [str(r["index"]) for r in rows]
    ans = [str(r["answer"]) for r in rows]
    hashes = [prompt_hash(compiled.render(r)) for r in rows]
    other = [next(x for x in labels if x != a) for a in ans]
    return idx, ans, hashes, other


def synthetic(
    texts: int = 20, copies: int = 30
) -> tuple[list[str], list[str], list[str], list[str]]:
    n = texts * copies
    idx = [str(i) for i in range(n)]
    ans = ["Yes" if (i // copies) % 2 else "No" for i in range(n)]
    hashes = [f"text{i // copies}" for i in range(n)]
    other = ["No" if a == "Yes" else "Yes" for a in ans]
    return idx, ans, hashes, other


class Task:
    def __init__(self, name: str, data: tuple[list[str], list[str], list[str], list[str]]):
        self.name = name
        self.idx, self.ans, self.hashes, self.other = data
        _, self.text = np.unique(np.asarray(self.hashes), return_inverse=True)
        n_text = int(self.text.max()) + 1
        # half the distinct texts easy, half hard (a fixed split per task)
        self.p_text = np.where(np.random.default_rng(1).random(n_text) < 0.5, EASY, HARD)
        self.metric = "balanced_accuracy"

    def arm(self, name: str, rng: np.random.Generator) -> TrialRecord:
        hit = rng.random(len(self.p_text)) < self.p_text  # one answer per distinct prompt
        gens = [a if hit[t] else o for a, o, t in zip(self.ans, self.other, self.text, strict=True)]
        score = stats.metric_fn(self.metric)(self.ans, gens)
        return TrialRecord.of(
            name, self.metric, self.idx, self.ans, gens, score, prompt_hashes=self.hashes
        )


def _rejects(p: float | None) -> int:
    """1 when a test rejects at ALPHA (an untested row, p None, does not)."""
    return int(p is not None and p < ALPHA)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--tasks", default="cuad_audit_rights,overruling,cuad_cap_on_liability,cuad_insurance"
    )
    ap.add_argument("--no-range", action="store_true", help="skip the k = 5 range tests")
    ap.add_argument("--ci-sims", type=int, default=300, help="simulations with an interval")
    args = ap.parse_args()
    catalog = Catalog(default_source())
    tasks = [Task(t, real_rows(catalog, t)) for t in args.tasks.split(",") if t]
    tasks.append(Task("20 texts x 30 copies", synthetic()))
    fisher_tasks = [t for t in tasks if t.name.startswith("cuad_")][:3]
    counts: dict[tuple[str, str, str], int] = {}
    t0 = time.perf_counter()
    for sim in range(args.sims):
        for by in ("rows", "prompt"):
            range_rows = []
            for task in tasks:
                arms = [
                    task.arm(
                        f"v{j}", np.random.default_rng((args.seed, sim, j, hash(task.name) % 2**32))
                    )
                    for j in range(K)
                ]
                row = compare.pair(
                    arms[0], arms[1], n_resamples=1000, seed=sim, cluster_by=by, intervals=False
                )
                key = (task.name, "paired", by)
                counts[key] = counts.get(key, 0) + _rejects(row.p_value)
                if sim < args.ci_sims:  # the comparison's own interval of the difference
                    answers, gens, idx = same_rows(arms[:2], task.name)
                    c = compare.clustering(arms[:2], idx, by)
                    ci = compare.interval(answers, gens[0], gens[1], task.metric, c, sim)
                    key = (task.name, f"95% CI covers 0 ({args.ci_sims} sims)", by)
                    counts[key] = counts.get(key, 0) + int(ci.low <= 0 <= ci.high)
                if args.no_range:
                    continue
                rr = compare.best_vs_worst(
                    arms, n_resamples=1000, seed=sim, cluster_by=by, intervals=False
                )
                key = (task.name, f"range (k = {K})", by)
                counts[key] = counts.get(key, 0) + _rejects(rr.p_value)
                range_rows.append(dataclasses.replace(rr, model="sim", task=task.name))
            if range_rows:
                fisher = compare.across_tasks(
                    [r for r in range_rows if r.task in {t.name for t in fisher_tasks}],
                    kind="best_vs_worst", test="permutation",
                    all_tasks=[t.name for t in fisher_tasks],
                )[0]  # fmt: skip
                key = ("Fisher over " + ", ".join(t.name for t in fisher_tasks), "Fisher", by)
                counts[key] = counts.get(key, 0) + _rejects(fisher.p_value)
        if sim in (0, 9) or (sim + 1) % 100 == 0:
            print(f"  {sim + 1} sims, {time.perf_counter() - t0:.0f} s", flush=True)
    se = math.sqrt(ALPHA * (1 - ALPHA) / args.sims)
    print(
        f"\nnull: same per-text accuracy in every variant (half the texts p = {EASY}, half "
        f"{HARD}); {args.sims} simulations per cell; alpha = {ALPHA} (SE of a size at alpha "
        f"= {se:.3f}); balanced accuracy; 1000 resamples per test\n"
    )
    print("| task | rows | clusters | test | all rows (cluster_by: rows) | clusters (default) |")
    print("| --- | --- | --- | --- | --- | --- |")
    names = {t.name: t for t in tasks}
    for (name, test, by), _ in sorted(counts.items()):
        if by != "rows":
            continue
        t = names.get(name)
        rows = len(t.idx) if t else "-"
        clus = int(t.text.max()) + 1 if t else "-"
        sims = args.ci_sims if "CI" in test else args.sims
        a = counts[(name, test, "rows")] / sims
        b = counts[(name, test, "prompt")] / sims
        print(f"| {name} | {rows} | {clus} | {test} | {a:.3f} | {b:.3f} |")


if __name__ == "__main__":
    main()
