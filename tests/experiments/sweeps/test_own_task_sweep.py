"""Your own data, start to finish, on the real embedded model: a CSV no other test names
becomes a task (`workbench task new`), and a sweep over format, verbalizer and instruction
files runs on it, scored by log-likelihood and by generation, with local/smollm2.

Small on purpose (4 rows, 8 variants): it proves the path works, not any effect."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from experiments.sweeps.plan import plan_tasks
from experiments.sweeps.spec import load_spec
from promptlib import Catalog
from promptlib.usertasks.source import catalog_source
from tests.conftest import run_cli, workbench_env
from tests.usertask_data import clauses, write_csv

REPO = Path(__file__).resolve().parents[3]
QUESTION = "Does the clause restrict disclosure to third parties?"


def _spec(root: Path, name: str, scoring: str) -> Path:
    for stem, text in (
        ("plain", "Read the clause. Does it stop a party from telling outsiders what it knows?"),
        ("check", "Check whether the clause limits sharing information with third parties."),
    ):
        (root / f"{stem}.yaml").write_text(f"text: {text}\n")
    path = root / f"{name}.yaml"
    path.write_text(
        f"name: {name}\ntasks: [hidden_clauses]\nmodels: [local/smollm2]\nlimit: 4\n"
        f"scoring: {scoring}\nfixed: {{demos: base}}\naxes:\n"
        '  format: [base, "sep:colon_newline,case:upper"]\n'
        "  verbalizer: [official, true_false]\n"
        f"  instruction_file: [none, {root / 'plain.yaml'}]\n"
        "comparisons: best_vs_worst\nn_resamples: 200\nacross_tasks: permutation\n"
    )
    return path


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.model
def test_own_csv_to_a_sweep_on_the_local_model(lb_dir: Path, tmp_path: Path) -> None:
    env = workbench_env(tmp_path, lb_dir, "own") | {"WORKBENCH_TASKS_DIR": str(tmp_path / "tasks")}
    data = write_csv(tmp_path / "hidden.csv", clauses(60, seed=23))
    made = run_cli(
        ["task", "new", "hidden_clauses", "--from", str(data), "--input", "clause_text",
         "--answer", "restricts", "--slice", "kind", "--instruction", QUESTION],
        env, tmp_path,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("task hidden_clauses: binary: labels Yes, No (")
    for scoring in ("loglik", "generate"):
        spec = _spec(tmp_path, f"own_{scoring}", scoring)
        r = run_cli(["sweep", str(spec), "--json"], env, tmp_path, timeout=1200)
        assert r.returncode == 0, r.stderr[-3000:]
        result = json.loads(r.stdout)
        assert result["status"] == "complete" and result["trials"] == 8, result
        assert result["skipped"] == [] and result["incomplete"] == []
        comparison = result["comparisons"][0]
        assert comparison["task"] == "hidden_clauses" and comparison["n"] == 4
        print(scoring, json.dumps(comparison, default=str)[:400])
        assert _trial_scorings(tmp_path, f"own/own_{scoring}") == [scoring] * 8


def _trial_scorings(root: Path, experiment: str) -> list[str]:
    """The scoring each trial run of a sweep's MLflow experiment was run with."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], "tags.`workbench.kind` = 'trial'")
    return sorted(r.data.params["scoring"] for r in runs)


@pytest.mark.data
def test_the_shipped_example_plans_its_twelve_trials(
    lb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ablations/examples/own_task.yaml runs on the task the README makes from
    ablations/examples/nda_clauses.csv: every variant compiles, none is skipped."""
    env = {"WORKBENCH_TASKS_DIR": str(tmp_path / "tasks"), "LEGALBENCH_DIR": str(lb_dir)}
    spec_doc = (REPO / "ablations" / "examples" / "own_task.yaml").read_text()
    command = next(line for line in spec_doc.splitlines() if "--instruction" in line)
    instruction = command.split("--instruction", 1)[1].strip().strip('"')
    made = run_cli(
        ["task", "new", "nda_disclosure", "--from", "ablations/examples/nda_clauses.csv",
         "--input", "clause", "--answer", "restricts_disclosure", "--slice", "clause_type",
         "--instruction", instruction],
        {**os.environ, **env}, REPO,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "binary: labels Yes, No" in made.stdout and "from 60 rows" in made.stdout
    monkeypatch.chdir(REPO)  # the spec names its instruction files from the repository
    catalog = Catalog(catalog_source(str(lb_dir), tasks_dir=tmp_path / "tasks"))
    spec = load_spec(REPO / "ablations" / "examples" / "own_task.yaml")
    planned = plan_tasks(spec, catalog)
    assert [(p.task, p.skipped, len(p.variants), len(p.rows)) for p in planned] == [
        ("nda_disclosure", None, 12, 20)
    ]
    assert planned[0].notes == ()  # no instruction names Yes/No against the True/False level
