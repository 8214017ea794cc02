"""Folders and `WORKBENCH_*` settings read from the environment, in one place.

Below every other experiments module but `experiments.bounds` (the ranges of its numbers), so
any of them may read a setting without an import circle. A reader that refuses a bad value
raises the error class its caller passes (`error=`): the caller's own (`ModelError`,
`ExecutorError`), so the exception a user or a test sees does not depend on where the value
is read.

`promptlib.data.default_source` reads ``WORKBENCH_CACHE_DIR`` with the same default itself
(promptlib cannot import experiments); a test checks the two defaults are equal. The same
holds for ``WORKBENCH_TASKS_DIR``, read by `promptlib.taskmeta.user_tasks_dir`.
"""

from __future__ import annotations

import os
from pathlib import Path

from experiments import bounds
from promptlib.errors import WorkbenchError

# ---- folders ----------------------------------------------------------------------------------
CACHE_DIR_ENV = "WORKBENCH_CACHE_DIR"
#: the cache folder when `WORKBENCH_CACHE_DIR` is unset (responses/, models/, locks/ inside)
DEFAULT_CACHE_DIR = "~/.cache/workbench"
MODELS_DIR_ENV = "WORKBENCH_MODELS_DIR"
RUNS_DIR_ENV = "WORKBENCH_RUNS_DIR"
#: where `workbench run` saves trials when `WORKBENCH_RUNS_DIR` is unset (relative to the cwd)
DEFAULT_RUNS_DIR = "runs"
#: where `workbench sweep` writes its reports (relative to the cwd)
REPORTS_DIR = "reports"
#: where `workbench task new` writes the user's own tasks, which every command lists beside
#: LegalBench's (the XDG data folder's place, so they outlive a cache clean-up)
TASKS_DIR_ENV = "WORKBENCH_TASKS_DIR"
DEFAULT_TASKS_DIR = "~/.local/share/workbench/tasks"
MLFLOW_CONFIG_ENV = "WORKBENCH_MLFLOW_CONFIG"
DEFAULT_MLFLOW_CONFIG = "mlflow.yaml"


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
    """Where trials are saved: ``$WORKBENCH_RUNS_DIR`` (not expanded), else ``runs``."""
    return Path(os.environ.get(RUNS_DIR_ENV) or DEFAULT_RUNS_DIR)


def reports_dir() -> Path:
    return Path(REPORTS_DIR)


#: where `workbench variants generate` writes without -o (relative to the cwd)
GENERATED_DIR = "ablations/generated"


def generated_dir() -> Path:
    return Path(GENERATED_DIR)


def mlflow_config_path(path: str | Path | None = None) -> Path:
    """The tracking config file: `path`, else ``$WORKBENCH_MLFLOW_CONFIG``, else
    ``./mlflow.yaml`` (which need not exist)."""
    return Path(path or os.environ.get(MLFLOW_CONFIG_ENV) or DEFAULT_MLFLOW_CONFIG)


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
#: the Optuna storage of `workbench optimize` without --storage (relative to the cwd)
DEFAULT_OPTUNA_STORAGE = "sqlite:///optuna.db"


def default_optuna_storage() -> str:
    return DEFAULT_OPTUNA_STORAGE


def resolved_optuna_storage() -> str:
    """The default storage as the study key names it: the file's absolute path (recipe F of
    `experiments.ids`, so two folders' default studies have two keys)."""
    return f"sqlite:///{Path('optuna.db').resolve()}"
