"""A rule-conclusion metric (an application trial's conclusions scored by the task's official
metric) gets the statistics of that metric: a rule-conclusion balanced accuracy is tested and
bounded exactly as balanced accuracy is (class-stratified), never by a generic fallback."""

from __future__ import annotations

import dataclasses

from experiments.analysis import compare
from experiments.analysis.sequential.betting import strata
from experiments.metrics import balanced_accuracy, rule_conclusion_metric
from experiments.trials.record import TrialRecord, parse_axes

N = 40


def _record(variant: str, k: int, metric: str) -> TrialRecord:
    # unbalanced classes: 30 Yes, 10 No, so stratified and unstratified methods differ
    answers = ["Yes" if i % 4 else "No" for i in range(N)]
    hits = [(i * 7 + k) % N < k for i in range(N)]
    gens = [a if h else ("No" if a == "Yes" else "Yes") for a, h in zip(answers, hits, strict=True)]
    return TrialRecord.of(
        task="hearsay", model="m", variant=variant, metric=metric, complete=True,
        indices=[str(i) for i in range(N)], answers=answers, generations=gens, correct=hits,
        score=balanced_accuracy(gens, answers), axes=parse_axes(variant),
    )  # fmt: skip


def test_rule_conclusion_comparison_is_the_official_metrics() -> None:
    rc = rule_conclusion_metric("balanced_accuracy")
    assert rc != "balanced_accuracy"
    plain = compare.pair(
        _record("x=A", 31, "balanced_accuracy"), _record("x=B", 22, "balanced_accuracy"),
        n_resamples=500,
    )  # fmt: skip
    ruled = compare.pair(_record("x=A", 31, rc), _record("x=B", 22, rc), n_resamples=500)
    assert ruled.metric == rc  # the table still says what was scored
    fields = ("p_value", "ci_low", "ci_high", "ci_method", "ci_a_low", "ci_b_high", "mde_80")
    for name in fields:
        assert getattr(ruled, name) == getattr(plain, name), name
    assert dataclasses.replace(ruled, metric="balanced_accuracy") == plain


def test_rule_conclusion_strata_are_balanced_accuracys() -> None:
    answers = ["Yes", "Yes", "Yes", "No"]
    cls, weights = strata(rule_conclusion_metric("balanced_accuracy"), answers)
    cls0, weights0 = strata("balanced_accuracy", answers)
    assert list(cls) == list(cls0) and list(weights) == list(weights0) == [0.5, 0.5]
