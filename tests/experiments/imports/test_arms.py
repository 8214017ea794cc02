"""Imported trials compared: paired by row id, rows in one arm only (or failed in one) listed
and left out, never scored as wrong; the numbers are the analysis functions' own on the same
correctness vectors; --rescore uses the official metric and says when the source's differs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from experiments.analysis import metric_interval, paired_permutation_test
from experiments.analysis.stats import holm, range_permutation_test
from experiments.imports import ImportedRow, ImportedTrial, ImportInputError
from experiments.imports.arms import Arms, to_records
from experiments.imports.verdict import verdict
from tests.experiments.imports.conftest import correctness

R = 2000


def trial(
    variant: str,
    vec: Sequence[int | None],
    task: str | None = "hearsay",
    ids: list[str] | None = None,
    model: str = "m",
    **kw: object,
) -> ImportedTrial:
    rows = tuple(
        ImportedRow(i, None if c is None else float(c), status="ok" if c is not None else "error")
        for i, c in zip(ids or [str(j) for j in range(len(vec))], vec, strict=True)
    )
    return ImportedTrial(Path(f"{variant}.jsonl"), "jsonl", None, task, variant, model,
                         kw.get("metric"), rows)  # type: ignore[arg-type]  # fmt: skip


def test_p_value_and_interval_equal_the_analysis_on_the_same_vectors() -> None:
    vec = correctness(80, 0.75, 0.55)
    doc = verdict("t", to_records([trial("A", vec["A"]), trial("B", vec["B"])]), n_resamples=R)
    (row,) = doc["comparisons"]
    y = ["1"] * 80
    pa = ["1" if c else "0" for c in vec["A"]]
    pb = ["1" if c else "0" for c in vec["B"]]
    res = paired_permutation_test(y, pa, pb, metric="accuracy", n_resamples=R, seed=0)
    ci = metric_interval(y, pa, pb, metric="accuracy", seed=0)
    assert row["status"] == "tested" and row["n"] == 80
    assert row["score_a"] == pytest.approx(sum(vec["A"]) / 80)
    assert row["statistic"] == pytest.approx(res.statistic)
    assert row["p_value"] == res.p_value
    assert (row["ci_low"], row["ci_high"]) == (ci.low, ci.high)
    assert row["p_value"] < 0.05  # the effect is there


def test_best_of_k_uses_the_range_test_and_holm_corrects_across_tasks() -> None:
    vecs = [correctness(50, 0.7, 0.5, seed=s) for s in (1, 2)]
    trials = [trial(v, vec[v], task) for task, vec in zip(("hearsay", "abercrombie"), vecs, strict=True)
              for v in ("A", "B")]  # fmt: skip
    arms = to_records(trials)
    bvw = verdict("t", arms, comparisons="best_vs_worst", n_resamples=R)["comparisons"]
    y = ["1"] * 50
    for row, vec in zip(bvw, vecs, strict=True):
        preds = [["1" if c else "0" for c in vec[v]] for v in ("A", "B")]
        res = range_permutation_test(y, preds, metric="accuracy", n_resamples=R, seed=0)
        assert row["test"].startswith("range permutation test")
        assert row["p_value"] == res.p_value
    pairs = verdict("t", arms, n_resamples=R)
    ps = [r["p_value"] for r in pairs["comparisons"]]
    assert [r["p_holm"] for r in pairs["comparisons"]] == holm(ps)
    (across,) = pairs["across_tasks"]
    assert across["n_tasks"] == 2 and across["test"].startswith("paired t-test")
    assert pairs["sensitivity"]["per_task"], pairs["sensitivity"]


def test_rows_in_one_arm_or_failed_in_one_are_listed_and_left_out() -> None:
    a = trial("A", [1, 1, 0, 1, 1], ids=["1", "2", "3", "4", "5"])
    b = trial("B", [0, 1, None, 0], ids=["1", "2", "3", "6"])
    arms = to_records([a, b])
    assert [r.indices for r in arms.records] == [("1", "2"), ("1", "2")]
    assert arms.records[0].score == 1.0 and arms.records[1].score == 0.5  # not 1/5, not 1/4
    gone = {x.row: x.reason for x in arms.left_out}
    assert gone == {"3": "no score in B (error)", "4": "not in B", "5": "not in B",
                    "6": "not in A"}  # fmt: skip


def test_rescore_uses_the_official_metric_and_says_the_source_differs() -> None:
    answers = ["Yes", "No", "Yes", "No", "Yes", "Yes"]
    gens = {"A": ["Yes", "No", "Yes", "Yes", "Yes", "Yes"], "B": ["Yes"] * 6}

    def scored(v: str) -> ImportedTrial:
        rows = tuple(
            ImportedRow(str(i), float(g == a), prediction=g, answer=a)
            for i, (g, a) in enumerate(zip(gens[v], answers, strict=True))
        )
        return ImportedTrial(Path(f"{v}.json"), "lm-evaluation-harness", "0.4.9", "hearsay",
                             v, "m", "exact_match", rows)  # fmt: skip

    arms = to_records([scored("A"), scored("B")], rescore=True, known_tasks={"hearsay"})
    assert [r.metric for r in arms.records] == ["balanced_accuracy"] * 2
    assert arms.records[1].score == pytest.approx(0.5)  # always "Yes": chance, not 4/6
    assert any("exact_match" in n and "balanced_accuracy" in n for n in arms.notes)
    with pytest.raises(ImportInputError, match="not one"):
        to_records([scored("A")], rescore=True, known_tasks={"abercrombie"})


def test_rescore_scores_a_user_task_with_its_declared_metric() -> None:
    """A user task's metric is its task.json's (the CLI passes name -> metric): rescoring by
    the task's name would have used balanced accuracy on an F1 task without a sign."""
    answers = ["Yes", "Yes", "No", "No"]
    gens = ["Yes", "No", "No", "No"]
    rows = tuple(
        ImportedRow(str(i), float(g == a), prediction=g, answer=a)
        for i, (g, a) in enumerate(zip(gens, answers, strict=True))
    )
    arm = [ImportedTrial(Path(f"{v}.json"), "jsonl", None, "my_clauses", v, "m", None, rows)
           for v in ("A", "B")]  # fmt: skip
    arms = to_records(arm, rescore=True, known_tasks={"my_clauses": "macro_f1"})
    # Yes: P 1, R 1/2 -> F1 2/3; No: P 2/3, R 1 -> F1 4/5
    assert [r.metric for r in arms.records] == ["macro_f1"] * 2
    assert arms.records[0].score == pytest.approx((2 / 3 + 4 / 5) / 2)


@pytest.mark.parametrize(
    ("trials", "message"),
    [
        ([trial("A", [1, 0]), trial("B", [1, 0], task="abercrombie")], "one comparison needs one task"),
        ([trial("A", [1, 0]), trial("A", [0, 1])], "already in"),
        ([trial("A", [1, 0]), trial("B", [1, 0], ids=["x", "y"])], "share no id"),
        ([trial("A", [1, 0]), trial("B", [1, 0])], None),
    ],
)  # fmt: skip
def test_arms_that_cannot_be_compared_are_refused(
    trials: list[ImportedTrial], message: str | None
) -> None:
    if message is None:
        assert len(to_records(trials).records) == 2
        return
    with pytest.raises(ImportInputError, match=message):
        to_records(trials)


def test_a_fractional_score_is_refused_not_rounded() -> None:
    t = ImportedTrial(Path("f.json"), "x", None, "hearsay", "A", "m", "f1",
                      (ImportedRow("1", 0.5), ImportedRow("2", 1.0)))  # fmt: skip
    with pytest.raises(ImportInputError, match=r"score 0\.5"):
        to_records([t, trial("B", [1, 0], ids=["1", "2"])])


def test_a_legalbench_task_compared_on_the_source_scoring_says_so() -> None:
    def scoring(arms: Arms) -> list[str]:  # the notes on scoring (not on clustering)
        return [n for n in arms.notes if "independent units" not in n]

    arms = to_records([trial("A", [1, 0]), trial("B", [0, 0])], known_tasks={"hearsay"})
    (note,) = scoring(arms)
    assert "not LegalBench's official balanced_accuracy" in note
    assert "no generations to rescore" in note
    assert scoring(to_records([trial("A", [1, 0]), trial("B", [0, 0])])) == []  # not known


def test_epochs_kept_apart_are_resampled_as_one_sample_not_n_rows() -> None:
    """3 epochs of each sample (identical here, as at temperature 0) are 30 observations,
    not 90: the p-value and interval are those of the 30 samples, and no unpaired z-test is
    given on the epochs as if they were independent rows."""
    vec = correctness(30, 0.7, 0.45, seed=4)

    def arm(v: str, epochs: int) -> ImportedTrial:
        rows = tuple(ImportedRow(str(i), float(c), epoch=e if epochs > 1 else None)
                     for i, c in enumerate(vec[v]) for e in range(1, epochs + 1))  # fmt: skip
        return ImportedTrial(Path(f"{v}.eval"), "inspect_ai", "0.3.1", "hearsay", v, "m",
                             "match", rows)  # fmt: skip

    one = verdict("t", to_records([arm("A", 1), arm("B", 1)]), n_resamples=R)
    three = verdict("t", to_records([arm("A", 3), arm("B", 3)]), n_resamples=R)
    (r1,), (r3,) = one["comparisons"], three["comparisons"]
    assert (r3["n"], r3["n_clusters"]) == (90, 30)
    assert r3["clustered_by"].startswith("sample")
    assert r3["p_value"] == r1["p_value"]  # not the smaller p of 90 independent rows
    assert (r3["ci_low"], r3["ci_high"]) == (r1["ci_low"], r1["ci_high"])
    assert "p_unpaired" not in r3 and "epochs of 30 samples" in three["pairing"][0]


def test_arms_scored_by_different_source_metrics_are_refused() -> None:
    a, b = trial("A", [1, 1, 0], metric="acc"), trial("B", [1, 0, 0], metric="exact_match")
    with pytest.raises(ImportInputError, match=r"scored by 'exact_match' but A .* by 'acc'"):
        to_records([a, b])


def test_rows_paired_by_id_that_are_other_examples_are_refused() -> None:
    """A positional id (lm-eval's doc_id, promptfoo's test index) from runs over the data in
    another order: the same id, another gold answer (or doc hash); never paired."""

    def arm(v: str, answers: list[str], **extra: object) -> ImportedTrial:
        rows = tuple(ImportedRow(str(i), 1.0, prediction="Yes", answer=a, extra=dict(extra))
                     for i, a in enumerate(answers))  # fmt: skip
        return ImportedTrial(Path(f"{v}.jsonl"), "x", None, "hearsay", v, "m", None, rows)

    with pytest.raises(ImportInputError, match=r"row '0' has answer 'No' but 'Yes' in A\.jsonl"):
        to_records([arm("A", ["Yes", "No"]), arm("B", ["No", "Yes"])])
    with pytest.raises(ImportInputError, match="doc_hash 'h2' but 'h1'"):
        to_records([arm("A", ["Yes", "No"], doc_hash="h1"), arm("B", ["Yes", "No"], doc_hash="h2")])
    assert len(to_records([arm("A", ["Yes", "No"]), arm("B", ["Yes", "No"])]).records) == 2


@pytest.mark.slow
def test_the_order_of_lines_and_files_changes_no_number() -> None:
    """Arms met in another order (lines shuffled, files given in another order): the same
    pairs, oriented the same way, with the same p-values and intervals; the same best and
    worst draw when two arms tie."""
    vecs = {"A": [1, 1, 0, 1] * 10, "B": [1, 1, 0, 1] * 10, "C": [0, 1, 0, 0] * 10}

    def run(order: str, comparisons: str) -> list[tuple[object, ...]]:
        doc = verdict("t", to_records([trial(v, vecs[v]) for v in order]),
                      comparisons=comparisons, n_resamples=R)  # fmt: skip
        keys = ("a", "b", "p_value", "ci_low", "ci_high", "ci_a_low", "ci_b_high")
        return [tuple(r.get(k) for k in keys) for r in doc["comparisons"]]

    for comparisons in ("all_pairs", "best_vs_worst"):
        assert run("ABC", comparisons) == run("CBA", comparisons) == run("BCA", comparisons)


def test_rows_with_shared_ids_but_no_score_are_not_called_unshared() -> None:
    """Every row in a failure state (a CSV whose status column says "OK", not "ok"): the
    error says no row has a score, not that the arms share no id."""

    def arm(v: str) -> ImportedTrial:
        rows = tuple(ImportedRow(str(i), None, status="OK") for i in range(3))
        return ImportedTrial(Path(f"{v}.csv"), "csv", None, "hearsay", v, "m", None, rows)

    with pytest.raises(ImportInputError, match=r"no row of hearsay \(m\) has a score .*\(OK\)"):
        to_records([arm("A"), arm("B")])
