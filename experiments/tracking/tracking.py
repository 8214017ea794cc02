"""MLflow tracking: the only module that imports mlflow.

Everything goes through an `MlflowClient` bound to the configured store: runs are created
with their parent tag, logged with `log_batch`, and ended with `set_terminated` in the state
that tells the truth. There is no fluent `start_run`, so no process-global active run and no
context exit that marks a parent FINISHED behind our back.

Run states: a trial's child run ends FINISHED when the trial is complete and FAILED when some
rows failed (its official score is then absent; `score_on_answered` and `n_errors` say what
happened). A sweep's parent is RUNNING while the sweep runs, FINISHED only when every trial
is complete and the comparisons are logged, FAILED otherwise; after a kill it stays RUNNING,
never FINISHED. A rerun that finds nothing to change leaves a FINISHED parent untouched.

Store failures (unreachable, locked, deleted, unwritable artifacts) are one `TrackingError`
line naming the store, what was being done and what to run; MLflow's own logger is silenced.

Concurrency: trials are claimed with a lock file per (store, trial) before a child run is
created, so two invocations of one sweep on one machine share the work and never delete each
other's in-flight runs; at most one FINISHED run per trial is kept whatever runs at once.

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

import contextlib
import functools
import hashlib
import io
import json
import os
import re
import subprocess
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from experiments.analysis.sensitivity import sensitivity_metrics, variance_shares_artifact
from experiments.files import atomic_write_text
from experiments.secrets import redact, safe_url
from experiments.settings import cache_dir
from experiments.trials.grading import current_grades, grade_metrics
from promptlib.data import read_text
from promptlib.errors import WorkbenchError
from promptlib.yamlsafe import safe_yaml_load

if TYPE_CHECKING:
    from experiments.trials.run import TrialResult
    from promptlib.render import CompiledPrompt

KIND = "workbench.kind"
SWEEP_ID = "workbench.sweep_id"
SWEEP_NAME = "workbench.sweep"
TRIAL_ID = "workbench.trial_id"
TRIAL_STATUS = "workbench.status"
VARIANT_ID = "workbench.variant_id"
STUDY = "workbench.study"
LAST_RUN = "workbench.last_run"
GRADED = "workbench.graded"
PREDICTIONS_SHA = "workbench.predictions_sha"  # what a `workbench run` run recorded
GRADES_SHA = "workbench.grades_sha"  # the hand grades on it, when graded
# GRADES_SHA while grades are being written (`Tracker._put_grades`): matches no folder
GRADES_PENDING = "pending:"
PARENT = "mlflow.parentRunId"

_F = TypeVar("_F", bound=Callable[..., Any])


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
        text = read_text(p, "tracking config", WorkbenchError)
        try:
            loaded = safe_yaml_load(text, str(p)) or {}
        except WorkbenchError as e:
            raise WorkbenchError(f"{e}; fix it or remove it to use the defaults") from None
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


class TrackingError(WorkbenchError):
    """The tracking store cannot be reached or used; the message says which and what to do."""


class SweepIncomplete(WorkbenchError):
    """`report` on a sweep that has no result yet (running, stopped): a state, exit 1."""

    exit_code = 1


METRIC_NAMES = "metric_names.json"  # short metric name -> full name, where one was shortened
MAX_KEY = 250  # MLflow's limit for metric (and param, tag) names


def metric_key(name: str) -> str:
    """`safe_name(name)`, or, over MLflow's 250 characters, a readable prefix and a hash of
    the whole name: the same name always gets the same key, two names never share one."""
    key = safe_name(name)
    if len(key) <= MAX_KEY:
        return key
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]  # of the name as given
    return key[: MAX_KEY - len(digest) - 1].rstrip("._-/") + "." + digest


# Short client-side retries: a wrong URL should fail in seconds, not after minutes.
_FAST_FAIL_ENV = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
    "MLFLOW_SQLALCHEMYSTORE_POOL_RECYCLE": "600",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
}


def _quiet_mlflow() -> Any:
    import logging

    import mlflow

    # The workbench turns every store failure into one line (`TrackingError`); MLflow's own
    # logger would print the same failure first, as a traceback of hundreds of lines.
    for name in ("mlflow", "alembic", "sqlalchemy"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    return mlflow


def _lock_dir(config: TrackingConfig) -> Path:
    """Where this store's lock files live: beside a SQLite file, else in the user cache."""
    uri = config.tracking_uri
    if uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///").split("?", 1)[0])
        return db.parent / f".{db.name}.locks"

    digest = hashlib.sha256(uri.encode("utf-8")).hexdigest()[:16]
    return cache_dir() / "locks" / digest


@contextlib.contextmanager
def _file_lock(path: Path, timeout: float = -1) -> Iterator[bool]:
    """Hold an OS file lock; yields False when `timeout` passed without getting it."""
    import filelock

    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(path))
    try:
        lock.acquire(timeout=timeout)
    except filelock.Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


RERUN = (
    "then run the same command again: what is logged is kept, and trials not logged yet "
    "rerun with their answers from the response cache"
)


def _reason(e: BaseException) -> str:
    """The first line of the innermost cause: "database is locked", not SQLAlchemy's wrapper."""
    seen: set[int] = set()
    while (e.__cause__ or e.__context__) is not None and id(e) not in seen:
        seen.add(id(e))
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    first = redact(str(e)).strip().splitlines()
    return first[0][:300] if first else type(e).__name__


def _store_error(
    config: TrackingConfig, e: BaseException, doing: str | None = None
) -> TrackingError:
    """One line for a store that failed: which store, doing what, why, and what to run."""
    url = safe_url(config.tracking_uri)
    if doing is None:  # opening the store, or `workbench run`'s own wording
        first = redact(str(e)).strip().splitlines()
        reason = first[0][:300] if first else type(e).__name__
        return TrackingError(
            f"cannot use the MLflow tracking store {url} ({reason}); "
            f"check tracking_uri in {config.source} or MLFLOW_TRACKING_URI (server running, "
            "credentials right, folder writable)"
        )
    db = _sqlite_path(config)
    if db is not None and not db.exists():  # SQLite says "readonly database" for this
        return TrackingError(
            f"the MLflow store {db} was deleted while {doing}; run the same command again: "
            "it starts a new store there and logs every trial again, answers from the "
            "response cache (put the file back first to keep the runs it held)"
        )
    return TrackingError(
        f"the MLflow tracking store {url} failed while {doing} ({_reason(e)}); check that "
        f"it is reachable and writable (tracking_uri, artifact_location in {config.source}), "
        f"{RERUN}"
    )


@contextlib.contextmanager
def store_errors(config: TrackingConfig, doing: str) -> Iterator[None]:
    """Turn any store failure inside the block into one `TrackingError` line; workbench
    errors and interrupts pass through unchanged."""
    try:
        yield
    except WorkbenchError:
        raise
    except Exception as e:
        raise _store_error(config, e, doing) from e


def _store_op(doing: str) -> Callable[[_F], _F]:
    """A Tracker method whose store failures are one `TrackingError` line (see store_errors)."""

    def wrap(fn: _F) -> _F:
        @functools.wraps(fn)
        def inner(self: Tracker, *args: Any, **kwargs: Any) -> Any:
            with store_errors(self.config, doing):
                return fn(self, *args, **kwargs)

        return inner  # type: ignore[return-value]

    return wrap


def _probe_database(uri: str) -> None:
    """One quick connection to a database store (MLflow itself retries for ~100 s)."""
    scheme = uri.split(":", 1)[0].split("+", 1)[0]
    if scheme not in ("postgresql", "mysql", "mssql"):
        return
    import sqlalchemy

    args = {"connect_timeout": 10} if scheme in ("postgresql", "mysql") else {}
    engine = sqlalchemy.create_engine(uri, connect_args=args, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect():
            pass
    finally:
        engine.dispose()


def open_client(config: TrackingConfig) -> Any:
    """An MlflowClient on the store, checked with one cheap call, failing fast and in one line.

    Creating a fresh SQLite store runs MLflow's migrations; two processes doing it at once
    collide ("duplicate column name"), so that first contact is serialised by a lock file.
    """
    for key, value in _FAST_FAIL_ENV.items():
        os.environ.setdefault(key, value)
    mlflow = _quiet_mlflow()
    try:
        _probe_database(config.tracking_uri)
        with _file_lock(_lock_dir(config) / "store.lock"):
            client = mlflow.MlflowClient(tracking_uri=config.tracking_uri)
            client.search_experiments(max_results=1)
    except WorkbenchError:
        raise
    except Exception as e:  # any store failure: unreachable, auth, schema, disk
        raise _store_error(config, e) from None
    _stamp_schema(config)
    return client


def _sqlite_path(config: TrackingConfig) -> Path | None:
    uri = config.tracking_uri
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri.removeprefix("sqlite:///").split("?", 1)[0])


def _schema_version(db: Path) -> str | None:
    """The MLflow schema revision of a SQLite store (alembic's), read without MLflow."""
    import sqlite3

    try:
        con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
        try:
            row = con.execute("SELECT version_num FROM alembic_version").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def _stamp_schema(config: TrackingConfig) -> None:
    """Note beside a SQLite store the schema revision MLflow just opened it at, so that a
    cached rerun may read the store without MLflow only while it is still that schema."""

    db = _sqlite_path(config)
    version = _schema_version(db) if db is not None else None
    if db is None or version is None:
        return
    with contextlib.suppress(OSError):  # only the fast cached rerun is lost
        atomic_write_text(_lock_dir(config) / "schema-opened", version)


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


def _retrying(what: str, fn: Any, attempts: int = 4) -> Any:
    """Retry a store write that can lose a race with a peer (unique-constraint collisions)."""
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as e:
            text = str(e)
            racing = any(
                k in text
                for k in (
                    "IntegrityError",
                    "UNIQUE constraint",
                    "UniqueViolation",
                    "already exists",
                )
            )
            if not racing or attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError(what)


class Tracker:
    """Sweep and study tracking in MLflow through one client: find-or-create, resume, log."""

    def __init__(self, config: TrackingConfig | None = None) -> None:
        self.config = config or load_config()
        self.client = open_client(self.config)
        self.mlflow = _quiet_mlflow()
        self.commit = _git_commit()
        self._renamed: dict[str, dict[str, str]] = {}  # run id -> {short metric name: full}

    # ---- experiments and parent runs -----------------------------------------------------
    def experiment_id(self, name_suffix: str) -> str:
        name = f"{self.config.experiment_prefix}/{name_suffix}"
        exp = self.client.get_experiment_by_name(name)
        if exp is not None:
            return str(exp.experiment_id)
        try:
            return str(
                self.client.create_experiment(name, artifact_location=self._artifacts_for(name))
            )
        except Exception:  # a peer created it a moment ago
            exp = self.client.get_experiment_by_name(name)
            if exp is None:
                raise
            return str(exp.experiment_id)

    def _artifacts_for(self, name: str) -> str | None:
        if not self.config.artifact_location:
            return None
        return self.config.artifact_location.rstrip("/") + "/" + safe_name(name)

    def artifact_dir(self) -> Path | None:
        """The local artifact folder, when artifacts are stored on this machine."""
        return artifact_dir(self.config)

    def _create_run(
        self, experiment_id: str, name: str, tags: dict[str, str], params: dict[str, Any]
    ) -> str:
        from mlflow.entities import Param

        run = self.client.create_run(experiment_id, run_name=name, tags=tags)
        run_id = str(run.info.run_id)
        if params:
            self.client.log_batch(run_id, params=[Param(k, _param(v)) for k, v in params.items()])
        return run_id

    @_store_op("finding the sweep's parent run")
    def parent_run(self, sweep_name: str, sweep_id: str, params: dict[str, Any]) -> str:
        """The sweep's parent run: reused if this sweep ran before (resume), else new, RUNNING.

        A reused parent keeps its state (`run_status`): the caller marks it RUNNING
        (`mark_running`) only once it has something to change, so a rerun that finds
        nothing to do, interrupted or not, leaves a FINISHED sweep FINISHED.
        """
        exp = self.experiment_id(sweep_name)
        with _file_lock(_lock_dir(self.config) / f"sweep-{sweep_id[:32]}.parent.lock"):
            found = self.client.search_runs(
                [exp],
                filter_string=f"tags.`{SWEEP_ID}` = '{sweep_id}' and tags.`{KIND}` = 'sweep'",
                order_by=["attributes.start_time ASC"],
                max_results=1,
            )
            if found:
                run_id = str(found[0].info.run_id)
            else:
                run_id = self._create_run(
                    exp,
                    sweep_name,
                    {KIND: "sweep", SWEEP_ID: sweep_id, SWEEP_NAME: sweep_name,
                     "git.commit": self.commit, **_versions()},
                    params,
                )  # fmt: skip
            # `workbench report` shows the sweep run most recently, not the one created last
            self.client.set_tag(run_id, LAST_RUN, f"{time.time():.6f}")
            return run_id

    @_store_op("reading the sweep's parent run")
    def run_status(self, run_id: str) -> str:
        """RUNNING, FINISHED, FAILED or KILLED."""
        return str(self.client.get_run(run_id).info.status)

    @_store_op("marking the sweep's parent run RUNNING")
    def mark_running(self, run_id: str) -> None:
        self.client.update_run(run_id, status="RUNNING")

    def study_parent(self, study_name: str, study_key: str, params: dict[str, Any]) -> str:
        """The optimisation study's parent run in this store: found by its key, else new."""
        exp = self.experiment_id(f"optimize/{study_name}")
        with _file_lock(_lock_dir(self.config) / f"study-{study_key[:32]}.lock"):
            found = self.client.search_runs(
                [exp],
                filter_string=f"tags.`{STUDY}` = '{study_key}' and tags.`{KIND}` = 'study'",
                order_by=["attributes.start_time ASC"],
                max_results=1,
            )
            if found:
                run_id = str(found[0].info.run_id)
                self.client.update_run(run_id, status="RUNNING")
                return run_id
            return self._create_run(
                exp,
                study_name,
                {
                    KIND: "study",
                    STUDY: study_key,
                    "workbench.study_name": study_name,
                    "git.commit": self.commit,
                    **_versions(),
                },
                params,
            )

    def run_exists(self, run_id: str) -> bool:
        try:
            run = self.client.get_run(run_id)
        except Exception:
            return False
        return bool(run.info.lifecycle_stage == "active")

    def log_study_summary(self, parent_id: str, report: dict[str, Any]) -> None:
        """The held-out verdict on the study's parent run (metrics + report.json)."""
        self.client.log_dict(parent_id, report, "report.json")
        metrics = {
            "dev_score": report.get("dev_score"),
            "heldout_score": report["heldout"]["score"],
            "heldout_ci_low": report["heldout"]["ci_low"],
            "heldout_ci_high": report["heldout"]["ci_high"],
            "base_heldout_score": report["base_heldout"]["score"],
            "p_value.best_vs_base": report["p_value"],
        }
        self._log_metrics(parent_id, metrics)

    def finish(self, run_id: str, ok: bool) -> None:
        """End a run in the state that tells the truth: FINISHED only when all went well."""
        self.client.set_terminated(run_id, status="FINISHED" if ok else "FAILED")

    def _log_metrics(self, run_id: str, metrics: dict[str, Any]) -> None:
        """Log metrics; a name over MLflow's 250 characters is logged as `metric_key(name)`
        and the run's `metric_names.json` maps every such short name to its full name."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = []
        renamed = self._renamed.setdefault(run_id, {})
        before = len(renamed)
        for name, value in metrics.items():
            if value is None:
                continue
            key = metric_key(name)
            if key != safe_name(name):  # shortened: say what it stands for
                renamed[key] = name
            batch.append(Metric(key, float(value), now, 0))
        if len(renamed) > before:  # before the metrics: a name is never logged unexplained
            self.client.log_dict(run_id, dict(sorted(renamed.items())), METRIC_NAMES)
        for i in range(0, len(batch), 900):  # MLflow caps a batch at 1000 metrics
            self.client.log_batch(run_id, metrics=batch[i : i + 900])

    # ---- child runs ------------------------------------------------------------------------
    def _children(self, parent_id: str, trial_id: str | None = None) -> list[Any]:
        parent = self.client.get_run(parent_id)
        flt = f"tags.`{PARENT}` = '{parent_id}'"
        if trial_id is not None:
            flt += f" and tags.`{TRIAL_ID}` = '{trial_id}'"
        return list(
            self.client.search_runs(
                [parent.info.experiment_id],
                filter_string=flt,
                order_by=["attributes.start_time ASC"],
                max_results=50_000,
            )
        )

    @_store_op("listing the sweep's trial runs")
    def finished_trials(self, parent_id: str) -> dict[str, str]:
        """trial id -> run id of the FINISHED child runs (other runs are left alone here)."""
        done: dict[str, str] = {}
        for run in self._children(parent_id):
            tid = run.data.tags.get(TRIAL_ID)
            if run.info.status == "FINISHED" and tid and tid not in done:
                done[tid] = str(run.info.run_id)
        return done

    @contextlib.contextmanager
    def claim(self, parent_id: str, trial_id: str, wait: bool) -> Iterator[str | None]:
        """Claim a trial under a parent, for this process only.

        Yields "done:<run_id>" when the trial already has a FINISHED run, "mine" when this
        process holds the trial's lock and must run it (any unfinished run of it is then a
        leftover of a killed process and is deleted, as are FINISHED duplicates), or None
        when a peer holds it right now and `wait` is False.
        """
        lock = _lock_dir(self.config) / f"trial-{trial_id[:40]}-{parent_id[:16]}.lock"
        with _file_lock(lock, timeout=-1 if wait else 0) as got:
            if not got:
                yield None
                return
            with store_errors(self.config, f"claiming trial {trial_id[:12]}"):
                runs = self._children(parent_id, trial_id)
                finished = [r for r in runs if r.info.status == "FINISHED"]
                for run in runs:
                    if finished and run.info.run_id == finished[0].info.run_id:
                        continue
                    self.client.delete_run(run.info.run_id)
            yield f"done:{finished[0].info.run_id}" if finished else "mine"

    @_store_op("deleting a trial run whose artifacts are gone")
    def discard_run(self, run_id: str) -> None:
        """Delete a run that cannot be used (its predictions vanished): its trial reruns."""
        self.client.delete_run(run_id)

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
    ) -> str:
        """One run for a trial, ended FINISHED (complete) or FAILED (rows failed).

        Under a sweep's parent run it is a child run; with `parent_id` None it is a top-level
        run of `experiment_id` (a `workbench run`, see `log_run`). The run stays RUNNING until
        everything is logged, so a crash mid-log leaves a run that resume recognises as
        unfinished. `source` is the split's TSV path.
        """
        from mlflow.entities import Param, RunTag

        spec = result.spec
        v = spec.variant
        summary = result.summary()
        status = result.status
        tags = {
            TRIAL_ID: result.trial_id,
            TRIAL_STATUS: str(status),
            VARIANT_ID: result.variant_id,
            "git.commit": self.commit,
            **_versions(),
        }
        if parent_id is not None:
            parent = self.client.get_run(parent_id)
            experiment_id = str(parent.info.experiment_id)
            tags |= {PARENT: parent_id, KIND: "trial", SWEEP_ID: parent.data.tags.get(SWEEP_ID, "")}
        else:
            assert experiment_id is not None, "a run without a parent needs its experiment"
            tags[KIND] = "run"
        if result.metric == "manual":
            tags[GRADED] = "false"  # graded by hand: no score until 'workbench grade import'
        run = self.client.create_run(
            experiment_id,
            run_name=f"{spec.task} · {name} · {spec.model}",
            tags=tags,
        )
        run_id = str(run.info.run_id)
        params = {
            "task": spec.task,
            "model": spec.model,
            "api_base": safe_url(result.lm_identity.get("api_base") or "none"),
            "mode": result.lm_identity.get("mode"),
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
            "definition": spec.definition,
            "metric": result.metric,
            "decoding": json.dumps(result.decoding, sort_keys=True)[:500],
            **(extra_params or {}),
        }
        self.client.log_batch(
            run_id,
            params=[Param(k, _param(x)) for k, x in params.items()],
            tags=[RunTag("mlflow.note.content", result.failure_reason())] if not status.ok else [],
        )
        metrics = {
            # The official score exists only for a complete trial.
            "score": summary["score"],
            result.metric: summary["score"],
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
        self._log_metrics(run_id, metrics)
        self.client.log_text(run_id, compiled.render(rows[0]), "prompt.txt")
        self.client.log_text(run_id, _jsonl(result), "predictions.jsonl")
        self.client.log_dict(run_id, summary, "summary.json")
        if compiled.labels:
            fig = confusion_figure(result, compiled.labels)
            self.client.log_figure(run_id, fig, "confusion_matrix.png")
            _close(fig)
        self._log_dataset(run_id, spec.task, spec.split, rows, source)
        if self.config.prompt_registry:
            self._register_prompt(run_id, spec.task, name, compiled)
        self.finish(run_id, status.ok)
        return run_id

    # ---- single runs (`workbench run`) and hand grades ------------------------------------
    def run_experiment(self, task: str) -> tuple[str, str]:
        """The experiment of a task's single runs: '<prefix>/run/<task>' (name, id)."""
        suffix = f"run/{task}"
        return f"{self.config.experiment_prefix}/{suffix}", self.experiment_id(suffix)

    def _trial_runs(self, experiment_id: str, trial_id: str) -> list[Any]:
        return list(
            self.client.search_runs(
                [experiment_id],
                filter_string=f"tags.`{TRIAL_ID}` = '{trial_id}' and tags.`{KIND}` = 'run'",
                order_by=["attributes.start_time ASC"],
                max_results=1000,
            )
        )

    def log_run(
        self,
        result: TrialResult,
        compiled: CompiledPrompt,
        rows: list[dict[str, str]],
        source: str | None = None,
    ) -> dict[str, Any]:
        """Track a `workbench run` trial: at most one FINISHED run per trial id, and it shows
        the trial's current predictions and grades.

        A FINISHED run is reused (`mlflow_reused` true) only when its predictions (hash of
        every row's generation and parsed answer) and its hand grades are the ones of this
        result and the grades saved with it; otherwise the result is logged as a new run
        (with the saved grades, if they grade these generations) and the stale runs are
        deleted, as are unfinished or FAILED ones (a rerun after failed rows, a killed
        process). An incomplete result never replaces a FINISHED run: it is logged FAILED
        beside it. The same lock file as sweeps' claims serialises two processes running one
        trial. Store failures raise `TrackingError`; the caller has saved the trial on disk
        before.
        """

        grades, want = _wanted_tags(result)
        try:
            name, exp = self.run_experiment(result.spec.task)
            lock = _lock_dir(self.config) / f"run-{result.trial_id[:40]}-{exp[:16]}.lock"
            with _file_lock(lock):
                runs = self._trial_runs(exp, result.trial_id)
                finished = [r for r in runs if r.info.status == "FINISHED"]
                same = [
                    r for r in finished if all(r.data.tags.get(k, "") == v for k, v in want.items())
                ]
                if result.complete and same:
                    run_id, reused = str(same[0].info.run_id), True
                else:
                    run_id = self.log_trial(
                        None,
                        result,
                        compiled,
                        rows,
                        result.spec.variant.label,
                        # the --limit sample's seed ('seed' is the variant's demo draw)
                        {"sample_seed": result.spec.seed, "variant_id": result.variant_id},
                        source=source,
                        experiment_id=exp,
                    )
                    reused = False
                    self.client.set_tag(run_id, PREDICTIONS_SHA, want[PREDICTIONS_SHA])
                    if grades is not None:
                        self._put_grades(run_id, grade_metrics(grades), grades)
                # an incomplete attempt leaves the trial's FINISHED run(s) in place
                keep = {run_id} | (
                    set() if result.complete else {str(r.info.run_id) for r in finished}
                )
                for run in runs:
                    if str(run.info.run_id) not in keep:
                        self.client.delete_run(run.info.run_id)
        except WorkbenchError:
            raise
        except Exception as e:  # the store went away or refused a write mid-way
            raise _store_error(self.config, e) from None
        return {"mlflow_run_id": run_id, "mlflow_experiment": name, "mlflow_reused": reused}

    def _put_grades(self, run_id: str, metrics: dict[str, float], grades: dict[str, Any]) -> None:
        """Put hand grades on a run so that a write cut short is visible and repaired.

        Why the order: the metrics, the artifact and the tags are separate store writes, and
        a store failing between them used to leave grade metrics on a run whose GRADES_SHA
        still said "ungraded", which `log_run` and `reusable_run` then reused as matching the
        ungraded folder (a stray score disagreeing with disk, for good). Now GRADES_SHA is
        set to `GRADES_PENDING` + sha *first*, and to the sha (with GRADED "true", one
        batch) only *last*: a run left in between matches no trial folder (neither "" nor a
        sha), so the next `workbench run` of the trial logs it afresh and deletes it, and
        `workbench grade import` run again rewrites every part and ends with the sha.
        """
        from mlflow.entities import RunTag

        sha = _sha(grades["grades"])
        self.client.set_tag(run_id, GRADES_SHA, GRADES_PENDING + sha)
        self._log_metrics(run_id, metrics)
        self.client.log_dict(run_id, grades, "grades.json")
        self.client.log_batch(run_id, tags=[RunTag(GRADED, "true"), RunTag(GRADES_SHA, sha)])

    def log_grades(
        self, task: str, trial_id: str, metrics: dict[str, float], grades: dict[str, Any]
    ) -> str | None:
        """Put hand grades on the trial's FINISHED run; None when the trial was not tracked.

        Only a run that recorded the graded generations gets them (others are stale: the
        next `workbench run` of the trial replaces them).
        """
        exp = self.client.get_experiment_by_name(f"{self.config.experiment_prefix}/run/{task}")
        if exp is None:
            return None
        # a hand-graded task has no parsed answers
        want = _sha([[str(g["index"]), g["generation"], None] for g in grades["grades"]])
        runs = [
            r
            for r in self._trial_runs(str(exp.experiment_id), trial_id)
            if r.info.status == "FINISHED" and r.data.tags.get(PREDICTIONS_SHA, want) == want
        ]
        if not runs:
            return None
        run_id = str(runs[0].info.run_id)
        self._put_grades(run_id, metrics, grades)
        return run_id

    @_store_op("reading the sweep's trial runs")
    def sweep_trials(self, parent_id: str) -> list[dict[str, Any]]:
        """One row per trial of a sweep (its FINISHED or latest run): task, model, variant,
        status, score and invalid_rate, from the child runs' params and metrics.

        A hand-graded run's score counts only once its grades are complete (`_score_of`);
        otherwise `score` is None and `score_note` says why.
        """
        rows: dict[str, dict[str, Any]] = {}
        for run in self._children(parent_id):
            tid = run.data.tags.get(TRIAL_ID)
            if not tid or (tid in rows and rows[tid]["run_status"] == "FINISHED"):
                continue
            p, m = run.data.params, run.data.metrics
            score, note = _score_of(run)
            rows[tid] = {
                "trial_id": tid,
                "task": p.get("task"),
                "model": p.get("model"),
                "variant": p.get("variant"),
                "status": run.data.tags.get(TRIAL_STATUS),
                "run_status": run.info.status,
                "score": score,
                "score_note": note,
                "invalid_rate": m.get("invalid_rate"),
                "n": m.get("n"),
            }
        return list(rows.values())

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

    def _register_prompt(
        self, run_id: str, task: str, variant_name: str, compiled: CompiledPrompt
    ) -> Any:
        """Register the variant's template (new version only if the text changed) and link it."""
        template = compiled.template()
        name = safe_name(f"{task}.{compiled.variant.id[:12]}")

        def register() -> Any:
            try:
                latest = self.client.load_prompt(f"prompts:/{name}@latest")
                if latest is not None and latest.template == template:
                    return latest
            except Exception:  # not registered yet
                pass
            return self.client.register_prompt(
                name=name,
                template=template,
                commit_message=f"{task}: {variant_name}",
                tags={"task": task, "variant": variant_name, VARIANT_ID: compiled.variant.id},
            )

        version = _retrying("register_prompt", register)
        with self._default_store():
            self.client.link_prompt_version_to_run(run_id, version)
        return version

    @contextlib.contextmanager
    def _default_store(self) -> Iterator[None]:
        """Point MLflow's *default* store at ours for one call, then put everything back.

        MLflow's registry resolves a run through the default tracking store, and
        `mlflow.set_tracking_uri` also exports MLFLOW_TRACKING_URI into the environment,
        which would silently redirect every later `load_config()` in this process to this
        store. Both are restored on the way out.
        """
        from mlflow.tracking import _tracking_service

        before_env = os.environ.get("MLFLOW_TRACKING_URI")
        before_uri = _tracking_service.utils._tracking_uri
        self.mlflow.set_tracking_uri(self.config.tracking_uri)
        try:
            yield
        finally:
            self.mlflow.set_tracking_uri(before_uri)
            if before_env is None:
                os.environ.pop("MLFLOW_TRACKING_URI", None)
            else:
                os.environ["MLFLOW_TRACKING_URI"] = before_env

    def register_best(self, task: str, name: str, compiled: CompiledPrompt, alias: str) -> Any:
        """Register a prompt and point `alias` (e.g. 'best') at it."""
        template = compiled.template()
        pname = safe_name(f"{task}.{alias}")
        version = _retrying(
            "register_prompt",
            lambda: self.client.register_prompt(
                name=pname,
                template=template,
                commit_message=f"{task}: {name}",
                tags={"task": task, "variant": name, VARIANT_ID: compiled.variant.id},
            ),
        )
        self.client.set_prompt_alias(pname, alias, version.version)
        return version

    def _artifact_text(self, run_id: str, path: str) -> str:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="workbench-artifact-") as tmp:
            local = self.client.download_artifacts(run_id, path, tmp)
            return Path(local).read_text(encoding="utf-8")

    @_store_op("reading a trial's predictions")
    def load_predictions(self, run_id: str) -> list[dict[str, Any]]:
        text = self._artifact_text(run_id, "predictions.jsonl")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def stored_predictions(self, run_id: str) -> list[dict[str, Any]] | None:
        """A FINISHED run's predictions, or None when its artifact is missing or unreadable
        (the artifact folder was deleted or damaged): the trial must then run and be logged
        again. A store that cannot be reached at all is a `TrackingError`, not None."""
        try:
            text = self._artifact_text(run_id, "predictions.jsonl")
        except Exception as e:
            with store_errors(self.config, "reading a trial's predictions"):
                listed = {a.path for a in self.client.list_artifacts(run_id)}
            if "predictions.jsonl" in listed:  # there, yet unreadable: not ours to delete
                raise _store_error(self.config, e, "reading a trial's predictions") from e
            return None
        try:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError:
            return None
        keys = ("index", "answer", "generation", "correct")
        if not all(isinstance(r, dict) and all(k in r for k in keys) for r in rows):
            return None
        return rows

    @_store_op("reading a trial's metrics")
    def run_metrics(self, run_id: str) -> dict[str, float]:
        return dict(self.client.get_run(run_id).data.metrics)

    # ---- the parent's comparisons -------------------------------------------------------
    @_store_op("logging the sweep's comparisons")
    def log_comparisons(
        self,
        parent_id: str,
        doc: dict[str, Any],
        figures: dict[str, Any],
    ) -> None:
        """comparisons.json/.csv and one p_value metric per tested comparison."""
        table = doc["comparisons"]
        self.client.log_dict(parent_id, doc, "comparisons.json")
        self.client.log_text(parent_id, comparisons_csv(table), "comparisons.csv")
        metrics: dict[str, Any] = {}
        for row in table:
            if row.get("p_value") is None:
                continue  # untested (an incomplete trial): no number to log
            # full names here; `_log_metrics` makes them MLflow names (`metric_key`)
            key = f"p_value.{row['task']}.{row['model']}.{row['a']}_vs_{row['b']}"
            metrics[key] = row["p_value"]
            metrics[key.replace("p_value.", "p_value_corrected.", 1)] = row["p_corrected"]
        self._log_metrics(parent_id, metrics)
        for filename, fig in figures.items():
            self.client.log_figure(parent_id, fig, filename)

    @_store_op("reading the sweep's comparisons")
    def logged_comparisons(self, parent_id: str, figures: list[str]) -> dict[str, Any] | None:
        """The comparisons document on a parent run, if it and every named figure are there."""
        listed = {a.path for a in self.client.list_artifacts(parent_id)}
        if "comparisons.json" not in listed or not set(figures) <= listed:
            return None
        try:
            return dict(json.loads(self._artifact_text(parent_id, "comparisons.json")))
        except (OSError, ValueError, TypeError):
            return None

    @_store_op("reading the sweep's runs")
    def sweep_report(self, sweep_name: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The latest parent run of a sweep and its comparisons document."""
        exp = self.client.get_experiment_by_name(f"{self.config.experiment_prefix}/{sweep_name}")
        if exp is None:
            raise WorkbenchError(
                f"no sweep named {sweep_name!r} in {safe_url(self.config.tracking_uri)}; "
                "run 'workbench sweep ablations/<spec>.yaml' first"
            )
        runs = self.client.search_runs(
            [exp.experiment_id], filter_string=f"tags.`{KIND}` = 'sweep'", max_results=10_000
        )
        if not runs:
            raise WorkbenchError(f"sweep {sweep_name!r} has no parent run yet")
        # the sweep run most recently (a resumed sweep reuses an older parent)
        run = max(
            runs,
            key=lambda r: float(r.data.tags.get(LAST_RUN) or 0) or r.info.start_time / 1000,
        )
        try:
            doc = json.loads(self._artifact_text(run.info.run_id, "comparisons.json"))
        except Exception as e:
            status = run.info.status
            why = (
                "it is still running, or was stopped before its comparisons"
                if status == "RUNNING"
                else "its artifacts are missing"
                if status == "FINISHED"
                else "it did not finish"
            )
            raise SweepIncomplete(
                f"sweep {sweep_name!r} (parent run {run.info.run_id}, {status}) has no "
                f"comparisons yet: {why}; run the sweep again to resume it"
            ) from e
        info = {"run_id": run.info.run_id, "status": run.info.status, "params": run.data.params}
        return info, dict(doc)


def artifact_dir(config: TrackingConfig) -> Path | None:
    """The local artifact folder, when artifacts are stored on this machine."""
    loc = config.artifact_location
    if loc and loc.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return Path(unquote(urlparse(loc).path))
    return None


def _score_of(run: Any) -> tuple[float | None, str | None]:
    """A run's score and, when it has none to show, why (None when the score stands).

    Why: hand grades reach a run in several writes (`Tracker._put_grades`): the `score`
    metric is there while `grades_sha` still says `pending:`, and a grade import cut short
    leaves it so. Such a score is not the trial's (its folder is ungraded) and is not shown;
    nor is any score on a run marked graded "false".
    """
    tags = run.data.tags
    sha = tags.get(GRADES_SHA, "")
    if sha.startswith(GRADES_PENDING):
        return None, (
            "hand grades half-written on this run (grades_sha pending): no score until "
            f"'workbench grade import' of trial {tags.get(TRIAL_ID, '?')[:12]} completes"
        )
    if tags.get(GRADED) == "false":
        return None, "graded by hand and not graded yet: no score"
    return run.data.metrics.get("score"), None


def _wanted_tags(result: TrialResult) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The saved hand grades of `result` (or None) and the tags a run that shows it carries."""

    grades = current_grades(result) if result.metric == "manual" else None
    return grades, {
        PREDICTIONS_SHA: predictions_sha(result),
        GRADES_SHA: _sha(grades["grades"]) if grades is not None else "",
    }


# ---- a cached rerun without MLflow ---------------------------------------------------------
# A rerun whose answers all come from the cache changes nothing in the store, yet opening it
# through MLflow costs ~1.5 s (imports, migrations check). For a SQLite store the same
# question `Tracker.log_run` asks is answered by one read-only query of MLflow's tables. The
# store itself is what is read, so nothing can be stale: a deleted run, a replaced store, other
# predictions or grades, or a second run of the trial (which log_run would delete) all make
# the answer None, and the caller goes the full way. Any surprise (no such table or column, a
# locked or damaged file) is None too, never an error. It is only trusted on a store that
# MLflow itself opened at the same schema revision (`_stamp_schema`), in the default
# workspace, and that this process could write to: otherwise MLflow must see it first.
_TRIAL_RUNS_SQL = """
SELECT r.run_uuid, r.status FROM runs r JOIN experiments e ON e.experiment_id = r.experiment_id
WHERE e.name = ? AND e.lifecycle_stage = 'active' AND r.lifecycle_stage = 'active'
  AND EXISTS (SELECT 1 FROM tags t WHERE t.run_uuid = r.run_uuid AND t.key = ? AND t.value = ?)
  AND EXISTS (SELECT 1 FROM tags t WHERE t.run_uuid = r.run_uuid AND t.key = ? AND t.value = ?)
"""


def _sqlite_trial_runs(
    config: TrackingConfig, task: str, trial_id: str
) -> tuple[str, list[tuple[str, str, dict[str, str]]]] | None:
    """The experiment name and the active `workbench run` runs of a trial in a SQLite store:
    (run id, status, tags) each; None when the store is not SQLite or cannot be read so."""
    import sqlite3

    db = _sqlite_path(config)
    if db is None or not db.is_file() or os.environ.get("MLFLOW_ENABLE_WORKSPACES"):
        return None
    try:
        opened = (_lock_dir(config) / "schema-opened").read_text(encoding="utf-8")
    except OSError:
        return None  # MLflow has not opened this store since the stamp existed
    if _schema_version(db) != opened:
        return None  # another MLflow migrated it, or the store was replaced
    name = f"{config.experiment_prefix}/run/{task}"
    try:
        con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
        try:
            columns = {row[1] for row in con.execute("PRAGMA table_info(experiments)")}
            if (
                "workspace" in columns
                and con.execute(
                    "SELECT 1 FROM experiments WHERE workspace != 'default' LIMIT 1"
                ).fetchone()
            ):
                return None  # workspaces in use: MLflow decides what this process sees
            found = con.execute(_TRIAL_RUNS_SQL, (name, TRIAL_ID, trial_id, KIND, "run")).fetchall()
            runs = []
            for run_id, status in found:
                tags = dict(
                    con.execute("SELECT key, value FROM tags WHERE run_uuid = ?", (run_id,))
                )
                runs.append((str(run_id), str(status), tags))
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return name, runs


def tracked_before(config: TrackingConfig, task: str, trial_id: str) -> bool:
    """Whether a SQLite store readable without MLflow holds a FINISHED run of this trial,
    and could be written if the rerun turns out to change something (the file, its folder
    and the lock folder are writable): only then may opening MLflow wait until the end."""
    db = _sqlite_path(config)
    locks = _lock_dir(config)
    if db is None or not all(os.access(p, os.W_OK) for p in (db, db.parent, locks)):
        return False
    found = _sqlite_trial_runs(config, task, trial_id)
    return found is not None and any(status == "FINISHED" for _, status, _ in found[1])


def reusable_run(result: TrialResult, config: TrackingConfig) -> dict[str, Any] | None:
    """What `Tracker.log_run(result, ...)` would return when it would write nothing: the
    trial is complete and its one run in the store is FINISHED with these predictions and
    grades. None whenever log_run has something to do or the store cannot be read directly.
    """
    if not result.complete:
        return None
    found = _sqlite_trial_runs(config, result.spec.task, result.trial_id)
    if found is None:
        return None
    name, runs = found
    _, want = _wanted_tags(result)
    if len(runs) != 1:  # none to reuse, or others that log_run would delete
        return None
    run_id, status, tags = runs[0]
    if status != "FINISHED" or any(tags.get(k, "") != v for k, v in want.items()):
        return None
    return {"mlflow_run_id": run_id, "mlflow_experiment": name, "mlflow_reused": True}


MAX_PARAM = 6000  # MLflow's limit for a param value


def _param(value: Any) -> str:
    """A param value as MLflow takes it: over 6000 characters it keeps a prefix and a hash."""
    text = "none" if value is None else str(value)
    if len(text) <= MAX_PARAM:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return text[: MAX_PARAM - 40] + f"... [{len(text)} chars, sha256 {digest}]"


def _sha(value: Any) -> str:
    """A short stable hash of JSON-able `value` (a tag value: MLflow caps tags, not this)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def predictions_sha(result: TrialResult) -> str:
    """What a run of `result` shows: each row's index, generation and parsed answer."""
    return _sha([[str(p.index), p.generation, p.parsed] for p in result.predictions])


def _jsonl(result: TrialResult) -> str:
    import dataclasses

    return "".join(
        json.dumps(dataclasses.asdict(p), ensure_ascii=False) + "\n" for p in result.predictions
    )


def comparisons_csv(table: list[dict[str, Any]]) -> str:
    import csv

    if not table:
        return ""
    buf = io.StringIO()
    # every key of every row, in order of first appearance: an untested row has fewer keys
    # than a tested one (no interval method, no draws' intervals), and may come first
    fields = list(dict.fromkeys(k for row in table for k in row))
    w = csv.DictWriter(buf, fieldnames=fields, restval="")
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


def log_sensitivity(
    tracker: Tracker, parent_run_id: str, report: dict[str, Any], figures: dict[str, Any]
) -> None:
    """A sweep's prompt sensitivity on its parent run (see `experiments.analysis.sensitivity`).

    Metrics ``sensitivity.<task>.<model>.<measure>`` (spread, maxp, avgp, sensitiscore,
    share_prompt_dependent, ``_ci_low``/``_ci_high`` for avgp, sensitiscore and
    share_prompt_dependent only (a bootstrap of a max does not cover), and
    ``spread_p_value``; characters MLflow refuses in a name become ``_``, and names that
    would collide are refused before anything is logged), the
    artifacts ``variance_shares.json`` ({model: {shares: {factor: share}, ci: ...}}) and
    ``sensitivity.json`` (the whole report), and the figures.
    """

    metrics = sensitivity_metrics(report)
    with store_errors(tracker.config, "logging the sweep's prompt sensitivity"):
        tracker.client.log_dict(
            parent_run_id, variance_shares_artifact(report), "variance_shares.json"
        )
        tracker.client.log_dict(parent_run_id, report, "sensitivity.json")
        tracker._log_metrics(parent_run_id, metrics)
        for filename, fig in figures.items():
            tracker.client.log_figure(parent_run_id, fig, filename)


def serve_ui(port: int, host: str = "127.0.0.1", say: Callable[[str], None] = print) -> int:
    """Run the MLflow UI on the configured store until interrupted; returns the exit code.

    A port that cannot be bound is a `WorkbenchError` before anything starts. The MLflow
    server forks workers and job consumers, so it runs as its own process group and the
    whole group is taken down on the way out: no worker outlives the command. The server
    only returns by itself when it failed to serve (exit code 1 or its own).
    """
    import signal
    import socket

    try:  # a port in use or not ours to bind: say so now, not after the server gives up
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, port))
    except OSError as e:
        raise WorkbenchError(
            f"cannot serve the MLflow UI on {host}:{port} ({e.strerror or e}); "
            "pass another --port (or stop what uses it)"
        ) from None
    cmd = ui_command(load_config(), port, host)
    shown = " ".join(safe_url(c) for c in cmd[3:])
    say(f"MLflow UI on http://{host}:{port}  ({shown})")
    proc = subprocess.Popen(cmd, env=os.environ.copy(), start_new_session=True)

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        code = proc.wait()
        say(f"error: the MLflow server stopped (exit code {code})")
        code = code or 1
    except KeyboardInterrupt:
        code = 0
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    return code
