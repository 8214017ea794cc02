"""What the short legend and the short variant names claim (issue 32, point 6) must be true of
the table above them: a best-of-k table has no interval and no MDE to name, and a file's stem
is printed only when no other variant the output names shares it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiments.output import comparison_table, decision_lines, sequential_table

BVW_ROW: dict[str, Any] = {
    "model": "m", "task": "hearsay", "a": "instruction=reference", "b": "instruction=base",
    "status": "tested", "metric": "balanced_accuracy", "score_a": 0.7, "score_b": 0.5,
    "statistic": 0.2, "p_value": 0.39,
    "test": "range permutation test (per-row permutation of the k variants' predictions)",
    "exact": False, "n_resamples": 200, "n": 20, "n_discordant": None, "k": 3,
    "ci_low": None, "ci_high": None,
    "ci_note": "no interval: best and worst are chosen after seeing the scores",
    "mde_80": None, "n_clusters": 20, "clustered_by": "prompt", "p_corrected": 0.78,
    "correction": "Holm", "family_size": 2,
    "draw_scores": {"instruction=reference": 0.7, "instruction=base": 0.5,
                    "instruction=description": 0.6},
}  # fmt: skip


def _legend(text: str) -> list[str]:
    return [line for line in text.splitlines()[1:] if not line.startswith("hearsay")]


def test_a_best_of_k_legend_names_no_interval_and_no_mde() -> None:
    legend = _legend(comparison_table([BVW_ROW]))
    assert len(legend) == 3 and all(len(line) <= 130 for line in legend), legend
    text = "\n".join(legend)
    # the table prints '-' for both: the legend must not name a method for them
    assert "paired bootstrap" not in text and "simulated" not in text, text
    assert "range permutation test of max - min over 3 variants (A best, B worst)" in text
    assert "Holm over 2 tests" in text and "no 95% CI or MDE80" in text


def test_f1_bootstrap_intervals_are_one_method_in_the_legend() -> None:
    def row(task: str, clusters: int) -> dict[str, Any]:
        return {
            **{k: v for k, v in BVW_ROW.items() if k not in ("k", "draw_scores")},
            "task": task, "a": "x=1", "b": "x=2", "metric": "f1", "ci_low": -0.1,
            "ci_high": 0.3, "ci_note": None, "mde_80": 0.2, "family_size": 3,
            "test": "paired permutation test (swaps of A and B per cluster of rows)",
            "ci_method": f"bootstrap (paired {clusters} clusters of 40 rows), BCa, expanded "
            f"(t with {clusters - 2} df)",
        }  # fmt: skip

    table = [row("hearsay", 30), row("hearsay", 31), row("hearsay", 33)]
    legend = _legend(comparison_table(table))
    assert "95% CI: bootstrap (paired clusters); MDE80" in legend[1], legend


@pytest.fixture
def lawyers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, str]:
    """Two variants from files both named lawyer.yaml, and a third."""
    monkeypatch.chdir(tmp_path)
    return (
        f"instruction_file={tmp_path}/specs/lawyer.yaml",
        f"instruction_file={tmp_path}/old/lawyer.yaml",
        f"instruction_file={tmp_path}/specs/judge.yaml",
    )


def test_best_of_k_names_the_winning_file_when_a_losing_draw_shares_its_stem(
    lawyers: tuple[str, str, str],
) -> None:
    x, y, z = lawyers
    row = {**BVW_ROW, "a": x, "b": z, "draw_scores": {x: 0.7, y: 0.6, z: 0.5}}
    text = comparison_table([row])
    # y, the other lawyer.yaml, is a draw of the same test: "lawyer" would not say which won
    assert "instruction_file=specs/lawyer.yaml " in text, text
    assert "instruction_file=lawyer " not in text
    assert "instruction_file=judge " in text  # no clash: its stem


def test_a_sequential_table_names_each_arm_once_and_apart(lawyers: tuple[str, str, str]) -> None:
    x, y, z = lawyers
    row = {
        "model": "m", "task": "hearsay", "a": x, "b": z, "design": "sequential",
        "comparison": "best_vs_worst", "method": "anytime", "sequence": "betting", "metric":
        "accuracy", "alpha": 0.05, "family_alpha": 0.05, "delta": None, "batch": 10,
        "budget": 30, "planned": 40, "k": 3, "looks": [10, 20], "n": 20, "decision": "best",
        "estimate": 0.3, "ci_low": 0.1, "ci_high": 0.5, "clustered_by": "rows",
        "n_clusters": 20, "score_a": 0.8, "score_b": 0.5, "best_identified": False,
        "eliminated": [{"variant": y, "rows": 10, "by": z}], "in_contention": [x, z],
        "rows_per_arm": {x: 20, y: 10, z: 20}, "status": "decided",
    }  # fmt: skip
    text = sequential_table([row])
    a_column = text.splitlines()[1].split()[2]
    gone = next(line for line in text.splitlines() if "eliminated" in line)
    assert a_column == "instruction_file=specs/lawyer.yaml", text
    assert "eliminated instruction_file=old/lawyer.yaml after 10 rows" in gone, gone
    # the decision line names A as the table does
    lines = decision_lines({"sequential": [row]})
    assert "instruction_file=specs/lawyer.yaml" in lines[0] and str(Path.cwd()) not in lines[0]


def test_a_decision_line_never_shortens_a_name_inside_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    s = "instruction_file=specs/a.yaml"
    long, twin = f"{s},seed=1", "instruction_file=old/a.yaml,seed=1"
    # long and twin share the stem form "instruction_file=a,seed=1": both keep their paths;
    # s alone is shown as its stem, and must not be replaced inside `long`
    row = {
        "model": "m", "task": "hearsay", "a": long, "b": twin, "status": "tested",
        "metric": "accuracy", "score_a": 0.8, "score_b": 0.5, "statistic": 0.3,
        "p_value": 0.01, "p_corrected": 0.01, "correction": "Holm", "family_size": 2,
        "ci_low": 0.1, "ci_high": 0.5, "n": 40, "mde_80": 0.2, "test": "paired permutation test",
    }  # fmt: skip
    other = {**row, "task": "abercrombie", "a": s, "b": twin, "p_value": 0.5, "p_corrected": 0.5}
    doc = {"comparisons": [row, other], "across_tasks": []}
    table = comparison_table(doc["comparisons"])
    lines = decision_lines(doc)
    assert f"use {long} over {twin}" in lines[0], lines
    assert "instruction_file=a,seed=1" not in "\n".join(lines)
    assert f"between instruction_file=a and {twin}" in lines[1], lines
    assert f" {long} " in table.splitlines()[1]


def test_one_file_spelled_two_ways_prints_two_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # two variants (two names, two trials) whose paths reach one file: shortened, both read
    # "instruction_file=specs/a.yaml"; as written they differ
    a, b = "instruction_file=specs/a.yaml", "instruction_file=./specs/a.yaml"
    row = {**BVW_ROW, "a": a, "b": b, "draw_scores": {a: 0.7, b: 0.5}}
    first = comparison_table([row]).splitlines()[1]
    assert f" {a} " in first and f" {b} " in first, first
