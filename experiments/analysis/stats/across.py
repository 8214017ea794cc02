"""Tests across tasks, on per-task scores.

`across_tasks("t" | "wilcoxon" | "permutation", ...)` reports degenerate inputs (fewer than
two tasks, all differences zero or identical for t, tasks without a score) with
``p_value=None`` and a note instead of a meaningless p-value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from experiments.analysis.stats.metrics import FloatArray
from experiments.analysis.stats.paired import _EPS, _tail

AcrossTest = Literal["t", "wilcoxon", "permutation"]


@dataclass(frozen=True)
class AcrossTasks:
    """An across-task test on per-task scores; `p_value` is None when the input is degenerate."""

    test: str
    statistic: float | None
    p_value: float | None
    n_tasks: int
    mean_difference: float | None
    note: str = ""


ACROSS_TESTS: dict[str, str] = {
    "t": "paired t-test over tasks",
    "wilcoxon": "Wilcoxon signed-rank over tasks",
    "permutation": "sign-flip permutation test over tasks (mean difference)",
}


def _task_differences(
    test: str, scores_a: Sequence[float | None], scores_b: Sequence[float | None]
) -> tuple[FloatArray, AcrossTasks | None]:
    """Per-task differences, or a degenerate result saying why no test is possible."""
    name = ACROSS_TESTS[test]
    if len(scores_a) != len(scores_b):
        raise ValueError(
            f"scores_a has {len(scores_a)} tasks and scores_b {len(scores_b)}; "
            "they must pair up task by task"
        )
    a = np.array([np.nan if s is None else float(s) for s in scores_a], dtype=float)
    b = np.array([np.nan if s is None else float(s) for s in scores_b], dtype=float)
    n = len(a)
    missing = np.flatnonzero(np.isnan(a) | np.isnan(b))
    if len(missing):
        note = (
            f"{len(missing)} of {n} tasks have no score (positions {missing.tolist()}); "
            "no across-task test on a partial set"
        )
        return a - b, AcrossTasks(name, None, None, n, None, note)
    d = a - b
    mean = float(d.mean()) if n else None
    if n < 2:
        return d, AcrossTasks(name, None, None, n, mean, f"fewer than 2 tasks ({n}): no test")
    if np.all(np.abs(d) <= 1e-12):
        note = "every per-task difference is zero: the variants tie on every task, no test"
        return d, AcrossTasks(name, None, None, n, mean, note)
    return d, None


def _identical(d: FloatArray) -> bool:
    return bool(np.ptp(d) <= 1e-12)


def paired_t_across_tasks(
    scores_a: Sequence[float | None], scores_b: Sequence[float | None]
) -> AcrossTasks:
    """The paper's test: a paired t-test over per-task scores (e.g. tasks in a category).

    Degenerate inputs give ``p_value=None`` with a note: fewer than 2 tasks, a task without
    a score, all differences zero, or all differences identical (zero variance: t is
    undefined, and float rounding would otherwise turn it into p ~ 1e-31).
    """
    from scipy.stats import t as t_dist

    d, degenerate = _task_differences("t", scores_a, scores_b)
    if degenerate is not None:
        return degenerate
    n = len(d)
    mean = float(d.mean())
    if _identical(d):
        note = (
            f"every per-task difference equals {mean:.4g}: zero variance, so the t statistic "
            "is undefined; use the sign-flip permutation or Wilcoxon test"
        )
        return AcrossTasks(ACROSS_TESTS["t"], None, None, n, mean, note)
    se = float(d.std(ddof=1)) / math.sqrt(n)
    stat = mean / se
    p = float(2 * t_dist.sf(abs(stat), n - 1))
    return AcrossTasks(ACROSS_TESTS["t"], stat, min(1.0, p), n, mean)


def _cannot_reach(
    name: str, n: int, mean: float, smallest: float, alpha: float, why: str
) -> AcrossTasks | None:
    """A result without a p-value when the test's smallest attainable p is not below alpha:
    printing p = 0.0625 for 4 tasks that all agree reads like a result, but no outcome of
    the test could have been significant."""
    if smallest < alpha:
        return None
    note = (
        f"cannot reach p < {alpha:g} with {n} tasks: the smallest p-value this test can give "
        f"is {smallest:.4g} ({why}); add tasks or use the paired t-test"
    )
    return AcrossTasks(name, None, None, n, mean, note)


def _signed_rank_exact(d: FloatArray) -> tuple[float, float, float]:
    """(W+, exact two-sided p, smallest attainable p) of the signed-rank statistic over all
    2^n sign patterns, with average ranks for tied |d| (no zeros in `d`)."""
    from scipy.stats import rankdata

    n = len(d)
    ranks = rankdata(np.abs(d))
    w_plus = float(ranks[d > 0].sum())
    signs = (np.arange(2**n)[:, None] >> np.arange(n)) & 1  # 1 = positive
    null = signs @ ranks
    centre = float(ranks.sum()) / 2
    dev = np.abs(null - centre)
    p = float(np.count_nonzero(dev >= abs(w_plus - centre) - _EPS) / len(null))
    smallest = float(np.count_nonzero(dev >= dev.max() - _EPS) / len(null))
    return w_plus, p, smallest


def wilcoxon_across_tasks(
    scores_a: Sequence[float | None],
    scores_b: Sequence[float | None],
    alpha: float = 0.05,
    exact_threshold: int = 16,
) -> AcrossTasks:
    """Wilcoxon signed-rank test over per-task scores (no normality assumption).

    Tasks whose difference is zero carry no sign: they are dropped (Wilcoxon's own rule),
    `n_tasks` counts the tasks the test used and the note names the dropped ones. Exact
    over all 2^n sign patterns (average ranks for ties) when n <= `exact_threshold`, else
    scipy's normal approximation. Degenerate inputs (fewer than 2 tasks, a task without a
    score, all differences zero) and too few tasks to reach `alpha` give ``p_value=None``
    with a note.
    """
    from scipy.stats import wilcoxon

    name = ACROSS_TESTS["wilcoxon"]
    d, degenerate = _task_differences("wilcoxon", scores_a, scores_b)
    if degenerate is not None:
        return degenerate
    # differences within float rounding of each other are ties, not distinct ranks
    d = np.round(d, 12)
    zero = np.flatnonzero(np.abs(d) <= 1e-12)
    used = d[np.abs(d) > 1e-12]
    notes = []
    if len(zero):
        notes.append(
            f"{len(zero)} of {len(d)} tasks tie (zero difference, positions "
            f"{zero.tolist()}) and are dropped by the signed-rank test; n_tasks counts the "
            f"{len(used)} it used, mean_difference is over all {len(d)}"
        )
    n = len(used)
    mean = float(d.mean())
    if n < 2:
        return AcrossTasks(
            name, None, None, n, mean, "; ".join([*notes, f"fewer than 2 untied tasks ({n})"])
        )
    if n <= exact_threshold:
        stat, p, smallest = _signed_rank_exact(used)
        notes.append(f"exact over {2**n} sign patterns")
    else:
        from scipy.stats import rankdata

        r = wilcoxon(used)
        # W+ (the sum of the ranks of the positive differences), as on the exact path
        stat = float(rankdata(np.abs(used))[used > 0].sum())
        p, smallest = float(r.pvalue), 0.0
        notes.append("normal approximation")
    if _identical(used):
        notes.append("all differences identical (tied ranks)")
    cannot = _cannot_reach(name, n, mean, smallest, alpha, f"2^{n} sign patterns")
    if cannot is not None:
        return replace(cannot, note="; ".join([*notes, cannot.note]))
    return AcrossTasks(name, stat, min(1.0, p), n, mean, "; ".join(notes))


def permutation_across_tasks(
    scores_a: Sequence[float | None],
    scores_b: Sequence[float | None],
    n_resamples: int = 10_000,
    seed: int | None = 0,
    exact_threshold: int = 16,
    alpha: float = 0.05,
) -> AcrossTasks:
    """Sign-flip permutation test of the mean per-task difference (two-sided).

    Under H0 each task's difference is symmetric about 0, so its sign is flipped with
    probability 1/2. Exact over all 2^n sign patterns when n <= `exact_threshold`, else Monte
    Carlo with p = (b + 1) / (R + 1). Degenerate inputs as for the t-test; identical non-zero
    differences are fine here (p = 2 / 2^n exactly). With too few tasks for any sign pattern
    to give p < `alpha` (5 or fewer), no p-value: a note says so.
    """
    name = ACROSS_TESTS["permutation"]
    d, degenerate = _task_differences("permutation", scores_a, scores_b)
    if degenerate is not None:
        return degenerate
    n = len(d)
    observed = float(d.mean())
    if n <= exact_threshold:
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
        null = signs @ d / n
        p = _tail(null, observed, "two-sided") / len(null)
        smallest = _tail(null, float(np.abs(null).max()), "two-sided") / len(null)
        how = f"exact over {2**n} sign patterns"
        cannot = _cannot_reach(name, n, observed, smallest, alpha, how)
        if cannot is not None:
            return cannot
    else:
        rng = np.random.default_rng(seed)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(n_resamples, n))
        null = signs @ d / n
        p = (_tail(null, observed, "two-sided") + 1) / (n_resamples + 1)
        how = f"{n_resamples} random sign patterns"
    note = how + ("; all differences identical" if _identical(d) else "")
    return AcrossTasks(name, observed, float(p), n, observed, note)


def across_tasks(
    test: AcrossTest,
    scores_a: Sequence[float | None],
    scores_b: Sequence[float | None],
    alpha: float = 0.05,
) -> AcrossTasks:
    """One across-task test, chosen by name; the result's `test` says which one ran.

    ``None`` (or NaN) marks a task without a score: the result then has no p-value and its
    note lists those tasks (they are not dropped silently).
    """
    if test == "t":
        return paired_t_across_tasks(scores_a, scores_b)
    if test == "wilcoxon":
        return wilcoxon_across_tasks(scores_a, scores_b, alpha=alpha)
    if test == "permutation":
        return permutation_across_tasks(scores_a, scores_b, alpha=alpha)
    raise ValueError(f"across-task test must be t, wilcoxon or permutation, not {test!r}")
