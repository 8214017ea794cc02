"""Review of the HTML report's per-slice tables (issue 34): no per-slice test of a pair
chosen after seeing the scores (best vs worst), and a row with a blank slice value is the
"(blank)" group, as `workbench report --by slice` has it, not a reason to drop the table."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from experiments.reports.html.build import Sources, build_report
from experiments.trials.record import Prediction, TrialRecord, TrialStatus
from promptlib.templates import fill

TASK, MODEL = "hearsay", "m"


@dataclass(frozen=True)
class _Prompt:
    instruction: str
    query: str = "Q: {{text}}\nA:"
    labels: tuple[str, ...] | None = ("Yes", "No")

    def render(self, example: Mapping[str, str]) -> str:
        return f"{self.instruction}\n\n" + fill(self.query, example)


def _record(variant: str, answers: Sequence[str], said: Sequence[str]) -> TrialRecord:
    rows = tuple(
        Prediction(index=str(i), prompt_hash=f"{variant}{i}", answer=gold, generation=out,
                   parsed=out, correct=out == gold)
        for i, (gold, out) in enumerate(zip(answers, said, strict=True))
    )  # fmt: skip
    return TrialRecord(
        task=TASK, model=MODEL, variant=variant, metric="balanced_accuracy",
        status=TrialStatus.COMPLETE, score=0.5, rows=rows, trial_id=f"t-{variant}",
        run_id=f"run-{variant}",
    )  # fmt: skip


def _build(recs: Sequence[TrialRecord], comparisons: Sequence[Any], slices: Sequence[str]) -> Any:
    data = {
        str(i): {"index": str(i), "text": f"row {i}", "answer": "Yes", "slice": s}
        for i, s in enumerate(slices)
    }
    prompts = {r.trial_id: _Prompt(f"Instruction of {r.variant}.") for r in recs}
    return build_report(
        kind="sweep", title="t", name="t", id="t", status="complete", records=recs,
        comparisons=comparisons, sources=Sources(prompts, {TASK: data}, {}), n_resamples=200,
        created="2026-01-01T00:00:00+00:00",
    ).to_dict()  # fmt: skip


def _random(n: int, seed: int, k: int) -> tuple[list[str], list[list[str]]]:
    rng = random.Random(seed)
    gold = [rng.choice(["Yes", "No"]) for _ in range(n)]
    return gold, [[rng.choice(["Yes", "No"]) for _ in range(n)] for _ in range(k)]


def test_best_vs_worst_gets_no_per_slice_test_and_says_why() -> None:
    n = 12
    gold, said = _random(n, 3, 3)
    recs = [_record(v, gold, s) for v, s in zip("xyz", said, strict=True)]
    row = {"task": TASK, "model": MODEL, "a": "x", "b": "z", "status": "tested", "k": 3,
           "p_value": 0.4}  # fmt: skip
    doc = _build(recs, [row], [("A", "B")[i % 2] for i in range(n)])
    (s,) = doc["samples"]
    assert s["slices"] == [] and s["classes"] == []
    assert any("post-selection" in x and "x vs z" in x for x in doc["notes"])


def test_a_blank_slice_value_is_its_own_group_not_a_dropped_table() -> None:
    n = 12
    gold, (sa, sb) = _random(n, 4, 2)
    recs = [_record("a", gold, sa), _record("b", gold, sb)]
    row = {"task": TASK, "model": MODEL, "a": "a", "b": "b", "status": "tested"}
    doc = _build(recs, [row], ["A", "B", ""] * 4)
    (s,) = doc["samples"]
    assert not any("no per-slice" in x for x in doc["notes"]), doc["notes"]
    (table,) = s["slices"]
    assert [(r["group"], r["n"]) for r in table["rows"]] == [("A", 4), ("B", 4), ("(blank)", 4)]


def test_a_sequential_pairs_tables_say_they_ignore_the_looks() -> None:
    n = 12
    gold, (sa, sb) = _random(n, 5, 2)
    recs = [_record("a", gold, sa), _record("b", gold, sb)]
    row = {"task": TASK, "model": MODEL, "a": "a", "b": "b", "status": "stopped"}
    data = {
        str(i): {"index": str(i), "text": f"row {i}", "answer": "Yes", "slice": "AB"[i % 2]}
        for i in range(n)
    }
    prompts = {r.trial_id: _Prompt(f"Instruction of {r.variant}.") for r in recs}
    doc = build_report(
        kind="sweep", title="t", name="t", id="t", status="complete", records=recs,
        comparisons=(), sequential=[row], sources=Sources(prompts, {TASK: data}, {}),
        n_resamples=200, created="2026-01-01T00:00:00+00:00",
    ).to_dict()  # fmt: skip
    (s,) = doc["samples"]
    assert s["slices"] and s["classes"]
    assert sum("do not account for its looks" in x for x in doc["notes"]) == 1
    fixed = _build(recs, [row], ["A", "B"] * 6)
    assert not any("looks" in x for x in fixed["notes"])
