"""`workbench import inspect|lm-eval|promptfoo` on bad input, from the real tools' files in
tests/data/imports (made by inspect_ai, lm-eval and promptfoo against the stub server): one line
on stderr naming the file and what to do, exit 2, and nothing written (no MLflow store, no run,
no file). Each case is a file made from a fixture and the words its error must carry."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.experiments.imports.conftest import Workbench
from tests.experiments.imports.interop_stub import need

need("inspect_ai")

pytestmark = pytest.mark.data

DATA = Path(__file__).resolve().parents[2] / "data" / "imports"
INSPECT_A, INSPECT_B = DATA / "inspect" / "stub_a.eval", DATA / "inspect" / "stub_b.eval"
(LM_RESULTS,) = (DATA / "lmeval").glob("results_*.json")
PROMPTFOO = DATA / "promptfoo" / "results.json"


def _copy(src: Path, d: Path, name: str | None = None) -> Path:
    out = d / (name or src.name)
    shutil.copy(src, out)
    return out


def _lmeval_run(d: Path) -> dict[str, Path]:
    """The lm-eval fixture's files copied into `d`: results, A's and B's samples."""
    out = {"results": _copy(LM_RESULTS, d)}
    for key in ("a", "b"):
        (samples,) = (DATA / "lmeval").glob(f"samples_stub_legal_{key}_*.jsonl")
        out[key] = _copy(samples, d)
    return out


def _cut(path: Path, keep: float = 0.5) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def _edit_json(path: Path, edit: Callable[[dict], None]) -> Path:  # type: ignore[type-arg]
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return path


def _inspect_old_tool(d: Path) -> Path:
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(str(INSPECT_A))
    log.eval.packages = {"inspect_ai": "0.2.7"}
    write_eval_log(log, str(d / "old.eval"))
    return d / "old.eval"


def _lm_cut_samples(d: Path) -> Path:
    return _cut(_lmeval_run(d)["a"], 0.8)


def _lm_old(d: Path) -> Path:
    run = _lmeval_run(d)
    _edit_json(run["results"], lambda r: r.update(lm_eval_version="0.3.0"))
    return run["results"]


def _lm_no_doc_id(d: Path) -> Path:
    path = _lmeval_run(d)["a"]
    first, *rest = path.read_text().splitlines(keepends=True)
    line = {k: v for k, v in json.loads(first).items() if k != "doc_id"}
    path.write_text(json.dumps(line) + "\n" + "".join(rest))
    return path


def _lm_mixed_tasks(d: Path) -> Path:
    """A's config retargeted to LegalBench's hearsay, B's to abercrombie (as lm-eval's own
    legalbench tasks name theirs)."""
    run = _lmeval_run(d)

    def edit(r: dict) -> None:  # type: ignore[type-arg]
        for task, name in (("stub_legal_a", "hearsay"), ("stub_legal_b", "abercrombie")):
            r["configs"][task] |= {"dataset_path": "nguha/legalbench", "dataset_name": name}

    _edit_json(run["results"], edit)
    return run["a"]  # imported with B's samples beside it


def _pf_older(d: Path) -> Path:
    return _edit_json(_copy(PROMPTFOO, d), lambda r: r["results"].update(version=2))


def _pf_duplicate(d: Path) -> Path:
    return _edit_json(
        _copy(PROMPTFOO, d), lambda r: r["results"]["results"].append(r["results"]["results"][0])
    )


def _pf_no_test(d: Path) -> Path:
    return _edit_json(_copy(PROMPTFOO, d), lambda r: r["results"]["results"][2].pop("testIdx"))


Case = tuple[str, str, Callable[[Path], Path], list[str]]
CASES: list[Case] = [
    ("inspect: lm-eval's results file", "inspect", lambda d: _copy(LM_RESULTS, d),
     ["not a readable inspect_ai eval log", "another tool's results"]),
    ("inspect: a truncated log", "inspect", lambda d: _cut(_copy(INSPECT_A, d)),
     ["not a readable inspect_ai eval log", "truncated"]),
    ("inspect: an unsupported inspect_ai", "inspect", _inspect_old_tool,
     ["inspect_ai 0.2.7", "supports inspect_ai 0.3 or later, before 0.4"]),
    ("inspect: promptfoo's csv", "inspect", lambda d: _copy(PROMPTFOO, d, "results.csv"),
     ["ends in .eval or .json"]),
    ("lm-eval: an inspect log", "lm-eval", lambda d: _copy(INSPECT_A, d),
     ["not an lm-eval output file name"]),
    ("lm-eval: truncated samples", "lm-eval", _lm_cut_samples, ["truncated"]),
    ("lm-eval: an unsupported lm-eval", "lm-eval", _lm_old,
     ["written by lm-eval 0.3.0", "supports lm-eval 0.4.3 or later, before 0.5"]),
    ("lm-eval: a row without doc_id", "lm-eval", _lm_no_doc_id, ["has no doc_id"]),
    ("lm-eval: mixed tasks in one comparison", "lm-eval", _lm_mixed_tasks,
     ["one comparison needs one task"]),
    ("promptfoo: lm-eval's results file", "promptfoo",
     lambda d: _copy(LM_RESULTS, d, "results.json"), ["not a promptfoo results file"]),
    ("promptfoo: truncated", "promptfoo", lambda d: _cut(_copy(PROMPTFOO, d)),
     ["not readable JSON", "truncated"]),
    ("promptfoo: an unsupported results format", "promptfoo", _pf_older,
     ["results format 2", "not supported"]),
    ("promptfoo: duplicate ids", "promptfoo", _pf_duplicate, ["appears twice"]),
    ("promptfoo: a result without its test", "promptfoo", _pf_no_test, ["has no testIdx"]),
]  # fmt: skip


@pytest.mark.parametrize(("what", "fmt", "make", "words"), CASES, ids=[c[0] for c in CASES])
def test_bad_tool_files_are_one_line_exit_2_and_write_nothing(
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
    args = [str(path), "--task", "hearsay"]
    if "mixed tasks" in what:  # A's and B's samples, each naming its own task: no --task
        args = [str(path), *map(str, path.parent.glob("samples_stub_legal_b_*.jsonl"))]
    result = wb("import", fmt, *args, "--n-resamples", "200")
    assert result.exit_code == 2, (what, result.output)
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert str(path) in err, err
    for w in words:
        assert w in err, err
    assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no store, no run, no file
    assert not (tmp_path / "store" / "mlflow.db").exists()


def test_the_fixtures_import_cleanly(
    tmp_path: Path, lb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The good fixtures the bad cases are made from import (so each case fails for its own
    defect), and a pair of inspect logs compares."""
    wb = Workbench(tmp_path, lb_dir, monkeypatch)
    for fmt, paths in (
        ("inspect", [INSPECT_A, INSPECT_B]),
        ("lm-eval", [LM_RESULTS]),
        ("promptfoo", [PROMPTFOO]),
    ):
        result = wb("import", fmt, *map(str, paths), "--task", "hearsay", "--no-track",
                    "--n-resamples", "200", "--json")  # fmt: skip
        assert result.exit_code == 0, (fmt, result.output)
        (row,) = json.loads(result.stdout)["comparisons"]
        assert row["status"] == "tested", (fmt, row)
