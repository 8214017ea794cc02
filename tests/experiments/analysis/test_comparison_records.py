"""The comparison records (`experiments.analysis.records`, issue 32 part 1): typed and frozen,
and `to_dict()` gives each kind of row exactly as the workbench wrote it before (the same keys,
in the same order, each optional group present in the same cases), so comparisons.json, .csv and
the MLflow metrics keep their bytes.

`PINNED` holds the rows the code before the records (commit 5439088, rows built as dicts) gave
for the scenarios below. To re-pin on purpose (a deliberate change of the rows), run this file
as a script with the code that should produce them on the path:

    PYTHONPATH=. python tests/experiments/analysis/test_comparison_records.py

It runs the same scenarios through either code (rows as dicts or as records)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from experiments.analysis import compare, stats
from experiments.sweeps.report import compare as sweep_compare
from experiments.sweeps.spec import NamedVariant, SweepSpec
from experiments.trials.record import TrialRecord, TrialStatus
from promptlib.variants import PromptVariant

PINNED = Path(__file__).resolve().parents[2] / "data" / "comparison_records.json"
FN = stats.metric_fn("accuracy")
N = 40


def _hits(seed: int, rate: float) -> list[bool]:
    return [((i * 7919 + seed * 104729) % 100) / 100 < rate for i in range(N)]


def _arm(model: str, task: str, variant: str, hits: list[bool] | None) -> TrialRecord:
    """A yes/no trial right where `hits` says (None: every row failed)."""
    y = ["Yes" if i % 2 else "No" for i in range(N)]
    idx = [str(i) for i in range(N)]
    hashes = [f"{task}-{i % 30}" for i in range(N)]  # 10 texts repeated: clusters
    if hits is None:
        return TrialRecord.of(
            variant, "accuracy", idx, y, [None] * N, None, status=TrialStatus.FAILED,
            n_errors=N, task=task, model=model, prompt_hashes=hashes,
        )  # fmt: skip
    gens = [t if h else {"Yes": "No", "No": "Yes"}[t] for t, h in zip(y, hits, strict=True)]
    return TrialRecord.of(
        variant, "accuracy", idx, y, gens, FN(y, gens), task=task, model=model,
        prompt_hashes=hashes,
    )  # fmt: skip


def _spec(comparisons: Any, correction: str, across: str) -> SweepSpec:
    return SweepSpec(
        path="s.yaml", name="s", description="", tasks=("hearsay", "abercrombie"), requires=(),
        models=("m1", "m2"), split="test", limit=None, sample_seed=0,
        variants=tuple(NamedVariant(v, PromptVariant()) for v in ("A", "B", "C")),
        comparisons=comparisons, n_resamples=200, correction=correction, scoring=None,
        across_tasks=across,
    )  # fmt: skip


def _arms(failed: tuple[str, str, str] | None = None) -> list[TrialRecord]:
    rates = {"A": 0.85, "B": 0.6, "C": 0.7}
    return [
        _arm(m, t, v, None if (m, t, v) == failed else _hits(s + 10 * j, rates[v]))
        for j, (m, t) in enumerate(
            [("m1", "hearsay"), ("m1", "abercrombie"), ("m2", "hearsay"), ("m2", "abercrombie")]
        )
        for s, v in enumerate(("A", "B", "C"))
    ]


def _dict(row: Any) -> dict[str, Any]:
    """A row as written: a record's `to_dict()` (a row of the code before: the dict itself)."""
    return row.to_dict() if hasattr(row, "to_dict") else dict(row)


def scenarios() -> dict[str, Any]:
    """Every kind of row, through the code that builds them for sweeps, imports and optimize."""
    out: dict[str, Any] = {}
    # all_pairs: tested pairs, a failed arm's untested pairs (the sweep incomplete: waiting),
    # a skipped variant's rows; Holm; the t test across tasks
    skipped = {"abercrombie": {"C": "needs a train split"}}
    arms = [a for a in _arms(("m2", "hearsay", "B")) if (a.task, a.variant) != ("abercrombie", "C")]
    table, across = sweep_compare(
        _spec("all_pairs", "holm", "t"),
        arms,
        None,
        skipped,
        final=False,  # type: ignore[arg-type]
    )
    out["pairs"] = {"comparisons": table, "across_tasks": across}
    # declared pairs, Benjamini-Hochberg, the Wilcoxon test across tasks, a finished sweep
    pairs = [("C", "A"), ("B", "C")]
    table, across = sweep_compare(_spec(pairs, "bh", "wilcoxon"), _arms(), None)  # type: ignore[arg-type]
    out["declared"] = {"comparisons": table, "across_tasks": across}
    # best vs worst: the range test, an untested one (a failed draw), Fisher across tasks
    table, across = sweep_compare(
        _spec("best_vs_worst", "holm", "permutation"),
        _arms(("m2", "abercrombie", "A")),
        None,  # type: ignore[arg-type]
    )
    out["best_vs_worst"] = {"comparisons": table, "across_tasks": across}
    # lone pairs (as optimize's best vs base): with intervals, without, and untested
    a, b, lost = _arms()[0], _arms()[1], _arm("m1", "hearsay", "C", None)
    out["lone"] = {
        "comparisons": [
            compare.pair(a, b, n_resamples=300),
            compare.pair(a, b, n_resamples=300, intervals=False),
            compare.pair(a, lost, n_resamples=300),
            compare.best_vs_worst(_arms()[:3], n_resamples=300, intervals=False),
        ],
        "across_tasks": [],
    }
    return {
        name: {k: [_dict(r) for r in rows] for k, rows in doc.items()} for name, doc in out.items()
    }


def _text(doc: Any) -> str:
    return json.dumps(doc, indent=1, default=str)


@pytest.fixture(scope="module")
def rows() -> dict[str, Any]:
    return scenarios()


@pytest.mark.parametrize("name", ["pairs", "declared", "best_vs_worst", "lone"])
def test_each_kind_of_row_is_written_as_before(rows: dict[str, Any], name: str) -> None:
    """Byte for byte as comparisons.json writes it (keys, their order, values)."""
    pinned = json.loads(PINNED.read_text())
    assert _text(rows[name]) == _text(pinned[name])


def test_the_pins_cover_every_kind_of_row() -> None:
    """Tested and untested pairs, skipped ones, range rows and untested range rows, corrected
    and recommended or not, lone pairs without intervals, and across-task rows of each test."""
    pinned = json.loads(PINNED.read_text())
    table = [r for doc in pinned.values() for r in doc["comparisons"]]
    status = [r["status"] for r in table]
    assert "tested" in status and any(x.startswith("skipped on this task") for x in status)
    assert any("rows failed" in x for x in status)
    assert any("k" in r for r in table) and any("draw_ci" not in r for r in table)
    assert any("p_holm" not in r for r in table) and any("recommendation" in r for r in table)
    assert any(r["a"] == "best" for r in table)  # an untested best vs worst
    tests = {r["test"].split(" ")[0] for doc in pinned.values() for r in doc["across_tasks"]}
    assert tests == {"paired", "Wilcoxon", "Fisher's"}


def test_a_stored_row_reads_back_to_the_same_dict(rows: dict[str, Any]) -> None:
    """`from_dict` then `to_dict` gives the stored row back, for every kind of row."""
    from experiments.analysis.records import AcrossTaskTest, Comparison

    for doc in rows.values():
        for r in doc["comparisons"]:
            assert list(Comparison.from_dict(r).to_dict().items()) == list(r.items())
        for r in doc["across_tasks"]:
            assert list(AcrossTaskTest.from_dict(r).to_dict().items()) == list(r.items())


def test_records_are_frozen_and_transformed_by_replace() -> None:
    from experiments.analysis.records import AcrossTaskTest, Comparison

    a, b = _arms()[:2]
    row = compare.pair(a, b, n_resamples=200, intervals=False)
    assert isinstance(row, Comparison)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.p_value = 0.0  # type: ignore[misc]
    (corrected,) = compare.correct([row], "bh")
    assert row.adjusted is None and "p_bh" not in row.to_dict()  # the input is unchanged
    assert corrected.p_corrected == corrected.to_dict()["p_bh"] == row.p_value
    (across,) = compare.across_tasks(
        [dataclasses.replace(corrected, model="m", task="t")], kind="pairs", test="t",
        all_tasks=["t", "u"],
    )  # fmt: skip
    assert isinstance(across, AcrossTaskTest) and across.missing_tasks == ["u"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        across.note = "x"  # type: ignore[misc]


if __name__ == "__main__":  # re-pin: see the module's docstring
    PINNED.write_text(_text(scenarios()) + "\n")
    print(f"wrote {PINNED}", file=sys.stderr)
