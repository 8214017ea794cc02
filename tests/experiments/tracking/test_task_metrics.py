"""A sweep's trial runs let MLflow compare one task's variants (issue 34, point 3).

MLflow's compare page used to put every trial of a sweep on one `score` axis, mixing tasks of
different chance levels, and its params table showed the decoding settings as one JSON string.
Each trial run now carries its scores again under ``<task>/`` names (MLflow's charts draw one
section per prefix, and a metric only for the runs that have it), its variant's axes as
params, and the decoding settings as short ``decoding.<name>`` params.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from experiments.testing.stub_server import StubOpenAI, hashed_yes_no
from experiments.tracking.trial_runs import (
    DECODING_FILE,
    _env_param,
    decoding_params,
    logged_decoding,
)
from promptlib import Catalog
from tests.conftest import mlflow_store

TASKS = ("hearsay", "personal_jurisdiction")
SPEC = (
    "name: permetric\ntasks: [hearsay, personal_jurisdiction]\nfixed: {demos: none}\nlimit: 6\n"
    "axes:\n  instruction: [reference, description]\n"
    'comparisons: [["instruction=reference", "instruction=description"]]\nn_resamples: 100\n'
)


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory, catalog: Catalog) -> dict[str, Any]:
    """A two-task, two-variant sweep logged to a fresh store by a stub server's model."""
    import mlflow

    from experiments.llm.gateway import LiteLLMModel
    from experiments.sweeps.driver import run_sweep
    from experiments.sweeps.spec import load_spec
    from experiments.tracking import Tracker, TrackingConfig

    os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")
    root = tmp_path_factory.mktemp("permetric")
    (root / "spec.yaml").write_text(SPEC)
    tracker = Tracker(
        TrackingConfig(
            tracking_uri=mlflow_store(root),
            artifact_location=(root / "artifacts").as_uri(),
            experiment_prefix="pm",
            prompt_registry=False,
            source="test",
        )
    )
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        lm = LiteLLMModel("openai/stub", api_base=stub.url, concurrency=1)
        result = run_sweep(
            load_spec(root / "spec.yaml"), catalog, models=(lm.name,), tracker=tracker,
            lm_factory=lambda _name: lm, reports_dir=root / "reports",
        )  # fmt: skip
    client = mlflow.MlflowClient(tracking_uri=tracker.config.tracking_uri)
    parent = client.get_run(result.parent_run_id)
    children = client.search_runs(
        [parent.info.experiment_id],
        filter_string=f"tags.`mlflow.parentRunId` = '{result.parent_run_id}'",
    )
    return {"client": client, "children": children, "tracker": tracker}


@pytest.mark.data
def test_each_trial_run_has_its_own_tasks_metrics_only(logged: dict[str, Any]) -> None:
    children = logged["children"]
    assert len(children) == 4
    for run in children:
        task, m = run.data.params["task"], run.data.metrics
        metric = run.data.params["metric"]
        assert m[f"{task}/score"] == m["score"] == m[metric]  # the plain names stay
        assert m[f"{task}/{metric}"] == m["score"]
        assert m[f"{task}/invalid_rate"] == m["invalid_rate"]
        others = [k for k in m if "/" in k and not k.startswith(f"{task}/")]
        assert others == [], f"{run.info.run_name} carries another task's metrics"
    assert {r.data.params["task"] for r in children} == set(TASKS)


@pytest.mark.data
def test_params_hold_the_axes_and_no_decoding_json(logged: dict[str, Any]) -> None:
    for run in logged["children"]:
        p = run.data.params
        assert p["instruction"] in ("reference", "description")
        assert p["variant"] == f"instruction={p['instruction']}"
        assert "decoding" not in p and "env" not in p
        assert not [k for k, v in p.items() if v.lstrip().startswith(("{", "["))], p
        assert p["decoding.temperature"] == "0.0" and int(p["decoding.max_tokens"]) > 0
        assert p["decoding.mode"] == "chat"
        # the whole dict stays readable, as an artifact and through the reader
        whole = logged["client"].download_artifacts(run.info.run_id, DECODING_FILE)
        doc = json.loads(Path(whole).read_text())
        assert doc["max_tokens"] == int(p["decoding.max_tokens"])
        assert logged_decoding(p)["max_tokens"] == p["decoding.max_tokens"]
        # the sweep's table reads the runs as before
    rows = logged["tracker"].sweep_trials(logged["children"][0].data.tags["mlflow.parentRunId"])
    assert {(r["task"], r["variant"]) for r in rows} == {
        (t, f"instruction={i}") for t in TASKS for i in ("reference", "description")
    }
    assert all(r["score"] is not None for r in rows)


def test_decoding_params_are_short_values() -> None:
    generate = {"temperature": 0.0, "max_tokens": 400, "stop": ["\n", "###"], "mode": "chat"}
    assert decoding_params(generate) == {
        "decoding.max_tokens": 400,
        "decoding.mode": "chat",
        "decoding.stop": '"\\n" "###"',
        "decoding.temperature": 0.0,
    }
    assert decoding_params({**generate, "stop": []})["decoding.stop"] == "none"
    # log-likelihood: the continuations (labels as shown) are in decoding.json, not params
    loglik = {"loglik": "sum", "continuations": [" Yes", " No"]}
    assert decoding_params(loglik) == {"decoding.loglik": "sum"}


def test_older_runs_decoding_json_param_is_still_read() -> None:
    old = {"decoding": json.dumps({"temperature": 0.0, "max_tokens": 32, "stop": ["\n"]})}
    assert logged_decoding(old) == {"temperature": "0.0", "max_tokens": "32", "stop": '["\\n"]'}
    assert logged_decoding({"decoding": '{"temperature": 0.0, "max_to'}) == {}  # cut at 500
    assert logged_decoding({"task": "hearsay"}) == {}
    new = {"decoding.max_tokens": "32", "decoding": "{}"}
    assert logged_decoding(new) == {"max_tokens": "32"}  # the new params win


def test_env_is_one_param_per_variable() -> None:
    env = {"OPENAI_BASE_URL": "http://gw.example/v1", "OPENAI_API_VERSION": "2024"}
    assert _env_param(env) == {
        "env.OPENAI_API_VERSION": "2024",
        "env.OPENAI_BASE_URL": "http://gw.example/v1",
    }
    assert _env_param(None) == {} and _env_param({}) == {}


def test_an_imported_trial_gets_its_tasks_scores_too() -> None:
    from experiments.tracking.imported import _task_scores

    params = {"task": "abercrombie", "metric": "accuracy", "variant": "A"}
    assert _task_scores(params, {"score": 0.7, "n": 30}) == {
        "abercrombie/score": 0.7,
        "abercrombie/accuracy": 0.7,
    }
    assert _task_scores(params, {"n": 30}) == {}  # no score: nothing to compare
