"""MLflow tracking: the only module that imports mlflow.

One parent run per sweep, one child run per trial. A child run carries every variant axis
as a param, the variant and trial ids, git commit and package versions as tags, the scores
as metrics, and as artifacts one rendered prompt, the predictions table and a confusion
matrix. Each variant's template is registered in the MLflow Prompt Registry and linked to
the run; the evaluated rows are logged as an MLflow dataset input. The parent run holds the
comparisons table, one `p_value…` metric per comparison, and the figures.

Configuration comes from `mlflow.yaml` (tracking URI, artifact location, experiment prefix,
prompt registry on/off); `MLFLOW_TRACKING_URI` overrides the URI.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import warnings
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from promptlib.errors import WorkbenchError

if TYPE_CHECKING:
    from experiments.runner import TrialResult
    from promptlib.render import CompiledPrompt

KIND = "workbench.kind"
SWEEP_ID = "workbench.sweep_id"
SWEEP_NAME = "workbench.sweep"
TRIAL_ID = "workbench.trial_id"
VARIANT_ID = "workbench.variant_id"
PARENT = "mlflow.parentRunId"


@dataclass(frozen=True)
class TrackingConfig:
    tracking_uri: str
    artifact_location: str | None
    experiment_prefix: str
    prompt_registry: bool
    source: str


def load_config(path: str | Path | None = None) -> TrackingConfig:
    """Read mlflow.yaml (default: $WORKBENCH_MLFLOW_CONFIG, then ./mlflow.yaml)."""
    p = Path(path or os.environ.get("WORKBENCH_MLFLOW_CONFIG") or "mlflow.yaml")
    doc: dict[str, Any] = {}
    if p.is_file():
        try:
            loaded = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise WorkbenchError(f"{p}: malformed YAML ({e})") from e
        if not isinstance(loaded, dict):
            raise WorkbenchError(f"{p}: expected a mapping (tracking_uri:, ...)")
        unknown = set(loaded) - {
            "tracking_uri",
            "artifact_location",
            "experiment_prefix",
            "prompt_registry",
        }
        if unknown:
            raise WorkbenchError(f"{p}: unknown field(s) {', '.join(sorted(unknown))}")
        doc = loaded
    base = p.resolve().parent
    uri = os.environ.get("MLFLOW_TRACKING_URI") or doc.get("tracking_uri") or "sqlite:///mlflow.db"
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        uri = "sqlite:///" + str(base / uri.removeprefix("sqlite:///"))
    artifacts = doc.get("artifact_location", "./mlartifacts")
    if artifacts and "://" not in artifacts:
        artifacts = (base / artifacts).resolve().as_uri()
    return TrackingConfig(
        tracking_uri=uri,
        artifact_location=artifacts,
        experiment_prefix=str(doc.get("experiment_prefix", "legal-prompt-workbench")),
        prompt_registry=bool(doc.get("prompt_registry", True)),
        source=str(p),
    )


def _mlflow(config: TrackingConfig) -> Any:
    import logging

    import mlflow

    logging.getLogger("mlflow").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.ERROR)
    mlflow.set_tracking_uri(config.tracking_uri)
    return mlflow


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _versions() -> dict[str, str]:
    out = {}
    for pkg in ("legal-prompt-workbench", "litellm", "mlflow", "llama_cpp_python", "dspy"):
        try:
            out[f"version.{pkg}"] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    return out


def safe_name(text: str) -> str:
    """A name MLflow accepts for metrics and prompts (letters, digits, _ - . /)."""
    return re.sub(r"[^A-Za-z0-9_\-./]+", "_", text).strip("_")


class Tracker:
    """Sweep tracking in MLflow: find-or-create, resume, log."""

    def __init__(self, config: TrackingConfig | None = None) -> None:
        self.config = config or load_config()
        self.mlflow = _mlflow(self.config)
        self.client = self.mlflow.MlflowClient()
        self.commit = _git_commit()

    # ---- experiments and parent runs -----------------------------------------------------
    def experiment_id(self, sweep_name: str) -> str:
        name = f"{self.config.experiment_prefix}/{sweep_name}"
        exp = self.client.get_experiment_by_name(name)
        if exp is not None:
            return str(exp.experiment_id)
        return str(self.client.create_experiment(name, artifact_location=self._artifacts_for(name)))

    def _artifacts_for(self, name: str) -> str | None:
        if not self.config.artifact_location:
            return None
        return self.config.artifact_location.rstrip("/") + "/" + safe_name(name)

    def parent_run(self, sweep_name: str, sweep_id: str, params: dict[str, Any]) -> str:
        """The sweep's parent run: reused if this sweep ran before (resume), else created."""
        exp = self.experiment_id(sweep_name)
        found = self.client.search_runs(
            [exp],
            filter_string=f"tags.`{SWEEP_ID}` = '{sweep_id}' and tags.`{KIND}` = 'sweep'",
            max_results=1,
        )
        if found:
            run_id = str(found[0].info.run_id)
            if found[0].info.status != "RUNNING":
                self.client.update_run(run_id, status="RUNNING")
            return run_id
        run = self.client.create_run(
            exp,
            run_name=sweep_name,
            tags={
                KIND: "sweep",
                SWEEP_ID: sweep_id,
                SWEEP_NAME: sweep_name,
                "git.commit": self.commit,
                **_versions(),
            },
        )
        for key, value in params.items():
            self.client.log_param(run.info.run_id, key, _param(value))
        return str(run.info.run_id)

    def study_parent(self, study_name: str, params: dict[str, Any]) -> str:
        """A new parent run for an optimisation study (one per study, made by its creator)."""
        exp = self.experiment_id(f"optimize/{study_name}")
        run = self.client.create_run(
            exp,
            run_name=study_name,
            tags={
                KIND: "study",
                "workbench.study": study_name,
                "git.commit": self.commit,
                **_versions(),
            },
        )
        for key, value in params.items():
            self.client.log_param(run.info.run_id, key, _param(value))
        return str(run.info.run_id)

    def log_study_summary(self, parent_id: str, report: dict[str, Any]) -> None:
        """The held-out verdict on the study's parent run (metrics + report.json)."""
        with self.mlflow.start_run(run_id=parent_id):
            self.mlflow.log_dict(report, "report.json")
            metrics = {
                "dev_score": report.get("dev_score"),
                "heldout_score": report["heldout"]["score"],
                "heldout_ci_low": report["heldout"]["ci_low"],
                "heldout_ci_high": report["heldout"]["ci_high"],
                "base_heldout_score": report["base_heldout"]["score"],
                "p_value.best_vs_base": report["p_value"],
            }
            self.mlflow.log_metrics({k: float(v) for k, v in metrics.items() if v is not None})
        self.client.set_terminated(parent_id, status="FINISHED")

    def finish(self, run_id: str, ok: bool = True) -> None:
        self.client.set_terminated(run_id, status="FINISHED" if ok else "FAILED")

    # ---- child runs ------------------------------------------------------------------------
    def finished_trials(self, parent_id: str) -> dict[str, str]:
        """trial id -> run id of the finished child runs; unfinished ones are deleted."""
        parent = self.client.get_run(parent_id)
        children = self.client.search_runs(
            [parent.info.experiment_id],
            filter_string=f"tags.`{PARENT}` = '{parent_id}'",
            max_results=50_000,
        )
        done: dict[str, str] = {}
        for run in children:
            tid = run.data.tags.get(TRIAL_ID)
            if run.info.status == "FINISHED" and tid and tid not in done:
                done[tid] = run.info.run_id
            else:  # killed mid-trial (or a duplicate): remove so each trial has one run
                self.client.delete_run(run.info.run_id)
        return done

    def log_trial(
        self,
        parent_id: str,
        result: TrialResult,
        compiled: CompiledPrompt,
        rows: list[dict[str, str]],
        name: str,
        extra_params: dict[str, Any] | None = None,
        source: str | None = None,
    ) -> str:
        """One child run for a finished trial; marked FINISHED only once fully logged.

        `source` is where the rows came from (the split's TSV path), for the dataset input.
        """
        mlflow = self.mlflow
        spec = result.spec
        v = spec.variant
        parent = self.client.get_run(parent_id)
        summary = result.summary()
        with (
            mlflow.start_run(run_id=parent_id, experiment_id=parent.info.experiment_id),
            mlflow.start_run(
                run_name=f"{spec.task} · {name} · {spec.model}",
                experiment_id=parent.info.experiment_id,
                nested=True,
                tags={
                    KIND: "trial",
                    TRIAL_ID: spec.id,
                    VARIANT_ID: result.variant_id,
                    SWEEP_ID: parent.data.tags.get(SWEEP_ID, ""),
                    "git.commit": self.commit,
                    **_versions(),
                },
            ) as child,
        ):
            mlflow.log_params(
                {
                    "task": spec.task,
                    "model": spec.model,
                    "split": spec.split,
                    "limit": _param(spec.limit),
                    "n_rows": len(result.predictions),
                    "variant": name,
                    "instruction": v.instruction,
                    "register": v.register,
                    "demos": v.demos if v.demos != "sample" else str(v.k),
                    "seed": _param(v.seed),
                    "pool": v.pool,
                    "format": v.format,
                    "scoring": spec.scoring,
                    "metric": result.metric,
                    **(extra_params or {}),
                }
            )
            metrics = {
                "score": summary["score"],
                result.metric: summary["score"],
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
            mlflow.log_metrics({k: float(x) for k, x in metrics.items() if x is not None})
            mlflow.log_text(compiled.render(rows[0]), "prompt.txt")
            mlflow.log_text(_jsonl(result), "predictions.jsonl")
            mlflow.log_dict(summary, "summary.json")
            if compiled.labels:
                fig = confusion_figure(result, compiled.labels)
                mlflow.log_figure(fig, "confusion_matrix.png")
                _close(fig)
            self._log_dataset(spec.task, spec.split, rows, source)
            if self.config.prompt_registry:
                self._register_prompt(child.info.run_id, spec.task, name, compiled)
            return str(child.info.run_id)

    def _log_dataset(
        self, task: str, split: str, rows: list[dict[str, str]], source: str | None
    ) -> None:
        import pandas as pd

        df = pd.DataFrame(rows)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "source can be interpreted in multiple ways"
            ds = self.mlflow.data.from_pandas(
                df, source=source or f"{task}/{split}.tsv", targets="answer", name=f"{task}/{split}"
            )
        self.mlflow.log_input(ds, context="evaluation")

    def _register_prompt(
        self, run_id: str, task: str, variant_name: str, compiled: CompiledPrompt
    ) -> Any:
        """Register the variant's template (new version only if the text changed) and link it."""
        template = compiled.template()
        name = safe_name(f"{task}.{compiled.variant.id[:12]}")
        version = None
        try:
            latest = self.mlflow.genai.load_prompt(f"prompts:/{name}@latest")
            if latest.template == template:
                version = latest
        except Exception:  # not registered yet
            version = None
        if version is None:
            version = self.mlflow.genai.register_prompt(
                name=name,
                template=template,
                commit_message=f"{task}: {variant_name}",
                tags={"task": task, "variant": variant_name, VARIANT_ID: compiled.variant.id},
            )
        self.client.link_prompt_version_to_run(run_id, version)
        return version

    def register_best(self, task: str, name: str, compiled: CompiledPrompt, alias: str) -> Any:
        """Register a prompt and point `alias` (e.g. 'best') at it."""
        template = compiled.template()
        pname = safe_name(f"{task}.{alias}")
        version = self.mlflow.genai.register_prompt(
            name=pname,
            template=template,
            commit_message=f"{task}: {name}",
            tags={"task": task, "variant": name, VARIANT_ID: compiled.variant.id},
        )
        self.mlflow.genai.set_prompt_alias(pname, alias, version.version)
        return version

    def load_predictions(self, run_id: str) -> list[dict[str, Any]]:
        text = self.mlflow.artifacts.load_text(f"runs:/{run_id}/predictions.jsonl")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def run_metrics(self, run_id: str) -> dict[str, float]:
        return dict(self.client.get_run(run_id).data.metrics)

    # ---- the parent's comparisons -------------------------------------------------------
    def log_comparisons(
        self, parent_id: str, table: list[dict[str, Any]], figures: dict[str, Any]
    ) -> None:
        with self.mlflow.start_run(run_id=parent_id):
            self.mlflow.log_dict({"comparisons": table}, "comparisons.json")
            self.mlflow.log_text(_csv(table), "comparisons.csv")
            for row in table:
                key = safe_name(f"p_value.{row['task']}.{row['model']}.{row['a']}_vs_{row['b']}")
                self.mlflow.log_metric(key, row["p_value"])
                self.mlflow.log_metric(
                    key.replace("p_value.", "p_value_corrected.", 1), row["p_corrected"]
                )
            for filename, fig in figures.items():
                self.mlflow.log_figure(fig, filename)

    def sweep_report(self, sweep_name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The latest parent run of a sweep and its comparisons table."""
        exp = self.client.get_experiment_by_name(f"{self.config.experiment_prefix}/{sweep_name}")
        if exp is None:
            raise WorkbenchError(
                f"no sweep named {sweep_name!r} in {self.config.tracking_uri}; "
                "run 'workbench sweep ablations/<spec>.yaml' first"
            )
        runs = self.client.search_runs(
            [exp.experiment_id],
            filter_string=f"tags.`{KIND}` = 'sweep'",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        if not runs:
            raise WorkbenchError(f"sweep {sweep_name!r} has no parent run yet")
        run = runs[0]
        try:
            doc = self.mlflow.artifacts.load_dict(f"runs:/{run.info.run_id}/comparisons.json")
        except Exception as e:
            raise WorkbenchError(
                f"sweep {sweep_name!r} (run {run.info.run_id}) has no comparisons yet: "
                "it did not finish; run the sweep again to resume it"
            ) from e
        info = {"run_id": run.info.run_id, "status": run.info.status, "params": run.data.params}
        return info, list(doc["comparisons"])


def _param(value: Any) -> str:
    return "none" if value is None else str(value)


def _jsonl(result: TrialResult) -> str:
    import dataclasses

    return "".join(
        json.dumps(dataclasses.asdict(p), ensure_ascii=False) + "\n" for p in result.predictions
    )


def _csv(table: list[dict[str, Any]]) -> str:
    import csv

    if not table:
        return ""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(table[0]))
    w.writeheader()
    w.writerows(table)
    return buf.getvalue()


def confusion_figure(result: TrialResult, labels: tuple[str, ...]) -> Any:
    """Confusion matrix of a trial (rows: answers; columns: parsed outputs, plus 'invalid')."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cols = [*labels, "invalid"]
    m = np.zeros((len(labels), len(cols)), dtype=int)
    for p in result.predictions:
        if p.answer not in labels:
            continue
        j = cols.index(p.parsed) if p.parsed in labels else len(labels)
        m[labels.index(p.answer), j] += 1
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(cols), 1.0 + 0.8 * len(labels)))
    ax.imshow(m, cmap="Blues")
    ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("model output")
    ax.set_ylabel("answer")
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            ax.text(j, i, str(m[i, j]), ha="center", va="center")
    ax.set_title(f"{result.spec.task}: {result.spec.variant.label}", fontsize=9)
    fig.tight_layout()
    return fig


def _close(fig: Any) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)


def ui_command(config: TrackingConfig, port: int, host: str = "127.0.0.1") -> list[str]:
    """The `mlflow ui` command for the configured store."""
    import sys

    cmd = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", config.tracking_uri]
    if config.artifact_location:
        cmd += ["--default-artifact-root", config.artifact_location]
    return [*cmd, "--host", host, "--port", str(port)]
