"""`sweeps.by_slice.sweep_slices` (`workbench report --by`) on a stub store and catalog: each
tested pair split with the sweep's resamples and clustering; best-vs-worst and untested rows
left out with the reason; a task without the column refused naming its columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from experiments.analysis.slices import SliceError
from experiments.sweeps.by_slice import cluster_rule, sweep_slices
from experiments.trials.record import Prediction

DATA = [
    {"index": str(i), "answer": a, "text": f"t{i}", "slice": s, "doc": f"d{i // 2}"}
    for i, (a, s) in enumerate(
        [("Yes", "p"), ("Yes", "p"), ("No", "q"), ("No", "q"), ("Yes", "q"), ("No", "p")]
    )
]
GENS = {"v1": ["Yes", "Yes", "No", "No", "Yes", "No"], "v2": ["No", "Yes", "No", "Yes", "No", "No"],
        "v3": ["Yes", "No", "No", "No", "No", "Yes"]}  # fmt: skip


@dataclass
class _Spec:
    labels: tuple[str, ...] = ("Yes", "No")
    is_classification: bool = True


@dataclass
class _Task:
    def rows(self, split: str) -> list[dict[str, str]]:
        assert split == "test"
        return [dict(r) for r in DATA]

    @property
    def spec(self) -> _Spec:
        return _Spec()


class _Catalog:
    def task(self, name: str) -> _Task:
        assert name == "hearsay"
        return _Task()


class _Tracker:
    loaded: list[str]

    def __init__(self) -> None:
        self.loaded = []

    def sweep_trial_runs(self, parent_id: str) -> list[dict[str, Any]]:
        return [
            {"trial_id": f"t{v}", "run_id": f"r{v}", "task": "hearsay", "model": "m",
             "variant": v, "metric": "balanced_accuracy", "split": "test",
             "status": "complete", "score": 0.5}
            for v in GENS
        ]  # fmt: skip

    def load_predictions(self, run_id: str) -> list[Prediction]:
        self.loaded.append(run_id)
        gens = GENS[run_id[1:]]
        return [
            Prediction(r["index"], f"h{r['index']}", r["answer"], g, g, g == r["answer"])
            for r, g in zip(DATA, gens, strict=True)
        ]


def _row(a: str, b: str, **kw: Any) -> dict[str, Any]:
    return {"task": "hearsay", "model": "m", "a": a, "b": b, "status": "tested",
            "p_value": 0.5, "n_resamples": 4, "clustered_by": "prompt", **kw}  # fmt: skip


def test_tested_pairs_are_split_with_the_sweeps_resamples_and_others_are_named() -> None:
    doc = {"comparisons": [
        _row("v1", "v2"),
        _row("v1", "v3", p_value=None, status="v3 incomplete (1 of 6 rows failed)"),
        _row("v1", "v3", k=3),
    ]}  # fmt: skip
    tracker = _Tracker()
    found = sweep_slices(tracker, "parent", doc, _Catalog(), by="slice", n_resamples=1000)
    (table,) = found.tables
    assert (table.a, table.b, table.column, table.n_resamples) == ("v1", "v2", "slice", 1000)
    assert [(r.group, r.n) for r in table.rows] == [("p", 3), ("q", 3)]
    # p: rows 0, 1, 5; A right on 0, 1, 5, B right on 1, 5 -> recall Yes 1 vs 1/2, No 1 vs 1
    p = table.rows[0]
    assert (p.score_a, p.score_b) == (1.0, 0.75)
    assert "not tested (v3 incomplete" in found.notes[0]
    assert "chosen after seeing the scores" in found.notes[1]
    assert sorted(set(tracker.loaded)) == ["rv1", "rv2", "rv3"]  # every peer: its clusters


def test_by_class_groups_by_gold_answer() -> None:
    doc = {"comparisons": [_row("v1", "v2")]}
    found = sweep_slices(_Tracker(), "parent", doc, _Catalog(), by="class")
    (table,) = found.tables
    assert table.column == "answer" and [r.group for r in table.rows] == ["No", "Yes"]
    # No: rows 2, 3, 5: A 3/3, B 2/3; Yes: rows 0, 1, 4: A 3/3, B 1/3
    scores = [x for r in table.rows for x in (r.score_a, r.score_b)]
    assert scores == pytest.approx([1.0, 2 / 3, 1.0, 1 / 3])


def test_a_task_without_the_column_is_refused_naming_its_columns() -> None:
    doc = {"comparisons": [_row("v1", "v2")]}
    with pytest.raises(SliceError, match=r"no column 'nope'; its columns: index, answer, text, "
                       r"slice, doc\. Name one with --column"):  # fmt: skip
        sweep_slices(_Tracker(), "parent", doc, _Catalog(), by="slice", column="nope")
    with pytest.raises(SliceError, match="--by must be slice or class"):
        sweep_slices(_Tracker(), "parent", doc, _Catalog(), by="row")


def test_the_sweeps_column_clustering_is_kept() -> None:
    assert cluster_rule("column:doc+prompt") == "column:doc"
    assert cluster_rule("prompt") == "prompt" and cluster_rule(None) == "prompt"
    doc = {"comparisons": [_row("v1", "v2", clustered_by="column:doc+prompt")]}
    (table,) = sweep_slices(_Tracker(), "parent", doc, _Catalog(), by="slice").tables
    # docs d0 = rows 0, 1 (slice p) -> p has rows 0, 1, 5 in 2 clusters
    assert any("6 rows in 3 clusters" in n for n in table.notes)
    assert table.test == "paired permutation test (swaps of A and B per cluster of rows)"


def test_a_sweep_task_without_the_column_is_named_and_the_others_are_split() -> None:
    """The demo's abercrombie has no `slice` column, hearsay has: hearsay is split and a note
    names abercrombie, instead of refusing the whole sweep."""

    class Both(_Catalog):
        def task(self, name: str) -> _Task:
            if name == "hearsay":
                return _Task()
            plain = _Task()
            plain.rows = lambda split: [  # type: ignore[method-assign]
                {k: v for k, v in r.items() if k != "slice"} for r in DATA
            ]
            return plain

    class Two(_Tracker):
        def sweep_trial_runs(self, parent_id: str) -> list[dict[str, Any]]:
            runs = super().sweep_trial_runs(parent_id)
            return runs + [{**r, "task": "abercrombie"} for r in runs]

    doc = {"comparisons": [_row("v1", "v2"), {**_row("v1", "v2"), "task": "abercrombie"}]}
    found = sweep_slices(Two(), "parent", doc, Both(), by="slice", n_resamples=1000)
    assert [t.task for t in found.tables] == ["hearsay"]
    assert found.notes == (
        "abercrombie: not split: task abercrombie (test split) has no column 'slice'; its "
        "columns: index, answer, text, doc",
    )
