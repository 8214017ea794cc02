"""Optimisation on the embedded model, end to end through the CLI (acceptance runs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import workbench_env

pytestmark = [pytest.mark.model, pytest.mark.data, pytest.mark.slow]


def _run(args: list[str], root: Path, lb_dir: Path) -> dict[str, Any]:
    env = workbench_env(root, lb_dir, "opt")
    r = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "optimize", *args, "--json"],
        env=env, cwd=root, capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    return dict(json.loads(r.stdout))


def _trial_runs(root: Path, study: str) -> list[Any]:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    exp = client.get_experiment_by_name(f"opt/optimize/{study}")
    return [
        r for r in client.search_runs([exp.experiment_id])
        if r.data.tags.get("workbench.kind") == "trial"
    ]  # fmt: skip


def test_optuna_on_hearsay(lb_dir: Path, tmp_path: Path) -> None:
    # a stratified 24-row dev sample keeps the real-model search within CI's time budget
    args = ["hearsay", "--model", "local/smollm2", "--trials", "8", "--dev-limit", "24"]
    rep = _run(args, tmp_path, lb_dir)
    assert rep["n_trials"] == 8 and rep["best_variant"]
    assert rep["pruner"] == "wilcoxon" and rep["search_model_calls"] > 0
    assert rep["dev_score"] is not None
    assert {"score", "ci_low", "ci_high", "n"} <= set(rep["heldout"])
    assert rep["heldout"]["ci_low"] <= rep["heldout"]["score"] <= rep["heldout"]["ci_high"]
    assert 0 < rep["p_value"] <= 1
    assert len(_trial_runs(tmp_path, rep["study"])) >= 8
    assert rep["prompt_registry"] == "prompts:/hearsay.best@best"
    print(
        "hearsay optuna:",
        json.dumps(
            {k: rep[k] for k in ("best_variant", "dev_score", "heldout", "base_heldout", "p_value")}
        ),
    )


@pytest.mark.parametrize("method", ["dspy-labeled", "dspy-bootstrap"])
def test_dspy_on_cuad_audit_rights(lb_dir: Path, tmp_path: Path, method: str) -> None:
    rep = _run(
        ["cuad_audit_rights", "--model", "local/smollm2", "--method", method, "--trials", "2",
         "--dev-limit", "24", "--heldout-limit", "40"],
        tmp_path, lb_dir,
    )  # fmt: skip
    assert rep["method"] == method and rep["heldout"]["n"] > 30
    assert "p_value" in rep and rep["base_heldout"]["score"] is not None
    # the dev score is the runner's, on dev rows that are not the program's demonstrations
    assert rep["dev_score"] is not None
    assert any(n.startswith("dev score: balanced_accuracy") for n in rep["search_notes"])
    dev = set(rep["heldout_indices"])
    # the exported variant's demonstrations are dev or train rows, never held-out
    assert "demos=" in rep["best_variant"]
    for part in rep["best_variant"].split("rows[")[-1].rstrip("]").split("+"):
        if ":" in part:
            split, idx = part.split(":")
            assert not (split == "test" and idx in dev)
    print(
        f"cuad_audit_rights {method}:",
        json.dumps(
            {k: rep[k] for k in ("best_variant", "dev_score", "heldout", "base_heldout", "p_value")}
        ),
    )
