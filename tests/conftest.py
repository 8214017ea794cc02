"""Shared fixtures. Tests that need LegalBench data skip, with the reason, where it is absent."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from promptlib import Catalog, LocalSource

REPO = Path(__file__).resolve().parents[1]

# `workbench run` logs to MLflow by default; a test that does not give the subprocess its
# own store (`workbench_env`) must not create ./mlflow.db in the repository.
os.environ.setdefault("WORKBENCH_NO_TRACK", "1")
# Run where no mlflow.yaml is found (a tmp folder), the workbench keeps its store, runs and
# reports beside the user-level $XDG_CONFIG_HOME/workbench/mlflow.yaml: never the real one.
_CONFIG_HOME = tempfile.mkdtemp(prefix="workbench-test-config-")
atexit.register(shutil.rmtree, _CONFIG_HOME, ignore_errors=True)
os.environ["XDG_CONFIG_HOME"] = _CONFIG_HOME
# Nor may a developer's own tasks (`workbench task new`) join the catalog of a test: user
# tasks live in a folder that does not exist unless a test sets WORKBENCH_TASKS_DIR itself.
os.environ["WORKBENCH_TASKS_DIR"] = os.path.join(
    tempfile.gettempdir(), f"workbench-tests-{os.getpid()}", "no-user-tasks"
)


def legalbench_dir() -> Path | None:
    env = os.environ.get("LEGALBENCH_DIR")
    if env:
        return Path(env) if Path(env).is_dir() else None
    guess = REPO.parent / "shared" / "legalbench"
    return guess if guess.is_dir() else None


@pytest.fixture(scope="session")
def lb_dir() -> Path:
    d = legalbench_dir()
    if d is None:
        pytest.skip(
            "LegalBench data not found: set LEGALBENCH_DIR to a folder in LegalBench's layout "
            "(e.g. ../shared/legalbench)"
        )
    return d


@pytest.fixture(scope="session")
def catalog(lb_dir: Path) -> Catalog:
    return Catalog(LocalSource(lb_dir))


@functools.cache
def _empty_mlflow_db() -> Path:
    """An empty MLflow SQLite store, made once per test process (see `mlflow_store`)."""
    import mlflow

    folder = Path(tempfile.mkdtemp(prefix="workbench-test-mlflow-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    db = folder / "mlflow.db"
    # what `tracking.store.open_client` does to a new store: MLflow creates and migrates it
    mlflow.MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments(max_results=1)
    return db


def mlflow_store(folder: Path) -> str:
    """The URI of the MLflow store `folder/mlflow.db`, made empty if it is not there yet.

    Creating a SQLite store runs MLflow's migrations, 3-10 s per store on a loaded machine;
    a new store here is a copy of one migrated store (milliseconds), its own file, shared with
    no other test. Not for tests of the creation itself (its lock, the "new tracking store"
    line): those need no file there."""
    db = folder / "mlflow.db"
    if not db.exists():
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_empty_mlflow_db(), db)
    return f"sqlite:///{db}"


def workbench_env(
    root: Path, lb_dir: Path, prefix: str, tracking_uri: str | None = None
) -> dict[str, str]:
    """Environment for a `workbench` subprocess with its own MLflow store and cache."""
    uri = tracking_uri or f"sqlite:///{root}/mlflow.db"
    (root / "mlflow.yaml").write_text(
        f"tracking_uri: {uri}\nartifact_location: {root}/artifacts\n"
        f"experiment_prefix: {prefix}\nprompt_registry: true\n"
    )
    # MLflow's set_tracking_uri() exports MLFLOW_TRACKING_URI into this process, which
    # would override the subprocess's own mlflow.yaml.
    inherited = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MLFLOW_TRACKING_URI", "WORKBENCH_NO_TRACK")  # this store is for tracking
    }
    return {
        **inherited,
        "LEGALBENCH_DIR": str(lb_dir),
        "WORKBENCH_MLFLOW_CONFIG": str(root / "mlflow.yaml"),
        "WORKBENCH_CACHE_DIR": str(root / "cache"),
    }


def run_cli(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """`workbench ARGS` in a subprocess (its own MLflow store and cache: `workbench_env`)."""
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


# The slowest test files, slowest first (measured in CI, minutes each). Under pytest-xdist
# with --dist loadfile a file stays on one worker and files are handed out in collection
# order, so a slow file collected last runs alone at the end while the other workers idle.
# Starting the slow ones first (longest processing time first) shortens the whole run.
# Matched by file name alone, so test file names stay unique across tests/ (any folder).
SLOW_FIRST = (
    "test_optimize_model.py",
    "test_ray.py",
    "test_studies.py",
    "test_failures.py",
    "test_served.py",
    "test_grading.py",
    "test_sweeps.py",
    "test_sensitivity.py",
    "test_run_tracking.py",
    "test_stats.py",
    "test_local_model.py",
    "test_dspy.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW_FIRST)))  # stable
