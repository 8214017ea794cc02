"""Review of `sweeps.by_slice.sweep_slices` (issue 34): without the parent's n_resamples,
the per-group tests never take an exact comparison's pattern count (2^d, e.g. 4) as the
sweep's resamples."""

from __future__ import annotations

from typing import Any

from experiments.sweeps.by_slice import sweep_slices
from experiments.trials.record import Prediction

DATA = [
    {"index": str(i), "answer": a, "slice": s}
    for i, (a, s) in enumerate([("Yes", "p"), ("Yes", "p"), ("No", "q"), ("No", "q")] * 10)
]
GENS = {"v1": ["Yes", "Yes", "No", "No"] * 10, "v2": ["No", "Yes", "No", "Yes"] * 10}


class _Spec:
    labels = ("Yes", "No")
    is_classification = True


class _Task:
    spec = _Spec()

    def rows(self, split: str) -> list[dict[str, str]]:
        return [dict(r) for r in DATA]


class _Catalog:
    def task(self, name: str) -> _Task:
        return _Task()


class _Tracker:
    def sweep_trial_runs(self, parent_id: str) -> list[dict[str, Any]]:
        return [
            {"trial_id": f"t{v}", "run_id": f"r{v}", "task": "hearsay", "model": "m",
             "variant": v, "metric": "balanced_accuracy", "split": "test",
             "status": "complete", "score": 0.5}
            for v in GENS
        ]  # fmt: skip

    def load_predictions(self, run_id: str) -> list[Prediction]:
        return [
            Prediction(r["index"], f"h{r['index']}", r["answer"], g, g, g == r["answer"])
            for r, g in zip(DATA, GENS[run_id[1:]], strict=True)
        ]


def _row(a: str, b: str, **kw: Any) -> dict[str, Any]:
    return {"task": "hearsay", "model": "m", "a": a, "b": b, "status": "tested",
            "p_value": 0.5, "clustered_by": "prompt", **kw}  # fmt: skip


def test_an_exact_comparisons_pattern_count_is_not_taken_for_the_resamples() -> None:
    doc = {"comparisons": [_row("v1", "v2", exact=True, n_resamples=4)]}
    for by in ("slice", "class"):
        (table,) = sweep_slices(_Tracker(), "parent", doc, _Catalog(), by=by).tables
        assert table.n_resamples == 1000
        # 20 discordant rows in each group: Monte Carlo, p >= 1 / (R + 1) with R = 1000
        assert all(r.p_value is not None and r.p_value < 0.01 for r in table.rows)


def test_a_monte_carlo_comparison_gives_the_sweeps_resamples() -> None:
    doc = {"comparisons": [_row("v1", "v2", exact=True, n_resamples=4),
                           _row("v1", "v2", exact=False, n_resamples=2000)]}  # fmt: skip
    tables = sweep_slices(_Tracker(), "parent", doc, _Catalog(), by="slice").tables
    assert [t.n_resamples for t in tables] == [2000, 2000]
    # the parent's param wins
    tables = sweep_slices(_Tracker(), "p", doc, _Catalog(), by="slice", n_resamples=500).tables
    assert [t.n_resamples for t in tables] == [500, 500]


def test_a_sequential_comparison_is_named_as_not_split() -> None:
    doc = {"comparisons": [], "sequential": [_row("v1", "v2", p_value=None)]}
    found = sweep_slices(_Tracker(), "parent", doc, _Catalog(), by="slice", n_resamples=100)
    assert found.tables == ()
    (note,) = found.notes
    assert "v1 vs v2: a sequential comparison, not split" in note
