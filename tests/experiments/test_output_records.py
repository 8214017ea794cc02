"""The printout reads comparison records (issue 32, part 1): a caller that has the records
gets the same text as from their stored rows, and a stored row is read once into one."""

from __future__ import annotations

from typing import Any

from experiments.analysis.records import AcrossTaskTest, Comparison
from experiments.output import across_table, comparison_table, decision_lines

PAIR: dict[str, Any] = {
    "model": "m", "task": "hearsay", "a": "x=1", "b": "x=2", "status": "tested",
    "metric": "balanced_accuracy", "score_a": 0.7, "score_b": 0.5, "statistic": 0.2,
    "p_value": 0.04, "test": "paired permutation test (swaps of A and B per row)",
    "exact": False, "n_resamples": 200, "n": 20, "n_discordant": 6, "ci_low": 0.01,
    "ci_high": 0.39, "ci_note": None, "ci_method": "Bayesian (Jeffreys posteriors)",
    "mde_80": 0.3, "mde_unreliable": True, "n_clusters": 20, "clustered_by": "rows",
    "p_corrected": 0.08, "correction": "Benjamini-Hochberg", "family_size": 2,
}  # fmt: skip
ACROSS: dict[str, Any] = {
    "model": "m", "a": "x=1", "b": "x=2", "test": "paired t-test over tasks",
    "statistic": 2.0, "p_value": 0.2, "n_tasks": 2, "mean_difference": 0.15, "note": None,
    "tasks": ["hearsay", "abercrombie"], "missing_tasks": [],
}  # fmt: skip
UNTESTED = {**PAIR, "b": "x=3", "p_value": None, "status": "incomplete trial x=3"}


def test_records_print_as_their_stored_rows() -> None:
    rows = [PAIR, UNTESTED]
    records = [Comparison.from_dict(r) for r in rows]
    for explain in (False, True):
        text = comparison_table(records, explain=explain, of="import")
        assert text == comparison_table(rows, explain=explain, of="import")
    assert "Benjamini-Hochberg over 2 tests" in comparison_table(records)
    assert "not tested: incomplete trial x=3" in comparison_table(records)
    assert across_table([AcrossTaskTest.from_dict(ACROSS)]) == across_table([ACROSS])
    assert "p = 0.2000, mean A − B +0.150" in across_table([ACROSS])


def test_an_older_row_without_a_correction_reads_holm() -> None:
    old = {k: v for k, v in PAIR.items() if k not in ("correction", "family_size")}
    assert "p corr: Holm over 1 tests;" in comparison_table([old])


def test_decision_lines_of_an_older_document_are_worked_out_from_its_fields() -> None:
    # no recommendation stored: worked out as a new sweep's, with the document's correction
    doc = {"comparisons": [PAIR], "across_tasks": [ACROSS]}
    said = decision_lines(doc)
    assert len(said) == 2 and said[0].startswith("decision: hearsay (m): "), said
    assert "Benjamini-Hochberg" in said[0] and said[1].startswith("decision: across tasks")
    assert "recommendation" not in PAIR  # read, not written into the caller's rows
