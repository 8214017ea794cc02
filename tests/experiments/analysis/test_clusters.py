"""Clusters of rows that cannot vary apart: every test swaps, permutes and resamples them
as units, and callable metrics see the caller's values as given."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score

from experiments.analysis import clusters, compare, stats
from experiments.trials.record import TrialRecord
from tests.support.normal_mde import normal_approximation_mde


def _dataset(n: int = 40, seed: int = 1) -> tuple[list[str], list[str], list[str]]:
    rng = np.random.default_rng(seed)
    y = [str(v) for v in rng.choice(["Yes", "No"], size=n)]
    flip = {"Yes": "No", "No": "Yes"}
    a = [t if rng.random() < 0.8 else flip[t] for t in y]
    b = [t if rng.random() < 0.6 else flip[t] for t in y]
    return y, a, b


def _repeat(xs: list[str], r: int) -> list[str]:
    return [x for x in xs for _ in range(r)]


def test_by_prompts_links_rows_transitively_across_variants() -> None:
    c = clusters.by_prompts([["h1", "h1", "h2", "h3", None], ["g1", "g2", "g2", "g4", "g5"]])
    # rows 0-1 share a prompt under A, rows 1-2 under B: one cluster of three
    assert c.ids.tolist() == [0, 0, 0, 1, 2]
    assert c.n_clusters == 3 and c.how == "prompt"
    assert clusters.by_column(["d1", "", "d1", ""], "document_name").ids.tolist() == [0, 1, 0, 2]
    with pytest.raises(ValueError, match="same rows"):
        clusters.by_prompts([["a"], ["a", "b"]])


@pytest.mark.parametrize("metric", ["accuracy", "balanced_accuracy"])
def test_duplicated_rows_clustered_give_the_original_p_value(metric: str) -> None:
    y, a, b = _dataset()
    original = stats.paired_permutation_test(y, a, b, metric=metric, n_resamples=4000)
    ids = np.repeat(np.arange(len(y)), 3)
    yr, ar, br = _repeat(y, 3), _repeat(a, 3), _repeat(b, 3)
    clustered = stats.paired_permutation_test(
        yr, ar, br, metric=metric, n_resamples=4000, clusters=ids
    )
    naive = stats.paired_permutation_test(yr, ar, br, metric=metric, n_resamples=4000)
    assert clustered.statistic == pytest.approx(original.statistic)
    assert clustered.p_value == pytest.approx(original.p_value)
    assert clustered.n == 3 * len(y) and clustered.n_clusters == len(y)
    assert "cluster" in clustered.test
    assert naive.p_value < original.p_value  # row swaps overstate the evidence


def test_range_test_permutes_clusters() -> None:
    y, a, b = _dataset(30, seed=4)
    c = [t if i % 3 else ("No" if t == "Yes" else "Yes") for i, t in enumerate(y)]
    preds = [a, b, c]
    original = stats.range_permutation_test(y, preds, metric="accuracy", n_resamples=2000)
    ids = np.repeat(np.arange(len(y)), 4)
    dup = stats.range_permutation_test(
        _repeat(y, 4), [_repeat(p, 4) for p in preds], metric="accuracy",
        n_resamples=2000, clusters=ids,
    )  # fmt: skip
    assert dup.statistic == pytest.approx(original.statistic)
    assert abs(dup.p_value - original.p_value) < 0.03  # same null, other Monte Carlo draws
    assert dup.n_clusters == len(y) and dup.n_discordant == original.n_discordant


def test_bootstrap_resamples_clusters() -> None:
    y, a, b = _dataset(60, seed=2)
    ids = np.repeat(np.arange(len(y)), 4)
    yr, ar, br = _repeat(y, 4), _repeat(a, 4), _repeat(b, 4)
    for metric in ("accuracy", "balanced_accuracy"):
        one = stats.bootstrap_ci(y, a, b, metric=metric)
        dup = stats.bootstrap_ci(yr, ar, br, metric=metric, clusters=ids)
        naive = stats.bootstrap_ci(yr, ar, br, metric=metric)
        width = one.high - one.low
        assert dup.high - dup.low == pytest.approx(width, rel=0.15)
        assert naive.high - naive.low < 0.7 * width  # rows resampled: far too narrow
        assert "60 clusters of 240 rows" in dup.method


def test_mde_uses_the_number_of_clusters() -> None:
    y, a, b = _dataset(50, seed=3)
    ids = np.repeat(np.arange(len(y)), 5)
    one = normal_approximation_mde(y, a, b, metric="accuracy")
    dup = normal_approximation_mde(
        _repeat(y, 5), _repeat(a, 5), _repeat(b, 5), metric="accuracy", clusters=ids
    )
    assert dup == pytest.approx(one, rel=0.05)


@pytest.mark.slow
def test_a_callable_metric_sees_the_values_as_given() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 80).tolist()
    a = [v if rng.random() < 0.85 else 1 - v for v in y]
    b = [v if rng.random() < 0.6 else 1 - v for v in y]
    res = stats.paired_permutation_test(y, a, b, metric=f1_score, n_resamples=300)
    assert res.statistic == pytest.approx(f1_score(y, a) - f1_score(y, b))
    assert res.metric == "f1_score"
    bools = [bool(v) for v in y]
    res_b = stats.paired_permutation_test(
        bools, [bool(v) for v in a], [bool(v) for v in b], metric=accuracy_score,
        n_resamples=200,
    )  # fmt: skip
    assert res_b.statistic == pytest.approx(accuracy_score(y, a) - accuracy_score(y, b))
    ci = stats.bootstrap_ci(y, a, b, metric=f1_score, n_resamples=200)
    assert ci.estimate == pytest.approx(f1_score(y, a) - f1_score(y, b))
    r = stats.range_permutation_test(y, [a, b], metric=f1_score, n_resamples=100)
    assert r.statistic == pytest.approx(abs(f1_score(y, a) - f1_score(y, b)))
    ids = np.arange(80) // 2
    rc = stats.paired_permutation_test(y, a, b, metric=f1_score, n_resamples=200, clusters=ids)
    assert rc.n_clusters == 40 and rc.statistic == pytest.approx(res.statistic)


def test_exchanging_strings_of_different_lengths_does_not_truncate() -> None:
    seen: list[set[str]] = []

    def metric(y: object, p: object) -> float:
        values = list(p)  # type: ignore[call-overload]
        seen.append(set(values))
        return float(np.mean([t == v for t, v in zip(y, values, strict=True)]))  # type: ignore[call-overload]

    y = np.array(["longer answer", "x"] * 5)
    a = np.array(["longer answer", "x"] * 5)
    b = np.array(["y", "z"] * 5)
    stats.paired_permutation_test(y, a, b, metric=metric, n_resamples=50)
    assert all(s <= {"longer answer", "x", "y", "z"} for s in seen)


def test_across_tasks_say_when_they_cannot_decide() -> None:
    five = stats.across_tasks("permutation", [0.9] * 5, [0.8] * 5)
    assert five.p_value is None and "cannot reach p < 0.05 with 5 tasks" in five.note
    six = stats.across_tasks("permutation", [0.9] * 6, [0.8] * 6)
    assert six.p_value == pytest.approx(2 / 64)
    w5 = stats.across_tasks("wilcoxon", [0.9, 0.8, 0.7, 0.6, 0.5], [0.8, 0.7, 0.6, 0.5, 0.4])
    assert w5.p_value is None and "cannot reach" in w5.note
    # zero differences are dropped by the signed-rank test and not counted as used tasks
    w = stats.across_tasks(
        "wilcoxon",
        [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.3],
        [0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.3],
    )
    assert w.n_tasks == 7 and "1 of 8 tasks tie" in w.note
    assert w.p_value == pytest.approx(2 / 128)
    t = stats.across_tasks("t", [0.9, 0.8, 0.75], [0.8, 0.7, 0.7])
    assert t.p_value is not None  # a t-test can reach any p


def test_pair_reports_rows_and_clusters() -> None:
    y, a, b = _dataset(30, seed=5)
    yr, ar, br = _repeat(y, 2), _repeat(a, 2), _repeat(b, 2)
    idx = [str(i) for i in range(len(yr))]
    hashes = [f"p{i // 2}" for i in range(len(yr))]
    fn = stats.metric_fn("accuracy")

    def arm(name: str, gens: list[str]) -> TrialRecord:
        return TrialRecord.of(name, "accuracy", idx, yr, gens, fn(yr, gens), prompt_hashes=hashes)

    row = compare.pair(arm("A", ar), arm("B", br), n_resamples=2000)
    assert row.n == 60 and row.n_clusters == 30 and row.clustered_by == "prompt"
    plain = stats.paired_permutation_test(y, a, b, metric="accuracy", n_resamples=2000)
    assert row.p_value == pytest.approx(plain.p_value)
    assert row.ci_a_low <= fn(yr, ar) <= row.ci_a_high
    rows = compare.pair(arm("A", ar), arm("B", br), n_resamples=2000, cluster_by="rows")
    assert rows.n_clusters == 60 and rows.p_value < row.p_value


@pytest.mark.slow
def test_reduced_null_simulation_20_texts_repeated_30_times() -> None:
    """The issue's case, reduced: 20 distinct texts x 30 copies, both variants with the same
    per-text accuracy. Row swaps reject far above alpha; cluster swaps hold it."""
    rng = np.random.default_rng(7)
    texts, copies, sims = 20, 30, 150
    ids = np.repeat(np.arange(texts), copies)
    y = ["Yes" if i % 2 else "No" for i in ids]
    p_text = np.where(np.arange(texts) < texts // 2, 0.9, 0.3)  # easy and hard texts
    by_rows = by_clusters = 0
    for _ in range(sims):
        hit_a = rng.random(texts) < p_text
        hit_b = rng.random(texts) < p_text
        a = [
            t if hit_a[i] else ("No" if t == "Yes" else "Yes") for t, i in zip(y, ids, strict=True)
        ]
        b = [
            t if hit_b[i] else ("No" if t == "Yes" else "Yes") for t, i in zip(y, ids, strict=True)
        ]
        r = stats.paired_permutation_test(y, a, b, metric="accuracy", n_resamples=500)
        c = stats.paired_permutation_test(y, a, b, metric="accuracy", n_resamples=500, clusters=ids)
        by_rows += r.p_value < 0.05
        by_clusters += c.p_value < 0.05
    assert by_rows / sims > 0.3
    assert by_clusters / sims <= 0.09


def test_a_column_adds_dependence_but_never_splits_a_prompt_cluster() -> None:
    idx = [str(i) for i in range(6)]
    arm = TrialRecord.of(
        "A", "accuracy", idx, ["Yes"] * 6, ["Yes"] * 6, 1.0,
        prompt_hashes=["p0", "p0", "p1", "p2", "p3", "p4"],
    )  # fmt: skip
    docs = {"0": "", "1": "", "2": "d1", "3": "d1", "4": "  ", "5": "d2"}
    c = compare.clustering([arm], idx, "column:document_name", docs)
    # rows 0-1 one prompt (empty document keeps them together), 2-3 one document, blank = none
    assert c.ids.tolist() == [0, 0, 1, 1, 2, 3]
    assert c.how == "column:document_name+prompt"
    with pytest.raises(Exception, match="cluster_by must be"):
        compare.clustering([arm], idx, "documents")


def test_none_keys_are_not_one_big_cluster() -> None:
    ids = clusters.checked([None, "a", None, "a", float("nan")], 5)
    assert ids.tolist() == [0, 1, 2, 1, 3]


def test_rows_without_a_prompt_hash_are_named_not_hidden() -> None:
    y, a, b = _dataset(20, seed=6)
    idx = [str(i) for i in range(20)]
    fn = stats.metric_fn("accuracy")
    half = [f"p{i}" if i < 10 else None for i in range(20)]
    arms = [
        TrialRecord.of(n, "accuracy", idx, y, g, fn(y, g), prompt_hashes=half)
        for n, g in (("A", a), ("B", b))
    ]
    row = compare.pair(*arms, n_resamples=500)
    assert row.cluster_note and "10 of 20 rows have no prompt hash" in row.cluster_note
    full = [TrialRecord.of(x.variant, x.metric, idx, y, x.generations, x.score) for x in arms]
    assert "20 of 20" in compare.pair(*full, n_resamples=500).cluster_note
    with pytest.raises(Exception, match="prompt hashes for 20 rows"):
        compare.pair(
            TrialRecord.of("A", "accuracy", idx, y, a, fn(y, a), prompt_hashes=["h"] * 5),
            arms[1], n_resamples=100,
        )  # fmt: skip


def test_mixed_class_clusters_do_not_depend_on_row_order() -> None:
    rng = np.random.default_rng(3)
    y = np.array(["yes", "no"] * 60)
    a = np.where(rng.random(120) < 0.8, y, np.where(y == "yes", "no", "yes"))
    keys = np.arange(120) // 2  # every cluster holds one "yes" and one "no" row
    one = stats.bootstrap_ci(y, a, metric="balanced_accuracy", clusters=keys)
    order = np.argsort(y, kind="stable")  # all "no" rows first
    two = stats.bootstrap_ci(y[order], a[order], metric="balanced_accuracy", clusters=keys[order])
    assert (one.unreliable, one.note) == (two.unreliable, two.note)
    assert "120 rows are in clusters that mix answer classes" in one.note


def test_comparisons_csv_takes_every_row_s_keys() -> None:
    """An untested comparison (an incomplete arm) may come first and has fewer keys than a
    tested one: the CSV still holds every column, blank where a row has none."""
    import csv
    import io

    from experiments.tracking import comparisons_csv

    y, a, b = _dataset(20, seed=8)
    idx = [str(i) for i in range(20)]
    fn = stats.metric_fn("accuracy")
    done = [TrialRecord.of(n, "accuracy", idx, y, g, fn(y, g)) for n, g in (("A", a), ("B", b))]
    lost = TrialRecord.of("C", "accuracy", idx, y, [None] * 20, None, status="failed", n_errors=20)
    pairs = [compare.pair(done[0], lost, n_resamples=200), compare.pair(*done, n_resamples=200)]
    rows = [r.to_dict() for r in pairs]
    assert set(rows[0]) <= set(rows[1])
    parsed = list(csv.DictReader(io.StringIO(comparisons_csv(rows))))
    assert parsed[1]["ci_method"] and parsed[0]["p_value"] == ""


def test_an_mde_outside_its_validated_range_is_marked() -> None:
    """Few units: the MDE80's true power was measured off 0.80 +- 0.05 there, so the row
    carries `mde_unreliable` and the table marks the MDE with '?'; many units do not."""
    from experiments import output

    fn = stats.metric_fn("accuracy")
    marks = {}
    for n in (16, 120):
        y, a, b = _dataset(n, seed=11)
        idx = [str(i) for i in range(n)]
        arms = [
            TrialRecord.of(name, "accuracy", idx, y, g, fn(y, g))
            for name, g in (("A", a), ("B", b))
        ]
        row = compare.pair(*arms, n_resamples=500)
        line = output.comparison_table([{**row.to_dict(), "task": "t", "p_corrected": 1.0}])
        line = line.splitlines()[1]
        marks[n] = (row.mde_unreliable, "?" in line)
    assert marks == {16: (True, True), 120: (False, False)}


@pytest.mark.slow
def test_an_interval_that_disagrees_with_the_test_says_so() -> None:
    """Three classes, A fixes two rows of each and breaks none: the exact test rejects
    (p = 1/32); wherever the interval still holds 0 the row must say so, never show both
    silently. Over random data too: a row whose p and interval disagree carries the note."""
    fn = stats.metric_fn("balanced_accuracy")
    labels = ["a", "b", "c"]
    y = [lab for lab in labels for _ in range(50)]
    b = [t if i % 50 >= 10 else "b" if t != "b" else "c" for i, t in enumerate(y)]
    a = [
        t if (i % 50 >= 10 or i % 50 < 2) else g for i, (t, g) in enumerate(zip(y, b, strict=True))
    ]
    idx = [str(i) for i in range(len(y))]
    rows = []
    for seed in range(5):
        ys, as_, bs = (y, a, b) if seed == 0 else _dataset(60, seed=seed)
        ix = idx if seed == 0 else [str(i) for i in range(60)]
        f = fn if seed == 0 else stats.metric_fn("balanced_accuracy")
        arms = [
            TrialRecord.of(n, "balanced_accuracy", ix, ys, g, f(ys, g))
            for n, g in (("A", as_), ("B", bs))
        ]
        rows.append(compare.pair(*arms, n_resamples=2000))
    assert rows[0].p_value < 0.05
    for r in rows:
        excludes = r.ci_low > 0 or r.ci_high < 0
        said = "contains 0" in (r.ci_note or "") or "excludes 0" in (r.ci_note or "")
        assert said == ((r.p_value < 0.05) != excludes), r
    assert "unreliable: unreliable" not in " ".join(str(r.ci_note) for r in rows)
