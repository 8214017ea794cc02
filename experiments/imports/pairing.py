"""What pairing buys: beside each paired test on 0/1 correctness, the p-value the unpaired
two-proportion z-test gives on the very same rows (the test lm-evaluation-harness's comparison
uses, #3831). A note for the reader, never the verdict: the verdict is the paired test's."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from experiments.analysis.records import Comparison
from experiments.imports.arms import CORRECTNESS
from experiments.trials.record import TrialRecord

TEST = "unpaired two-proportion z-test (pooled), two-sided"


def z_test(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Two-sided p of the pooled two-proportion z-test of share(a) = share(b); None when it
    is undefined (no rows, or every row right or every row wrong in both arms)."""
    n_a, n_b = len(a), len(b)
    if not n_a or not n_b:
        return None
    pooled = (sum(a) + sum(b)) / (n_a + n_b)
    var = pooled * (1 - pooled) * (1 / n_a + 1 / n_b)
    if var <= 0:
        return None
    z = (sum(a) / n_a - sum(b) / n_b) / math.sqrt(var)
    return math.erfc(abs(z) / math.sqrt(2))


def pairing_notes(
    table: Sequence[Comparison], records: Sequence[TrialRecord]
) -> tuple[list[Comparison], list[str]]:
    """For each tested pair on correctness: both p-values (its row gains `p_unpaired`)."""
    by: dict[tuple[str | None, ...], TrialRecord] = {
        (r.task, r.model, r.variant): r for r in records
    }
    notes, out = [], []
    for row in table:
        out.append(row)
        if row.status != "tested" or row.metric != CORRECTNESS or row.is_range:
            continue
        a, b = by[(row.task, row.model, row.a)], by[(row.task, row.model, row.b)]
        if row.n_clusters is not None and row.n is not None and row.n_clusters < row.n:
            notes.append(
                f"{row.task} ({row.model}) {row.a} vs {row.b}: no unpaired z-test: " + _units(row)
            )
            continue
        p = z_test([c is True for c in a.correct], [c is True for c in b.correct])
        out[-1] = replace(row, p_unpaired=p, unpaired_test=TEST)
        if p is None:
            continue
        notes.append(
            f"{row.task} ({row.model}) {row.a} vs {row.b}: paired p = "
            f"{row.p_value:.4f}; unpaired z-test on the same {row.n} rows p = {p:.4f} "
            "(ignores that the rows are shared; the paired p is the verdict)"
        )
    return out, notes


def _units(row: Comparison) -> str:
    """Why rows are not independent: a sample's epochs only (no prompt identity), or rows
    given one prompt (by the source's identity or the task's texts, epochs with them)."""
    n, c, how = row.n, row.n_clusters, str(row.clustered_by or "")
    if how.startswith("sample (its epochs"):
        return (
            f"its {n} rows are the epochs of {c} samples, not independent rows (the paired "
            "test resamples each sample's epochs together)"
        )
    return (
        f"its {n} rows are {c} clusters of rows given one prompt ({how}), not independent "
        "rows (the paired test swaps and resamples each cluster whole)"
    )
