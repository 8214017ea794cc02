"""Distributed optimisation: two worker processes share one Optuna study in a real PostgreSQL.

.ci/run installs Debian's PostgreSQL, starts it on loopback and sets WORKBENCH_TEST_POSTGRES
(the Optuna storage) and WORKBENCH_TEST_POSTGRES_MLFLOW (the MLflow backend store).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from experiments.optimize.space import INVALID_ATTR, REUSED_ATTR, variant_from_params
from experiments.testing.stub_server import StubOpenAI, hashed_yes_no
from tests.conftest import workbench_env

pytestmark = [pytest.mark.data, pytest.mark.slow]


def _urls() -> tuple[str, str]:
    optuna_url = os.environ.get("WORKBENCH_TEST_POSTGRES")
    mlflow_url = os.environ.get("WORKBENCH_TEST_POSTGRES_MLFLOW")
    if not optuna_url or not mlflow_url:
        if os.environ.get("CI"):
            pytest.fail("CI must start PostgreSQL and set WORKBENCH_TEST_POSTGRES(_MLFLOW)")
        pytest.skip("no PostgreSQL: set WORKBENCH_TEST_POSTGRES and WORKBENCH_TEST_POSTGRES_MLFLOW")
    return optuna_url, mlflow_url


def test_two_workers_share_one_study(lb_dir: Path, tmp_path: Path) -> None:
    import mlflow
    import optuna

    optuna_url, mlflow_url = _urls()
    study = f"two-workers-{uuid.uuid4().hex[:8]}"
    env = {
        **workbench_env(tmp_path, lb_dir, "pgtest", tracking_uri=mlflow_url),
        "OPENAI_API_KEY": "sk-dummy-key-for-the-local-stub",
    }
    # The store's schema is created once, before the workers (as a team's MLflow server would).
    mlflow.MlflowClient(tracking_uri=mlflow_url).search_experiments()
    with StubOpenAI(latency=0.01, reply_fn=hashed_yes_no) as stub:
        workers = [
            subprocess.Popen(
                [
                    sys.executable, "-m", "experiments.cli", "optimize", "hearsay",
                    "--model", "openai/stub", "--api-base", stub.url, "--trials", "4",
                    "--storage", optuna_url, "--study", study, "--sampler", "random",
                    "--seed", str(seed), "--json",
                ],
                env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            for seed in (1, 2)
        ]  # fmt: skip
        outs = [w.communicate(timeout=600) for w in workers]
    for w, (out, err) in zip(workers, outs, strict=True):
        assert w.returncode == 0, err[-3000:]
        report = json.loads(out)
        assert "heldout" in report and "p_value" in report
    trials = optuna.load_study(study_name=study, storage=optuna_url).trials
    finished = [t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]
    # `--trials 4` is 4 prompts evaluated per worker. A worker proposing a prompt the other
    # already completed records a reused trial (its value, no model call, no MLflow run);
    # levels no prompt combines are a PRUNED trial that evaluated nothing.
    reused = [t for t in finished if REUSED_ATTR in t.user_attrs]
    evaluated = [t for t in finished if not {REUSED_ATTR, INVALID_ATTR} & set(t.user_attrs)]
    assert len(evaluated) == 8
    by_number = {t.number: t for t in trials}
    for t in reused:
        source = by_number[t.user_attrs[REUSED_ATTR]]
        assert source.state.name == "COMPLETE" and REUSED_ATTR not in source.user_attrs
        assert t.value == source.value
        assert variant_from_params(t.params).id == variant_from_params(source.params).id
    assert sorted(t.number for t in trials) == list(range(len(trials)))  # no duplicates
    client = mlflow.MlflowClient(tracking_uri=mlflow_url)
    exp = client.get_experiment_by_name(f"pgtest/optimize/{study}")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("workbench.kind") == "study"]
    children = [r for r in runs if r.data.tags.get("workbench.kind") == "trial"]
    assert len(parents) == 1
    assert all(c.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for c in children)
    assert sorted(int(c.data.params["optuna.trial"]) for c in children) == sorted(
        t.number for t in evaluated
    )
    # no password from the storage or tracking URL in any output, param or tag
    password = optuna_url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
    shown = [out + err for out, err in outs]
    for run in runs:
        shown += [str(v) for v in run.data.params.values()]
        shown += [str(v) for v in run.data.tags.values()]
    assert not [x for x in shown if f":{password}@" in x]
    assert parents[0].data.params["storage"].count(":***@") == 1
