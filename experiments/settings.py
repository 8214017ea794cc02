"""Folders and `WORKBENCH_*` settings read from the environment, in one place.

Below every other experiments module but `experiments.bounds` (the ranges of its numbers) and
`experiments.project` (the project file its folders are relative to), so any of them may read a
setting without an import circle. A reader that refuses a bad value
raises the error class its caller passes (`error=`): the caller's own (`ModelError`,
`ExecutorError`), so the exception a user or a test sees does not depend on where the value
is read.

`promptlib.data.default_source` reads ``WORKBENCH_CACHE_DIR`` with the same default itself
(promptlib cannot import experiments); a test checks the two defaults are equal. The same
holds for ``WORKBENCH_TASKS_DIR``, read by `promptlib.taskmeta.user_tasks_dir`.

The folders that were relative to the working folder (runs/, reports/, generated variants,
optuna.db, the MLflow store) are relative to the project file's folder (`experiments.project`:
the nearest mlflow.yaml from the working folder up, else the user-level one), which may also
name them (`runs_dir:`, `reports_dir:`, ...); run from the project root they are where
they were.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from experiments import bounds, project
from promptlib.errors import WorkbenchError

# ---- folders ----------------------------------------------------------------------------------
CACHE_DIR_ENV = "WORKBENCH_CACHE_DIR"
#: the cache folder when `WORKBENCH_CACHE_DIR` is unset (responses/, models/, locks/ inside)
DEFAULT_CACHE_DIR = "~/.cache/workbench"
MODELS_DIR_ENV = "WORKBENCH_MODELS_DIR"
RUNS_DIR_ENV = "WORKBENCH_RUNS_DIR"
#: where `workbench run` saves trials when `WORKBENCH_RUNS_DIR` is unset and the project file
#: has no `runs_dir:` (relative to the project file's folder)
DEFAULT_RUNS_DIR = "runs"
#: where `workbench sweep` writes its reports without `reports_dir:` (same folder)
REPORTS_DIR = "reports"
MLFLOW_CONFIG_ENV = project.CONFIG_ENV
DEFAULT_MLFLOW_CONFIG = project.CONFIG_NAME
DATA_DIR_ENV = "LEGALBENCH_DIR"
#: where `workbench task new` writes the user's own tasks, which every command lists beside
#: LegalBench's (the XDG data folder's place, so they outlive a cache clean-up)
TASKS_DIR_ENV = "WORKBENCH_TASKS_DIR"
DEFAULT_TASKS_DIR = "~/.local/share/workbench/tasks"


def cache_dir() -> Path:
    return Path(os.environ.get("WORKBENCH_CACHE_DIR") or DEFAULT_CACHE_DIR).expanduser()


def cache_dir_from_env() -> bool:
    """Whether the user chose the cache folder (``WORKBENCH_CACHE_DIR`` set and not empty)."""
    return bool(os.environ.get(CACHE_DIR_ENV))


def tasks_dir() -> Path:
    """The user task folder: ``$WORKBENCH_TASKS_DIR``, else `DEFAULT_TASKS_DIR` (expanded)."""
    return Path(os.environ.get(TASKS_DIR_ENV) or DEFAULT_TASKS_DIR).expanduser()


def responses_dir() -> Path:
    """The response cache's folder (`llm.cache.ResponseCache()`'s)."""
    return cache_dir() / "responses"


def default_responses_dir() -> Path:
    """The response cache's folder when ``WORKBENCH_CACHE_DIR`` is unset."""
    return Path(DEFAULT_CACHE_DIR).expanduser() / "responses"


def locks_dir() -> Path:
    """Where the lock files of a tracking store that is not a SQLite file live."""
    return cache_dir() / "locks"


def models_dir() -> Path:
    """Where assembled GGUFs live: ``$WORKBENCH_MODELS_DIR``, else ``<cache dir>/models``."""
    env = os.environ.get(MODELS_DIR_ENV)
    return Path(env).expanduser() if env else cache_dir() / "models"


def runs_dir() -> Path:
    """Where trials are saved: ``$WORKBENCH_RUNS_DIR`` (as given, not expanded), else the
    project file's `runs_dir:`, else ``runs`` beside it."""
    env = os.environ.get(RUNS_DIR_ENV)
    return Path(env) if env else project.locate().folder_field("runs_dir", DEFAULT_RUNS_DIR)


GRADES_DIR_ENV = "WORKBENCH_GRADES_DIR"
#: the hand grades' folder (grades.jsonl, sheets/) when `WORKBENCH_GRADES_DIR` is unset: beside
#: runs/, so the grades travel with the trials they grade
DEFAULT_GRADES_DIR = "grades"


def grades_dir() -> Path:
    """Where hand grades live: ``$WORKBENCH_GRADES_DIR``, else ``grades`` beside `runs_dir()`."""
    env = os.environ.get(GRADES_DIR_ENV)
    return Path(env) if env else runs_dir().parent / DEFAULT_GRADES_DIR


def reports_dir() -> Path:
    """Where sweeps write reports/<sweep>/: the project file's `reports_dir:`, else ``reports``
    beside it."""
    return project.locate().folder_field("reports_dir", REPORTS_DIR)


#: where `workbench variants generate` writes without -o (relative to the project file's folder)
GENERATED_DIR = "ablations/generated"


def generated_dir() -> Path:
    return project.locate().folder_field("generated_dir", GENERATED_DIR)


def mlflow_config_path(path: str | Path | None = None) -> Path:
    """The project file (absolute; it need not exist): `path`, else ``$WORKBENCH_MLFLOW_CONFIG``,
    else the nearest mlflow.yaml from the working folder up, else the user-level one."""
    return project.locate(path).path


@dataclass(frozen=True)
class DataDefault:
    """The LegalBench folder the project file names (`legalbench_dir:`), for
    `promptlib.data.default_source` when neither --data-dir nor ``$LEGALBENCH_DIR`` is given."""

    path: str | None  # absolute; None when the project file names none
    file: str  # the file that names it, or where to add `legalbench_dir:`, for messages


def data_default() -> DataDefault:
    found = project.locate()
    value = found.text("legalbench_dir")
    if found.found == "user" and value is None:
        where = f"an {project.CONFIG_NAME} in your project folder (or {found.path})"
    else:
        where = str(found.path)
    return DataDefault(str(found.resolve(value).resolve()) if value else None, where)


# ---- local models -----------------------------------------------------------------------------
LOCAL_N_CTX_ENV = "WORKBENCH_LOCAL_N_CTX"
DEFAULT_LOCAL_N_CTX = "4096"
LOCAL_N_CTX_STEP = 256
"""llama.cpp pads its context to a multiple of this (200 gives ``llm.n_ctx()`` 256), while
llama-cpp-python sizes its token buffer to the value asked for: a prompt between the two
passed every check and crashed in the buffer (a traceback under --scoring loglik, retried
row errors under generate). Older llama.cpp padded to 32, a divisor of 256."""
#: a file describing the CPU (as /proc/cpuinfo), for tests and for a node describing another
CPUINFO_ENV = "WORKBENCH_CPUINFO"
#: auto, on or off: llama.cpp's extra buffer types (off on a CPU with AMX under auto)
EXTRA_BUFTS_ENV = "WORKBENCH_LLAMA_EXTRA_BUFTS"


def cpuinfo_env() -> str | None:
    """``WORKBENCH_CPUINFO`` as set (None when unset): a file describing the CPU."""
    return os.environ.get(CPUINFO_ENV)


def extra_bufts_env() -> str | None:
    """``WORKBENCH_LLAMA_EXTRA_BUFTS`` as set (None when unset): auto, on or off."""
    return os.environ.get(EXTRA_BUFTS_ENV)


def local_n_ctx(error: type[Exception] = WorkbenchError) -> int:
    """Context size of the local models (``WORKBENCH_LOCAL_N_CTX``, default 4096): a
    multiple of `LOCAL_N_CTX_STEP`, refused otherwise rather than rounded, so the value in
    the cache and trial identities is the context the model really has."""
    raw = os.environ.get("WORKBENCH_LOCAL_N_CTX", "4096")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise error(f"WORKBENCH_LOCAL_N_CTX must be an integer >= 1, not {raw!r}")
    if not bounds.LOCAL_N_CTX.contains(n):  # llama.cpp would allocate its KV cache for it
        raise error(f"WORKBENCH_LOCAL_N_CTX must be {bounds.LOCAL_N_CTX.describe()}, not {raw!r}")
    if n % LOCAL_N_CTX_STEP:
        down = n // LOCAL_N_CTX_STEP * LOCAL_N_CTX_STEP
        up = down + LOCAL_N_CTX_STEP
        raise error(
            f"WORKBENCH_LOCAL_N_CTX must be a multiple of {LOCAL_N_CTX_STEP} (llama.cpp pads "
            f"the context to one, and llama-cpp-python's buffer would not follow), not {n}: "
            f"set WORKBENCH_LOCAL_N_CTX={f'{down} or {up}' if down else up}"
        )
    return n


# ---- Ray --------------------------------------------------------------------------------------
# How long the driver waits for its actors to be placed and started before it gives up with
# advice (seconds); an unschedulable actor would otherwise wait forever.
RAY_START_TIMEOUT_ENV = "WORKBENCH_RAY_START_TIMEOUT"
DEFAULT_RAY_START_TIMEOUT = 180.0
# How many actors `workbench sweep --executor ray` starts (default: the cluster's CPUs).
RAY_ACTORS_ENV = "WORKBENCH_RAY_ACTORS"


def ray_start_timeout(error: type[Exception] = WorkbenchError) -> float:
    raw = os.environ.get(RAY_START_TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_RAY_START_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise error(f"{RAY_START_TIMEOUT_ENV} must be a number of seconds > 0, not {raw!r}")
    if not bounds.RAY_START_TIMEOUT.contains(value):  # inf would wait for ever
        raise error(
            f"{RAY_START_TIMEOUT_ENV} must be {bounds.RAY_START_TIMEOUT.describe()}, not {raw!r}"
        )
    return value


def ray_actors(error: type[Exception] = WorkbenchError) -> int | None:
    """``WORKBENCH_RAY_ACTORS``, or None (one actor per cluster CPU) when unset."""
    raw = os.environ.get(RAY_ACTORS_ENV)
    if raw is None:
        return None
    if not raw.strip().isdigit() or int(raw) < 1:
        raise error(f"{RAY_ACTORS_ENV} must be an integer >= 1, not {raw!r}")
    if not bounds.RAY_ACTORS.contains(int(raw)):
        raise error(f"{RAY_ACTORS_ENV} must be {bounds.RAY_ACTORS.describe()}, not {raw!r}")
    return int(raw)


# ---- tracking and optimisation ----------------------------------------------------------------
#: set (to any true value) to run `workbench run` / `grade import` without MLflow (typer `envvar`)
NO_TRACK_ENV = "WORKBENCH_NO_TRACK"
#: the Optuna storage of `workbench optimize` without --storage and without `optuna_storage:`
#: in the project file (a SQLite path relative to the project file's folder)
DEFAULT_OPTUNA_STORAGE = "sqlite:///optuna.db"


def default_optuna_storage() -> str:
    """The storage `workbench optimize` opens without --storage: the project file's
    `optuna_storage:`, else optuna.db beside it; a relative SQLite path is made absolute
    against the project file's folder (symlinks resolved)."""
    found = project.locate()
    url = found.text("optuna_storage") or DEFAULT_OPTUNA_STORAGE
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        path, query, args = url.removeprefix("sqlite:///").partition("?")
        return f"sqlite:///{found.resolve(path).resolve()}{query}{args}"
    return url


def resolved_optuna_storage() -> str:
    """The default storage as the study key names it (recipe F of `experiments.ids`): the
    file's absolute path, so two projects' default studies have two keys. It is the path
    `Path('optuna.db').resolve()` gave run from the project root, so keys stay as they were."""
    return default_optuna_storage()
