"""The note on what pairing buys: the unpaired z-test's p beside the paired test's."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from experiments.imports import ImportedRow, ImportedTrial
from experiments.imports.arms import to_records
from experiments.imports.pairing import z_test
from experiments.imports.verdict import verdict


def test_z_test_is_the_pooled_two_proportion_test() -> None:
    statsmodels = pytest.importorskip("statsmodels.stats.proportion")
    a, b = [True] * 30 + [False] * 20, [True] * 22 + [False] * 28
    _, p = statsmodels.proportions_ztest([30, 22], [50, 50])
    assert z_test(a, b) == pytest.approx(p, rel=1e-12)
    assert z_test([True, True], [True]) is None  # no variance: no p, not p = 1


def test_shared_row_difficulty_makes_the_paired_p_smaller() -> None:
    """Rows with a shared difficulty: B gets right what A gets right, bar a few rows A adds.
    The unpaired test sees two noisy shares; the paired test sees only the discordant rows."""
    rng = random.Random(7)
    easy = [rng.random() < 0.55 for _ in range(120)]
    a = [e or rng.random() < 0.2 for e in easy]
    b = list(easy)

    def arm(v: str, vec: list[bool]) -> ImportedTrial:
        rows = tuple(ImportedRow(str(i), float(c)) for i, c in enumerate(vec))
        return ImportedTrial(Path(f"{v}.eval"), "inspect_ai", None, "hearsay", v, "m", None, rows)

    doc = verdict("t", to_records([arm("A", a), arm("B", b)]), n_resamples=5000)
    (row,) = doc["comparisons"]
    assert row["p_value"] < row["p_unpaired"]
    assert row["p_value"] < 0.01 < row["p_unpaired"]
    (note,) = doc["pairing"]
    assert f"paired p = {row['p_value']:.4f}" in note and f"p = {row['p_unpaired']:.4f}" in note
