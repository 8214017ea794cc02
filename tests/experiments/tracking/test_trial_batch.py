"""A trial is logged in one batch (issue 35, point 2): one `log_batch` for its params, metrics
and tags, one `log_artifacts` for its files, and the sweep's parent read once, not per trial;
what the run holds is what it held when every value and file was its own store call.

The call counts are read from a spy client; the contents from a real SQLite store, where the
same fixed trial is logged both ways: by `log_trial`, and by `_log_as_before`, the calls
`TrialRuns.log_trial` made before this change (one per file, metrics apart from params).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from experiments.llm.scripted import LMDefaults
from experiments.llm.types import Completion, Decoding
from experiments.tracking import Tracker, TrackingConfig
from experiments.tracking.batch import MAX_METRICS, MAX_PARAMS_TAGS, batches
from promptlib import Catalog
from tests.conftest import mlflow_store

pytestmark = pytest.mark.data


class _FixedLM(LMDefaults):
    """Answers every prompt 'Yes' after a fixed latency: a trial that never changes."""

    name = "fixed/yes"
    mode = "completion"
    concurrency = 1

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        return Completion(" Yes", tokens_in=10, tokens_out=1, latency=0.25)

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        raise NotImplementedError


@pytest.fixture(scope="module")
def trial(catalog: Catalog) -> dict[str, Any]:
    """A finished 6-row hearsay trial (with labels: its run has a confusion matrix)."""
    from experiments.trials.run import run_trial
    from experiments.trials.spec import TrialSpec, resolve_trial
    from promptlib import parse_spec

    lm = _FixedLM()
    spec = TrialSpec(task="hearsay", variant=parse_spec("base"), model=lm.name, limit=6)
    resolved = resolve_trial(spec, catalog, lm)
    result = run_trial(resolved, catalog, lm)
    result = dataclasses.replace(result, wall_time=1.5)  # the one value that varies
    assert result.complete and len(result.predictions) == 6
    return {"result": result, "resolved": resolved}


def _config(root: Path, registry: bool = False) -> TrackingConfig:
    return TrackingConfig(
        tracking_uri=mlflow_store(root),
        artifact_location=(root / "artifacts").as_uri(),
        experiment_prefix="batch",
        prompt_registry=registry,
        source="test",
    )


class _Spy:
    """The client's calls by name, passed through to the real client."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: list[str] = []
        self.uploaded: list[list[str]] = []
        self.batched: list[dict[str, int]] = []

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)
        if not callable(real):
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            if name == "log_artifacts":
                self.uploaded.append(sorted(p.name for p in Path(args[1]).iterdir()))
            if name == "log_batch":
                self.batched.append(
                    {k: len(kwargs.get(k) or []) for k in ("params", "metrics", "tags")}
                )
            return real(*args, **kwargs)

        return call


def test_a_trial_is_one_batch_and_one_upload(trial: dict[str, Any], tmp_path: Path) -> None:
    from experiments.names import PREDICTIONS_SHA, SWEEP_ID

    tracker = Tracker(_config(tmp_path))
    spy = _Spy(tracker.client)
    tracker.client = spy
    exp = tracker.experiment_id("sweep/batch")
    parent = spy.create_run(exp, tags={SWEEP_ID: "s1"}).info.run_id
    result, resolved = trial["result"], trial["resolved"]
    spy.calls.clear()
    for name in ("a", "b"):  # two trials of one sweep
        tracker.log_trial(
            parent, result, resolved.compiled, resolved.rows, name,
            extra_tags={PREDICTIONS_SHA: "x"},
        )  # fmt: skip
    one = ["create_run", "log_artifacts", "log_batch", "log_inputs", "set_terminated"]
    assert spy.calls == ["get_run", *one, *one]  # the parent is read once per sweep
    files = ["confusion_matrix.png", "decoding.json", "predictions.jsonl", "prompt.txt"]
    assert spy.uploaded == [sorted([*files, "summary.json"])] * 2
    (first, second) = spy.batched
    assert first == second and first["metrics"] >= 14 and first["tags"] == 1  # all of them
    assert first["params"] >= 20


def test_the_tracker_opens_mlflow_once(
    trial: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One client, one tracking store for everything a `workbench run` or a sweep logs."""
    import mlflow
    from mlflow.store.tracking import sqlalchemy_store

    made: list[str] = []
    config = _config(tmp_path)  # a new store URI: MLflow keeps one store per URI it has seen
    for cls, label in (
        (mlflow.MlflowClient, "client"),
        (sqlalchemy_store.SqlAlchemyStore, "store"),
    ):
        init = cls.__init__

        def counted(self: Any, *a: Any, _init: Any = init, _label: str = label, **k: Any) -> None:
            made.append(_label)
            _init(self, *a, **k)

        monkeypatch.setattr(cls, "__init__", counted)
    tracker = Tracker(config)
    result, resolved = trial["result"], trial["resolved"]
    tracker.log_run(result, resolved.compiled, resolved.rows)
    parent = tracker.parent_run("batch_sweep", "sid", {"models": "fixed/yes"})
    tracker.log_trial(parent, result, resolved.compiled, resolved.rows, "base")
    tracker.finish(parent, True)
    assert made == ["client", "store"]


def _log_as_before(
    tracker: Tracker, exp: str, result: Any, compiled: Any, rows: list[dict[str, str]]
) -> str:
    """`TrialRuns.log_trial` as it was before one batch (a top-level run, no registry)."""
    from mlflow.entities import Param

    from experiments.analysis.figures import close, confusion_figure
    from experiments.names import _param, predictions_sha, run_name
    from experiments.tracking.trial_runs import (
        DECODING_FILE,
        _trial_metrics,
        _trial_params,
        task_metrics,
    )
    from experiments.trials.predictions import PREDICTIONS_FILE, encode_predictions

    spec, summary, client = result.spec, result.summary(), tracker.client
    tags, _ = tracker._trial_tags(None, result, exp)
    run_id = client.create_run(
        exp, run_name=run_name(f"{spec.task} · base · {spec.model}"), tags=tags
    ).info.run_id
    extra = {"sample_seed": spec.seed, "variant_id": result.variant_id}
    params = _trial_params(result, spec.variant.label, extra)
    client.log_batch(run_id, params=[Param(k, _param(x)) for k, x in params.items()], tags=[])
    tracker._log_metrics(
        run_id,
        _trial_metrics(summary, result.metric) | task_metrics(spec.task, summary, result.metric),
    )
    client.log_text(run_id, compiled.render(rows[0]), "prompt.txt")
    client.log_text(run_id, encode_predictions(result.predictions), PREDICTIONS_FILE)
    client.log_dict(run_id, summary, "summary.json")
    client.log_dict(run_id, result.decoding, DECODING_FILE)
    fig = confusion_figure(
        result.predictions, compiled.labels, f"{spec.task}: {spec.variant.label}"
    )
    client.log_figure(run_id, fig, "confusion_matrix.png")
    close(fig)
    tracker._log_dataset(run_id, spec.task, spec.split, rows, None)
    tracker.finish(run_id, True)
    client.set_tag(run_id, "workbench.predictions_sha", predictions_sha(result))
    return str(run_id)


def _contents(tracker: Tracker, run_id: str, root: Path) -> dict[str, Any]:
    run = tracker.client.get_run(run_id)
    files = {}
    for a in tracker.client.list_artifacts(run_id):
        local = tracker.client.download_artifacts(run_id, a.path, str(root))
        files[a.path] = Path(local).read_bytes()
    return {
        "params": dict(run.data.params),
        "metrics": dict(run.data.metrics),
        "tags": dict(run.data.tags),
        "files": files,
        "inputs": [d.dataset.digest for d in run.inputs.dataset_inputs],
        "status": run.info.status,
    }


def test_the_batched_run_holds_what_the_run_held_before(
    trial: dict[str, Any], tmp_path: Path
) -> None:
    tracker = Tracker(_config(tmp_path))
    result, resolved = trial["result"], trial["resolved"]
    # its own experiment: in the one of `workbench run`, log_run would reuse this run
    exp = tracker.experiment_id("before/hearsay")
    before = _log_as_before(tracker, exp, result, resolved.compiled, resolved.rows)
    time.sleep(0.01)  # distinct start times
    now = tracker.log_run(result, resolved.compiled, resolved.rows)["mlflow_run_id"]
    assert now != before
    a, b = _contents(tracker, before, tmp_path / "a"), _contents(tracker, now, tmp_path / "b")
    assert set(a["files"]) == set(b["files"]) == {
        "confusion_matrix.png", "decoding.json", "predictions.jsonl", "prompt.txt", "summary.json",
    }  # fmt: skip
    assert a == b


def test_batches_keep_within_mlflows_limits() -> None:
    params = {f"p{i}": "v" for i in range(250)}
    metrics = {f"m{i}": float(i) for i in range(2000)}
    tags = {f"t{i}": "v" for i in range(30)}
    out = batches(params, metrics, tags)
    for b in out:
        assert len(b.params) <= MAX_PARAMS_TAGS and len(b.tags) <= MAX_PARAMS_TAGS
        assert len(b.metrics) <= MAX_METRICS
        assert len(b.params) + len(b.metrics) + len(b.tags) <= 1000
    assert dict(p for b in out for p in b.params) == params
    assert dict(m for b in out for m in b.metrics) == metrics
    assert dict(t for b in out for t in b.tags) == tags
    assert len(batches({"a": "1"}, {"m": 1.0}, {"t": "x"})) == 1
    assert batches({}, {}, {}) == []
