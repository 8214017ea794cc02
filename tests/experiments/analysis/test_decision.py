"""Decision lines (issue 31, point 2): every comparison ends with what to do, in a line that
never says more than the table does, and never points the other way."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments import output
from experiments.analysis import compare, decision, stats
from experiments.analysis.decision import for_across, for_pair, for_sequential
from experiments.analysis.records import AcrossTaskTest, Comparison
from experiments.tracking import comparisons_csv
from experiments.trials.record import TrialRecord

FN = stats.metric_fn("accuracy")


def _arms(hits_a: list[bool], hits_b: list[bool]) -> tuple[TrialRecord, TrialRecord]:
    """Two arms of a yes/no task on the same rows, right where the hits say."""
    y = ["Yes" if i % 2 else "No" for i in range(len(hits_a))]
    flip = {"Yes": "No", "No": "Yes"}
    idx = [str(i) for i in range(len(y))]
    out = []
    for name, hits in (("A", hits_a), ("B", hits_b)):
        gens = [t if h else flip[t] for t, h in zip(y, hits, strict=True)]
        out.append(TrialRecord.of(name, "accuracy", idx, y, gens, FN(y, gens)))
    return out[0], out[1]


def C(**row: Any) -> Comparison:
    """A comparison row with the given fields (the rest None, as a stored row's missing keys)."""
    return Comparison.from_dict(row)


def X(**row: Any) -> AcrossTaskTest:
    """An across-task row with the given fields."""
    return AcrossTaskTest.from_dict(row)


def _table(hits_a: list[bool], hits_b: list[bool]) -> list[Comparison]:
    """One tested comparison as a sweep's table holds it: corrected and recommended."""
    row = replace(compare.pair(*_arms(hits_a, hits_b), n_resamples=500), model="m", task="hearsay")
    table, _ = decision.annotate(compare.correct([row], "holm"), [], "holm")
    return table


def _rec(row: Comparison | AcrossTaskTest) -> Any:
    assert row.recommendation is not None
    return row.recommendation


def _diff_in_table(table: list[Comparison]) -> str:
    """The diff column (headed 'A − B') of the printed comparison table (its one data row)."""
    head, line, *_ = output.comparison_table([r.to_dict() for r in table]).splitlines()
    start = head.index(" A − B ") - 1  # 'A − B' is right-aligned in a column of 7
    return line[start : start + 7].strip()


def _hits(n: int, rate: float, seed: int) -> list[bool]:
    rng = np.random.default_rng(seed)
    return [bool(x) for x in rng.random(n) < rate]


# ---- the three outcomes of a pair ----------------------------------------------------------
def test_a_significant_win_for_b_says_use_b_with_the_tables_sign() -> None:
    table = _table([i % 3 == 0 for i in range(90)], [i % 9 != 0 for i in range(90)])
    row = table[0]
    assert row.statistic < 0 and row.p_corrected < 0.05
    rec = _rec(row)
    assert rec.action == "use" and rec.choice == "B"
    shown = _diff_in_table(table)
    assert shown.startswith("-") and f"diff A - B {shown}" in rec.line
    assert rec.line.startswith("hearsay (m): use B over A (")
    assert f"p corr {row.p_corrected:.4f} < 0.05, Holm" in rec.line


def test_a_significant_win_for_a_says_use_a() -> None:
    table = _table([i % 9 != 0 for i in range(90)], [i % 3 == 0 for i in range(90)])
    rec = _rec(table[0])
    assert rec.action == "use" and rec.choice == "A"
    assert rec.line.startswith("hearsay (m): use A over B (diff A - B +")
    assert f"diff A - B {_diff_in_table(table)}" in rec.line


def test_no_significant_difference_is_no_decision_with_n_and_the_mde() -> None:
    a = [i % 4 != 0 for i in range(60)]
    b = [i % 4 != 1 for i in range(60)]  # the same accuracy, other rows wrong
    table = _table(a, b)
    row, rec = table[0], _rec(table[0])
    assert row.p_corrected >= 0.05
    assert rec.action == "undecided" and rec.choice is None
    assert rec.line.startswith("hearsay (m): no decision between A and B (diff A - B +0.000")
    assert f"n 60, MDE80 {row.mde_80:.3f}" in rec.line
    assert "differences smaller than that would often be missed" in rec.line
    assert "use" not in rec.line.split("(")[0]


def test_a_significant_raw_p_that_the_correction_lifts_is_not_called() -> None:
    """The call is made on the corrected p: p 0.01 among many tests is not a decision."""
    row = {"task": "t", "model": "m", "a": "A", "b": "B", "statistic": 0.1, "p_value": 0.01,
           "p_corrected": 0.2, "correction": "Holm", "ci_low": 0.02, "ci_high": 0.18,
           "n": 80, "mde_80": 0.15, "mde_unreliable": True}  # fmt: skip
    rec = for_pair(C(**row))
    assert rec.action == "undecided" and "p corr 0.2000 >= 0.05" in rec.line
    assert "MDE80 0.150, flagged unreliable" in rec.line


def _lost(name: str = "C", n: int = 10) -> TrialRecord:
    """An arm whose every row failed: its comparisons are not tested."""
    y, idx = ["Yes"] * n, [str(i) for i in range(n)]
    return TrialRecord.of(name, "accuracy", idx, y, [None] * n, None, status="failed", n_errors=n)


def test_an_untested_comparison_says_why() -> None:
    a, _ = _arms([True] * 10, [False] * 10)
    row = replace(compare.pair(a, _lost(), n_resamples=100), task="t", model="m")
    rec = for_pair(row)
    assert rec.action == "undecided" and rec.choice is None
    assert rec.line == f"t (m): no decision between A and C: not tested ({row.status})"


def test_best_vs_worst_names_the_best_draw_and_what_was_not_tested() -> None:
    row = {"task": "t", "model": "m", "a": "seed=1", "b": "seed=3", "k": 5, "statistic": 0.12,
           "p_value": 0.001, "p_corrected": 0.003, "correction": "Holm", "n": 95}  # fmt: skip
    rec = for_pair(C(**row))
    assert rec.action == "use" and rec.choice == "seed=1"
    assert "use seed=1 over seed=3, the worst of 5 variants" in rec.line
    assert "not tested against the other 3" in rec.line
    assert for_pair(C(**{**row, "p_corrected": 0.2})).action == "undecided"


# ---- the property: never against the table ------------------------------------------------
ROWS = st.fixed_dictionaries(
    {
        "statistic": st.floats(-1, 1, allow_nan=False),
        "p_value": st.floats(0, 1, allow_nan=False),
        "lift": st.floats(1, 20, allow_nan=False),
        "half": st.floats(0, 0.5, allow_nan=False),
        "mde_80": st.one_of(st.none(), st.floats(0.001, 1)),
    }
)


@settings(max_examples=400, deadline=None)
@given(ROWS)
def test_the_call_never_contradicts_the_table(x: dict[str, Any]) -> None:
    d = x["statistic"]
    row = {"task": "t", "model": "m", "a": "va", "b": "vb", "status": "tested", "statistic": d,
           "p_value": x["p_value"], "p_corrected": min(1.0, x["p_value"] * x["lift"]),
           "correction": "Holm", "ci_low": d - x["half"], "ci_high": d + x["half"], "n": 50,
           "mde_80": x["mde_80"], "score_a": 0.5, "score_b": 0.5 - d}  # fmt: skip
    rec = for_pair(C(**row))
    table_diff = f"{d:+.3f}"  # the table prints diff as `{statistic:>+7.3f}`
    assert f"diff A - B {table_diff}" in rec.line
    if rec.action == "use":
        assert row["p_corrected"] < decision.ALPHA
        assert (rec.choice == "va") == (d > 0) and (rec.choice == "vb") == (d < 0)
        loser = "vb" if rec.choice == "va" else "va"
        assert re.search(rf"use {rec.choice} over {loser} ", rec.line)
    else:
        assert rec.action == "undecided" and rec.choice is None
        assert row["p_corrected"] >= decision.ALPHA or d == 0
        assert "no decision" in rec.line


@pytest.mark.parametrize("seed", range(6))
def test_real_comparisons_are_called_the_tables_way(seed: int) -> None:
    """Random arms through the comparison itself (test, interval, MDE, correction)."""
    rng = np.random.default_rng(seed)
    rates = rng.uniform(0.3, 0.95, size=2)
    table = _table(_hits(50, rates[0], seed), _hits(50, rates[1], seed + 100))
    row, rec = table[0], _rec(table[0])
    assert row.statistic == pytest.approx(row.score_a - row.score_b)
    assert f"diff A - B {_diff_in_table(table)}" in rec.line
    if rec.action == "use":
        assert (rec.choice == "A") == (row.statistic > 0) and row.p_corrected < 0.05
    else:
        assert row.p_corrected >= 0.05


# ---- sequential, across tasks -----------------------------------------------------------------
SEQ = {"model": "m", "task": "t", "a": "v1", "b": "v2", "estimate": -0.3, "ci_low": -0.5,
       "ci_high": -0.1, "n": 200, "budget": 1000, "alpha": 0.025, "delta": 0.05,
       "status": "decided"}  # fmt: skip


def test_a_sequential_line_is_its_own_decision() -> None:
    b_wins = for_sequential({**SEQ, "decision": "B"})
    assert (b_wins.action, b_wins.choice) == ("use", "v2")
    assert b_wins.line == (
        "t (m): use v2 over v1 (diff A - B -0.300, interval [-0.500, -0.100], level 0.025, "
        "200 rows)"
    )
    assert for_sequential({**SEQ, "decision": "A", "estimate": 0.3}).choice == "v1"
    eq = for_sequential({**SEQ, "decision": "equivalent", "ci_low": -0.04, "ci_high": 0.03})
    assert eq.action == "equivalent" and "equivalent within +-0.05" in eq.line
    open_ = for_sequential({**SEQ, "decision": "undecided", "ci_low": -0.2, "ci_high": 0.1})
    assert open_.action == "undecided"
    assert "no decision between v1 and v2 after 200 of 1000 rows" in open_.line
    stopped = for_sequential({**SEQ, "decision": None, "status": "incomplete: a row failed"})
    assert stopped.line == "t (m): no decision: incomplete: a row failed"


def test_a_best_of_k_not_identified_names_no_winner() -> None:
    row = {**SEQ, "decision": "best", "k": 4, "estimate": 0.3, "ci_low": 0.1, "ci_high": 0.5}
    found = for_sequential({**row, "best_identified": True})
    assert (found.action, found.choice) == ("use", "v1")
    tied = for_sequential({**row, "best_identified": False, "in_contention": ["v1", "v3"]})
    assert tied.action == "undecided" and tied.choice is None
    assert "no decision among v1, v3, still in contention" in tied.line
    pair = {**row, "k": 2, "best_identified": True}  # all_pairs of two variants
    assert for_sequential(pair).line.startswith("t (m): use v1 over v2 (best - worst +0.300")
    open_ = for_sequential({**pair, "decision": "undecided", "ci_low": -0.1})
    assert "no decision between v1 and v2 after 200 of 1000 rows" in open_.line


def test_across_tasks_is_corrected_over_the_sweeps_across_tests() -> None:
    across = [
        X(model="m", a="x", b="y", test="paired t-test over tasks", statistic=-4.0,
          p_value=0.01, n_tasks=5, mean_difference=-0.04, note=None),
        X(model="m", a="x", b="z", test="paired t-test over tasks", statistic=3.0,
          p_value=0.03, n_tasks=5, mean_difference=0.03, note=None),
        X(model="m", a="y", b="z", test="paired t-test over tasks", statistic=1.0,
          p_value=0.3, n_tasks=5, mean_difference=0.01, note=None),
    ]  # fmt: skip
    _, across = decision.annotate([], across, "holm")
    first, second, third = (_rec(r) for r in across)
    assert (first.action, first.choice) == ("use", "y")
    assert "p corr 0.0300 (Holm over 3 across-task tests) < 0.05" in first.line
    assert "mean diff A - B -0.040" in first.line
    assert second.action == "undecided"  # 0.03 alone would pass; Holm makes it 0.06
    assert "p corr 0.0600 (Holm over 3 across-task tests) >= 0.05" in second.line
    assert third.action == "undecided"


def test_a_wilcoxon_that_points_against_the_mean_is_not_called() -> None:
    row = {"model": "m", "a": "x", "b": "y", "test": "Wilcoxon signed-rank over tasks",
           "statistic": 2.0, "p_value": 0.01, "n_tasks": 6, "mean_difference": 0.05}  # fmt: skip
    rec = for_across(X(**row))  # W+ = 2 < 6*7/4: the ranks point to y, the mean to x
    assert rec.action == "undecided" and "disagree" in rec.line
    assert for_across(X(**{**row, "statistic": 19.0})).choice == "x"


# ---- where the lines are printed and written -------------------------------------------------
def test_sweep_and_report_print_the_decisions_last() -> None:
    table = _table([i % 9 != 0 for i in range(90)], [i % 3 == 0 for i in range(90)])
    result = {"sweep": "s", "trials": 2, "resumed": 0, "parent_run_id": "r", "skipped": [],
              "comparisons": [r.to_dict() for r in table], "across_tasks": [],
              "experiment": "p/s"}  # fmt: skip
    lines = output.sweep_summary(result, "sqlite:///x").splitlines()
    assert lines[-1] == "decision: " + _rec(table[0]).line
    assert lines[-2].startswith("Open the MLflow UI")
    # a document written before recommendations existed: worked out the same way
    old = [replace(table[0], recommendation=None).to_dict()]
    doc = {"comparisons": old, "across_tasks": [], "incomplete": [], "sensitivity": {}}
    text = output.sweep_report("s", {"run_id": "r", "status": "FINISHED"}, doc)
    assert text.splitlines()[-1] == lines[-1]


def test_comparisons_csv_gains_a_last_column_and_keeps_the_others_bytes() -> None:
    """An untested row first (fewer keys) and a best-of-k row after it: the columns before
    the recommendation are exactly those of the file without it."""
    tested = _table([i % 9 != 0 for i in range(90)], [i % 3 == 0 for i in range(90)])[0]
    first = compare.untested("w", "best", "worst", [_lost()], "range permutation test")
    first = replace(first, model="m", task="u", status="skipped")
    tested = replace(tested, recommendation=None)
    later = replace(tested, k=3, draw_ci={"A": [0.1, 0.2]}, p_post_selection=0.01)
    rows = compare.correct([first, later], "holm")
    before = comparisons_csv([r.to_dict() for r in rows]).splitlines()
    rows, _ = decision.annotate(rows, [], "holm")
    after = comparisons_csv([r.to_dict() for r in rows]).splitlines()
    assert after[0] == before[0] + ",recommendation"
    parsed = list(csv.DictReader(io.StringIO("\n".join(after))))
    for old_line, new_line, row in zip(before[1:], after[1:], parsed, strict=True):
        assert new_line.startswith(old_line + ",")
        assert row["recommendation"].startswith(("u (m): no decision", "hearsay (m): use"))


def test_a_one_task_sweep_prints_no_across_task_line() -> None:
    """One task has no across-task comparison: its untested row gets no decision line."""
    one = {"model": "m", "a": "x", "b": "y", "test": "paired t-test over tasks", "p_value": None,
           "n_tasks": 1, "mean_difference": 0.2, "note": "fewer than 2 tasks (1): no test",
           "tasks": ["hearsay"], "missing_tasks": []}  # fmt: skip
    assert decision.lines({"comparisons": [], "across_tasks": [one]}) == []
    two = {**one, "missing_tasks": ["proa"], "note": "no score for proa"}
    assert decision.lines({"comparisons": [], "across_tasks": [two]}) == [
        "decision: across tasks (m): no decision: not tested (no score for proa)"
    ]


def test_an_older_document_is_filled_as_a_new_one_is() -> None:
    """`workbench report` of a sweep logged before recommendations (and its --json) gets
    the rows' recommendations worked out from the same numbers."""
    table = _table([i % 9 != 0 for i in range(90)], [i % 3 == 0 for i in range(90)])
    across: list[dict[str, Any]] = [{"model": "m", "a": "A", "b": "B", "test": "paired t-test over tasks",
               "statistic": 5.0, "p_value": 0.001, "n_tasks": 4, "mean_difference": 0.1,
               "note": None, "tasks": ["t1", "t2", "t3", "t4"], "missing_tasks": []}]  # fmt: skip
    rows, tests = decision.annotate(table, [X(**r) for r in across], "holm")
    new = {"comparisons": [r.to_dict() for r in rows], "across_tasks": [r.to_dict() for r in tests]}
    old = {"comparisons": [replace(r, recommendation=None).to_dict() for r in table],
           "across_tasks": [dict(r) for r in across]}  # fmt: skip
    decision.fill(old)
    assert old == new
    shown = {"looks": [10, 20], "batch": 10, "sequence": "s", "family_alpha": 0.05}
    seq = {"comparisons": [], "sequential": [{**SEQ, **shown, "decision": "B"}], "across_tasks": []}
    doc = {**seq, "incomplete": [], "sensitivity": {}}
    text = output.sweep_report("s", {"run_id": "r", "status": "FINISHED"}, doc)
    assert text.splitlines()[-1] == "decision: " + for_sequential(seq["sequential"][0]).line


# ---- best of k: ties, whatever the variants' order ------------------------------------------
def _draws(hits: dict[str, list[bool]]) -> list[TrialRecord]:
    """Draws of a yes/no task on the same rows, right where the hits say."""
    n = len(next(iter(hits.values())))
    y = ["Yes" if i % 2 else "No" for i in range(n)]
    flip = {"Yes": "No", "No": "Yes"}
    idx = [str(i) for i in range(n)]
    out = []
    for name, h in hits.items():
        gens = [t if ok else flip[t] for t, ok in zip(y, h, strict=True)]
        out.append(TrialRecord.of(name, "accuracy", idx, y, gens, FN(y, gens)))
    return out


def _best_of_k(arms: list[TrialRecord]) -> Comparison:
    row = replace(compare.best_vs_worst(arms, n_resamples=500), task="t", model="m")
    (row,) = compare.correct([row], "holm")
    return row


def test_draws_tied_for_the_best_score_name_no_single_draw_in_any_order() -> None:
    """Two draws with the same best score and a clearly worse one: the range test rejects,
    but which draw to "use" was the first of the tied in the spec's order (reordering the
    variants named the other). Neither is the best: no single draw is named, in any order."""
    top = [i % 7 != 0 for i in range(60)]
    hits = {"x": top, "z": top[3:] + top[:3], "w": [i % 3 == 0 for i in range(60)]}
    arms = _draws(hits)
    scores = [float(arm.score or 0.0) for arm in arms]
    assert scores[0] == scores[1] > scores[2]
    for order in ([0, 1, 2], [1, 0, 2]):
        row = _best_of_k([arms[i] for i in order])
        rec = for_pair(row)
        assert row.p_corrected < 0.05
        assert rec.action == "undecided" and rec.choice is None
        first, second = (arms[i].variant for i in order[:2])
        assert f"no single variant to use: {first}, {second} tie for the best score" in rec.line
        assert "w is the worst of 3" in rec.line
    # a draw alone at the top is still the one to use, and a tie at the bottom is said
    hits["x"] = [True] * 60
    hits["v"] = hits["w"]
    row = _best_of_k(_draws(hits))
    rec = for_pair(row)
    assert (rec.action, rec.choice) == ("use", "x")
    other = "v" if row.b == "w" else "w"
    assert f"the worst of 4 variants, tied with {other}" in rec.line


def test_a_p_just_below_the_level_is_not_printed_as_the_level() -> None:
    """1,000 resamples give p = (b + 1) / 1001: b = 49 is p = 0.04995, a call, which four
    decimals print as "p corr 0.0500 < 0.05". Shown with the digits that tell it apart."""
    p = 50 / 1001
    row = {"task": "t", "model": "m", "a": "A", "b": "B", "statistic": 0.1, "p_value": p,
           "p_corrected": p, "correction": "Holm", "ci_low": 0.01, "ci_high": 0.2, "n": 80,
           "mde_80": 0.15}  # fmt: skip
    rec = for_pair(C(**row))
    assert rec.action == "use" and "p corr 0.049950 < 0.05, Holm" in rec.line
    assert "0.0500 <" not in rec.line
    across = {"model": "m", "a": "x", "b": "y", "test": "paired t-test over tasks",
              "statistic": 3.0, "p_value": p, "n_tasks": 5, "mean_difference": 0.03}  # fmt: skip
    assert "p 0.049950 < 0.05" in for_across(X(**across)).line
    verdict = {"statistic": 0.1, "p_value": p, "heldout": {"n": 80}, "mde_80": 0.15}
    held = decision.for_heldout(verdict, "v1", best_is_base=False)
    assert held.action == "use" and "p 0.049950 < 0.05" in held.line
    # away from the level, four decimals as the table prints them
    assert "p corr 0.0300 < 0.05" in for_pair(C(**{**row, "p_corrected": 0.03})).line
    assert "p corr 0.0500 >= 0.05" in for_pair(C(**{**row, "p_corrected": 0.05})).line


# ---- an incomplete sweep: the correction will run over the comparisons a rerun tests --------
def _pair_row(model: str, task: str, p: float | None, status: str = "tested") -> Comparison:
    return C(model=model, task=task, a="A", b="B", status=status,
             statistic=None if p is None else 0.1, p_value=p, ci_low=0.02,
             ci_high=0.18, n=80, mde_80=0.15)  # fmt: skip


def test_an_incomplete_sweep_calls_only_what_its_rerun_cannot_undo() -> None:
    """m2's trial failed (a missing key): its comparison is untested, so Holm ran over the
    other two alone and m1's p 0.03 read "use A over B". The rerun tests m2's too, and Holm
    over all three lifts it to 0.06 whatever m2 gives above 0.03: the call is undone. A call
    is made only where it holds with the waiting comparisons at p = 1 (Holm's and BH's
    adjusted p-values only grow with any input p); a variant a task skips is not waiting."""
    failed = "B failed (80 of 80 rows failed)"
    skipped = "skipped on this task: B: needs a train split"
    table = [
        _pair_row("m1", "t1", 0.03),
        _pair_row("m1", "t2", 0.0004),
        _pair_row("m2", "t1", None, failed),
        _pair_row("m2", "t2", None, skipped),
    ]
    table = compare.correct(table, "holm")
    assert table[0].p_corrected == pytest.approx(0.03)  # Holm over the 2 tested
    rows, _ = decision.annotate(table, [], "holm", final=False)
    shaky, sure = _rec(rows[0]), _rec(rows[1])
    assert shaky.action == "undecided" and shaky.choice is None
    assert shaky.line == (
        "t1 (m1): no decision yet between A and B (diff A - B +0.100, p corr 0.0300 over the "
        "tests run so far): 1 comparison of this sweep waits for incomplete trials, and "
        "corrected over them too p may reach 0.0600; rerun the same command"
    )
    assert sure.action == "use" and sure.choice == "A"
    assert sure.line.endswith(
        "; holds whatever the 1 comparison waiting for incomplete trials gives"
    )
    # the rerun: m2's comparison tested (p 0.5), Holm over three undoes the first call
    done = compare.correct([*table[:2], _pair_row("m2", "t1", 0.5), table[3]], "holm")
    done, _ = decision.annotate(done, [], "holm")
    assert done[0].p_corrected == pytest.approx(0.06)
    assert _rec(done[0]).action == "undecided"
    assert _rec(done[1]).choice == "A"
    # a finished sweep (or an import: nothing to rerun) decides on the table's p corr
    rows, _ = decision.annotate(table, [], "holm", final=True)
    assert _rec(rows[0]).action == "use"


def test_an_across_task_test_waiting_for_a_task_is_not_decided() -> None:
    """The declared across-task test is over every task: run over the two scored so far
    while the third waits for its trials, its "use" was a test of another set of tasks."""
    table = [
        _pair_row("m", "t1", 0.2),
        _pair_row("m", "t2", 0.3),
        _pair_row("m", "t3", None, "A incomplete (3 of 80 rows failed)"),
    ]
    table = compare.correct(table, "holm")
    across = [
        X(model="m", a="A", b="B", test="paired t-test over tasks", statistic=40.0,
          p_value=0.016, n_tasks=2, mean_difference=0.1, tasks=["t1", "t2"],
          missing_tasks=["t3"])
    ]  # fmt: skip
    _, done = decision.annotate(table, across, "holm", final=False)
    rec = _rec(done[0])
    assert rec.action == "undecided"
    assert rec.line == (
        "across tasks (m): no decision yet between A and B: t3 waits for incomplete trials, "
        "and the test is over every task; rerun the same command"
    )
    # another pair, all its tasks scored: Holm over it and the waiting test at p = 1
    other = replace(across[0], b="C", p_value=0.03, tasks=["t1", "t2", "t3"], missing_tasks=[])
    _, (_, other) = decision.annotate(table, [*across, other], "holm", final=False)
    assert other.p_corrected == pytest.approx(0.032)  # over the two tested so far
    assert _rec(other).line == (
        "across tasks (m): no decision yet between A and C (mean diff A - B +0.100, p corr "
        "0.0320 over the tests run so far): 1 across-task test of this sweep waits for "
        "incomplete trials, and corrected over them too p may reach 0.0600; rerun the same "
        "command"
    )
    _, final = decision.annotate(table, across, "holm", final=True)
    assert _rec(final[0]).choice == "A"
    # `workbench report` of an older document of that sweep: the same lines
    old = {"comparisons": [r.to_dict() for r in table],
           "across_tasks": [r.to_dict() for r in across],
           "incomplete": [{"task": "t3", "model": "m", "variant": "A"}]}  # fmt: skip
    assert decision.lines(old)[-1] == f"decision: {rec.line}"
