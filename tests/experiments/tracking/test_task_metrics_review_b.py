"""Review of the per-task MLflow metrics (issue 34): an incomplete trial (rows failed) logs
no official score under any name, plain or ``<task>/``; a complete one logs the official
score recomputed from its predictions under both."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from experiments.metrics import score
from experiments.testing.stub_server import StubOpenAI, hashed_yes_no
from experiments.trials.predictions import PREDICTIONS_FILE, decode_predictions
from promptlib import Catalog
from tests.conftest import mlflow_store

SPEC = (
    "name: permetricfail\ntasks: [hearsay]\nfixed: {demos: none}\nlimit: 12\n"
    "axes:\n  instruction: [reference, description]\n"
    'comparisons: [["instruction=reference", "instruction=description"]]\nn_resamples: 100\n'
)


class _FailsOneVariant:
    """A 500 on a third of the rows of the first variant the stub sees (its prompts share
    their first 80 characters, the instruction), none for the other: one trial incomplete."""

    def __init__(self) -> None:
        self.head: str | None = None

    def __call__(self, prompt: str) -> bool:
        self.head = self.head or prompt[:80]
        mine = prompt[:80] == self.head
        return mine and hashlib.sha256(prompt.encode()).digest()[0] % 3 == 0


@pytest.mark.data
def test_incomplete_trials_log_no_score_under_the_task_name(
    tmp_path: Path, catalog: Catalog
) -> None:
    import mlflow

    from experiments.llm.gateway import LiteLLMModel
    from experiments.sweeps.driver import run_sweep
    from experiments.sweeps.spec import load_spec
    from experiments.tracking import Tracker, TrackingConfig

    os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")
    (tmp_path / "spec.yaml").write_text(SPEC)
    tracker = Tracker(TrackingConfig(
        tracking_uri=mlflow_store(tmp_path), artifact_location=(tmp_path / "a").as_uri(),
        experiment_prefix="pmf", prompt_registry=False, source="test",
    ))  # fmt: skip
    with StubOpenAI(reply_fn=hashed_yes_no, fail_fn=_FailsOneVariant()) as stub:
        lm = LiteLLMModel("openai/stub", api_base=stub.url, concurrency=1, max_retries=0)
        result = run_sweep(
            load_spec(tmp_path / "spec.yaml"), catalog, models=(lm.name,), tracker=tracker,
            lm_factory=lambda _name: lm, reports_dir=tmp_path / "reports",
        )  # fmt: skip
    client = mlflow.MlflowClient(tracking_uri=tracker.config.tracking_uri)
    parent = client.get_run(result.parent_run_id)
    children = client.search_runs(
        [parent.info.experiment_id],
        filter_string=f"tags.`mlflow.parentRunId` = '{result.parent_run_id}'",
    )
    statuses = sorted(r.info.status for r in children)
    assert statuses == ["FAILED", "FINISHED"], statuses  # the case probed: one of each
    for run in children:
        m = run.data.metrics
        if run.info.status == "FAILED":
            assert m["n_errors"] > 0
            scored = [k for k in m if k in ("score", "balanced_accuracy") or k.startswith(
                ("hearsay/score", "hearsay/balanced_accuracy"))]  # fmt: skip
            assert scored == [], scored
        else:
            got = client.download_artifacts(run.info.run_id, PREDICTIONS_FILE, str(tmp_path))
            preds = decode_predictions(Path(got).read_text())
            official = score("hearsay", [p.scored_text or "" for p in preds],
                             [p.answer for p in preds])  # fmt: skip
            assert m["hearsay/score"] == m["score"] == m["hearsay/balanced_accuracy"]
            assert m["score"] == pytest.approx(official, abs=1e-12)
