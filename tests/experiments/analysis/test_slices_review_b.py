"""Review of `analysis.slices.slice_table` (issue 34): per-class groups are LegalBench's
classes (normalised labels), not the raw spellings of the gold answers."""

from __future__ import annotations

from sklearn.metrics import recall_score

from experiments.analysis.slices import slice_table
from experiments.metrics import balanced_accuracy, normalize
from experiments.trials.record import TrialRecord


def _arm(name: str, answers: list[str], gens: list[str]) -> TrialRecord:
    idx = [str(i) for i in range(len(answers))]
    return TrialRecord.of(
        name, "balanced_accuracy", idx, answers, gens, score=balanced_accuracy(gens, answers),
        task="t", model="m",
    )  # fmt: skip


# one class spelled "Yes", "yes", "Yes." and "Yes ": LegalBench's normalisation makes them one
ANS = ["Yes", "yes", "Yes.", "No", "no", "No", "Yes ", "no"]
GA = ["Yes", "No", "yes", "No", "No", "Yes", "Yes", "no"]
GB = ["No", "No", "No", "No", "Yes", "Yes", "Yes", "no"]


def test_by_class_groups_are_normalised_labels_with_sklearn_recall() -> None:
    a, b = _arm("A", ANS, GA), _arm("B", ANS, GB)
    gold = {p.index: p.answer for p in a.rows}
    t = slice_table(a, b, gold, by="class", column="answer", n_resamples=1000, mde=False,
                    labels=["Yes", "No"])  # fmt: skip
    assert [(r.group, r.n) for r in t.rows] == [("No", 4), ("Yes", 4)]
    y = [normalize(x) for x in ANS]
    for arm, gens in (("a", GA), ("b", GB)):
        want = recall_score(y, [normalize(g) for g in gens], labels=["no", "yes"], average=None)
        got = [getattr(r, f"score_{arm}") for r in t.rows]
        assert got == list(want)
    assert not any("no rows" in n for n in t.notes)


def test_by_class_group_name_without_labels_is_the_commonest_spelling() -> None:
    a, b = _arm("A", ANS, GA), _arm("B", ANS, GB)
    gold = {p.index: p.answer for p in a.rows}
    t = slice_table(a, b, gold, by="class", column="answer", n_resamples=1000, mde=False)
    assert [(r.group, r.n) for r in t.rows] == [("No", 4), ("Yes", 4)]


def test_a_numeric_column_is_in_numeric_order_blank_last() -> None:
    n = 24
    ans = ["Yes", "No"] * (n // 2)
    gens = ["Yes"] * n
    a, b = _arm("A", ans, gens), _arm("B", ans, ["No"] * n)
    groups = {str(i): ("2", "10", "1", "", "x", "33")[i % 6] for i in range(n)}
    t = slice_table(a, b, groups, by="slice", column="year", n_resamples=100, mde=False)
    assert [r.group for r in t.rows] == ["1", "2", "10", "33", "x", "(blank)"]


def test_a_column_of_many_values_says_so() -> None:
    n = 44
    ans = ["Yes", "No"] * (n // 2)
    a, b = _arm("A", ans, ["Yes"] * n), _arm("B", ans, ["No"] * n)
    many = {str(i): str(i // 2) for i in range(n)}  # 22 slices of 2 rows
    t = slice_table(a, b, many, by="slice", column="id", n_resamples=100, mde=False)
    assert len(t.rows) == 22 and t.correction == "Holm over the 22 slices of this comparison"
    assert any(x.startswith("22 slices of 'id' (22 small)") for x in t.notes)
    few = {str(i): str(i % 4) for i in range(n)}
    t = slice_table(a, b, few, by="slice", column="c", n_resamples=100, mde=False)
    assert not any("slices of" in x for x in t.notes)
