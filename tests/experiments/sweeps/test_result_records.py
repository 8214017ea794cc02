"""The typed results' one JSON form (issue 32, part 1): `to_dict` gives the document as it was
before the records, key for key and in order (the order is part of comparisons.json's bytes)."""

from __future__ import annotations

import dataclasses
from typing import Any

from experiments.analysis.decision import Recommendation
from experiments.analysis.sensitivity import SensitivityReport
from experiments.imports.result import ImportResult
from experiments.sweeps.result import ReportFiles, SweepResult
from experiments.sweeps.sequential_result import (
    Eliminated,
    EliminationOutcome,
    SequentialComparison,
)
from experiments.trials.record import SweepStatus

COMMON = ["model", "task", "a", "b", "design", "comparison", "method", "sequence", "metric",
          "alpha", "family_alpha", "delta", "batch", "budget", "planned"]  # fmt: skip
MIDDLE = ["looks", "n", "decision", "estimate", "ci_low", "ci_high", "clustered_by",
          "n_clusters", "score_a", "score_b"]  # fmt: skip


def _row(**kw: Any) -> SequentialComparison:
    base: dict[str, Any] = dict(
        model="m", task="t", a="x", b="y", comparison="pair", method="betting", sequence="s",
        metric="accuracy", alpha=0.05, family_alpha=0.05, delta=0.02, batch=10, budget=40,
        planned=40, looks=(10, 20), n=20, decision="A", estimate=0.2, ci_low=0.1, ci_high=0.3,
        clustered_by="rows", n_clusters=20, score_a=0.9, score_b=0.7,
        status="decided (A) after 20 of 40 rows", rows_per_arm={"x": 20, "y": 20},
    )  # fmt: skip
    return SequentialComparison(**(base | kw))


def test_a_pairs_row_ends_with_status_then_rows_per_arm_then_its_recommendation() -> None:
    rec = Recommendation("use", "x", "use x over y")
    doc = _row(recommendation=rec).to_dict()
    assert list(doc) == [*COMMON, *MIDDLE, "status", "rows_per_arm", "recommendation"]
    assert doc["looks"] == [10, 20] and isinstance(doc["looks"], list)  # a list in the CSV
    assert doc["recommendation"] == {"action": "use", "choice": "x", "line": "use x over y"}
    assert "recommendation" not in _row().to_dict()


def test_an_eliminations_row_has_k_after_planned_and_rows_per_arm_before_status() -> None:
    el = EliminationOutcome(4, (Eliminated("z", 10, "x"),), False, ("x", "y"))
    doc = _row(comparison="best_vs_worst", delta=None, elimination=el).to_dict()
    assert list(doc) == [*COMMON, "k", *MIDDLE, "eliminated", "best_identified",
                         "in_contention", "rows_per_arm", "status"]  # fmt: skip
    assert doc["eliminated"] == [{"variant": "z", "rows": 10, "by": "x"}]
    assert doc["in_contention"] == ["x", "y"] and doc["k"] == 4


def _sweep(**kw: Any) -> SweepResult:
    base: dict[str, Any] = dict(
        sweep="s", sweep_id="id", parent_run_id="r", status=SweepStatus.COMPLETE, trials=2,
        resumed=0, skipped=[], notes=[], incomplete=[], comparisons=[{"p_value": 0.5}],
        across_tasks=[], sensitivity={"per_task": []}, sequential=None, figures=[],
        report=None, rebuilt=[], experiment="p/s", unreviewed=[], cost={"model_calls": 1},
    )  # fmt: skip
    return SweepResult(**(base | kw))


def test_a_sweeps_document_has_its_optional_keys_only_when_it_has_them() -> None:
    plain = _sweep().to_dict()
    assert list(plain) == ["sweep", "sweep_id", "parent_run_id", "status", "trials", "resumed",
                           "skipped", "notes", "incomplete", "comparisons", "across_tasks",
                           "sensitivity", "figures", "rebuilt", "experiment", "unreviewed",
                           "cost"]  # fmt: skip
    assert plain["status"] == "complete" and type(plain["status"]) is str
    full = _sweep(
        sequential=[_row()], report=ReportFiles("d", ("a.csv",), "l"), trial_rows=[{"n": 1}]
    ).to_dict()
    assert list(full)[11:14] == ["sensitivity", "sequential", "figures"]
    assert list(full)[14:17] == ["report_dir", "report_files", "latest"]
    assert list(full)[-1] == "trial_rows" and full["report_files"] == ["a.csv"]
    assert full["sequential"] == [_row().to_dict()]
    assert not _sweep(incomplete=[{"task": "t"}]).ok


def test_an_imports_document_has_tracking_last_and_only_when_tracked() -> None:
    record = {"name": "n", "import_id": "i", "format": "jsonl", "files": [], "tools": ["x"]}
    doc = {"between": "variants", "import": "n", "comparisons": [], "across_tasks": [],
           "sensitivity": {}, "left_out": [], "notes": [], "clustering": [], "pairing": [],
           "trials": []}  # fmt: skip
    result = ImportResult.of(record, doc)
    keys = ["import", "import_id", "format", "files", "tools", "between", "comparisons",
            "across_tasks", "sensitivity", "left_out", "notes", "clustering", "pairing",
            "trials"]  # fmt: skip
    assert list(result.to_dict()) == keys
    tracked = dataclasses.replace(result, tracking={"run_id": "r"}).to_dict()
    assert list(tracked) == [*keys, "tracking"]


def test_a_sensitivity_reports_section_keeps_its_keys_in_order() -> None:
    rep = SensitivityReport([], {}, [], [], [], ["n"], 100, ["a", "b"])
    assert list(rep.to_dict()) == ["per_task", "variance_shares", "meta_analysis",
                                   "rank_stability", "excluded", "notes", "n_resamples",
                                   "variants"]  # fmt: skip
