"""The calibrated report's reading of stored files, on small hand-made trial folders: judge
scores written through the judge store (`write_judge`), hand grades and sheet keys through
the grade store. Cherry-picked grades, no grades, stale generations, the judge choice, the
labels, `grade next`. (Coverage through the real path, trials run by the runner and judged
by `judge_trial`: test_calibrated_path.py.)"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from experiments import output
from experiments.calibrated import Arm, calibrated_report
from experiments.criteria import CRITERIA
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

JUDGE_ID = "ab" * 32
TASK, MODEL = "hearsay", "stub"


def _meta(arm: Arm, n: int, text: str) -> JudgeMeta:
    return JudgeMeta(
        JUDGE_ID, arm.trial_id, TASK, "stub-judge", {}, "generate", {}, "v1", {}, n, 0, 0,
        None, "complete", {}, hashlib.sha256(text.encode("utf-8")).hexdigest(), "now",
    )  # fmt: skip


def _cell(
    root: Path,
    rng: np.random.Generator,
    *,
    n: int,
    p: dict[str, float],
    bias: float,
    share: float,
    agree: float = 0.8,
    graded: str = "prefix",
    model: str = MODEL,
    sheet: str = "s1",
) -> tuple[list[Arm], float]:
    """Two trials (A, B) on `n` rows under `root`, judged and partly hand-graded; the true
    A − B (the probabilities' difference)."""
    runs, grades = root / "runs", root / "grades"
    salt = abs(hash(str(root) + model)) % 10**8
    arms = [Arm(f"{v.lower() * 8}{salt:08d}", TASK, model, v) for v in p]
    items = []
    for arm in arms:
        truth = rng.random(n) < p[arm.variant]
        right = rng.random(n) < agree
        judge = np.where(right, truth, ~truth).astype(int)
        if arm.variant == "A":
            judge = np.where(rng.random(n) < bias, 1, judge)
        preds, lines = [], []
        for i in range(n):
            gen = f"{arm.variant} answer to row {i}: {'right' if truth[i] else 'wrong'}"
            preds.append(Prediction(str(i), f"h{arm.variant}{i}", "x", gen, None, None))
            sha = generation_sha256(gen)
            lines += [
                JudgeScore(str(i), c, int(judge[i]), sha, "prompt", str(judge[i]), JUDGE_ID, "r")
                for c in CRITERIA
            ]
            items.append((arm.trial_id, str(i), sha, int(truth[i])))
        folder = runs / arm.trial_id
        folder.mkdir(parents=True)
        (folder / "predictions.jsonl").write_text(encode_predictions(preds))
        write_judge(folder, _meta(arm, len(lines), encode_scores(lines)), lines)
    order = rng.permutation(len(items))
    key_items = tuple(
        SheetItem(f"item{k}", items[j][0], items[j][1], items[j][2], k) for k, j in enumerate(order)
    )
    save_sheet_key(SheetKey(sheet, 1, "now", CRITERIA, key_items), grades)
    k = int(share * len(items))
    chosen = list(range(k)) if graded == "prefix" else list(range(k, 2 * k))
    truth_of = {(t, i): y for t, i, _, y in items}
    append_grades(
        [
            HandGrade(
                it.trial_id,
                it.index,
                c,
                truth_of[(it.trial_id, it.index)],
                "ann",
                sheet,
                it.item,
                it.generation_sha256,
                it.position,
                "now",
            )
            for pos in chosen
            for it in (key_items[pos],)
            for c in CRITERIA
        ],
        grades,
    )
    return arms, p["A"] - p["B"]


def _report(root: Path, arms: list[Arm], criteria: tuple[str, ...] = ("correctness",)):  # type: ignore[no-untyped-def]
    return calibrated_report(
        "sim", arms, {(TASK, MODEL): [("A", "B")]}, criteria=criteria,
        runs_root=root / "runs", grades_root=root / "grades",
    )  # fmt: skip


def test_report_labels_judge_only_numbers_and_flags_the_biased_judge(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    arms, _ = _cell(tmp_path, rng, n=400, p={"A": 0.5, "B": 0.5}, bias=0.3, share=0.2)
    report = _report(tmp_path, arms, CRITERIA)
    text = output.calibrated_table(report)
    assert "judge score (not calibrated)" in text
    assert "never correctness or analysis" in text
    assert "Holm" in text
    assert "NOT A RANDOM SUBSET" not in text
    assert "not decided (p corr" in text and "more rows to resolve it" in text
    rows = report.cells[0].comparisons
    assert {r.criterion for r in rows} == set(CRITERIA)
    assert rows[0].family_size == 2
    explained = output.calibrated_table(report, explain=True)
    assert "PPI++" in explained and "cluster-robust by prompt" in explained
    again = type(report).from_dict(json.loads(json.dumps(report.to_dict())))
    assert again == report


def test_cherry_picked_grades_are_left_out_and_said_loudly(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    arms, _ = _cell(
        tmp_path, rng, n=100, p={"A": 0.6, "B": 0.4}, bias=0.0, share=0.2, graded="middle"
    )
    report = _report(tmp_path, arms)
    row = report.cells[0].comparisons[0]
    assert not row.random_subset
    assert row.n_hand_a == row.n_hand_b == 0  # none of them is in a graded prefix
    assert not row.valid and row.hand_needed
    text = output.calibrated_table(report)
    assert "NOT A RANDOM SUBSET" in text
    assert "not decided: grade" in text


def test_without_hand_grades_only_judge_scores_and_how_many_to_grade(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    arms, _ = _cell(tmp_path, rng, n=60, p={"A": 0.6, "B": 0.4}, bias=0.0, share=0.0)
    report = _report(tmp_path, arms)
    mean = report.cells[0].means[0]
    assert mean.estimate is None and mean.judge_mean is not None
    assert mean.hand_needed and mean.hand_needed > 0
    text = output.calibrated_table(report)
    assert "no hand grades: only the judge score (not calibrated) is known" in text


def test_a_grade_of_a_changed_generation_is_dropped_and_counted(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    arms, _ = _cell(tmp_path, rng, n=80, p={"A": 0.6, "B": 0.4}, bias=0.0, share=0.3)
    folder = tmp_path / "runs" / arms[0].trial_id
    text = (folder / "predictions.jsonl").read_text()
    (folder / "predictions.jsonl").write_text(
        text.replace("answer to row", "answer (rerun) to row")
    )
    mean = _report(tmp_path, arms).cells[0].means[0]
    assert mean.n_hand == 0
    assert mean.stale_hand > 0 and mean.stale_judge == 80


@pytest.mark.parametrize("judge", [None, "zz"])
def test_judge_choice(tmp_path: Path, judge: str | None) -> None:
    from experiments.calibrated import CalibratedError

    rng = np.random.default_rng(5)
    arms, _ = _cell(tmp_path, rng, n=20, p={"A": 0.5, "B": 0.5}, bias=0.0, share=0.5)
    if judge is None:
        assert _report(tmp_path, arms).judge_id == JUDGE_ID
        return
    with pytest.raises(CalibratedError, match="no such judge run"):
        calibrated_report(
            "sim", arms, {}, judge=judge, runs_root=tmp_path / "runs",
            grades_root=tmp_path / "grades",
        )  # fmt: skip


def test_grade_next_continues_the_sheet_order_and_says_stop(tmp_path: Path) -> None:
    from experiments.calibrated.next import next_items

    rng = np.random.default_rng(6)
    arms, _ = _cell(tmp_path, rng, n=100, p={"A": 0.6, "B": 0.4}, bias=0.1, share=0.25)
    runs, grades = tmp_path / "runs", tmp_path / "grades"
    found = next_items(
        arms, ("A", "B"), "correctness", k=5, target=0.01, runs_root=runs, grades_root=grades
    )
    assert not found.stop and found.more_needed and found.more_needed > 0
    assert [it.position for it in found.items] == [50, 51, 52, 53, 54]  # 25% of 200 graded
    assert "the next 5 rows of sheet s1's random order" in output.next_items(found)
    done = next_items(
        arms, ("A", "B"), "correctness", target=0.9, runs_root=runs, grades_root=grades
    )
    assert done.stop and not done.items and "stop grading" in done.line


def test_holm_runs_over_the_whole_report_as_the_sweeps_table_does(tmp_path: Path) -> None:
    """Two (task, model) cells in one report: one Holm family of every valid comparison (2
    cells x 2 criteria), not one per cell, which would claim winners at twice the error rate."""
    from experiments.analysis.stats.multiplicity import holm

    rng = np.random.default_rng(5)
    one, _ = _cell(tmp_path, rng, n=300, p={"A": 0.8, "B": 0.5}, bias=0.0, share=0.3)
    two, _ = _cell(
        tmp_path, rng, n=300, p={"A": 0.6, "B": 0.5}, bias=0.0, share=0.3, model="stub2",
        sheet="s2",
    )  # fmt: skip
    pairs = {(TASK, MODEL): [("A", "B")], (TASK, "stub2"): [("A", "B")]}
    report = calibrated_report(
        "sim", [*one, *two], pairs, criteria=CRITERIA, runs_root=tmp_path / "runs",
        grades_root=tmp_path / "grades",
    )  # fmt: skip
    rows = [r for c in report.cells for r in c.comparisons]
    assert len(report.cells) == 2 and len(rows) == 4 and all(r.valid for r in rows)
    assert {r.family_size for r in rows} == {4}
    expected = holm([r.p_value for r in rows if r.p_value is not None])
    assert [r.p_corrected for r in rows] == pytest.approx(expected)
    # shuffled arms: the same numbers
    again = calibrated_report(
        "sim", [*two[::-1], *one[::-1]], pairs, criteria=CRITERIA,
        runs_root=tmp_path / "runs", grades_root=tmp_path / "grades",
    )  # fmt: skip
    by = {(r.model, r.criterion): r.p_corrected for c in again.cells for r in c.comparisons}
    assert by == {(r.model, r.criterion): r.p_corrected for r in rows}


def test_with_no_judge_run_the_report_is_the_hand_grades_alone(tmp_path: Path) -> None:
    """Hand grades and no judge run: the comparison is the hand-only one (lambda 0), said
    so, with no judge number, instead of an error."""
    import shutil

    rng = np.random.default_rng(9)
    arms, _ = _cell(tmp_path, rng, n=120, p={"A": 0.8, "B": 0.4}, bias=0.0, share=0.5)
    for a in arms:
        shutil.rmtree(tmp_path / "runs" / a.trial_id / "judge")
    report = _report(tmp_path, arms, CRITERIA)
    assert report.judge_id == "none"
    rows = report.cells[0].comparisons
    assert all(r.valid and r.judge_estimate is None for r in rows)
    for r in rows:  # the hand-graded difference, its interval the hand-only one's (a hair
        # wider: lambda and c count as fitted even when the missing judge forces lambda to 0)
        assert r.estimate == pytest.approx(r.hand_estimate)
        assert r.low is not None and r.high is not None
        assert r.hand_low is not None and r.hand_high is not None
        ratio = (r.high - r.low) / (r.hand_high - r.hand_low)
        assert 1.0 <= ratio < 1.01
    text = output.calibrated_table(report)
    assert "no judge run: hand grades alone" in text
