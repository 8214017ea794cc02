"""`workbench score successor_liability` scores a gold label no local file documents exactly
as LegalBench's own `evaluation.py` scores it, and says so in a note (issue 35, point 5).

LegalBench's full test split holds 'implied assumption of liability', which no shipped file
names; `evaluation.py` scores it (its F1 counts every gold part no prediction matches as a
false negative; balanced accuracy makes every distinct answer a class). The reference below
is LegalBench's code, copied verbatim; the CLI's numbers must equal it bit for bit.
"""

# ruff: noqa: UP006, UP035 (LegalBench's `List` annotations, kept verbatim)
from __future__ import annotations

import json
import os
import string  # evaluation.py's own import, used by its normalize below
import subprocess
import sys
import warnings
from pathlib import Path
from typing import List

import pytest
from nltk.stem.porter import PorterStemmer
from sklearn.metrics import balanced_accuracy_score

pytestmark = pytest.mark.data

UNDOCUMENTED = "implied assumption of liability"


# ---- LegalBench's evaluation.py, verbatim ----------------------------------------------------
# Source: https://github.com/HazyResearch/legalbench/blob/ce482446b8eac4403b6db2c17223af4514bb24e3/evaluation.py
# (commit ce482446b8eac4403b6db2c17223af4514bb24e3). Its `evaluate(task, ...)` checks
# EXACT_MATCH_BALANCED_ACC_TASKS first, and "successor_liability" is in that list: the code
# scores the task with `evaluate_exact_match_balanced_accuracy` (workbench's default,
# `--definition code`); `evaluate_successor_liability` is the paper's F1 (`--definition paper`).
# The file does `from nltk.stem.porter import *`; PorterStemmer is imported above instead.
# Only `# type: ignore` comments are added (mypy: the original has no return types).
# fmt: off
def normalize(text: str, stem: bool) -> str:
    """
    Normalizes strings.

    Args:
        - text: text to normalize
        - stem: whether or not to apply a stemmer
    
    Returns: normalized text
    """

    # Remove punctuation
    text = str(text).translate(str.maketrans("", "", string.punctuation))

    # Remove extra spaces
    text = text.strip()

    # Make lower case
    text = text.lower()

    # Stem
    if stem:
        text = PorterStemmer().stem(text)
    return text


def evaluate_exact_match_balanced_accuracy(generations: List[str], answers: List[str]):  # type: ignore[no-untyped-def]
    """
    Evaluates exact match using balanced_accuracy.
    """
    normalized_answers = [normalize(a, stem=False) for a in answers]
    normalized_gens = [normalize(g, stem=False) for g in generations]
    return balanced_accuracy_score(normalized_answers, normalized_gens)


def evaluate_successor_liability(generations: List[str], answers: List[str]):  # type: ignore[no-untyped-def]
    """
    For successor liability, we measure F1 over the predicted exceptions.
    """
    CLASSES = [
        "express agreement",
        "fraudulent conveyance",
        "de facto merger",
        "mere continuation",
    ]
    tp, fp, fn = 0, 0, 0
    for i in range(len(generations)):
        predictions = [c for c in CLASSES if c in str(generations[i])]
        sample_answers = str(answers[i]).split(",")

        for j in range(len(predictions)):
            if predictions[j] in sample_answers:
                index = sample_answers.index(predictions[j])
                del sample_answers[index]
                tp += 1
            else:
                fp += 1
        fn += len(sample_answers)
        f1 = 2 * tp / (2 * tp + fp + fn)
    return f1
# fmt: on
# ---- end of LegalBench's code ----------------------------------------------------------------

# (generation, gold answer): documented answers, the undocumented label alone and combined,
# and generations outside the task's classes (the undocumented label itself, free text, a
# capitalised exception that the F1's case-sensitive match misses, an empty reply).
ROWS = [
    ("mere continuation", "mere continuation"),
    ("fraudulent conveyance, mere continuation", "fraudulent conveyance,mere continuation"),
    ("de facto merger", "de facto merger,mere continuation"),
    ("express agreement", UNDOCUMENTED),
    (UNDOCUMENTED, UNDOCUMENTED),
    ("none of them", UNDOCUMENTED),
    ("Mere Continuation", f"mere continuation,{UNDOCUMENTED}"),
    ("de facto merger", f"de facto merger,{UNDOCUMENTED}"),
    ("", f"{UNDOCUMENTED},express agreement"),
    ("piercing the corporate veil", "express agreement"),
    ("mere continuation", "fraudulent conveyance,mere continuation"),
    # a space after the comma: evaluation.py's F1 splits without stripping, so ' mere
    # continuation' is matched by no prediction (documented, as normalised, all the same)
    ("mere continuation", "fraudulent conveyance, mere continuation"),
]


def _write(path: Path, rows: list[tuple[str, str]]) -> Path:
    lines = [json.dumps({"generation": g, "answer": a}) for g, a in rows]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _score(lb_dir: Path, path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LEGALBENCH_DIR": str(lb_dir)}
    args = [sys.executable, "-m", "experiments.cli", "score", "successor_liability", str(path)]
    return subprocess.run([*args, *extra], env=env, capture_output=True, text=True, timeout=120)


def _reference(definition: str, rows: list[tuple[str, str]]) -> float:
    gens = [g for g, _ in rows]
    answers = [a for _, a in rows]
    if definition == "paper":
        return float(evaluate_successor_liability(gens, answers))
    with warnings.catch_warnings():  # sklearn: "y_pred contains classes not in y_true"
        warnings.simplefilter("ignore")
        return float(evaluate_exact_match_balanced_accuracy(gens, answers))


@pytest.mark.parametrize("definition", ["code", "paper"])
def test_undocumented_gold_label_scores_as_evaluation_py(
    lb_dir: Path, tmp_path: Path, definition: str
) -> None:
    f = _write(tmp_path / "published.jsonl", ROWS)
    r = _score(lb_dir, f, "--definition", definition, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["n"] == len(ROWS)
    assert out["score"] == _reference(definition, ROWS)  # exactly, not approximately
    how = {
        "code": "balanced accuracy: every answer holding one is a class of its own",
        "paper": "F1: each a false negative, which no prediction can match",
    }[definition]
    assert out["notes"] == [
        "gold answers outside the task's documented labels, scored as LegalBench's "
        f"evaluation.py scores them ({how}): {UNDOCUMENTED!r} (6 rows, first line 4)"
    ], out["notes"]


def test_the_note_is_on_the_console_too(lb_dir: Path, tmp_path: Path) -> None:
    f = _write(tmp_path / "published.jsonl", ROWS)
    r = _score(lb_dir, f)
    assert r.returncode == 0, r.stderr
    value = _reference("code", ROWS)
    assert r.stdout == f"successor_liability  balanced_accuracy = {value:.4f}  (n=12)\n"
    assert r.stderr.startswith("note: gold answers outside the task's documented labels")
    assert f"{UNDOCUMENTED!r} (6 rows, first line 4)" in r.stderr


def test_documented_gold_answers_carry_no_note(lb_dir: Path, tmp_path: Path) -> None:
    rows = [(g, a) for g, a in ROWS if UNDOCUMENTED not in a]
    r = _score(lb_dir, _write(tmp_path / "p.jsonl", rows), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["notes"] == [] and out["score"] == _reference("code", rows)


def _fails_clearly(r: subprocess.CompletedProcess[str], path: Path, *needles: str) -> None:
    """exit 2, one line on stderr naming the file, nothing on stdout, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "" and "Traceback" not in r.stderr
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and str(path) in err, err
    for needle in needles:
        assert needle in err, (needle, err)


def test_an_unparseable_file_is_still_an_error(lb_dir: Path, tmp_path: Path) -> None:
    f = _write(tmp_path / "p.jsonl", ROWS[:3])
    with f.open("a", encoding="utf-8") as out:
        out.write('{"generation": "mere continuation", "answer": \n')
    _fails_clearly(_score(lb_dir, f, "--json"), f, f"{f}:4:", "not valid JSON")
    g = _write(tmp_path / "q.jsonl", [*ROWS[:2], ("mere continuation", None)])  # type: ignore[list-item]
    _fails_clearly(_score(lb_dir, g), g, f"{g}:3:", "'answer'", "null")


@pytest.mark.parametrize(
    ("answer", "needles"),
    [
        # a letter away from a documented exception: a typo, which the official metric
        # would score as a label of its own; refused, naming the label it is close to
        ("mere continuaton", ("'mere continuaton'", "a typo of 'mere continuation'")),
        ("de facto merger,", ("''", "an empty part")),  # a stray comma
    ],
)
def test_a_typo_is_still_refused(
    lb_dir: Path, tmp_path: Path, answer: str, needles: tuple[str, ...]
) -> None:
    f = _write(tmp_path / "p.jsonl", [*ROWS[:2], ("mere continuation", answer)])
    _fails_clearly(_score(lb_dir, f), f, f"{f}:3:", "not a label of this task", *needles)
