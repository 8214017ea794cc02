"""`read_predictions_file`: the gold labels outside a task's documented ones, read where the
official metric scores them (`metrics.scores_undocumented_gold`) and listed, never silently."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from experiments.metrics import scores_undocumented_gold
from experiments.trials.predictions import (
    UndocumentedLabel,
    read_predictions,
    read_predictions_file,
)
from promptlib import Catalog
from promptlib.errors import WorkbenchError

LABELS = ("de facto merger", "express agreement", "fraudulent conveyance", "mere continuation")
HOW = "F1: each a false negative, which no prediction can match"


def _write(path: Path, *answers: str) -> Path:
    rows = [json.dumps({"generation": "mere continuation", "answer": a}) for a in answers]
    path.write_text("".join(r + "\n" for r in rows), encoding="utf-8")
    return path


def test_undocumented_parts_are_listed_with_their_rows(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "p.jsonl",
        "mere continuation",
        "implied assumption of liability",
        "de facto merger,Implied Assumption of Liability.",  # the same label, as normalised
        "alter ego,alter ego",  # named twice in one row: one row
        "implied assumption of liability,mere continuation",
    )
    read = read_predictions_file(f, LABELS, multi_label=True, undocumented=HOW)
    assert read.answers[2] == "de facto merger,Implied Assumption of Liability."  # as given
    assert read.lines == [1, 2, 3, 4, 5]
    assert read.undocumented == (
        UndocumentedLabel("implied assumption of liability", rows=3, first_line=2),
        UndocumentedLabel("alter ego", rows=1, first_line=4),
    )


def test_without_a_metric_that_scores_them_they_are_refused(tmp_path: Path) -> None:
    f = _write(tmp_path / "p.jsonl", "mere continuation", "implied assumption of liability")
    message = r"p\.jsonl:2: answer 'implied assumption of liability' is not a label"
    with pytest.raises(WorkbenchError, match=message):
        read_predictions_file(f, LABELS, multi_label=True)
    with pytest.raises(WorkbenchError, match=message):  # the old reader: unchanged
        read_predictions(f, LABELS, multi_label=True)


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("mere continuaton", "a typo of 'mere continuation'"),
        ("De Facto Mergers", "a typo of 'de facto merger'"),
        ("express agreement,", "an empty part (a stray comma?)"),
    ],
)
def test_typos_and_empty_parts_stay_errors(tmp_path: Path, answer: str, says: str) -> None:
    f = _write(tmp_path / "p.jsonl", "mere continuation", answer)
    with pytest.raises(WorkbenchError, match=r"p\.jsonl:2: answer .* not a label") as e:
        read_predictions_file(f, LABELS, multi_label=True, undocumented=HOW)
    assert says in str(e.value)


def test_which_metrics_score_an_undocumented_gold_label() -> None:
    # multi-label answers (successor_liability): both official metrics score them
    assert scores_undocumented_gold("balanced_accuracy", multi_label=True)
    assert scores_undocumented_gold("successor_liability_f1", multi_label=True) == HOW
    assert scores_undocumented_gold("rule_conclusion_successor_liability_f1", multi_label=True)
    # single-label tasks: every class their README counts is documented, so refused
    for metric in ("balanced_accuracy", "macro_f1", "exact_match"):
        assert scores_undocumented_gold(metric, multi_label=False) is None
    assert scores_undocumented_gold("macro_f1", multi_label=True) is None


@pytest.mark.data
def test_single_label_tasks_document_every_class_their_readme_counts(catalog: Catalog) -> None:
    """Why a single-label task's undocumented gold answer stays refused: on the shipped data
    each documents at least as many labels as its README's "binary" / "N-way" counts, so an
    extra one is a file for another task or a typo (`scores_undocumented_gold`)."""
    checked = 0
    for spec in catalog.specs():
        if not spec.is_classification or spec.task_type == "multi-label":
            continue
        readme = catalog.task(spec.name).files.readme() or ""
        kind = re.search(r"\*\*Task type\*\*:\s*(.+)", readme)
        ways = re.search(r"(\d+)-way", kind.group(1)) if kind else None
        counted = int(ways.group(1)) if ways else 2 if spec.task_type == "binary" else None
        assert counted is not None, spec.name
        assert len(spec.labels or ()) >= counted, (spec.name, counted, spec.labels)
        checked += 1
    assert checked > 100
