"""`workbench report --model M` (issue 31, point 3): one model's rows, the sweep's numbers.

The cut only hides rows: a corrected p-value stays corrected over every model's comparisons,
and the table's footnote and the sequential legend keep counting the whole family.
"""

from __future__ import annotations

from typing import Any

import pytest

from experiments.output import comparison_table, sequential_table
from experiments.sweeps.report_view import RANK_LEFT_OUT, UnknownModel, only_model, sweep_models

M1, M2 = "local/smollm2", "local/smollm2-360m"  # one name inside the other


def row(model: str, p: float) -> dict[str, Any]:
    return {
        "model": model, "task": "hearsay", "a": "x", "b": "y", "score_a": 0.6, "score_b": 0.5,
        "statistic": 0.1, "ci_low": -0.1, "ci_high": 0.3, "p_value": p, "p_corrected": 2 * p,
        "correction": "Holm", "family_size": 2, "n": 10, "n_clusters": 10, "exact": True,
        "n_resamples": 200, "metric": "accuracy", "test": "paired permutation test",
        "status": "tested",
    }  # fmt: skip


def doc() -> dict[str, Any]:
    return {
        "comparisons": [row(M1, 0.01), row(M2, 0.2)],
        "across_tasks": [{"model": M1, "a": "x", "b": "y"}, {"model": M2, "a": "x", "b": "y"}],
        "incomplete": [],
        "skipped": [{"task": "abercrombie", "reason": "no test split"}],
        "sensitivity": {
            "per_task": [{"model": M1, "task": "hearsay"}, {"model": M2, "task": "hearsay"}],
            "variance_shares": {M1: {"shares": {}}, M2: {"shares": {}}},
            "meta_analysis": [{"model": M2, "a": "x", "b": "y"}],
            "rank_stability": [{"task": "hearsay", "models": [M1, M2]}],
            "excluded": [],
            "notes": [
                f"hearsay ({M1}): fewer than 2 complete variants, no sensitivity",
                f"hearsay ({M2}): the variants share no rows",
                f"variance shares ({M2}): too few rows.",
                "one note about no model",
            ],
        },
    }


def test_one_models_rows_and_notes_are_kept_and_the_rest_left_out() -> None:
    d = doc()
    view = only_model(d, [{"model": M1, "variant": "x"}, {"model": M2, "variant": "x"}], M2,
                      sweep_models(d, [], {"models": f"{M1},{M2}"}))  # fmt: skip
    assert [r["model"] for r in view.doc["comparisons"]] == [M2]
    assert [r["model"] for r in view.doc["across_tasks"]] == [M2]
    assert view.doc["skipped"] == d["skipped"]  # tasks, no model: as they were
    assert [r["model"] for r in view.trial_rows] == [M2]
    sens = view.doc["sensitivity"]
    assert [r["model"] for r in sens["per_task"]] == [M2]
    assert list(sens["variance_shares"]) == [M2] and sens["rank_stability"] == []
    assert sens["notes"] == [
        f"hearsay ({M2}): the variants share no rows",
        f"variance shares ({M2}): too few rows.",
        "one note about no model",
        RANK_LEFT_OUT,
    ]
    assert (view.shown, view.total) == (1, 2)
    assert d == doc()  # the sweep's document itself is not changed


def test_the_footnote_counts_the_whole_family_not_the_rows_shown() -> None:
    d = doc()
    whole = comparison_table(d["comparisons"])
    assert "p corr: Holm over 2 tests;" in whole
    assert "Holm across this sweep's 2 tested comparisons." in comparison_table(
        d["comparisons"], explain=True
    )
    view = only_model(d, [], M1, [M1, M2])
    cut = comparison_table(view.doc["comparisons"])
    assert "p corr: Holm over 2 tests (1 shown here);" in cut
    cut = comparison_table(view.doc["comparisons"], explain=True)
    assert "Holm across this sweep's 2 tested comparisons (1 shown here)." in cut
    assert "0.0200" in cut and "0.2000" not in cut  # M1's corrected p, as the sweep has it


def test_the_sequential_legend_keeps_the_sweeps_bonferroni_split() -> None:
    seq = {
        "model": M1, "task": "hearsay", "a": "x", "b": "y", "score_a": 0.6, "score_b": 0.5,
        "estimate": 0.1, "ci_low": -0.1, "ci_high": 0.3, "n": 12, "n_clusters": 12,
        "budget": 40, "looks": [1, 2], "decision": None, "status": "budget spent",
        "alpha": 0.025, "family_alpha": 0.05, "batch": 4, "sequence": "betting",
    }  # fmt: skip
    assert "Bonferroni over 1)" in sequential_table([seq])
    assert "Bonferroni over 2)" in sequential_table([seq], family=2)


def test_an_unknown_model_names_the_sweeps_models() -> None:
    with pytest.raises(UnknownModel, match=rf"its models: {M1}, {M2} — did you mean"):
        only_model(doc(), [], "local/smollm", [M1, M2])
