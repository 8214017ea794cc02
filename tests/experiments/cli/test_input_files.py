"""Every input file the CLI reads is a regular file of bounded size and depth (issue 30,
defects 7, 9, 11): each input-file option and argument is fed a FIFO (it must answer at once,
not wait for a writer), JSON nested 100,000 deep and an integer of 5,000 digits; each is one
line on stderr naming the file, exit 2, no traceback. Duplicate keys are refused naming the
file, the line and the key."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from tests.conftest import workbench_env

pytestmark = pytest.mark.data

DEEP = 100_000
HUGE_INT = "9" * 5000
LMEVAL_DATE = "2026-01-01T00-00-00.000001"


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _jsonl_row(**extra: object) -> str:
    return json.dumps({"row": "0", "variant": "A", "model": "m", "task": "hearsay", **extra})


# Each input option: (arguments with {path} for the file, the file's name). The file at {path}
# is a FIFO, deeply nested JSON or a huge integer, per test.
OPTIONS: dict[str, tuple[list[str], str]] = {
    "import jsonl": (["import", "jsonl", "{path}", "--no-track"], "r.jsonl"),
    "import csv": (["import", "csv", "{path}", "--no-track"], "r.csv"),
    "import promptfoo": (["import", "promptfoo", "{path}", "--no-track"], "results.json"),
    "import lm-eval samples": (
        ["import", "lm-eval", "{path}", "--no-track"],
        f"samples_t_{LMEVAL_DATE}.jsonl",
    ),
    "import lm-eval results": (
        ["import", "lm-eval", "{path}", "--no-track"],
        f"results_{LMEVAL_DATE}.json",
    ),
    "import inspect": (["import", "inspect", "{path}", "--no-track"], "log.eval"),
    "run --variant-file": (
        ["run", "hearsay", "--variant-file", "{path}", "--no-track", "--limit", "1"],
        "v.json",
    ),
    "render --variant instruction_file": (
        ["render", "hearsay", "--variant", "instruction_file={path}"],
        "i.yaml",
    ),
    "optimize --instruction-file": (
        ["optimize", "hearsay", "--instruction-file", "{path}", "--trials", "1"],
        "i.yaml",
    ),
    "sweep SPEC": (["sweep", "{path}"], "spec.yaml"),
    "grade import CSV": (["grade", "import", "{path}"], "grades.csv"),
    "score PREDICTIONS": (["score", "hearsay", "{path}"], "p.jsonl"),
}
JSON_OPTIONS = [
    "import jsonl",
    "import promptfoo",
    "import lm-eval samples",
    "import lm-eval results",
    "run --variant-file",
    "score PREDICTIONS",
]


def _invoke(args: list[str], seconds: float) -> Result | None:
    """`workbench ARGS` in a thread; None if it has not answered within `seconds`."""
    from experiments.cli import app

    out: list[Result] = []
    worker = threading.Thread(
        target=lambda: out.append(CliRunner().invoke(app, args, catch_exceptions=False)),
        daemon=True,
    )
    worker.start()
    worker.join(seconds)
    return out[0] if out else None


def _release(path: Path) -> None:
    """Open the FIFO's other end, so a reader that blocked on it (the old code) returns."""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


@pytest.fixture
def env(tmp_path: Path, lb_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "wb"
    root.mkdir()
    e = workbench_env(root, lb_dir, "inputs")
    for k in ("LEGALBENCH_DIR", "WORKBENCH_MLFLOW_CONFIG", "WORKBENCH_CACHE_DIR"):
        monkeypatch.setenv(k, e[k])
    monkeypatch.setenv("WORKBENCH_RUNS_DIR", str(root / "runs"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _one_line(result: Result, path: Path, *words: str) -> None:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in result.output, result.output
    assert str(path) in err, err
    for w in words:
        assert w in err, err


@pytest.mark.parametrize("option", list(OPTIONS))
def test_a_fifo_is_refused_at_once(env: Path, option: str) -> None:
    args, name = OPTIONS[option]
    path = _fifo(env / name)
    try:
        result = _invoke([a.replace("{path}", str(path)) for a in args], seconds=10)
    finally:
        _release(path)
    assert result is not None, f"{option}: still waiting on the FIFO after 10 s"
    _one_line(result, path, "FIFO", "not a regular file")


def test_a_fifo_as_the_tracking_config_is_refused(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _fifo(tmp_path / "mlflow.yaml")
    monkeypatch.setenv("WORKBENCH_MLFLOW_CONFIG", str(config))
    monkeypatch.delenv("WORKBENCH_NO_TRACK", raising=False)  # tracked: the config is read
    rows = tmp_path / "r.jsonl"
    rows.write_text(_jsonl_row(correct=1) + "\n")
    try:
        result = _invoke(["import", "jsonl", str(rows)], seconds=10)
    finally:
        _release(config)
    assert result is not None, "still waiting on the FIFO after 10 s"
    _one_line(result, config, "FIFO")


def _nested(option: str) -> str:
    deep = "[" * DEEP + "]" * DEEP
    if option in ("import jsonl", "score PREDICTIONS"):
        return '{"row": "0", "x": ' + deep + "}\n"
    if option == "import lm-eval samples":
        return '{"doc_id": 0, "x": ' + deep + "}\n"
    return '{"x": ' + deep + "}"


def _huge(option: str) -> str:
    if option == "import jsonl":
        return _jsonl_row(correct=1).replace('"row": "0"', f'"row": {HUGE_INT}') + "\n"
    if option == "score PREDICTIONS":
        return '{"generation": ' + HUGE_INT + ', "answer": "Yes"}\n'
    if option == "import lm-eval samples":
        return '{"doc_id": ' + HUGE_INT + ', "acc": 1}\n'
    return '{"x": ' + HUGE_INT + "}"


def _write_lmeval_companion(env: Path, option: str) -> None:
    """A valid results file beside a samples file (so the samples are what is read)."""
    if option == "import lm-eval samples":
        (env / f"results_{LMEVAL_DATE}.json").write_text(
            json.dumps({"configs": {"t": {}}, "results": {"t": {}}, "lm_eval_version": "0.4.9"})
        )


@pytest.mark.parametrize("case", ["nested", "huge int"])
@pytest.mark.parametrize("option", JSON_OPTIONS)
def test_deep_json_and_huge_integers_are_one_line(env: Path, option: str, case: str) -> None:
    args, name = OPTIONS[option]
    path = env / name
    path.write_text(_nested(option) if case == "nested" else _huge(option))
    _write_lmeval_companion(env, option)
    result = _invoke([a.replace("{path}", str(path)) for a in args], seconds=120)
    assert result is not None
    word = "nested deeper than" if case == "nested" else "an integer of 5,000 digits"
    _one_line(result, path, word)


DUPLICATES: dict[str, tuple[str, str, str]] = {
    # option: (file text, the key given twice, the line it is given again on)
    "import jsonl": (
        _jsonl_row(correct=1)
        + "\n"
        + _jsonl_row(correct=1, extra=2)
        .replace('"correct": 1', '"correct": 1, "correct": 0')
        .replace('"row": "0"', '"row": "1"')
        + "\n",
        "correct",
        "line 2",
    ),
    "import promptfoo": (
        '{\n "results": {\n  "version": 3,\n  "results": [],\n  "version": 2\n }\n}\n',
        "version",
        "line 5",
    ),
    "run --variant-file": ('{"demos": 2,\n "demos": 4}', "demos", "line 2"),
    "score PREDICTIONS": (
        '{"generation": "Yes", "answer": "No", "answer": "Yes"}\n',
        "answer",
        "line 1",
    ),
}


@pytest.mark.parametrize("option", list(DUPLICATES))
def test_a_key_given_twice_is_refused_naming_file_line_and_key(env: Path, option: str) -> None:
    args, name = OPTIONS[option]
    text, key, line = DUPLICATES[option]
    path = env / name
    path.write_text(text)
    result = _invoke([a.replace("{path}", str(path)) for a in args], seconds=120)
    assert result is not None
    _one_line(result, path, f"key {key!r} is given twice", line)


def test_a_csv_column_given_twice_is_refused(env: Path) -> None:
    path = env / "r.csv"
    path.write_text("row,variant,model,correct,correct\n0,A,m,1,0\n")
    result = _invoke(["import", "csv", str(path), "--no-track", "--task", "hearsay"], seconds=60)
    assert result is not None
    _one_line(result, path, "column 'correct' is given twice")


def test_a_csv_field_over_the_csv_limit_is_one_line(env: Path) -> None:
    path = env / "r.csv"
    path.write_text('row,variant,model,correct\n0,A,m,"' + "x" * 200_000 + '"\n')
    result = _invoke(["import", "csv", str(path), "--no-track", "--task", "hearsay"], seconds=60)
    assert result is not None
    _one_line(result, path, "not valid CSV")
