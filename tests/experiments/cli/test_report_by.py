"""`workbench report NAME --by slice|class` (issue 34, acceptance: "per-slice comparisons on
hearsay that match a hand computation from the trials' rows").

A real sweep on hearsay with the embedded local/smollm2 (40 seeded rows, every one of the
five slices present), then the report's per-slice and per-class numbers checked against a
computation here from each trial's stored rows (its MLflow run's predictions.jsonl
artifact) joined with hearsay's test.tsv `slice` column, with plain Python and sklearn's
balanced_accuracy_score (what LegalBench's evaluation calls)."""

from __future__ import annotations

import csv
import json
import string
import warnings
from pathlib import Path
from typing import Any

import pytest
from sklearn.metrics import balanced_accuracy_score

from tests.conftest import run_cli, workbench_env

pytestmark = [pytest.mark.data, pytest.mark.slow, pytest.mark.model]

SPEC = """
name: slices_check
tasks: [hearsay]
models: [local/smollm2]
limit: 40
scoring: loglik
fixed:
  demos: none
axes:
  instruction: [reference, description]
comparisons:
  - [instruction=reference, instruction=description]
n_resamples: 1000
"""
A, B = "instruction=reference", "instruction=description"


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory, lb_dir: Path) -> tuple[Path, dict[str, str]]:
    pytest.importorskip("llama_cpp")
    root = tmp_path_factory.mktemp("report_by")
    env = workbench_env(root, lb_dir, "report_by")
    (root / "spec.yaml").write_text(SPEC)
    r = run_cli(["sweep", "spec.yaml"], env, root)
    assert r.returncode == 0, r.stderr
    return root, env


def _normalize(text: str) -> str:
    """LegalBench's evaluation.normalize: drop punctuation, strip, lower-case."""
    return str(text).translate(str.maketrans("", "", string.punctuation)).strip().lower()


def _rows_of_trials(root: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """variant -> row index -> stored row, read from each trial run's predictions.jsonl."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for path in sorted((root / "artifacts").rglob("predictions.jsonl")):
        run_id = path.parent.parent.name  # <artifacts>/<experiment>/<run id>/artifacts/
        variant = client.get_run(run_id).data.params["variant"]
        lines = path.read_text().splitlines()
        out[variant] = {str(d["index"]): d for d in map(json.loads, lines) if d}
    assert set(out) == {A, B}, out.keys()
    return out


def _slices(lb_dir: Path) -> dict[str, str]:
    with open(lb_dir / "tasks" / "hearsay" / "test.tsv", newline="") as f:
        return {r["index"]: r["slice"] for r in csv.DictReader(f, delimiter="\t")}


def _scored(row: dict[str, Any]) -> str:
    return str(row["scored"] if row.get("scored") is not None else row["generation"])


def _hand(
    trials: dict[str, dict[str, dict[str, Any]]], group_of: dict[str, str]
) -> dict[str, dict[str, float]]:
    """group -> n, A's and B's balanced accuracy on the group's rows (sklearn), A - B."""
    out: dict[str, dict[str, float]] = {}
    for g in sorted(set(group_of.values())):
        rows = sorted(i for i, v in group_of.items() if v == g)
        y = [_normalize(trials[A][i]["answer"]) for i in rows]
        scores = []
        for arm in (A, B):
            pred = [_normalize(_scored(trials[arm][i])) for i in rows]
            with warnings.catch_warnings():  # one class in the slice: "y_pred contains ..."
                warnings.simplefilter("ignore")
                scores.append(float(balanced_accuracy_score(y, pred)))
        out[g] = {"n": len(rows), "a": scores[0], "b": scores[1], "diff": scores[0] - scores[1]}
    return out


def _report(args: list[str], root: Path, env: dict[str, str]) -> dict[str, Any]:
    r = run_cli(["report", "slices_check", *args, "--json"], env, root)
    assert r.returncode == 0, r.stderr
    return dict(json.loads(r.stdout))


def _check(table: dict[str, Any], hand: dict[str, dict[str, float]]) -> None:
    assert [r["group"] for r in table["rows"]] == sorted(hand)
    for row in table["rows"]:
        want = hand[row["group"]]
        assert row["n"] == want["n"]
        assert row["score_a"] == pytest.approx(want["a"], abs=1e-12)
        assert row["score_b"] == pytest.approx(want["b"], abs=1e-12)
        assert row["diff"] == pytest.approx(want["diff"], abs=1e-12)
        assert 0 <= row["p_value"] <= row["p_adjusted"] <= 1
        assert row["small"] == (row["n"] < 30)
    tested = [r for r in table["rows"] if r["p_value"] is not None]
    assert table["correction"] == f"Holm over the {len(tested)} slices of this comparison" or (
        table["correction"] == f"Holm over the {len(tested)} classes of this comparison"
    )
    assert table["n_resamples"] == 1000 and table["alpha"] == 0.05


def test_by_slice_matches_a_hand_computation_from_the_trials_rows(
    swept: tuple[Path, dict[str, str]], lb_dir: Path
) -> None:
    root, env = swept
    trials = _rows_of_trials(root)
    slice_of = _slices(lb_dir)
    group_of = {i: slice_of[i] for i in trials[A]}
    assert len(set(group_of.values())) >= 2
    doc = _report(["--by", "slice"], root, env)
    (table,) = doc["tables"]
    assert (table["task"], table["model"], table["a"], table["b"]) == (
        "hearsay", "local/smollm2", A, B,
    )  # fmt: skip
    assert table["by"] == table["column"] == "slice" and table["metric"] == "balanced_accuracy"
    assert table["test"].startswith("paired permutation test")
    _check(table, _hand(trials, group_of))
    # the same numbers as the table the command prints
    text = run_cli(["report", "slices_check", "--by", "slice"], env, root)
    assert text.returncode == 0, text.stderr
    for row in table["rows"]:
        line = next(x for x in text.stdout.splitlines() if x.strip().startswith(row["group"]))
        assert f"{row['score_a']:.3f}" in line and f"{row['diff']:+.3f}" in line
    assert "Holm over the" in text.stdout and "resamples" in text.stdout


def test_by_class_is_per_class_recall_from_the_trials_rows(
    swept: tuple[Path, dict[str, str]],
) -> None:
    root, env = swept
    trials = _rows_of_trials(root)
    group_of = {i: d["answer"] for i, d in trials[A].items()}
    doc = _report(["--by", "class"], root, env)
    (table,) = doc["tables"]
    assert table["metric"] == "recall (accuracy on the class's rows)"
    # recall on one class's rows is balanced accuracy of those rows (one class)
    _check(table, _hand(trials, group_of))


def test_a_missing_column_names_the_task_columns_and_plain_report_is_unchanged(
    swept: tuple[Path, dict[str, str]],
) -> None:
    root, env = swept
    r = run_cli(["report", "slices_check", "--by", "slice", "--column", "nope"], env, root)
    assert r.returncode == 2
    assert "has no column 'nope'" in r.stderr and "index, answer, text, slice" in r.stderr
    plain = run_cli(["report", "slices_check", "--json"], env, root)
    assert plain.returncode == 0, plain.stderr
    doc = json.loads(plain.stdout)
    assert "tables" not in doc and doc["comparisons"][0]["a"] == A
