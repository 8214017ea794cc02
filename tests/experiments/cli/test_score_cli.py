"""`workbench score`: every bad predictions file is one clear line naming file:line, exit 2,
no traceback and no output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.data


def _score(
    lb_dir: Path, path: Path, task: str = "hearsay", *extra: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LEGALBENCH_DIR": str(lb_dir)}
    args = [sys.executable, "-m", "experiments.cli", "score", task, str(path), *extra]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)


def _write(path: Path, *rows: object) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _fails_clearly(r: subprocess.CompletedProcess[str], path: Path, *needles: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stdout == ""
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert str(path) in err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def test_good_file_scores(lb_dir: Path, tmp_path: Path) -> None:
    f = _write(
        tmp_path / "p.jsonl",
        {"generation": "Yes", "answer": "Yes"},
        {"generation": "no.", "answer": "No"},
        {"generation": "Maybe", "answer": "no"},
    )
    r = _score(lb_dir, f, "hearsay", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["n"] == 3 and out["score"] == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("value", "kind"),
    [(None, "null"), (["Yes"], "a list"), ({"x": "Yes"}, "an object"), (True, "a boolean")],
)
@pytest.mark.parametrize("field", ["answer", "generation"])
def test_non_string_fields_are_errors(
    lb_dir: Path, tmp_path: Path, field: str, value: object, kind: str
) -> None:
    row = {"generation": "Yes", "answer": "Yes", field: value}
    f = _write(tmp_path / "p.jsonl", {"generation": "Yes", "answer": "Yes"}, row)
    _fails_clearly(_score(lb_dir, f), f, f"{f}:2:", repr(field), kind)


def test_answer_outside_the_label_set_is_an_error(lb_dir: Path, tmp_path: Path) -> None:
    f = _write(
        tmp_path / "p.jsonl",
        {"generation": "Yes", "answer": "Yes"},
        {"generation": "Yes", "answer": "No"},
        {"generation": "Yes", "answer": "Maybe"},
    )
    # a single-label task's documented labels are all its classes (issue 35): still refused
    err = _fails_clearly(_score(lb_dir, f), f, f"{f}:3:", "'Maybe'", "not a label", "'Yes'")
    assert "is the file for another task, or the answer mistyped?" in err


def test_multi_label_answers_are_checked_part_by_part(lb_dir: Path, tmp_path: Path) -> None:
    good = _write(
        tmp_path / "good.jsonl",
        {"generation": "de facto merger", "answer": "de facto merger,mere continuation"},
    )
    r = _score(lb_dir, good, "successor_liability")
    assert r.returncode == 0, r.stderr
    # a part no local file documents is scored as evaluation.py scores it, with a note
    # (issue 35; test_score_undocumented_gold.py): only a typo of a documented one is refused
    other = _write(
        tmp_path / "other.jsonl",
        {"generation": "de facto merger", "answer": "de facto merger,piercing the veil"},
    )
    r = _score(lb_dir, other, "successor_liability")
    assert r.returncode == 0 and "'piercing the veil' (1 row, first line 1)" in r.stderr
    bad = _write(
        tmp_path / "bad.jsonl",
        {"generation": "de facto merger", "answer": "de facto merger,mere continuaton"},
    )
    r = _score(lb_dir, bad, "successor_liability")
    _fails_clearly(r, bad, f"{bad}:1:", "continuaton", "a typo of 'mere continuation'")


def test_non_utf8_bytes_are_one_clear_line(lb_dir: Path, tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_bytes(
        b'{"generation": "Yes", "answer": "Yes"}\n{"generation": "\xff\xfe", "answer": "No"}\n'
    )
    _fails_clearly(_score(lb_dir, f), f, f"{f}:2:", "not UTF-8")


def test_deeply_nested_json_is_one_clear_line(lb_dir: Path, tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text('{"generation": "Yes", "answer": "Yes"}\n' + "[" * 100_000 + "\n")
    # `promptlib.inputs.loads`, every reader's JSON: the file, the line, the limit
    _fails_clearly(_score(lb_dir, f), f, "nested deeper than 64 levels (line 2)")


def test_a_huge_json_integer_is_one_clear_line(lb_dir: Path, tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text('{"generation": "Yes", "answer": ' + "9" * 5000 + "}\n")
    _fails_clearly(_score(lb_dir, f), f, f"{f}: line 1:", "an integer of 5,000 digits")


def test_unparsable_metric_input_names_the_row(lb_dir: Path, tmp_path: Path) -> None:
    f = _write(
        tmp_path / "p.jsonl",
        {"generation": "$100", "answer": "$100"},
        {"generation": "$5", "answer": "about five dollars"},
    )
    _fails_clearly(_score(lb_dir, f, "sara_numeric"), f, f"{f}:2:", "sara_numeric")


def test_integer_answers_are_read_as_digits(lb_dir: Path, tmp_path: Path) -> None:
    f = _write(tmp_path / "p.jsonl", {"generation": "$100", "answer": 100})
    r = _score(lb_dir, f, "sara_numeric", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["score"] == 1.0


@pytest.mark.parametrize("make", ["missing", "directory"])
def test_missing_file_or_directory(lb_dir: Path, tmp_path: Path, make: str) -> None:
    f = tmp_path / "p.jsonl"
    if make == "directory":
        f.mkdir()
    _fails_clearly(_score(lb_dir, f), f)
