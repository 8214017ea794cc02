"""`workbench import` on bad input: one line on stderr naming the file and what to do, exit 2,
and nothing written (no MLflow store, no run, no file). Each case is a file and the words its
error must carry. Readers of the tools' own formats (inspect, lm-eval, promptfoo) add their
cases (a truncated log, an unsupported tool version) in their own tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.experiments.imports.conftest import (
    Workbench,
    correctness,
    lines,
    write_csv,
    write_jsonl,
    write_text,
)

pytestmark = pytest.mark.data

GOOD = lines(correctness(6, 0.7, 0.5))


def _cut(path: Path) -> Path:
    """The file with its last line cut in the middle (a log copied while being written)."""
    text = path.read_text()
    path.write_text(text[: len(text) - 12])
    return path


def _binary(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


Case = tuple[str, str, Callable[[Path], Path], list[str]]
CASES: list[Case] = [
    ("unknown format", "jsonx", lambda d: write_jsonl(d / "r.jsonl", GOOD),
     ["unknown import format 'jsonx'", "did you mean 'jsonl'"]),
    ("a csv file given as jsonl", "jsonl", lambda d: write_csv(d / "r.jsonl", GOOD),
     ["looks like CSV", "workbench import csv"]),
    ("a JSON document given as csv", "csv",
     lambda d: write_text(d / "r.csv", json.dumps({"results": GOOD})),
     ["looks like JSON"]),
    ("a JSON document given as jsonl", "jsonl",
     lambda d: write_text(d / "r.json", json.dumps(GOOD, indent=1)),
     ["not a JSON object on its own line"]),
    ("a zip archive given as jsonl", "jsonl",
     lambda d: _binary(d / "log.eval", b"PK\x03\x04\xff\xfe binary"),
     ["zip archive", "workbench import inspect"]),
    ("variants on different tasks, the first two tasks alike", "jsonl",
     lambda d: write_jsonl(d / "r.jsonl", [*GOOD, *(r | {"task": "abercrombie"} for r in GOOD),
                                           GOOD[0] | {"task": "rule_qa"}]),
     ["task 'rule_qa'", "one comparison needs one task"]),
    # a JSON escape of half a UTF-16 pair is no text: no store can save it (it failed the
    # sqlite store after the comparisons, on every rerun)
    ("a lone surrogate in a variant name", "jsonl",
     lambda d: write_text(d / "r.jsonl", "\n".join(
         json.dumps(r).replace('"variant": "B"', '"variant": "B\\ud800"') for r in GOOD)),
     ["line 7", "\\ud800", "not text"]),
    ("truncated jsonl", "jsonl", lambda d: _cut(write_jsonl(d / "r.jsonl", GOOD)),
     ["cut off", "truncated"]),
    ("truncated csv", "csv", lambda d: _cut(write_csv(d / "r.csv", GOOD)),
     ["different number of fields"]),
    ("rows without ids", "jsonl",
     lambda d: write_jsonl(d / "r.jsonl", [*GOOD, {"variant": "A", "model": "m", "correct": 1}]),
     ["no `row` id"]),
    ("duplicate ids", "jsonl", lambda d: write_jsonl(d / "r.jsonl", [*GOOD, GOOD[0]]),
     ["appears twice"]),
    ("mixed tasks in one comparison", "jsonl",
     lambda d: write_jsonl(d / "r.jsonl", [r | {"task": "abercrombie"} if r["variant"] == "B"
                                           else r for r in GOOD]),
     ["one comparison needs one task", "--task"]),
    ("an empty file", "jsonl", lambda d: write_jsonl(d / "r.jsonl", []), ["no rows"]),
    ("a missing file", "jsonl", lambda d: d / "absent.jsonl", ["no such file"]),
    ("a fractional score", "jsonl",
     lambda d: write_jsonl(d / "r.jsonl", [r | {"correct": 0.5} for r in GOOD]),
     ["1 or 0 per row", "--rescore"]),
    ("rescore on an unknown task", "jsonl",
     lambda d: write_jsonl(d / "r.jsonl", [r | {"task": "no_such_task", "prediction": "Yes",
                                               "answer": "No"} for r in GOOD]),
     ["not one", "--task"]),
]  # fmt: skip


@pytest.mark.parametrize(("what", "fmt", "make", "words"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path,
    lb_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    what: str,
    fmt: str,
    make: Callable[[Path], Path],
    words: list[str],
) -> None:
    (tmp_path / "store").mkdir()
    wb = Workbench(tmp_path / "store", lb_dir, monkeypatch)
    data = tmp_path / "data"
    data.mkdir()
    path = make(data)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    extra = ["--rescore"] if "rescore" in what else []
    result = wb("import", fmt, str(path), "--n-resamples", "200", *extra)
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert str(path) in err, err
    for w in words:
        assert w in err, err
    assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no store, no run, no file
    assert not (tmp_path / "store" / "mlflow.db").exists()


@pytest.mark.parametrize("option", ["--task", "--variant-from", "--model-from", "--scorer"])
@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_field_option_is_refused_not_the_default(
    tmp_path: Path, lb_dir: Path, monkeypatch: pytest.MonkeyPatch, option: str, value: str
) -> None:
    """A script's empty `$FIELD` (`--variant-from ""`) silently read the default field."""
    (tmp_path / "store").mkdir()
    wb = Workbench(tmp_path / "store", lb_dir, monkeypatch)
    path = write_jsonl(tmp_path / "data.jsonl", GOOD)
    result = wb("import", "jsonl", str(path), "--n-resamples", "200", option, value)
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1 and option in err and "empty" in err, err
    assert result.stdout == ""
    assert not (tmp_path / "store" / "mlflow.db").exists()
