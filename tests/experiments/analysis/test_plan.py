"""One comparison plan (issue 32, part 2): a sweep and an import describe what they compare
as an `analysis.plan.ComparisonPlan` and run it with the same code; an import no longer
dresses up as a sweep."""

from __future__ import annotations

import dataclasses

import pytest

from experiments.analysis.plan import ComparisonPlan, plan_sensitivity, run_plan
from experiments.imports import verdict
from experiments.metrics import balanced_accuracy
from experiments.sweeps import report
from experiments.sweeps.spec import NamedVariant, SweepSpec
from experiments.trials.record import TrialRecord, parse_axes
from promptlib.variants import PromptVariant

N = 30
# rows each variant gets right, per task
RIGHT = {
    "hearsay": {"x=B": 24, "x=A": 15, "x=C": 19},
    "abercrombie": {"x=B": 12, "x=A": 22, "x=C": 18},
}


def _record(task: str, variant: str) -> TrialRecord:
    k = RIGHT[task][variant]
    answers = ["Yes" if i % 2 == 0 else "No" for i in range(N)]
    hits = [(i * 7 + ord(variant[-1])) % N < k for i in range(N)]
    gens = [a if h else ("No" if a == "Yes" else "Yes") for a, h in zip(answers, hits, strict=True)]
    return TrialRecord.of(
        task=task, model="m", variant=variant, metric="balanced_accuracy", complete=True,
        indices=[str(i) for i in range(N)], answers=answers, generations=gens, correct=hits,
        score=balanced_accuracy(gens, answers), axes=parse_axes(variant),
    )  # fmt: skip


# listed B first: a sweep keeps its spec's order, an import sorts the names
RECORDS = [_record(t, v) for t in RIGHT for v in ("x=B", "x=A", "x=C")]


def _spec(comparisons: str | tuple[tuple[str, str], ...]) -> SweepSpec:
    return SweepSpec(
        path="ablations/plan.yaml", name="plan", description="", tasks=tuple(RIGHT),
        requires=(), models=("m",), split="test", limit=None, sample_seed=0,
        variants=tuple(NamedVariant(v, PromptVariant()) for v in ("x=A", "x=B", "x=C")),
        comparisons=comparisons, n_resamples=200, correction="holm", scoring=None,
        across_tasks="t",
    )  # fmt: skip


def test_a_sweep_and_an_import_of_the_same_trials_build_the_same_plan() -> None:
    spec = _spec("all_pairs")
    imported = verdict.plan_of("plan", RECORDS, "all_pairs", "holm", "t", 200, "prompt")
    assert imported == report.plan_of(spec)
    assert imported.variants == ("x=A", "x=B", "x=C")  # name order, not the records' order
    assert (imported.kind, imported.pairs, imported.by_column) == ("all_pairs", (), None)


def test_the_sweep_compares_by_running_its_plan() -> None:
    spec = _spec((("x=C", "x=A"), ("x=B", "x=A")))
    table, across = report.compare(spec, RECORDS, catalog=None)  # type: ignore[arg-type]
    assert (table, across) == run_plan(report.plan_of(spec), RECORDS)
    # declared pairs as written, per task, corrected across the plan's 4 comparisons
    assert [(r["task"], r["a"], r["b"]) for r in table] == [
        ("hearsay", "x=C", "x=A"), ("hearsay", "x=B", "x=A"),
        ("abercrombie", "x=C", "x=A"), ("abercrombie", "x=B", "x=A"),
    ]  # fmt: skip
    assert {r["family_size"] for r in table} == {4}
    assert [(r["a"], r["b"], r["tasks"]) for r in across] == [
        ("x=B", "x=A", ["hearsay", "abercrombie"]), ("x=C", "x=A", ["hearsay", "abercrombie"])
    ]  # fmt: skip
    hearsay = table[1]
    assert hearsay["score_a"] - hearsay["score_b"] == pytest.approx(hearsay["statistic"])


def test_a_skipped_arm_is_listed_not_tested() -> None:
    plan = report.plan_of(_spec("all_pairs"))
    ran = [r for r in RECORDS if not (r.task == "hearsay" and r.variant == "x=C")]
    table, _ = run_plan(plan, ran, skipped={"hearsay": {"x=C": "no such prompt file"}})
    statuses = {(r["task"], r["a"], r["b"]): r["status"] for r in table}
    assert statuses[("hearsay", "x=A", "x=B")] == "tested"
    assert statuses[("hearsay", "x=A", "x=C")] == "skipped on this task: x=C: no such prompt file"
    assert statuses[("abercrombie", "x=A", "x=C")] == "tested"
    assert table[1]["p_value"] is None


def test_best_vs_worst_is_one_range_test_per_task() -> None:
    plan = dataclasses.replace(report.plan_of(_spec("best_vs_worst")), across_tasks="permutation")
    table, across = run_plan(plan, RECORDS)
    # the best and the worst draw of each task, chosen after the scores: the range test
    assert [(r["task"], r["a"], r["b"]) for r in table] == [
        ("hearsay", "x=B", "x=A"), ("abercrombie", "x=A", "x=B")
    ]  # fmt: skip
    assert {r["test"] for r in table} == {
        "range permutation test (per-row permutation of the k variants' predictions)"
    }
    assert across[0]["test"] == "Fisher's combination of per-task range permutation tests"


def test_the_sensitivity_of_a_plan_of_one_variant_says_why_there_is_none() -> None:
    plan = ComparisonPlan("one", ("hearsay",), ("m",), ("x=A",), "all_pairs", 200, "holm", "t")
    assert plan_sensitivity(plan, [_record("hearsay", "x=A")]) == {
        "per_task": [], "notes": ["one variant: nothing to compare"]
    }  # fmt: skip
    two = dataclasses.replace(plan, variants=("x=A", "x=B"))
    sens = plan_sensitivity(two, [_record("hearsay", "x=A"), _record("hearsay", "x=B")])
    assert [(r["task"], r["n_variants"]) for r in sens["per_task"]] == [("hearsay", 2)]
