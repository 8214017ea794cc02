"""MLflow for imported results (`workbench import`): an experiment per import
('<prefix>/import/<name>'), a parent run holding the source files, the reading options and the
comparisons, and a child run per imported trial; read back by `workbench compare`."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.names import (
    IMPORT_ID,
    IMPORT_NAME,
    IMPORT_RECORD,
    IMPORT_SOURCES,
    KIND,
    PARENT,
    TRIAL_STATUS,
    experiment_name,
    import_suffix,
    run_name,
)
from experiments.secrets import redact
from experiments.tracking.reports import Reports
from experiments.tracking.store import _store_op
from promptlib.errors import WorkbenchError

KIND_IMPORT = "import"
KIND_TRIAL = "imported_trial"
# when the import's files were last imported under its name (ms since the epoch), set again on
# reuse: `workbench compare NAME` reads the run imported last, not the one started last
IMPORTED_AT = "workbench.imported_at"


@_store_op("logging the import")
def log_import(
    tracker: Reports,
    record: Mapping[str, Any],
    sources: Sequence[Path],
    trials: Sequence[Mapping[str, Any]],
    doc: dict[str, Any],
) -> dict[str, Any]:
    """Track an import: reused when a FINISHED run of the same import id exists, else one
    parent run (sources, `import.json`, comparisons) and a child run per trial, FINISHED only
    once all is logged (a run left by a failed attempt is replaced).

    `record` is the import's name, id, format, options and files; `trials` one mapping per
    trial (params, metrics, rows)."""
    name, key = str(record["name"]), str(record["import_id"])
    exp = tracker.experiment_id(import_suffix(name))
    out = {
        "experiment": experiment_name(tracker.config.experiment_prefix, import_suffix(name)),
        "reused": False,
    }
    params = {
        "format": record["format"],
        **{f"option.{k}": v for k, v in record["options"].items()},
    }
    with tracker._find_or_create_parent(
        exp, f"import-{key[:32]}.lock", KIND_IMPORT, IMPORT_ID, key, name,
        {IMPORT_NAME: name}, params,
    ) as (run_id, found):  # fmt: skip
        out["run_id"] = run_id
        if found and tracker.run_status(run_id) == "FINISHED":
            tracker.client.set_tag(run_id, IMPORTED_AT, str(time.time_ns() // 1_000_000))
            return out | {"reused": True}
        for child in tracker._children(run_id):  # a failed attempt's: logged again below
            tracker.client.delete_run(child.info.run_id)
        tracker.mark_running(run_id)
        try:
            _log_parent(tracker, run_id, record, sources, doc)
            for t in trials:
                _log_trial(tracker, exp, run_id, t)
        except BaseException:
            tracker.finish(run_id, ok=False)
            raise
        tracker.client.set_tag(run_id, IMPORTED_AT, str(time.time_ns() // 1_000_000))
        tracker.finish(run_id, ok=True)
    return out


def _log_parent(
    tracker: Reports,
    run_id: str,
    record: Mapping[str, Any],
    sources: Sequence[Path],
    doc: dict[str, Any],
) -> None:
    for n, path in enumerate(sources):
        tracker.client.log_artifact(run_id, str(path), f"{IMPORT_SOURCES}/{n}")
    tracker.client.log_dict(run_id, dict(record), IMPORT_RECORD)
    tracker.log_comparisons(run_id, doc, {})


def _log_trial(tracker: Reports, exp: str, parent_id: str, t: Mapping[str, Any]) -> None:
    params = dict(t["params"])
    tags = {PARENT: parent_id, KIND: KIND_TRIAL, TRIAL_STATUS: str(t["status"])}
    name = run_name(f"{params['task']}.{params['variant']}.{params['model']}")
    run_id = tracker._create_run(exp, name, tags, params)
    tracker._log_metrics(run_id, dict(t["metrics"]) | _task_scores(params, t["metrics"]))
    rows = "".join(json.dumps(r, default=str) + "\n" for r in t["rows"])
    tracker.client.log_text(run_id, redact(rows), "rows.jsonl")  # e.g. a provider's error
    tracker.finish(run_id, ok=True)


@_store_op("logging the import's report")
def log_import_report(tracker: Reports, run_id: str, html: str, name: str = "index.html") -> None:
    """The import's HTML report on its parent run (MLflow's artifact view shows it), replacing
    one logged before (a reused import's report is rebuilt from the same files)."""
    tracker.client.log_text(run_id, html, name)


def _task_scores(params: Mapping[str, Any], metrics: Mapping[str, Any]) -> dict[str, Any]:
    """An imported trial's score again as ``<task>/score`` and ``<task>/<metric>``, as a
    sweep's trial runs have it (`trial_runs.task_metrics`): MLflow's charts then compare
    one task's arms in that task's section."""
    task, score = params.get("task"), metrics.get("score")
    if not task or score is None:
        return {}
    return {f"{task}/score": score, f"{task}/{params.get('metric') or 'score'}": score}


@_store_op("reading the import")
def read_import(tracker: Reports, name: str, into: Path) -> tuple[dict[str, Any], list[Path]]:
    """An import's `import.json` (with its run id) and its source files, downloaded into
    `into` in the order they were imported; a one-line error when there is no such import."""
    exp = tracker.client.get_experiment_by_name(
        experiment_name(tracker.config.experiment_prefix, import_suffix(name))
    )
    runs = [] if exp is None else tracker.client.search_runs(
        [exp.experiment_id],
        filter_string=f"tags.`{KIND}` = '{KIND_IMPORT}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
    )  # fmt: skip
    if not runs:
        raise WorkbenchError(
            f"no finished import named {name!r} in {tracker.config.tracking_uri}; run "
            "`workbench import FORMAT PATH... --name NAME` first (its output names the import)"
        )
    run_id = str(max(runs, key=_imported_at).info.run_id)
    record = json.loads(tracker._artifact_text(run_id, IMPORT_RECORD))
    stored = Path(tracker.client.download_artifacts(run_id, IMPORT_SOURCES, str(into)))
    names = [Path(f["path"]).name for f in record["files"]]
    flat = len(set(names)) == len(names)  # side by side, as read: a reader finds companions
    given = []
    for n, (f, fname) in enumerate(zip(record["files"], names, strict=True)):
        local = stored / str(n) / fname
        if flat:
            local = Path(shutil.move(local, into / fname))
        if f.get("role", "given") == "given":
            given.append(Path(local))
    return {**record, "run_id": run_id}, given


def _imported_at(run: Any) -> int:
    """When a run's files were last imported (its start, for runs logged without the tag)."""
    stamp = run.data.tags.get(IMPORTED_AT, "")
    return int(stamp) if stamp.isdigit() else int(run.info.start_time or 0)


def download_dir() -> tempfile.TemporaryDirectory[str]:
    """A temporary folder for an import's downloaded source files."""
    return tempfile.TemporaryDirectory(prefix="workbench-import-")
