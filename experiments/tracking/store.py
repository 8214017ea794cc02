"""The tracking store itself: mlflow.yaml, opening a client, locks beside the store, and every
store failure turned into one `TrackingError` line.

Store failures (unreachable, locked, deleted, unwritable artifacts) are one `TrackingError`
line naming the store, what was being done and what to run; MLflow's own logger is silenced.
Configuration comes from the project's `mlflow.yaml` (tracking URI, artifact location,
experiment prefix, prompt registry on/off), found from the working folder up
(`experiments.project`); `MLFLOW_TRACKING_URI` overrides the URI. A SQLite store the
workbench creates where no setting named it is announced in one line on stderr.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from experiments import ids, project, settings
from experiments.files import atomic_write_text
from experiments.secrets import redact, safe_url
from promptlib.errors import WorkbenchError

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass(frozen=True)
class TrackingConfig:
    tracking_uri: str
    artifact_location: str | None
    experiment_prefix: str
    prompt_registry: bool
    source: str
    #: where the store came from when no setting named it (the project file found, or the
    #: user default), said in one line when the store is created; None: the user named it
    origin: str | None = None


def _absolute_sqlite(uri: str, base: Path) -> str:
    """`uri` with a relative SQLite path made absolute against `base`."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:///" + str(base / uri.removeprefix("sqlite:///"))
    return uri


def load_config(path: str | Path | None = None) -> TrackingConfig:
    """Read the project file (`experiments.project.locate`: `path`, $WORKBENCH_MLFLOW_CONFIG,
    the nearest mlflow.yaml from the working folder up, else the user-level one); relative
    paths in it are relative to its folder. MLFLOW_TRACKING_URI overrides tracking_uri (a
    relative SQLite path in it is relative to the working folder, as MLflow reads it)."""
    found = project.locate(path)
    doc = found.fields
    env_uri = os.environ.get("MLFLOW_TRACKING_URI")
    if env_uri:
        uri, origin = _absolute_sqlite(env_uri, Path.cwd()), None
    else:
        uri = _absolute_sqlite(doc.get("tracking_uri") or "sqlite:///mlflow.db", found.folder)
        origin = None if found.chosen else found.describe()
    artifacts = doc.get("artifact_location", "./mlartifacts")
    if artifacts and "://" not in artifacts:
        artifacts = (found.folder / artifacts).resolve().as_uri()
    return TrackingConfig(
        tracking_uri=uri,
        artifact_location=artifacts,
        experiment_prefix=str(doc.get("experiment_prefix", "legal-prompt-workbench")),
        prompt_registry=bool(doc.get("prompt_registry", True)),
        source=str(found.path),
        origin=origin,
    )


class TrackingError(WorkbenchError):
    """The tracking store cannot be reached or used; the message says which and what to do."""


class SweepIncomplete(WorkbenchError):
    """`report` on a sweep that has no result yet (running, stopped): a state, exit 1."""

    exit_code = 1


# Short client-side retries: a wrong URL should fail in seconds, not after minutes.
_FAST_FAIL_ENV = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
    "MLFLOW_SQLALCHEMYSTORE_POOL_RECYCLE": "600",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    # MLflow's usage telemetry: its threads poll (0.12 s of CPU in a 100-prompt trial, taken
    # from the model's cores) and send to MLflow's servers. Set it to "false" to send.
    "MLFLOW_DISABLE_TELEMETRY": "true",
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
    return settings.locks_dir() / ids.short_sha(uri)


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


def _first_line(e: BaseException) -> str:
    """The first line of `e`'s message, secrets redacted, at most 300 characters (or the
    exception's type when the message is empty)."""
    first = redact(str(e)).strip().splitlines()
    return first[0][:300] if first else type(e).__name__


def _reason(e: BaseException) -> str:
    """The first line of the innermost cause: "database is locked", not SQLAlchemy's wrapper."""
    seen: set[int] = set()
    while (e.__cause__ or e.__context__) is not None and id(e) not in seen:
        seen.add(id(e))
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    return _first_line(e)


def _store_error(
    config: TrackingConfig, e: BaseException, doing: str | None = None
) -> TrackingError:
    """One line for a store that failed: which store, doing what, why, and what to run."""
    url = safe_url(config.tracking_uri)
    if doing is None:  # opening the store, or `workbench run`'s own wording
        reason = _first_line(e)
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
        def inner(self: Any, *args: Any, **kwargs: Any) -> Any:
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
    db = _sqlite_path(config)
    try:
        _probe_database(config.tracking_uri)
        with _file_lock(_lock_dir(config) / "store.lock"):
            new = db is not None and not db.exists()  # under the lock: one process creates it
            client = mlflow.MlflowClient(tracking_uri=config.tracking_uri)
            client.search_experiments(max_results=1)
    except WorkbenchError:
        raise
    except Exception as e:  # any store failure: unreachable, auth, schema, disk
        raise _store_error(config, e) from None
    if new and config.origin is not None:
        print(new_store_line(config), file=sys.stderr, flush=True)
    _stamp_schema(config)
    return client


def new_store_line(config: TrackingConfig) -> str:
    """The one line that says a store was created where no setting named it."""
    return f"new tracking store: {config.tracking_uri} ({config.origin})"


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


def artifact_dir(config: TrackingConfig) -> Path | None:
    """The local artifact folder, when artifacts are stored on this machine."""
    loc = config.artifact_location
    if loc and loc.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return Path(unquote(urlparse(loc).path))
    return None
