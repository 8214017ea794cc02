"""A trial's run: its tags, params, metrics and artifacts (prompt, predictions, confusion matrix,
dataset, registered prompt), and reading a logged trial back.

A trial's run ends FINISHED when the trial is complete and FAILED when some rows failed (its
official score is then absent; `score_on_answered` and `n_errors` say what happened). It
carries every variant axis as a param (and the decoding settings as short ``decoding.<name>``
params, not one JSON string), the variant and trial ids, git commit and package versions as
tags, the scores as metrics (again under ``<task>/`` names, so MLflow's charts compare one
task's variants among themselves: `task_metrics`), and as artifacts one rendered prompt, the
predictions table, the decoding dict and a confusion matrix. Each variant's template is
registered in the MLflow Prompt Registry and linked to the run; the evaluated rows are logged
as an MLflow dataset input.
"""

from __future__ import annotations

import json
import warnings
from typing import TYPE_CHECKING, Any

from experiments.names import (
    GRADED,
    KIND,
    PARENT,
    SWEEP_ID,
    TRIAL_ID,
    TRIAL_STATUS,
    VARIANT_ID,
    _param,
    run_name,
)
from experiments.secrets import safe_url
from experiments.tracking.batch import RunFiles
from experiments.tracking.parents import Parents
from experiments.tracking.registry import Registry
from experiments.tracking.store import _retrying, _store_error, _store_op, _versions, store_errors
from experiments.trials.predictions import PREDICTIONS_FILE, decode_predictions, encode_predictions
from experiments.trials.record import Prediction
from promptlib.variants.axes import tracked_params

DECODING_FILE = "decoding.json"  # a trial run's whole decoding dict (its params hold the scalars)

if TYPE_CHECKING:
    from experiments.trials.run import TrialResult
    from promptlib.render import CompiledPrompt


class TrialRuns(Parents, Registry):
    """One MLflow run per trial, under a sweep's parent or on its own (`workbench run`)."""

    def log_trial(
        self,
        parent_id: str | None,
        result: TrialResult,
        compiled: CompiledPrompt,
        rows: list[dict[str, str]],
        name: str,
        extra_params: dict[str, Any] | None = None,
        source: str | None = None,
        experiment_id: str | None = None,
        extra_tags: dict[str, str] | None = None,
    ) -> str:
        """One run for a trial, ended FINISHED (complete) or FAILED (rows failed).

        Under a sweep's parent run it is a child run; with `parent_id` None it is a top-level
        run of `experiment_id` (a `workbench run`, see `log_run`). The run stays RUNNING until
        everything is logged, so a crash mid-log leaves a run that resume recognises as
        unfinished. `source` is the split's TSV path; `extra_tags` join the params and
        metrics in the run's one `log_batch`, and its files go up in one `log_artifacts`
        (`batch`): a trial is a handful of store calls, not one per value or file.
        """
        spec = result.spec
        summary = result.summary()
        status = result.status
        tags, experiment_id = self._trial_tags(parent_id, result, experiment_id)
        run = self.client.create_run(
            experiment_id,
            run_name=run_name(f"{spec.task} · {name} · {spec.model}"),
            tags=tags,
        )
        run_id = str(run.info.run_id)
        params = _trial_params(result, name, extra_params)
        metrics = {
            n: v
            for n, v in (
                _trial_metrics(summary, result.metric)
                | task_metrics(spec.task, summary, result.metric)
            ).items()
            if v is not None
        }
        with RunFiles() as files:
            keys = self._keys(run_id, list(metrics), files)  # explained before they are used
            self._trial_files(files, result, compiled, rows, summary)
            self.client.log_artifacts(run_id, str(files.folder))  # one upload, every file
        late = dict(extra_tags or {})
        if not status.ok:
            late["mlflow.note.content"] = _param(result.failure_reason())
        self._log_batches(
            run_id,
            params={k: _param(x) for k, x in params.items()},
            metrics={keys[n]: float(v) for n, v in metrics.items()},
            tags=late,
        )
        self._log_dataset(run_id, spec.task, spec.split, rows, source)
        if self.config.prompt_registry:
            self._register_prompt(run_id, spec.task, name, compiled)
        self.finish(run_id, status.ok)
        return run_id

    def _trial_tags(
        self, parent_id: str | None, result: TrialResult, experiment_id: str | None
    ) -> tuple[dict[str, str], str]:
        """A trial run's tags and its experiment (the parent's, under a sweep)."""
        tags = {
            TRIAL_ID: result.trial_id,
            TRIAL_STATUS: str(result.status),
            VARIANT_ID: result.variant_id,
            "git.commit": self.commit,
            **_versions(),
        }
        if parent_id is not None:
            if parent_id not in self._parents:  # neither changes while the sweep runs
                parent = self.client.get_run(parent_id)
                found = (str(parent.info.experiment_id), parent.data.tags.get(SWEEP_ID, ""))
                self._parents[parent_id] = found
            experiment_id, sweep_id = self._parents[parent_id]
            tags |= {PARENT: parent_id, KIND: "trial", SWEEP_ID: sweep_id}
        else:
            assert experiment_id is not None, "a run without a parent needs its experiment"
            tags[KIND] = "run"
        if result.metric == "manual":
            tags[GRADED] = "false"  # graded by hand: no score until 'workbench grade import'
        return tags, experiment_id

    def _trial_files(
        self,
        files: RunFiles,
        result: TrialResult,
        compiled: CompiledPrompt,
        rows: list[dict[str, str]],
        summary: dict[str, Any],
    ) -> None:
        """The rendered prompt, predictions, summary, decoding and confusion matrix."""
        spec = result.spec
        files.text("prompt.txt", compiled.render(rows[0]))
        files.text(PREDICTIONS_FILE, encode_predictions(result.predictions))
        files.json_dict("summary.json", summary)
        files.json_dict(DECODING_FILE, result.decoding)
        if compiled.labels:
            # start-up time: matplotlib (not pyplot), only when a trial with labels is logged
            from experiments.analysis.confusion import confusion_figure

            title = f"{spec.task}: {spec.variant.label}"
            files.figure(
                "confusion_matrix.png", confusion_figure(result.predictions, compiled.labels, title)
            )

    def _log_dataset(
        self, run_id: str, task: str, split: str, rows: list[dict[str, str]], source: str | None
    ) -> None:
        import pandas as pd
        from mlflow.entities import DatasetInput, InputTag

        df = pd.DataFrame(rows)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "source can be interpreted in multiple ways"
            ds = self.mlflow.data.from_pandas(
                df, source=source or f"{task}/{split}.tsv", targets="answer", name=f"{task}/{split}"
            )
        entity = DatasetInput(
            dataset=ds._to_mlflow_entity(),
            tags=[InputTag(key="mlflow.data.context", value="evaluation")],
        )
        _retrying("log_inputs", lambda: self.client.log_inputs(run_id, datasets=[entity]))

    @_store_op("reading a trial's predictions")
    def load_predictions(self, run_id: str) -> list[Prediction]:
        return decode_predictions(self._artifact_text(run_id, PREDICTIONS_FILE))

    def stored_predictions(self, run_id: str) -> list[Prediction] | None:
        """A FINISHED run's predictions, or None when its artifact is missing or unreadable
        (the artifact folder was deleted or damaged): the trial must then run and be logged
        again. A store that cannot be reached at all is a `TrackingError`, not None."""
        try:
            text = self._artifact_text(run_id, PREDICTIONS_FILE)
        except Exception as e:
            with store_errors(self.config, "reading a trial's predictions"):
                listed = {a.path for a in self.client.list_artifacts(run_id)}
            if PREDICTIONS_FILE in listed:  # there, yet unreadable: not ours to delete
                raise _store_error(self.config, e, "reading a trial's predictions") from e
            return None
        try:
            return decode_predictions(text)
        except (ValueError, KeyError, TypeError):  # not JSON lines, or not predictions
            return None

    @_store_op("reading a trial's metrics")
    def run_metrics(self, run_id: str) -> dict[str, float]:
        return dict(self.client.get_run(run_id).data.metrics)


def _trial_params(
    result: TrialResult, name: str, extra_params: dict[str, Any] | None
) -> dict[str, Any]:
    """A trial run's params: every variant axis (as `promptlib.variants.axes` says), the
    model, split and scoring."""
    spec = result.spec
    return {
        "task": spec.task,
        "model": spec.model,
        "api_base": safe_url(result.lm_identity.get("api_base") or "none"),
        **_env_param(result.lm_identity.get("env")),
        "mode": result.lm_identity.get("mode"),
        "split": spec.split,
        "limit": _param(spec.limit),
        "n_rows": len(result.predictions),
        "variant": name,
        **tracked_params(spec.variant),  # each axis the table tracks (None is logged as none)
        "scoring": spec.scoring,
        "definition": spec.definition,
        "metric": result.metric,
        **decoding_params(result.decoding),
        **(extra_params or {}),
    }


def decoding_params(decoding: dict[str, Any]) -> dict[str, Any]:
    """The decoding settings as short params (``decoding.max_tokens``, ``decoding.stop``, ...)
    instead of one JSON string: the compare view's params table and plots show them as
    values. A list other than the stop sequences (log-likelihood's continuations: the labels
    as shown) is left to the run's `DECODING_FILE` artifact, which holds the whole dict.
    Runs logged before this have one ``decoding`` param holding the JSON (`logged_decoding`
    reads both)."""
    out: dict[str, Any] = {}
    for key, value in sorted(decoding.items()):
        if isinstance(value, (list, tuple)):
            if key == "stop":
                out[f"decoding.{key}"] = " ".join(json.dumps(s) for s in value) or "none"
            continue
        out[f"decoding.{key}"] = value
    return out


def logged_decoding(params: dict[str, str]) -> dict[str, str]:
    """A trial run's decoding params as logged, by setting name: the ``decoding.<name>``
    params, or for a run logged before they existed, the keys of its ``decoding`` JSON param
    (cut at 500 characters then, so possibly unreadable: {} in that case)."""
    new = {k.removeprefix("decoding."): v for k, v in params.items() if k.startswith("decoding.")}
    if new or "decoding" not in params:
        return new
    try:
        old = json.loads(params["decoding"])
    except ValueError:
        return {}
    if not isinstance(old, dict):
        return {}
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in old.items()}


def _env_param(env: Any) -> dict[str, Any]:
    """The environment that decided the answers (``OPENAI_BASE_URL``, ...) as one param per
    variable (``env.OPENAI_BASE_URL``), only when any was set: a run without has the params
    it always had. Its URLs are shown without passwords already (`experiments.llm.answer_env`).
    Runs logged before this have one ``env`` param holding the JSON."""
    if not isinstance(env, dict):
        return {}
    return {f"env.{name}": value for name, value in sorted(env.items())}


def task_metrics(task: str, summary: dict[str, Any], metric: str) -> dict[str, Any]:
    """The trial's scores again under ``<task>/`` names (``hearsay/score``,
    ``hearsay/balanced_accuracy``, ``hearsay/invalid_rate``): MLflow's charts put the
    metrics of one ``/`` prefix in one section, and a metric is drawn only for the runs
    that have it, so each task's variants are compared among themselves, never on one axis
    with tasks of another chance level. The plain names stay (readers and older runs use
    them)."""
    return {
        f"{task}/score": summary["score"],
        f"{task}/{metric}": summary["score"],
        f"{task}/invalid_rate": summary["invalid_rate"],
    }


def _trial_metrics(summary: dict[str, Any], metric: str) -> dict[str, Any]:
    """A trial run's metrics from its summary (None values are not logged)."""
    return {
        # The official score exists only for a complete trial.
        "score": summary["score"],
        metric: summary["score"],
        "score_on_answered": summary["score_on_answered"],
        "accuracy": summary["accuracy"],
        "invalid_rate": summary["invalid_rate"],
        "n": summary["n"],
        "n_errors": summary["n_errors"],
        "tokens_in": summary["tokens_in"],
        "tokens_out": summary["tokens_out"],
        "cost": summary["cost"],
        "mean_latency": summary["mean_latency"],
        "model_calls": summary["model_calls"],
        "cache_hits": summary["cache_hits"],
        "wall_time": summary["wall_time"],
    }
