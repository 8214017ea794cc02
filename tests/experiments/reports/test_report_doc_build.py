"""`reports.html.build`: a sweep's trials -> the report's disagreeing rows, counts, inputs and
diffs, the same document whatever order the trials and rows come in."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from experiments.reports.html.build import Sources, build_report
from experiments.reports.html.model import OUTPUT_CHARS, ROWS_CAP
from experiments.trials.record import Prediction, TrialRecord, TrialStatus
from promptlib.templates import fill

TASK, MODEL = "hearsay", "m"
CREATED = "2026-01-01T00:00:00+00:00"


@dataclass(frozen=True)
class FakePrompt:
    """A compiled prompt: an instruction and a query template."""

    instruction: str
    query: str = "Q: {{text}}\nA:"
    labels: tuple[str, ...] | None = ("Yes", "No")

    def render(self, example: Mapping[str, str]) -> str:
        return f"{self.instruction}\n\n" + fill(self.query, example)


def _record(variant: str, answers: Sequence[str], said: Sequence[str | None], **kw: Any) -> Any:
    rows = tuple(
        Prediction(
            index=str(i),
            prompt_hash=f"{variant}{i}",
            answer=gold,
            generation=out,
            parsed=out,
            correct=None if out is None else out == gold,
            error="boom" if out is None else None,
        )
        for i, (gold, out) in enumerate(zip(answers, said, strict=True))
    )
    return TrialRecord(
        task=kw.get("task", TASK), model=MODEL, variant=variant, metric="balanced_accuracy",
        status=TrialStatus.COMPLETE if None not in said else TrialStatus.INCOMPLETE,
        score=0.5, rows=rows, trial_id=f"t-{variant}", run_id=f"run-{variant}",
    )  # fmt: skip


def _data(n: int, slices: bool = True) -> dict[str, dict[str, Any]]:
    return {
        str(i): {"index": str(i), "text": f"row {i} says something", "answer": "Yes"}
        | ({"slice": ("A", "B", "C")[i % 3]} if slices else {})
        for i in range(n)
    }


def _sources(records: Sequence[Any], n: int, slices: bool = True) -> Sources:
    prompts = {r.trial_id: FakePrompt(f"Instruction of {r.variant}.") for r in records}
    return Sources(prompts, {TASK: _data(n, slices)}, {})


def _pair(a: str, b: str, **kw: Any) -> dict[str, Any]:
    return {"task": TASK, "model": MODEL, "a": a, "b": b, "status": "tested", **kw}


def _random(n: int, seed: int) -> tuple[list[str], list[str], list[str]]:
    rng = random.Random(seed)
    gold = [rng.choice(["Yes", "No"]) for _ in range(n)]
    return (
        gold,
        [rng.choice(["Yes", "No"]) for _ in range(n)],
        [rng.choice(["Yes", "No"]) for _ in range(n)],
    )


def _build(records: Sequence[Any], comparisons: Sequence[Any], n: int, **kw: Any) -> Any:
    kw.setdefault("slice_tables", None)
    kw.setdefault("created", CREATED)
    return build_report(
        kind="sweep", title="Sweep t", name="t", id="x" * 64, status="complete",
        records=records, comparisons=comparisons, sources=_sources(records, n), **kw,
    )  # fmt: skip


def test_every_disagreeing_row_is_there_with_its_outcome_and_the_counts() -> None:
    n = 60
    gold, sa, sb = _random(n, 1)
    a, b = _record("a", gold, sa), _record("b", gold, sb)
    doc = _build([a, b], [_pair("a", "b")], n).to_dict()
    (s,) = doc["samples"]
    want = [str(i) for i in range(n) if (sa[i] == gold[i]) != (sb[i] == gold[i])]
    assert [r["index"] for r in s["rows"]] == want
    assert s["n_rows"] == n and s["n_disagree"] == len(want) == s["n_shown"]
    right_a = sum(sa[i] == gold[i] and sb[i] != gold[i] for i in range(n))
    right_b = sum(sb[i] == gold[i] and sa[i] != gold[i] for i in range(n))
    assert s["counts"] == {"a_right": right_a, "b_right": right_b, "both_wrong": 0}
    for r in s["rows"]:
        i = int(r["index"])
        assert r["label"] == gold[i] and r["a"]["output"] == sa[i] and r["b"]["parsed"] == sb[i]
        assert r["outcome"] == ("a_right" if sa[i] == gold[i] else "b_right")
        assert r["slice"] == ("A", "B", "C")[i % 3]
    assert s["a_run"] == "run-a" and s["b_run"] == "run-b" and s["cap"] == ROWS_CAP
    # each shown row's input once, under its task
    assert list(doc["inputs"]) == [TASK]
    assert list(doc["inputs"][TASK]) == want
    assert doc["inputs"][TASK][want[0]] == f"row {want[0]} says something"


def test_different_wrong_answers_are_a_disagreement_both_wrong() -> None:
    a = _record("a", ["x", "x"], ["y", "x"])
    b = _record("b", ["x", "x"], ["z", "x"])
    (s,) = _build([a, b], [_pair("a", "b")], 2).to_dict()["samples"]
    assert [(r["index"], r["outcome"]) for r in s["rows"]] == [("0", "both_wrong")]
    assert s["counts"] == {"a_right": 0, "b_right": 0, "both_wrong": 1}


def test_a_row_one_arm_did_not_answer_is_not_compared() -> None:
    a = _record("a", ["Yes"] * 3, [None, "Yes", "No"])
    b = _record("b", ["Yes"] * 3, ["No", "No", "No"])
    (s,) = _build([a, b], [_pair("a", "b")], 3).to_dict()["samples"]
    assert s["n_rows"] == 2 and [r["index"] for r in s["rows"]] == ["1"]


def test_rows_are_capped_in_index_order_and_the_cap_is_said() -> None:
    n = 30
    a = _record("a", ["Yes"] * n, ["Yes"] * n)
    b = _record("b", ["Yes"] * n, ["No"] * n)
    doc = _build([a, b], [_pair("a", "b")], n, cap=12).to_dict()
    (s,) = doc["samples"]
    assert s["n_disagree"] == 30 and s["n_shown"] == 12 and s["cap"] == 12
    assert [r["index"] for r in s["rows"]] == [str(i) for i in range(12)]  # 2 before 10
    assert s["counts"]["a_right"] == 30  # over all the rows, not only those shown
    assert any("capped at 12" in x for x in doc["notes"])
    assert any("12 of its 30 disagreeing rows shown" in x for x in doc["notes"])
    assert len(doc["inputs"][TASK]) == 12


def test_the_pair_diff_is_stored_once_and_masks_the_row() -> None:
    n = 20
    a = _record("a", ["Yes"] * n, ["Yes"] * n)
    b = _record("b", ["Yes"] * n, ["No"] * n)
    (s,) = _build([a, b], [_pair("a", "b")], n).to_dict()["samples"]
    assert len(s["diffs"]) == 1 and {r["diff"] for r in s["rows"]} == {0}
    (diff,) = s["diffs"]
    assert ["-", "a."] in diff and ["+", "b."] in diff
    assert not any("says something" in t for _, t in diff)
    assert any("⟨row input⟩" in t for op, t in diff if op == "=")


def test_long_outputs_are_cut_saying_how_much() -> None:
    long = "Yes" + "!" * (OUTPUT_CHARS + 50)
    a = _record("a", ["Yes"], ["Yes"])
    b = _record("b", ["Yes"], [long])
    (s,) = _build([a, b], [_pair("a", "b")], 1).to_dict()["samples"]
    out = s["rows"][0]["b"]["output"]
    assert out.startswith("Yes!") and out.endswith("… (53 more characters)")
    assert len(out) == OUTPUT_CHARS + len("… (53 more characters)")


def test_best_vs_worst_names_its_arms_and_an_untested_row_has_no_samples() -> None:
    n = 10
    gold, sa, sb = _random(n, 2)
    recs = [_record("a", gold, sa), _record("b", gold, sb), _record("c", gold, gold)]
    rows = [
        _pair("c", "a", k=3),  # best vs worst: the variants it names
        _pair("best", "worst", status="untested (an arm failed)"),
    ]
    doc = _build(recs, rows, n).to_dict()
    assert [(s["a"], s["b"], s["key"]) for s in doc["samples"]] == [("c", "a", "c1")]
    assert doc["comparisons"] == rows  # the comparisons document's rows as they are


def test_any_order_of_trials_and_rows_gives_the_same_document() -> None:
    n = 40
    gold, sa, sb = _random(n, 3)
    _, sc, _ = _random(n, 4)
    recs = [_record("a", gold, sa), _record("b", gold, sb), _record("c", gold, sc)]
    pairs = [_pair("a", "b"), _pair("a", "c"), _pair("b", "c")]
    first = json.dumps(_build(recs, pairs, n).to_dict())
    rng = random.Random(5)
    for _ in range(3):
        shuffled = []
        for r in rng.sample(recs, len(recs)):
            rows = list(r.rows)
            rng.shuffle(rows)
            shuffled.append(replace(r, rows=tuple(rows)))
        assert json.dumps(_build(shuffled, pairs, n).to_dict()) == first
    # and apart from `created`, the clock does not enter it
    later = _build(recs, pairs, n, created=None).to_dict()
    assert json.dumps({**later, "created": CREATED}) == first


def test_slice_and_class_tables_are_asked_for_with_the_sweeps_test() -> None:
    calls: list[dict[str, Any]] = []

    @dataclass
    class Table:
        by: str

        def to_dict(self) -> dict[str, Any]:
            return {"by": self.by}

    def tables(a: Any, b: Any, groups: Mapping[str, str], **kw: Any) -> Table:
        calls.append({"a": a.variant, "b": b.variant, "groups": dict(groups), **kw})
        return Table(kw["by"])

    n = 9
    gold, sa, sb = _random(n, 6)
    recs = [_record("a", gold, sa), _record("b", gold, sb)]
    (s,) = _build(recs, [_pair("a", "b")], n, slice_tables=tables, n_resamples=123,
                  cluster_by="rows").to_dict()["samples"]  # fmt: skip
    assert s["slices"] == [{"by": "slice"}] and s["classes"] == [{"by": "class"}]
    by_slice, by_class = calls
    assert by_slice["groups"] == {str(i): ("A", "B", "C")[i % 3] for i in range(n)}
    assert by_slice["column"] == "slice" and by_slice["n_resamples"] == 123
    assert by_slice["cluster_by"] == "rows" and len(by_slice["peers"]) == 2
    assert by_class["groups"] == {str(i): gold[i] for i in range(n)}
    assert by_class["labels"] == ["Yes", "No"]


def test_a_task_without_a_slice_column_has_no_slice_table_nor_slice_values() -> None:
    n = 6
    gold, sa, sb = _random(n, 7)
    recs = [_record("a", gold, sa), _record("b", gold, sb)]
    asked: list[str] = []

    def tables(a: Any, b: Any, groups: Any, **kw: Any) -> Any:
        asked.append(kw["by"])
        raise ValueError("no table")

    doc = build_report(
        kind="sweep", title="t", name="t", id="t", status="complete", records=recs,
        comparisons=[_pair("a", "b")], sources=_sources(recs, n, slices=False),
        slice_tables=tables, created=CREATED,
    ).to_dict()  # fmt: skip
    (s,) = doc["samples"]
    assert asked == ["class"] and s["slices"] == [] and s["classes"] == []
    assert all(r["slice"] is None for r in s["rows"])
    assert any("no per-slice/per-class table (ValueError: no table)" in x for x in doc["notes"])


def test_the_real_slice_table_fills_the_report() -> None:
    n = 14
    gold, sa, sb = _random(n, 8)
    recs = [_record("a", gold, sa), _record("b", gold, sb)]
    doc = build_report(
        kind="sweep", title="t", name="t", id="t", status="complete", records=recs,
        comparisons=[_pair("a", "b")], sources=_sources(recs, n), n_resamples=200,
        created=CREATED,
    ).to_dict()  # fmt: skip
    (s,) = doc["samples"]
    (table,) = s["slices"]
    assert table["by"] == "slice" and table["column"] == "slice"
    assert sorted(r["group"] for r in table["rows"]) == ["A", "B", "C"]
    assert sum(r["n"] for r in table["rows"]) == n
    (classes,) = s["classes"]
    assert sorted(r["group"] for r in classes["rows"]) == sorted(set(gold))


def test_slice_tables_stop_at_their_cap_and_say_so() -> None:
    asked: list[tuple[str, str]] = []

    @dataclass
    class Table:
        def to_dict(self) -> dict[str, Any]:
            return {}

    def tables(a: Any, b: Any, groups: Any, **kw: Any) -> Table:
        asked.append((a.variant, b.variant))
        return Table()

    n = 6
    gold, sa, sb = _random(n, 9)
    recs = [_record("a", gold, sa), _record("b", gold, sb), _record("c", gold, gold)]
    pairs = [_pair("a", "b"), _pair("a", "c"), _pair("b", "c")]
    doc = _build(recs, pairs, n, slice_tables=tables, tables_cap=2).to_dict()
    assert sorted(set(asked)) == [("a", "b"), ("a", "c")]
    assert [bool(s["slices"]) for s in doc["samples"]] == [True, True, False]
    assert any("first 2 of the 3 comparisons" in x for x in doc["notes"])
