"""`analysis.slices.slice_table` (issue 34): per-slice and per-class A vs B, checked against
hand computations: scores, the exact permutation p of tiny paired cases, Holm over the
groups, clusters kept within a group, the small mark, determinism under shuffles, a slice
of one answer class (what LegalBench's sklearn metric gives), and the same numbers as the
sweep's own comparison when one group holds every row."""

from __future__ import annotations

import random
import warnings

import pytest
from sklearn.metrics import balanced_accuracy_score

from experiments.analysis import compare
from experiments.analysis.slices import (
    PAPER_QUOTE,
    SMALL_BELOW,
    SliceError,
    SliceRow,
    SliceTable,
    slice_table,
)
from experiments.metrics import balanced_accuracy
from experiments.trials.record import TrialRecord


def _arm(
    name: str,
    answers: list[str],
    gens: list[str],
    hashes: list[str] | None = None,
    metric: str = "balanced_accuracy",
) -> TrialRecord:
    idx = [str(i) for i in range(len(answers))]
    return TrialRecord.of(
        name, metric, idx, answers, gens, score=balanced_accuracy(gens, answers),
        prompt_hashes=hashes or (), task="hearsay", model="m",
    )  # fmt: skip


def _table(a: TrialRecord, b: TrialRecord, groups: dict[str, str], **kw: object) -> SliceTable:
    args: dict[str, object] = {"by": "slice", "column": "slice", "n_resamples": 1000, "mde": False}
    return slice_table(a, b, groups, **{**args, **kw})  # type: ignore[arg-type]


# slice s: 8 rows of "Yes"; A right on all, B wrong on rows 0-5 (6 discordant rows, all for A)
# slice t: 4 rows of "No"; A right on rows 8, 9, B right on 8 only (1 discordant row), 10, 11
#          both wrong; slice u: 2 rows both arms right (no discordant row)
ANS = ["Yes"] * 8 + ["No"] * 4 + ["Yes", "No"]
GA = ["Yes"] * 8 + ["No", "No", "Yes", "Yes"] + ["Yes", "No"]
GB = ["No"] * 6 + ["Yes"] * 2 + ["No", "Yes", "Yes", "Yes"] + ["Yes", "No"]
GROUPS = {str(i): "s" if i < 8 else "t" if i < 12 else "u" for i in range(14)}


def test_scores_differences_and_exact_p_by_hand() -> None:
    t = _table(_arm("A", ANS, GA), _arm("B", ANS, GB), GROUPS)
    s, tt, u = t.rows
    assert [r.group for r in t.rows] == ["s", "t", "u"]
    assert (s.n, tt.n, u.n) == (8, 4, 2)
    # s: one class, recall A 8/8, B 2/8
    assert (s.score_a, s.score_b, s.diff) == pytest.approx((1.0, 0.25, 0.75))
    # 6 discordant rows, each worth 1/8: only "swap none" and "swap all" reach |0.75|
    assert s.p_value == pytest.approx(2 / 64)
    # t: recall of "No" A 2/4, B 1/4; one discordant row: p = 2/2
    assert (tt.score_a, tt.score_b) == pytest.approx((0.5, 0.25))
    assert tt.p_value == pytest.approx(1.0)
    # u: two classes, both arms right everywhere: balanced accuracy 1, nothing to swap
    assert (u.score_a, u.score_b, u.diff, u.p_value) == (1.0, 1.0, 0.0, 1.0)
    # Holm over the 3 tested slices: sorted p 1/32, 1, 1 -> 3/32, max(3/32, 2), 1 -> capped
    assert s.p_adjusted == pytest.approx(3 / 32)
    assert tt.p_adjusted == pytest.approx(1.0) and u.p_adjusted == pytest.approx(1.0)
    assert t.correction == "Holm over the 3 slices of this comparison"
    assert t.test == "paired permutation test (per-example swaps of A and B)"
    assert t.n_resamples == 1000 and t.alpha == 0.05 and t.small_below == SMALL_BELOW
    assert any("exact over every swap pattern" in n and "s (64)" in n for n in t.notes)
    assert any("score alike on every row (p = 1) in: u" in n for n in t.notes)


def test_slice_scores_are_legalbench_balanced_accuracy_on_the_slice_rows() -> None:
    rng = random.Random(3)
    answers = [rng.choice(["Yes", "No"]) for _ in range(60)]
    ga = [rng.choice(["Yes", "No", "yes.", "maybe"]) for _ in answers]
    gb = [rng.choice(["Yes", "No"]) for _ in answers]
    groups = {str(i): rng.choice(["p", "q", "r"]) for i in range(60)}
    t = _table(_arm("A", answers, ga), _arm("B", answers, gb), groups)

    def norm(x: str) -> str:
        return x.strip(".").strip().lower()

    for row in t.rows:
        rows = [i for i in range(60) if groups[str(i)] == row.group]
        y = [norm(answers[i]) for i in rows]
        with warnings.catch_warnings():  # a class predicted but absent from a slice
            warnings.simplefilter("ignore")
            want_a = balanced_accuracy_score(y, [norm(ga[i]) for i in rows])
            want_b = balanced_accuracy_score(y, [norm(gb[i]) for i in rows])
        assert row.n == len(rows)
        assert row.score_a == pytest.approx(want_a) and row.score_b == pytest.approx(want_b)
        assert row.diff == pytest.approx(want_a - want_b)
        assert row.ci_a_low <= row.score_a <= row.ci_a_high  # type: ignore[operator]
        assert row.ci_low <= row.diff <= row.ci_high  # type: ignore[operator]


def test_one_class_slice_is_that_class_recall_as_sklearn_gives_it() -> None:
    answers = ["Yes"] * 5
    ga, gb = ["Yes", "Yes", "No", "No", "No"], ["Yes", "No", "No", "No", "No"]
    t = _table(_arm("A", answers, ga), _arm("B", answers, gb), {str(i): "x" for i in range(5)})
    (row,) = t.rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "y_pred contains classes not in y_true"
        assert row.score_a == pytest.approx(balanced_accuracy_score(answers, ga)) == 0.4
        assert row.score_b == pytest.approx(balanced_accuracy_score(answers, gb)) == 0.2
    assert any("one answer class in every group" in n and "recall" in n for n in t.notes)


def test_clusters_of_the_sweep_are_swapped_whole_within_a_slice() -> None:
    # 4 rows, A right and B wrong on each; rows 0 and 1 got one prompt: 3 units, not 4
    answers, ga, gb = ["Yes"] * 4, ["Yes"] * 4, ["No"] * 4
    hashes = ["h0", "h0", "h2", "h3"]
    a, b = _arm("A", answers, ga, hashes), _arm("B", answers, gb, hashes)
    t = _table(a, b, {str(i): "x" for i in range(4)})
    assert t.rows[0].p_value == pytest.approx(2 / 8)  # rows swapped one by one: 2/16
    assert t.test == "paired permutation test (swaps of A and B per cluster of rows)"
    assert any("4 rows in 3 clusters" in n for n in t.notes)
    rows = _table(a, b, {str(i): "x" for i in range(4)}, cluster_by="rows")
    assert rows.rows[0].p_value == pytest.approx(2 / 16)


def test_small_slices_say_so_with_the_paper_and_their_mde() -> None:
    n_small, n_big = SMALL_BELOW - 1, SMALL_BELOW
    answers = ["Yes"] * (n_small + n_big)
    rng = random.Random(0)
    ga = [rng.choice(["Yes", "No"]) for _ in answers]
    gb = [rng.choice(["Yes", "No"]) for _ in answers]
    groups = {str(i): "small" if i < n_small else "big" for i in range(len(answers))}
    t = _table(_arm("A", answers, ga), _arm("B", answers, gb), groups, mde=True)
    big, small = t.rows  # sorted by name
    assert (big.group, big.n, big.small) == ("big", n_big, False)
    assert (small.group, small.n, small.small) == ("small", n_small, True)
    assert small.note is not None and PAPER_QUOTE in small.note
    assert small.mde_80 is not None and f"MDE at 80% power {small.mde_80:.2f}" in small.note
    assert big.note is None or PAPER_QUOTE not in big.note


def test_shuffled_rows_and_groups_give_the_same_table() -> None:
    rng = random.Random(7)
    answers = [rng.choice(["Yes", "No"]) for _ in range(40)]
    ga = [rng.choice(["Yes", "No"]) for _ in answers]
    gb = [rng.choice(["Yes", "No"]) for _ in answers]
    hashes = [f"h{i % 31}" for i in range(40)]  # some rows share a prompt
    groups = {str(i): rng.choice(["a", "b", "c", ""]) for i in range(40)}
    a, b = _arm("A", answers, ga, hashes), _arm("B", answers, gb, hashes)
    first = _table(a, b, groups, n_resamples=200, mde=True).to_dict()
    order = list(a.indices)
    rng.shuffle(order)
    a2, b2 = a.replace(indices=order), b.replace(indices=list(reversed(order)))
    keys = list(groups)
    rng.shuffle(keys)
    shuffled = _table(a2, b2, {k: groups[k] for k in keys}, n_resamples=200, mde=True)
    assert shuffled.to_dict() == first
    assert [r["group"] for r in first["rows"]] == ["a", "b", "c", "(blank)"]


def test_one_group_of_every_row_is_the_sweeps_own_comparison() -> None:
    rng = random.Random(11)
    answers = [rng.choice(["Yes", "No"]) for _ in range(50)]
    ga = [a if rng.random() < 0.8 else rng.choice(["Yes", "No"]) for a in answers]
    gb = [a if rng.random() < 0.6 else rng.choice(["Yes", "No"]) for a in answers]
    hashes = [f"h{i % 45}" for i in range(50)]
    a, b = _arm("A", answers, ga, hashes), _arm("B", answers, gb, hashes)
    c = compare.pair(a, b, n_resamples=500)
    (row,) = _table(a, b, {str(i): "all" for i in range(50)}, n_resamples=500, mde=True).rows
    assert row.p_value == c.p_value and row.diff == pytest.approx(c.statistic)
    assert (row.ci_low, row.ci_high) == (c.ci_low, c.ci_high)
    assert (row.ci_a_low, row.ci_a_high, row.ci_b_low, row.ci_b_high) == (
        c.ci_a_low, c.ci_a_high, c.ci_b_low, c.ci_b_high,
    )  # fmt: skip
    assert row.mde_80 == c.mde_80


def test_by_class_is_recall_on_each_gold_class() -> None:
    answers = ["Yes", "Yes", "Yes", "No", "No"]
    ga = ["Yes", "Yes", "No", "No", "Yes"]
    gb = ["Yes", "No", "No", "Yes", "Yes"]
    groups = {str(i): a for i, a in enumerate(answers)}
    t = slice_table(_arm("A", answers, ga), _arm("B", answers, gb), groups, by="class",
                    column="answer", n_resamples=1000, labels=["Yes", "No", "Maybe"],
                    mde=False)  # fmt: skip
    no, yes = t.rows
    assert (no.group, no.n, no.score_a, no.score_b) == ("No", 2, 0.5, 0.0)
    assert (yes.group, yes.n) == ("Yes", 3)
    assert (yes.score_a, yes.score_b) == pytest.approx((2 / 3, 1 / 3))
    # No: one discordant row (A right): p = 2/2; Yes: one discordant row: p = 1
    assert (no.p_value, yes.p_value) == (1.0, 1.0)
    assert t.metric == "recall (accuracy on the class's rows)"
    assert t.correction == "Holm over the 2 classes of this comparison"
    assert "classes with no rows here: maybe" in t.notes


def test_by_class_needs_label_answers() -> None:
    a = _arm("A", ["10"], ["10"], metric="sara_numeric")
    with pytest.raises(SliceError, match="use --by slice"):
        slice_table(a, a.replace(variant="B"), {"0": "10"}, by="class", column="answer",
                    n_resamples=100)  # fmt: skip


def test_rows_without_a_group_value_are_refused_by_name() -> None:
    a, b = _arm("A", ["Yes", "No"], ["Yes", "No"]), _arm("B", ["Yes", "No"], ["No", "No"])
    with pytest.raises(SliceError, match=r"index 1\) have no 'slice' value"):
        _table(a, b, {"0": "x"})


def test_an_incomplete_arm_is_not_split() -> None:
    a = _arm("A", ["Yes", "No"], ["Yes", "No"])
    b = TrialRecord.of("B", "balanced_accuracy", ["0", "1"], ["Yes", "No"], [None, "No"],
                       n_errors=1, status="incomplete", task="hearsay", model="m")  # fmt: skip
    t = _table(a, b, {"0": "x", "1": "x"})
    assert t.rows == () and t.notes[0].startswith("not tested: B incomplete")


def test_dicts_round_trip() -> None:
    t = _table(_arm("A", ANS, GA), _arm("B", ANS, GB), GROUPS)
    d = t.to_dict()
    assert set(d) == {"task", "model", "a", "b", "by", "column", "metric", "test", "correction",
                      "n_resamples", "alpha", "small_below", "rows", "notes"}  # fmt: skip
    assert SliceTable.from_dict(d) == t
    assert SliceRow.from_dict(d["rows"][0]) == t.rows[0]
