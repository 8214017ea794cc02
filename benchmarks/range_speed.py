"""Speed of the range permutation test: 1,000 resamples x 5 variants x 2,000 rows.

Prints, for accuracy and balanced accuracy, the time of `range_permutation_test` against the
target (1 s), on typical data (about 80% of rows have variants that disagree) and on the
worst case (every row has variants that disagree), and side by side the time of a naive
loop over resamples (each resample permutes every row's predictions and recomputes the
official metric for each variant). The naive loop runs `--naive-resamples` resamples and is
scaled linearly to 1,000 (it says so). Also the vectorised per-row gather path (used when
rows have many distinct statistics, as for the F1 metrics) and ssla_f1 itself.

    .venv/bin/python benchmarks/range_speed.py [--naive-resamples 50]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from experiments.analysis import stats
from experiments.analysis.stats import range_test
from experiments.metrics import METRICS

N, K, R = 2000, 5, 1000
TARGET = 1.0


def best_of(fn: Callable[[], object], k: int = 3) -> float:
    times = []
    for _ in range(k):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def data(worst: bool) -> tuple[NDArray[Any], list[NDArray[Any]]]:
    rng = np.random.default_rng(0)
    y = rng.choice(np.array(["Yes", "No"], dtype=object), N, p=[0.8, 0.2])
    other = np.where(y == "Yes", "No", "Yes")
    if worst:  # variant i % K is wrong on row i, the others right: every row discordant
        preds = [np.where(np.arange(N) % K == j, other, y) for j in range(K)]
    else:
        p = rng.uniform(0.5, 0.95, N)
        preds = [np.where(rng.random(N) < p, y, other) for _ in range(K)]
    return y, preds


def naive(y: NDArray[Any], preds: Sequence[NDArray[Any]], metric: str, resamples: int) -> None:
    """The obvious loop: permute each row's k predictions, rescore every variant."""
    rng = np.random.default_rng(1)
    score = stats.metric_fn(metric)
    matrix = np.stack(preds, axis=1)
    observed = max(score(y, p) for p in preds) - min(score(y, p) for p in preds)
    b = 0
    for _ in range(resamples):
        perm = np.argsort(rng.random((N, K)), axis=1)
        shuffled = matrix[np.arange(N)[:, None], perm]
        values = [score(y, shuffled[:, j]) for j in range(K)]
        b += max(values) - min(values) >= observed - 1e-9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--naive-resamples", type=int, default=50)
    args = ap.parse_args()
    print(f"range_permutation_test: {R} resamples x {K} variants x {N} rows (target {TARGET} s)")
    for worst in (False, True):
        y, preds = data(worst)
        label = "worst case (all rows discordant)" if worst else "typical data"
        for metric in ("accuracy", "balanced_accuracy"):
            res = stats.range_permutation_test(y, preds, metric=metric, n_resamples=R)
            t = best_of(partial(stats.range_permutation_test, y, preds, metric, R))
            t0 = time.perf_counter()
            naive(y, preds, metric, args.naive_resamples)
            t_naive = (time.perf_counter() - t0) * R / args.naive_resamples
            print(
                f"  {label:34s} {metric:17s} {t:.3f}s "
                f"({'OK' if t <= TARGET else 'MISSED'}; {res.n_discordant} discordant rows, "
                f"p = {res.p_value:.3f}) | naive loop {t_naive:.1f}s "
                f"(scaled from {args.naive_resamples}) -> {t_naive / t:.0f}x faster",
                flush=True,
            )
    # the per-row gather path, forced (the grouped path is chosen automatically above)
    y, preds = data(True)
    yo = np.asarray(y, dtype=object)
    scores = [METRICS["balanced_accuracy"](list(p), list(y)) for p in preds]
    dec = stats.checked_decomposition("balanced_accuracy", yo, preds, scores)
    assert dec is not None
    t = best_of(
        lambda: range_test._range_null_decomposed(dec, R, np.random.default_rng(0), "gather")
    )
    print(f"  worst case, balanced_accuracy, per-row gather path (null only): {t:.3f}s")
    # an F1 metric on entity lists (rows have many distinct statistics: gather path)
    rng = np.random.default_rng(2)
    names = ["Alpha Corp", "Bravo LLC", "Charlie Inc", "Delta Bank"]
    answers = [",".join(rng.choice(names, 2, replace=False)) for _ in range(N)]
    gens = [
        [", ".join(n for n in a.split(",") if rng.random() < 0.7) for a in answers]
        for _ in range(K)
    ]
    t = best_of(lambda: stats.range_permutation_test(answers, gens, "ssla_f1", R), k=1)
    print(f"  ssla_f1 on entity lists (scoring included): {t:.3f}s")


if __name__ == "__main__":
    main()
