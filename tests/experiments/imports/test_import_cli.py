"""`workbench import jsonl|csv` end to end, tracked in MLflow (an experiment per import, a
parent run with the source files, a run per trial), reused when imported again, and
`workbench compare` on it with other tests (--rescore, the range test)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from experiments.analysis import metric_interval, paired_permutation_test
from tests.experiments.imports.conftest import Workbench, correctness, lines, write_csv, write_jsonl

pytestmark = pytest.mark.data
R = "2000"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("imports")


@pytest.fixture
def wb(store: Path, lb_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Workbench:
    return Workbench(store, lb_dir, monkeypatch)


VEC = correctness(60, 0.75, 0.5, seed=3)


def _expected() -> tuple[Any, Any]:
    y = ["1"] * 60
    pa, pb = (["1" if c else "0" for c in VEC[v]] for v in ("A", "B"))
    res = paired_permutation_test(y, pa, pb, metric="accuracy", n_resamples=int(R), seed=0)
    return res, metric_interval(y, pa, pb, metric="accuracy", seed=0)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_import_compares_tracks_and_reuses(wb: Workbench, tmp_path: Path, fmt: str) -> None:
    rows = lines(VEC)
    rows.append({"row": "99", "variant": "A", "model": "m", "task": "hearsay", "correct": 1})
    write = write_jsonl if fmt == "jsonl" else write_csv
    path = write(tmp_path / f"results.{fmt}", rows)
    name = f"e2e-{fmt}"
    result = wb("import", fmt, str(path), "--name", name, "--n-resamples", R, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (row,) = doc["comparisons"]
    res, ci = _expected()
    assert (row["p_value"], row["ci_low"], row["ci_high"]) == (res.p_value, ci.low, ci.high)
    assert row["n"] == 60  # row 99 is in A only: left out, not scored as wrong in B
    assert doc["left_out"] == [{"task": "hearsay", "model": "m", "row": "99",
                                "reason": "not in B"}]  # fmt: skip
    runs = wb.runs(name)
    parent = [r for r in runs if r.data.tags["workbench.kind"] == "import"]
    children = [r for r in runs if r.data.tags["workbench.kind"] == "imported_trial"]
    assert [r.info.status for r in parent] == ["FINISHED"]
    assert sorted(r.data.params["variant"] for r in children) == ["A", "B"]
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parent[0].info.run_id}
    a = next(r for r in children if r.data.params["variant"] == "A")
    assert a.data.metrics["n_left_out"] == 1 and a.data.params["source_file"] == str(path)
    art = Path(parent[0].info.artifact_uri.removeprefix("file://"))
    assert (art / "sources" / "0" / path.name).read_bytes() == path.read_bytes()
    assert json.loads((art / "import.json").read_text())["format"] == fmt

    again = wb("import", fmt, str(path), "--name", name, "--n-resamples", R)
    assert again.exit_code == 0, again.output
    assert "already tracked, not logged again" in again.stdout
    assert len(wb.runs(name)) == len(runs)


def test_compare_reads_the_import_back_and_rescores(wb: Workbench, tmp_path: Path) -> None:
    answers = ["Yes" if i % 3 else "No" for i in range(60)]
    rows = [
        {"row": i, "variant": v, "model": "m", "task": "hearsay", "answer": a,
         "prediction": a if c else ("No" if a == "Yes" else "Yes"), "correct": c}
        for v, vec in VEC.items() for i, (c, a) in enumerate(zip(vec, answers, strict=True))
    ]  # fmt: skip
    path = write_jsonl(tmp_path / "gen.jsonl", rows)
    first = wb("import", "jsonl", str(path), "--name", "gen", "--n-resamples", R, "--json")
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["comparisons"][0]["metric"] == "accuracy"
    again = wb("compare", "gen", "--rescore", "--n-resamples", R, "--json")
    assert again.exit_code == 0, again.output
    (row,) = json.loads(again.stdout)["comparisons"]
    assert row["metric"] == "balanced_accuracy" and row["status"] == "tested"
    text = wb("compare", "gen", "--comparisons", "best_vs_worst", "--n-resamples", R)
    assert text.exit_code == 0, text.output
    assert "range permutation test" in text.stdout
    missing = wb("compare", "no-such-import")
    assert missing.exit_code == 2 and "no finished import named" in missing.stderr


def test_no_track_writes_no_store(
    lb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    root.mkdir()
    wb = Workbench(root, lb_dir, monkeypatch)
    path = write_jsonl(tmp_path / "r.jsonl", lines(VEC))
    result = wb("import", "jsonl", str(path), "--no-track", "--n-resamples", "200")
    assert result.exit_code == 0, result.output
    assert "not tracked" in result.stdout and not (root / "mlflow.db").exists()


def test_a_companion_file_is_tracked_and_found_again_by_compare(
    wb: Workbench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader that reads a file beside the one given (as lm-eval's results file gives the
    model of its samples file): the companion is logged and put beside it again on compare."""
    from experiments.imports import FORMATS, ImportedTrial, ReadOptions
    from experiments.imports.tabular import read_jsonl

    def read_with_model_file(path: Path, opts: ReadOptions) -> list[ImportedTrial]:
        side = path.with_name("model.txt")
        model = side.read_text().strip()
        trials = read_jsonl(path, ReadOptions(opts.task, opts.variant_from, "model"))
        return [
            ImportedTrial(t.source_file, "sidecar", "1.0", t.task, t.variant, model, None,
                          t.rows, companions=(side,))
            for t in trials
        ]  # fmt: skip

    monkeypatch.setitem(FORMATS, "sidecar", read_with_model_file)
    (tmp_path / "model.txt").write_text("org/model-x\n")
    path = write_jsonl(tmp_path / "samples.jsonl", lines(VEC))
    first = wb("import", "sidecar", str(path), "--name", "side", "--n-resamples", R, "--json")
    assert first.exit_code == 0, first.output
    doc = json.loads(first.stdout)
    assert [f["role"] for f in doc["files"]] == ["given", "companion"]
    assert doc["comparisons"][0]["model"] == "org/model-x"
    (tmp_path / "model.txt").unlink()  # compare reads the tracked copy, not this folder
    again = wb("compare", "side", "--n-resamples", R, "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["comparisons"][0]["p_value"] == doc["comparisons"][0]["p_value"]


def test_between_models_pairs_two_models_on_one_prompt(wb: Workbench, tmp_path: Path) -> None:
    rows = [r | {"variant": "base", "model": {"A": "m-a", "B": "m-b"}[r["variant"]]}
            for r in lines(VEC)]  # fmt: skip
    path = write_jsonl(tmp_path / "models.jsonl", rows)
    plain = wb("import", "jsonl", str(path), "--no-track", "--n-resamples", R, "--json")
    assert plain.exit_code == 0 and json.loads(plain.stdout)["comparisons"] == []
    result = wb("import", "jsonl", str(path), "--between", "models", "--name", "models",
                "--n-resamples", R, "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["comparisons"]
    res, _ = _expected()
    assert (row["a"], row["b"], row["model"]) == ("m-a", "m-b", "base")
    assert row["p_value"] == res.p_value
    children = [r for r in wb.runs("models") if r.data.tags["workbench.kind"] == "imported_trial"]
    assert sorted(r.data.params["model"] for r in children) == ["m-a", "m-b"]


def test_compare_reads_the_files_imported_last_under_a_name(wb: Workbench, tmp_path: Path) -> None:
    """Files A, then changed files B, then A again under one name: the third import reuses
    A's run, and `workbench compare NAME` must read A (the last imported), not B."""
    a = write_jsonl(tmp_path / "a.jsonl", lines(VEC))
    b = write_jsonl(tmp_path / "b.jsonl", lines(correctness(60, 0.5, 0.5, seed=9)))
    p = {}
    for path in (a, b, a):
        out = wb("import", "jsonl", str(path), "--name", "aba", "--n-resamples", R, "--json")
        assert out.exit_code == 0, out.output
        p[path.name] = json.loads(out.stdout)["comparisons"][0]["p_value"]
    assert p["a.jsonl"] != p["b.jsonl"]
    again = wb("compare", "aba", "--n-resamples", R, "--json")
    assert again.exit_code == 0, again.output
    doc = json.loads(again.stdout)
    assert [f["path"] for f in doc["files"]] == [str(a)]
    assert doc["comparisons"][0]["p_value"] == p["a.jsonl"]


def test_a_file_holding_a_key_is_refused_before_anything_is_stored(
    wb: Workbench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Source files go to MLflow byte for byte (compare reads them back), so a file quoting
    the key (a provider's error message in a row, lm-eval's model_args) is refused with the
    variable's name, never stored; --no-track reads it without storing anything."""
    key = "sk-imported-0123456789abcdef"
    monkeypatch.setenv("SOME_PROVIDER_API_KEY", key)
    rows = [r | {"error": f"401: bad key {key}"} for r in lines(VEC)]
    path = write_jsonl(tmp_path / "keyed.jsonl", rows)
    out = wb("import", "jsonl", str(path), "--name", "keyed", "--n-resamples", "200")
    assert out.exit_code == 2, out.output
    assert "keyed.jsonl" in out.output and "SOME_PROVIDER_API_KEY" in out.output
    assert key not in out.output
    assert wb.runs("keyed") == []
    untracked = wb("import", "jsonl", str(path), "--no-track", "--n-resamples", "200")
    assert untracked.exit_code == 0, untracked.output
    assert key not in untracked.output
