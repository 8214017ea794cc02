"""The calibrated comparison through its real path (trial folders, judge score files, the
hand-grade store and sheet keys), on data whose truth is known.

A stub model's answers are correct with set per-variant probabilities; a stub judge agrees
with the truth 80% of the time and is biased toward variant A by `bias`; hand grades from
the truth fill the first 15% of a shuffled sheet. The PPI interval must cover the true
difference, the judge-only one must not (under bias 0.15), and the report must say the
judge-only numbers are judge scores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from experiments import output
from experiments.calibrated import Arm, calibrated_report
from experiments.calibrated.report import CRITERIA
from experiments.grading.store import (
    HandGrade,
    SheetItem,
    SheetKey,
    append_grades,
    generation_sha256,
    save_sheet_key,
)
from experiments.trials.predictions import encode_predictions
from experiments.trials.record import Prediction

JUDGE_ID = "j" * 64
TASK, MODEL = "hearsay", "stub"


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
) -> tuple[list[Arm], float]:
    """Two trials (A, B) on `n` rows under `root`, judged and partly hand-graded; the true
    A − B (the probabilities' difference)."""
    runs, grades = root / "runs", root / "grades"
    arms = [Arm(f"{v.lower() * 8}{abs(hash(str(root))) % 10**8:08d}", TASK, MODEL, v) for v in p]
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
                {"index": str(i), "criterion": c, "score": int(judge[i]),
                 "generation_sha256": sha, "judge_id": JUDGE_ID}
                for c in CRITERIA
            ]  # fmt: skip
            items.append((arm.trial_id, str(i), sha, int(truth[i])))
        folder = runs / arm.trial_id
        (folder / "judge").mkdir(parents=True)
        (folder / "predictions.jsonl").write_text(encode_predictions(preds))
        (folder / "judge" / f"{JUDGE_ID}.jsonl").write_text(
            "".join(json.dumps(d) + "\n" for d in lines)
        )
        (folder / "judge" / f"{JUDGE_ID}.json").write_text(json.dumps({"judge_id": JUDGE_ID}))
    order = rng.permutation(len(items))
    key_items = tuple(
        SheetItem(f"item{k}", items[j][0], items[j][1], items[j][2], k) for k, j in enumerate(order)
    )
    save_sheet_key(SheetKey("s1", 1, "now", CRITERIA, key_items), grades)
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
                "s1",
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


def test_ppi_covers_and_judge_only_does_not_under_bias(tmp_path: Path) -> None:
    """~100 reps of n=300 rows per arm, 15% hand-graded, judge biased toward A by 0.15."""
    rng = np.random.default_rng(33)
    reps, ppi_hits, judge_hits, ratios = 100, 0, 0, []
    for r in range(reps):
        arms, truth = _cell(
            tmp_path / str(r), rng, n=300, p={"A": 0.6, "B": 0.6}, bias=0.15, share=0.15
        )
        row = _report(tmp_path / str(r), arms).cells[0].comparisons[0]
        assert row.valid, row.reason
        assert row.low is not None and row.high is not None
        ppi_hits += row.low <= truth <= row.high
        assert row.judge_low is not None and row.judge_high is not None
        judge_hits += row.judge_low <= truth <= row.judge_high
        if row.width_ratio is not None:
            ratios.append(row.width_ratio)
    # 95% nominal: over 100 reps the MC standard error is ~2.2 points
    assert ppi_hits >= 88, ppi_hits
    assert judge_hits <= 60, judge_hits
    assert np.median(ratios) < 1.0  # the judge narrows the hand-only interval


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
    assert "grade the next 5 items of sheet s1" in output.next_items(found)
    done = next_items(
        arms, ("A", "B"), "correctness", target=0.9, runs_root=runs, grades_root=grades
    )
    assert done.stop and not done.items and "stop grading" in done.line
