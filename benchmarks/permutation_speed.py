"""Speed of the paired permutation test: 10,000 resamples x 2,000 pairs.

Prints the time against the acceptance bound (0.5 s) and the goal (0.05 s), and the ratio
against scipy.stats.permutation_test on the same data, measured side by side. The times
include scoring both variants with the official metric (the statistic is exactly
score_a - score_b). Also an F1 metric (ssla_f1 on entity lists), vectorised through per-row
(tp, fp, fn) counts, against the loop that recomputes the metric per resample.

    python benchmarks/permutation_speed.py
"""

from __future__ import annotations

import time

import numpy as np

from experiments.analysis.stats import metric_fn, paired_permutation_test


def best_of(fn, k: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(k):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    from scipy.stats import permutation_test

    rng = np.random.default_rng(0)
    n = 2000
    y = rng.integers(0, 2, n)
    a = np.where(rng.random(n) < 0.75, y, 1 - y)
    b = np.where(rng.random(n) < 0.70, y, 1 - y)
    for metric in ("accuracy", "balanced_accuracy"):
        t = best_of(lambda m=metric: paired_permutation_test(y, a, b, metric=m, n_resamples=10_000))
        print(
            f"{metric}: 10,000 resamples x {n} pairs in {t:.4f}s "
            f"(bound 0.5 s: {'OK' if t <= 0.5 else 'MISSED'}; goal 0.05 s: "
            f"{'OK' if t <= 0.05 else 'MISSED'})"
        )
    # worst case: every pair discordant, so all 2,000 examples enter every resample
    worst = (y, y, 1 - y)
    t = best_of(lambda: paired_permutation_test(*worst, n_resamples=10_000))
    print(
        f"worst case (all {n} pairs discordant): {t:.4f}s "
        f"(bound 0.5 s: {'OK' if t <= 0.5 else 'MISSED'}; goal 0.05 s: "
        f"{'OK' if t <= 0.05 else 'MISSED'})"
    )
    ca, cb = (a == y).astype(float), (b == y).astype(float)
    ts = best_of(
        lambda: permutation_test(
            (ca, cb),
            lambda x, z, axis: x.mean(axis=axis) - z.mean(axis=axis),
            permutation_type="samples",
            n_resamples=10_000,
            vectorized=True,
        ),
        k=2,
    )
    ours = best_of(lambda: paired_permutation_test(y, a, b, metric="accuracy", n_resamples=10_000))
    print(f"scipy.stats.permutation_test (accuracy): {ts:.3f}s -> ours is {ts / ours:.1f}x faster")
    names = ["Alpha Corp", "Bravo LLC", "Charlie Inc", "Delta Bank"]
    answers = [",".join(rng.choice(names, 2, replace=False)) for _ in range(n)]
    ga, gb = (
        [", ".join(x for x in ans.split(",") if rng.random() < p) for ans in answers]
        for p in (0.7, 0.6)
    )
    t = best_of(lambda: paired_permutation_test(answers, ga, gb, "ssla_f1", 10_000), k=2)
    f1 = metric_fn("ssla_f1")

    def slow(y, p):  # type: ignore[no-untyped-def]
        return f1(y, p)

    loop = best_of(lambda: paired_permutation_test(answers, ga, gb, slow, 100), k=1) * 100
    print(
        f"ssla_f1: 10,000 resamples x {n} pairs in {t:.3f}s; the recomputing loop would take "
        f"{loop:.0f}s (timed on 100 resamples) -> {loop / t:.0f}x"
    )


if __name__ == "__main__":
    main()
