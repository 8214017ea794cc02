"""MLflow for generated texts: a `workbench variants generate` run (an experiment per task,
'<prefix>/generate/<task>', params, the prompts and texts as artifacts), and the unreviewed
mark a sweep's parent run or a `workbench run` run carries while it uses unreviewed files."""

from __future__ import annotations

from typing import Any

from experiments.names import (
    GENERATION_KIND,
    KIND,
    UNREVIEWED,
    _param,
    generate_suffix,
)
from experiments.secrets import redact
from experiments.tracking.parents import Parents
from experiments.tracking.store import _store_op, _versions


@_store_op("creating the generation's MLflow run")
def start_generation(
    tracker: Parents, task: str, kind: str, generator: str, params: dict[str, Any]
) -> str:
    """A new RUNNING run for one generation, in '<prefix>/generate/<task>'."""
    experiment = tracker.experiment_id(generate_suffix(task))
    tags = {
        KIND: "generation",
        GENERATION_KIND: kind,
        "git.commit": tracker.commit,
        **_versions(),
    }
    safe = {k: redact(_param(v)) for k, v in params.items()}
    return tracker._create_run(experiment, f"{kind}-{task}", tags, safe)


@_store_op("logging the generation's texts")
def finish_generation(
    tracker: Parents,
    run_id: str,
    artifacts: dict[str, str],
    metrics: dict[str, float],
    ok: bool,
) -> None:
    """Log the texts (artifact path -> text, secrets redacted) and metrics; end the run
    FINISHED when every candidate was written, else FAILED."""
    for path, text in artifacts.items():
        tracker.client.log_text(run_id, redact(text), path)
    tracker._log_metrics(run_id, metrics)
    tracker.finish(run_id, ok)


@_store_op("marking unreviewed generated texts on the run")
def mark_unreviewed(tracker: Parents, run_id: str, paths: list[str]) -> None:
    """Tag `run_id` with the unreviewed files it used ('; '-joined), or remove the tag once
    there are none (a rerun after `reviewed: true`)."""
    if paths:
        tracker.client.set_tag(run_id, UNREVIEWED, _param("; ".join(paths)))
        return
    if UNREVIEWED in tracker.client.get_run(run_id).data.tags:
        tracker.client.delete_tag(run_id, UNREVIEWED)
