"""`TrialRecord.replace` with columns: rows keep their own cluster key, error and costs."""

from __future__ import annotations

import dataclasses
import random

import pytest

from experiments.analysis import compare
from experiments.trials.record import TrialRecord


def _records() -> tuple[TrialRecord, TrialRecord]:
    rng = random.Random(0)
    n = 40
    idx = [str(i) for i in range(n)]
    ans = [rng.choice("ab") for _ in range(n)]

    def noisy(p: float) -> list[str | None]:
        return [a if rng.random() < p else ("b" if a == "a" else "a") for a in ans]

    def acc(g: list[str | None]) -> float:
        return sum(x == y for x, y in zip(g, ans, strict=True)) / n

    hashes = [f"h{i % 10}" for i in range(n)]  # 10 clusters of 4 rows
    ga, gb = noisy(0.8), noisy(0.55)
    a = TrialRecord.of("A", "accuracy", idx, ans, ga, acc(ga), "complete", 0, hashes)
    b = TrialRecord.of("B", "accuracy", idx, ans, gb, acc(gb), "complete", 0, hashes)
    return a, b


def _shuffled(r: TrialRecord, seed: int = 1) -> TrialRecord:
    perm = list(range(r.n))
    random.Random(seed).shuffle(perm)
    return r.replace(
        indices=[r.indices[j] for j in perm],
        answers=[r.answers[j] for j in perm],
        generations=[r.generations[j] for j in perm],
    )


def test_a_partial_reorder_keeps_each_rows_cluster_and_the_p_value() -> None:
    a, b = _records()
    a2 = _shuffled(a)
    assert {p.index: p.prompt_hash for p in a2.rows} == {p.index: p.prompt_hash for p in a.rows}
    r1 = compare.pair(a, b, n_resamples=999)
    r2 = compare.pair(a2, b, n_resamples=999)
    assert (r1.p_value, r1.n_clusters) == (r2.p_value, r2.n_clusters)


def test_a_reorder_moves_errors_and_costs_with_their_row() -> None:
    a, _ = _records()
    rows = list(a.rows)
    rows[3] = dataclasses.replace(rows[3], error="boom", tokens_in=7, latency=0.5)
    moved = {p.index: p for p in _shuffled(dataclasses.replace(a, rows=tuple(rows))).rows}
    assert (moved["3"].error, moved["3"].tokens_in, moved["3"].latency) == ("boom", 7, 0.5)
    assert sum(p.error is not None for p in moved.values()) == 1


def test_new_rows_without_their_columns_are_refused() -> None:
    a, _ = _records()
    with pytest.raises(ValueError, match="give every column"):
        a.replace(indices=["x", *a.indices[1:]])


def test_n_errors_still_marks_the_first_rows() -> None:
    a, _ = _records()
    bad = a.replace(status="incomplete", n_errors=3)
    assert [p.error is not None for p in bad.rows[:4]] == [True, True, True, False]
    assert bad.n_errors == 3 and not bad.complete
