"""Hostile review B of the calibrated comparison (issue 33): numbers that were wrong with no
sign, each pinned on small hand-made trial folders written through the stores (predictions,
`write_judge`, sheet keys and `append_grades`)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from experiments import output
from experiments.calibrated import Arm, calibrated_report
from experiments.grading.store import (
    HandGrade,
    SheetItem,
    SheetKey,
    append_grades,
    generation_sha256,
    save_sheet_key,
)
from experiments.judge.store import JudgeMeta, JudgeScore, encode_scores, write_judge
from experiments.trials.predictions import encode_predictions
from experiments.trials.record import Prediction

JUDGE_ID = "cd" * 32
TASK, MODEL, CRIT = "hearsay", "stub", "correctness"
A = Arm("a" * 16, TASK, MODEL, "A")
B = Arm("b" * 16, TASK, MODEL, "B")


def _write(
    runs: Path,
    arm: Arm,
    truth: Sequence[int],
    judge: Sequence[int],
    *,
    failed: Sequence[int] = (),
    hashes: Sequence[str] | None = None,
    order: Sequence[int] | None = None,
) -> list[tuple[str, str, str, int]]:
    """A trial folder (rows in `order`; `failed` rows with no generation) and its judge run;
    its answered rows as (trial, index, generation sha256, truth)."""
    preds, lines, items = [], [], []
    for i in order if order is not None else range(len(truth)):
        gen = None if i in failed else f"{arm.variant} answer {i}: {truth[i]}"
        h = hashes[i] if hashes is not None else f"{arm.variant}{i}"
        preds.append(
            Prediction(str(i), h, "x", gen, None, None, error="x" if gen is None else None)
        )
        if gen is None:
            continue
        sha = generation_sha256(gen)
        lines.append(JudgeScore(str(i), CRIT, int(judge[i]), sha, "p", "r", JUDGE_ID, "r"))
        items.append((arm.trial_id, str(i), sha, int(truth[i])))
    folder = runs / arm.trial_id
    folder.mkdir(parents=True)
    (folder / "predictions.jsonl").write_text(encode_predictions(preds))
    text = encode_scores(lines)
    meta = JudgeMeta(
        JUDGE_ID, arm.trial_id, TASK, "j", {}, "generate", {}, "v1", {}, len(lines), 0, 0,
        None, "complete", {}, hashlib.sha256(text.encode("utf-8")).hexdigest(), "now",
    )  # fmt: skip
    write_judge(folder, meta, lines)
    return items


def _grade(grades: Path, items: Sequence[tuple[str, str, str, int]], k: int, seed: int = 0) -> None:
    """A sheet of `items` in a seeded random order, its first `k` graded from the truth."""
    order = np.random.default_rng(seed).permutation(len(items))
    key = tuple(
        SheetItem(f"i{p}", items[j][0], items[j][1], items[j][2], p) for p, j in enumerate(order)
    )
    save_sheet_key(SheetKey("s1", seed, "now", (CRIT,), key), grades)
    truth = {(t, i): y for t, i, _, y in items}
    graded = [
        HandGrade(it.trial_id, it.index, CRIT, truth[(it.trial_id, it.index)], "ann", "s1",
                  it.item, it.generation_sha256, it.position, "now")
        for it in key[:k]
    ]  # fmt: skip
    append_grades(graded, grades)


def _report(root: Path, pairs: Sequence[tuple[str, str]] = (("A", "B"),)):  # type: ignore[no-untyped-def]
    return calibrated_report(
        "t", [A, B], {(TASK, MODEL): list(pairs)}, criteria=(CRIT,), runs_root=root / "runs",
        grades_root=root / "grades",
    )  # fmt: skip


def test_rows_a_variant_failed_are_left_out_not_imputed(tmp_path: Path) -> None:
    """B's call failed on rows 0-39 (no generation: never judged, never on a sheet). They
    were rows of B's estimate with a judge score of 0.5 and an inclusion probability of
    n/N, though no grade could ever reach them: B's mean came out 0.65 where every answered
    row is graded and 45 of its 60 pass (0.75). Now the estimate is over answered rows (the
    pair over rows both answered), and the report says how many were left out."""
    yb = [0] * 40 + [1] * 45 + [0] * 15
    ya = [1] * 50 + [0] * 50
    items = _write(tmp_path / "runs", A, ya, ya) + _write(
        tmp_path / "runs", B, yb, yb, failed=range(40)
    )
    _grade(tmp_path / "grades", items, len(items))  # every answered row graded
    report = _report(tmp_path)
    mean_b = next(m for m in report.cells[0].means if m.variant == "B")
    assert mean_b.n_rows == 60
    assert mean_b.estimate is not None and abs(mean_b.estimate - 0.75) < 1e-9
    assert mean_b.judge_mean is not None and abs(mean_b.judge_mean - 0.75) < 1e-9
    row = report.cells[0].comparisons[0]
    truth = float(np.mean(np.array(ya[40:]) - np.array(yb[40:])))
    assert row.n_rows == 60
    assert row.estimate is not None and abs(row.estimate - truth) < 1e-9
    assert "B, correctness: 40 row(s) unanswered" in output.calibrated_table(report)


def test_grade_next_counts_grades_on_the_pairs_clusters_and_rows(tmp_path: Path) -> None:
    """`grade next --target` recomputed the difference itself, without the prompt clusters
    and pairing rows by file position: on 100 texts repeated 4 times it asked for 4 more
    grades where the reported interval (clustered) needs 89, and with B's rows stored in
    another order it paired row i of A with another row of B. The count is now the
    reported comparison's own (`hand_grades_needed` of its PPI result)."""
    from experiments.analysis.stats import ppi
    from experiments.calibrated import compare
    from experiments.calibrated.load import load_frames
    from experiments.calibrated.next import next_items
    from experiments.grading.store import load_grades, load_sheet_keys

    rng = np.random.default_rng(0)
    n, m = 400, 100
    texts = rng.integers(0, m, n)
    ya = (rng.random(m) < 0.6)[texts].astype(int)
    yb = (rng.random(m) < 0.5)[texts].astype(int)
    ja = np.where((rng.random(m) < 0.8)[texts], ya, 1 - ya).tolist()
    jb = np.where((rng.random(m) < 0.8)[texts], yb, 1 - yb).tolist()
    runs, grades = tmp_path / "runs", tmp_path / "grades"
    items = _write(runs, A, ya.tolist(), ja, hashes=[f"a{t}" for t in texts]) + _write(
        runs, B, yb.tolist(), jb, hashes=[f"b{t}" for t in texts], order=rng.permutation(n).tolist()
    )
    _grade(grades, items, 160)
    found = next_items([A, B], ("A", "B"), CRIT, target=0.12, runs_root=runs, grades_root=grades)
    frames = load_frames(
        [A, B], [CRIT], JUDGE_ID, runs, load_grades(grades), load_sheet_keys(grades)
    )
    row, est = compare._pair(frames[("A", CRIT)], frames[("B", CRIT)], 0.95)
    assert row.valid and row == found.comparison
    assert found.more_needed == ppi.hand_grades_needed(est.result, target_half_width=0.12)
    assert found.more_needed is not None and found.more_needed > 40


def test_a_tested_best_vs_worst_row_is_not_read_as_a_planned_pair() -> None:
    """A tested range row names the observed best and worst variants as a and b (with k),
    and its stored form has no `is_range`: it was read as a declared pair, so the calibrated
    report tested only the pair the scores picked, with an uncorrected p-value and no note.
    Every pair of the (task, model) is compared instead, and said."""
    from experiments.analysis.records import Comparison
    from experiments.calibrated.report import BEST_VS_WORST_NOTE, _pairs

    arms = [Arm(f"t{v}", TASK, MODEL, v) for v in ("v1", "v2", "v3")]
    tested = Comparison(
        a="v3", b="v1", status="tested", metric="accuracy", p_value=0.01, k=3,
        model=MODEL, task=TASK,
    )  # fmt: skip
    pairs, note = _pairs([tested.to_dict()], arms)
    assert pairs[(TASK, MODEL)] == (("v1", "v2"), ("v1", "v3"), ("v2", "v3"))
    assert note == BEST_VS_WORST_NOTE
    untested = Comparison(
        a="best", b="worst", status="untested", metric=None, model=MODEL, task=TASK
    )
    assert _pairs([untested.to_dict()], arms) == (pairs, note)


def test_a_criterion_the_judge_never_scored_has_no_judge_number(tmp_path: Path) -> None:
    """The judge run scored correctness only. On analysis every row was "unscored" and
    counted 0.5, so the report printed a judge score of 0.500 [0.500, 0.500] per variant and
    "judge score (not calibrated) A − B = +0.000" [nan, nan] in the decision line: numbers
    of a judge that said nothing. Now there is no judge number where no row was scored."""
    ya, yb = [1, 0] * 30, [1, 1, 0] * 20
    items = _write(tmp_path / "runs", A, ya, ya) + _write(tmp_path / "runs", B, yb, yb)
    _grade(tmp_path / "grades", items, 0)
    report = calibrated_report(
        "t", [A, B], {(TASK, MODEL): [("A", "B")]}, criteria=(CRIT, "analysis"),
        runs_root=tmp_path / "runs", grades_root=tmp_path / "grades",
    )  # fmt: skip
    cell = report.cells[0]
    judged = {m.criterion: m.judge_mean for m in cell.means if m.variant == "A"}
    assert judged == {CRIT: 0.5, "analysis": None}
    rows = {r.criterion: r for r in cell.comparisons}
    judge_diff = rows[CRIT].judge_estimate
    assert judge_diff is not None and abs(judge_diff + 1 / 6) < 1e-9
    assert rows["analysis"].judge_estimate is None and rows["analysis"].judge_low is None
    text = output.calibrated_table(report)
    assert "nan" not in text and "0.500   [0.500,0.500]" not in text
    assert "A − B = +0.000" not in rows["analysis"].decision
    assert "analysis: no hand grades and no judge score" in text


def test_a_sheet_row_rerun_since_does_not_cut_the_graded_prefix(tmp_path: Path) -> None:
    """A sheet graded top to bottom (40 items), then B's trial rerun and one row's answer
    changed: that item can never be graded again (the sheet shows the old answer), and
    every row graded after it was left out as "graded out of order" (27 of 39 current
    grades, here), with advice to grade the skipped item. Its order among the rows that did
    not change is still random: an item whose answer changed is no longer on the sheet."""
    ya, yb = [1, 0, 1] * 20, [0, 1, 1] * 20
    runs, grades = tmp_path / "runs", tmp_path / "grades"
    items = _write(runs, A, ya, ya) + _write(runs, B, yb, yb)
    _grade(grades, items, 40)
    from experiments.grading.store import load_sheet_key

    key = load_sheet_key("s1", grades)
    assert key is not None
    later = [i for i in key.items if i.trial_id == B.trial_id and i.position >= 10]
    rerun = min(later, key=lambda i: i.position)
    path = runs / B.trial_id / "predictions.jsonl"
    path.write_text(
        path.read_text().replace(f'"B answer {rerun.index}: ', f'"B answer {rerun.index} (rerun): ')
    )
    report = _report(tmp_path)
    row = report.cells[0].comparisons[0]
    assert row.random_subset, row.subset_note
    assert row.n_hand_a + row.n_hand_b == 39
    assert "NOT A RANDOM SUBSET" not in output.calibrated_table(report)
