"""A sequential comparison's looks with the interval at each (issue 34, point 1): recomputed
from the arms' records, the last look is the row's interval exactly, for a pair under both
methods and for an elimination; the records' order does not matter."""

from __future__ import annotations

import dataclasses
import itertools
import random
from pathlib import Path
from typing import Any

import pytest

from experiments.sweeps.looks import (
    ANYTIME_NOTE,
    ELIMINATION_NOTE,
    EQUIVALENT_NOTE,
    GROUP_NOTE,
    looks_of,
    sequential_section,
)
from experiments.sweeps.sequential import MemoryCache, run_sequential, sequential_rows
from experiments.sweeps.sequential_result import SequentialComparison
from experiments.testing.sequential_sim import MODEL, SetAccuracy, SetAccuracyLM, prepare
from experiments.trials.record import TrialRecord
from experiments.trials.run import run_trial
from promptlib import Catalog

SPEC = """
name: looks
tasks: [cuad_audit_rights]
limit: 200
fixed: {{demos: none}}
axes: {{register: [{arms}]}}
comparisons: {comparisons}
design: sequential
sequential: {{batch: 10{more}}}
"""
PAIR = "[[register=plain, register=technical]]"


def _run(
    tmp_path: Path, catalog: Catalog, effects: dict[str, float], *, arms: str = "plain, technical",
    comparisons: str = PAIR, more: str = "", seed: int = 1,
) -> tuple[list[SequentialComparison], list[TrialRecord]]:  # fmt: skip
    """The loop as the driver runs it, then each arm's trial on its prefix from the loop's
    cache (the records the driver's `_report` gets)."""
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(arms=arms, comparisons=comparisons, more=more))
    prep = prepare(path, catalog)
    assert prep.spec.sequential is not None
    lm = SetAccuracyLM(SetAccuracy(prep.prompts, effects, prep.labels, seed))
    cache = MemoryCache()
    run = run_sequential(
        prep.spec.sequential, prep.spec.comparisons, prep.plan, prep.resolved,
        lms={MODEL: lm}, catalog=catalog, cache=cache,
    )  # fmt: skip
    records = []
    for t, rt in zip(run.plan, run.resolved, strict=True):
        result = run_trial(rt, catalog, lm, cache=cache)  # type: ignore[arg-type]
        records.append(TrialRecord.from_result(result, variant=t.variant.name))
    return sequential_rows(run), records


def _check_last_look(section: list[dict[str, Any]]) -> None:
    for entry in section:
        row, looks = entry["row"], entry["looks"]
        assert looks, entry["note"]
        assert [x["n"] for x in looks] == [n for n in row["looks"] if n <= row["n"]]
        assert all(x["n"] < y["n"] for x, y in itertools.pairwise(looks))
        last = looks[-1]
        assert last["n"] == row["n"]
        assert (last["estimate"], last["low"], last["high"]) == (
            row["estimate"], row["ci_low"], row["ci_high"],
        )  # fmt: skip


@pytest.mark.data
@pytest.mark.parametrize(("more", "note"), [("", ANYTIME_NOTE), (", method: group", GROUP_NOTE)])
def test_a_pairs_last_look_is_its_interval(
    tmp_path: Path, catalog: Catalog, more: str, note: str
) -> None:
    rows, records = _run(tmp_path, catalog, {"register=plain": 0.3}, more=more)
    section = sequential_section(rows, records)
    assert len(section) == 1 and section[0]["note"].startswith(note)
    assert section[0]["row"]["decision"] == "A"  # stopped early: the looks end at the stop
    assert section[0]["row"]["n"] < 200
    _check_last_look(section)
    looks = section[0]["looks"]
    if not more:  # the anytime sequence is intersected over the looks: it only narrows
        assert all(
            x["low"] <= y["low"] and x["high"] >= y["high"] for x, y in itertools.pairwise(looks)
        )


@pytest.mark.data
def test_an_undecided_pair_runs_to_the_budget(tmp_path: Path, catalog: Catalog) -> None:
    rows, records = _run(tmp_path, catalog, {}, more=", max_rows: 60")
    section = sequential_section(rows, records)
    assert section[0]["row"]["decision"] == "undecided"
    assert [x["n"] for x in section[0]["looks"]] == [10, 20, 30, 40, 50, 60]
    _check_last_look(section)


@pytest.mark.data
@pytest.mark.parametrize("more", ["", ", method: group"])
def test_an_eliminations_looks_are_its_best_vs_worst_pairs(
    tmp_path: Path, catalog: Catalog, more: str
) -> None:
    # the best arm is the last: the pair's sequence runs as (worst - best) and is turned
    rows, records = _run(
        tmp_path, catalog, {"register=technical": 0.35, "register=plain": 0.1},
        arms="plain, default, technical", comparisons="best_vs_worst", more=more,
    )  # fmt: skip
    section = sequential_section(rows, records)
    row = section[0]["row"]
    assert row["a"] == "register=technical"
    assert list(row["rows_per_arm"]).index(row["a"]) > list(row["rows_per_arm"]).index(row["b"])
    assert section[0]["note"].startswith(ELIMINATION_NOTE)
    _check_last_look(section)


@pytest.mark.data
def test_the_records_order_changes_nothing(tmp_path: Path, catalog: Catalog) -> None:
    rows, records = _run(tmp_path, catalog, {"register=plain": 0.3})
    expected = sequential_section(rows, records)
    rng = random.Random(4)
    for _ in range(3):
        shuffled = [
            dataclasses.replace(r, rows=tuple(rng.sample(r.rows, len(r.rows)))) for r in records
        ]
        rng.shuffle(shuffled)
        assert sequential_section(rows, shuffled) == expected


@pytest.mark.data
def test_without_the_planned_rows_or_an_arm_no_looks_and_a_note(
    tmp_path: Path, catalog: Catalog
) -> None:
    rows, records = _run(tmp_path, catalog, {"register=plain": 0.3})
    bare = dataclasses.replace(rows[0], population=None)
    assert looks_of(bare, records[0], records[1]) == ()
    assert looks_of(rows[0], records[0], None) == ()
    cut = dataclasses.replace(records[0], rows=records[0].rows[:5])  # a look's rows missing
    assert looks_of(rows[0], cut, records[1]) == ()
    section = sequential_section([bare], records)
    assert section[0]["looks"] == [] and "could not be recomputed" in section[0]["note"]
    # the document's row is unchanged by the population it carries
    assert bare.to_dict() == rows[0].to_dict() and bare == rows[0]


@pytest.mark.data
def test_an_equivalent_group_verdicts_last_look_is_its_one_sided_interval(
    tmp_path: Path, catalog: Catalog
) -> None:
    rows, records = _run(tmp_path, catalog, {}, more=", method: group, delta: 0.3")
    section = sequential_section(rows, records)
    assert section[0]["row"]["decision"] == "equivalent"
    assert section[0]["note"] == GROUP_NOTE + EQUIVALENT_NOTE
    _check_last_look(section)
