"""promptfoo's real output, imported: ``tests/data/imports/promptfoo/results.json`` was made
once by the real CLI, promptfoo 0.121.20 (from the npm registry; the newest release that runs
on Node 20), against the workbench's stub server, with

    cd tests/data/imports/promptfoo && python make_results.py

which starts the stub on 127.0.0.1:8792 (right answers: variant A on even rows, variant B
unless the row is a multiple of 3) and runs

    npx -y promptfoo@0.121.20 eval -c promptfooconfig.yaml -o results.json --no-cache --no-table

Reading it needs no Node: the prompt is the variant, the provider the model, the test the row
and the assertion outcome the correctness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.analysis import metric_interval, paired_permutation_test
from experiments.imports import ImportedTrial, ImportInputError, ReadOptions, reader
from tests.experiments.imports.conftest import Workbench

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "imports" / "promptfoo" / "results.json"
N = 10
EXPECTED = {
    "variant-a": [int(i % 2 == 0) for i in range(N)],
    "variant-b": [int(i % 3 != 0) for i in range(N)],
}
R = 2000


def _read(path: Path = FIXTURE, **kw: str) -> list[ImportedTrial]:
    return reader("promptfoo")(path, ReadOptions(**kw))


def test_the_fixture_imports_as_the_stub_answered() -> None:
    trials = _read()
    assert [t.variant for t in trials] == ["variant-a", "variant-b"]  # the config's order
    for t in trials:
        assert (t.model, t.tool, t.tool_version) == ("stub-model", "promptfoo", "0.121.20")
        assert t.metric == "assertions passed" and t.source_file == FIXTURE
        assert [r.row_id for r in t.rows] == [str(i) for i in range(N)]
        assert [r.correct for r in t.rows] == [float(c) for c in EXPECTED[t.variant]]
        for r in t.rows:
            assert r.answer == "Yes" and r.prediction in ("Yes", "No")
            assert r.extra["description"] == f"row {r.row_id}"
            assert (r.prediction == "Yes") == bool(r.correct)
    assert {t.model for t in _read(model_from="provider.id")} == {"openai:chat:stub-model"}


def test_prompt_raw_names_the_template_per_result() -> None:
    """--variant-from names a field of each result: ``prompt.raw`` is the rendered prompt,
    different on every row, so each row would be its own variant; promptfoo's prompt label
    (the default) or ``prompt.label`` is the field that names a variant."""
    by_label = _read(variant_from="prompt.label")
    assert [t.variant for t in by_label] == ["variant-a", "variant-b"]
    assert len(_read(variant_from="prompt.raw")) == 2 * N


@pytest.mark.data
def test_workbench_import_gives_the_analysis_numbers(
    tmp_path: Path, lb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wb = Workbench(tmp_path, lb_dir, monkeypatch)
    result = wb("import", "promptfoo", str(FIXTURE), "--task", "hearsay", "--name", "pf-ab",
                "--n-resamples", str(R), "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["comparisons"]
    y = ["1"] * N
    pa, pb = (["1" if c else "0" for c in EXPECTED[v]] for v in ("variant-a", "variant-b"))
    res = paired_permutation_test(y, pa, pb, metric="accuracy", n_resamples=R, seed=0)
    ci = metric_interval(y, pa, pb, metric="accuracy", seed=0)
    assert (row["a"], row["b"], row["n"]) == ("variant-a", "variant-b", N)
    # each test's vars are its prompt identity (every test asks its own question)
    assert (row["clustered_by"], row["n_clusters"]) == ("test vars (promptfoo)", N)
    assert row["statistic"] == pytest.approx(res.statistic)
    assert (row["p_value"], row["ci_low"], row["ci_high"]) == (res.p_value, ci.low, ci.high)
    again = wb("compare", "pf-ab", "--n-resamples", str(R), "--json")  # read back from MLflow
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["comparisons"][0]["p_value"] == row["p_value"]


def test_a_provider_error_is_a_failure_state_not_a_wrong_answer(tmp_path: Path) -> None:
    """A result promptfoo could not grade (``failureReason`` 2, as promptfoo writes a provider
    error; here set on one result of the real file) is a row with status error and no score."""
    data = json.loads(FIXTURE.read_text())
    hit = next(r for r in data["results"]["results"] if r["promptIdx"] == 0 and r["testIdx"] == 4)
    hit |= {"success": False, "score": 0, "failureReason": 2, "error": "API error: 500"}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    a = _read(path)[0]
    row = next(r for r in a.rows if r.row_id == "4")
    assert (row.status, row.correct) == ("error", None)
    assert sum(r.correct == 1.0 for r in a.rows) == sum(EXPECTED["variant-a"]) - 1


def test_a_test_without_assertions_is_ungraded_not_a_right_answer(tmp_path: Path) -> None:
    """promptfoo calls a test with no assertions a success (score 1, no grading result): it
    is a row with status ungraded and no score, not a correct answer (row 1 of variant-a is
    wrong in the fixture, so counting it right would raise the score)."""
    data = json.loads(FIXTURE.read_text())
    for r in data["results"]["results"]:
        if r["testIdx"] == 1:
            r["testCase"].pop("assert", None)
            r |= {"success": True, "score": 1, "failureReason": 0, "gradingResult": None}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    for t in _read(path):
        row = next(r for r in t.rows if r.row_id == "1")
        assert (row.status, row.correct) == ("ungraded", None)


def test_bad_promptfoo_files_are_refused_by_name(tmp_path: Path) -> None:
    text = FIXTURE.read_text()
    data = json.loads(text)
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])
    older = tmp_path / "older.json"
    older.write_text(json.dumps(data | {"results": data["results"] | {"version": 2}}))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"version": 2, "eval": {"task": "x"}, "samples": []}))
    no_test = tmp_path / "no_test.json"
    results = [dict(r) for r in data["results"]["results"]]
    del results[3]["testIdx"]
    no_test.write_text(json.dumps(data | {"results": data["results"] | {"results": results}}))
    cases = [
        (cut, "not readable JSON"),
        (older, "promptfoo results format 2 (promptfoo 0.121.20) is not supported"),
        (other, "not a promptfoo results file"),
        (no_test, "result 3 has no testIdx"),
        (tmp_path / "results.csv", "rerun with -o results.json"),
    ]
    for path, words in cases:
        with pytest.raises(ImportInputError) as e:
            _read(path)
        message = str(e.value)
        assert str(path) in message and words in message, message
        assert "\n" not in message
