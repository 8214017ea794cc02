"""`experiments.settings` reads each folder and `WORKBENCH_*` setting as the code that reads it
today does: same default, same expansion, same refusal (message and error class).

Where today's reader is public it is called; where it is private or inline, or now calls
`settings` itself, its recipe is copied here, frozen, from the code before (commit and file:line
cited).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import typer

from experiments import settings
from experiments.llm import cpu, llama, weights
from experiments.llm.types import ModelError
from experiments.sweeps.executors import ExecutorError, worker_cache_dir
from experiments.tracking import load_config
from experiments.trials.store import runs_dir as runner_runs_dir

ENV = (
    "WORKBENCH_CACHE_DIR",
    "WORKBENCH_MODELS_DIR",
    "WORKBENCH_RUNS_DIR",
    "WORKBENCH_MLFLOW_CONFIG",
    "WORKBENCH_LOCAL_N_CTX",
    "WORKBENCH_RAY_START_TIMEOUT",
    "WORKBENCH_RAY_ACTORS",
)
FOLDERS = [None, "", "~/wb cache", "/tmp/x/é", "rel/dir"]


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)


def _set(monkeypatch: pytest.MonkeyPatch, name: str, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, value)


def _refusal(fn: Any, *args: Any) -> tuple[str, Any]:
    """(error class name and message, or "ok" and the value) of `fn(*args)`."""
    try:
        return "ok", fn(*args)
    except Exception as e:
        return type(e).__name__, str(e)


# ---- folders ----------------------------------------------------------------------------------
@pytest.mark.parametrize("value", FOLDERS)
def test_cache_dir_is_promptlibs_hf_cache(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    """promptlib/data.py:439 reads WORKBENCH_CACHE_DIR with its own default: the same folder."""
    import promptlib.data

    _set(monkeypatch, "WORKBENCH_CACHE_DIR", value)
    seen: list[Any] = []
    monkeypatch.setattr(promptlib.data, "HuggingFaceSource", lambda cache, _p: seen.append(cache))
    promptlib.data.default_source(hf=True)
    assert Path(seen[0]).expanduser() == settings.cache_dir()
    assert settings.cache_dir_from_env() is bool(value)


def test_the_default_responses_folder_is_the_workers() -> None:
    # experiments/sweeps/executors.py:160 (`worker_cache_dir`'s default folder)
    default = Path(settings.DEFAULT_CACHE_DIR).expanduser() / "responses"
    assert settings.default_responses_dir() == default


@pytest.mark.parametrize("value", FOLDERS)
def test_responses_and_locks_dirs(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    from experiments.llm.cache import ResponseCache

    _set(monkeypatch, "WORKBENCH_CACHE_DIR", value)
    cache = ResponseCache()
    try:
        assert settings.responses_dir() == cache.directory
    finally:
        cache.close()
    # c0d9f37 experiments/tracking/store.py:119-120 (`_lock_dir` of a store that is not SQLite)
    assert settings.locks_dir() == settings.cache_dir() / "locks"
    for directory in (settings.default_responses_dir(), Path("/elsewhere")):
        used = worker_cache_dir(SimpleNamespace(directory=directory))  # type: ignore[arg-type]
        explicit = settings.cache_dir_from_env() or directory != settings.default_responses_dir()
        assert used == (True, str(directory) if explicit else None)


@pytest.mark.parametrize("value", FOLDERS)
@pytest.mark.parametrize("cache", [None, "/c"])
def test_models_dir_is_the_weights(
    monkeypatch: pytest.MonkeyPatch, value: str | None, cache: str | None
) -> None:
    _set(monkeypatch, "WORKBENCH_MODELS_DIR", value)
    _set(monkeypatch, "WORKBENCH_CACHE_DIR", cache)
    assert settings.models_dir() == weights.models_dir()


@pytest.mark.parametrize("value", FOLDERS)
def test_runs_dir_is_the_runners(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    _set(monkeypatch, "WORKBENCH_RUNS_DIR", value)
    assert settings.runs_dir() == runner_runs_dir()


def test_reports_dir_is_the_sweeps(tmp_path: Path) -> None:
    # c0d9f37 experiments/cli/studies.py:120 and :138: Path("reports"), run from the project
    # root (the folder of its mlflow.yaml; experiments.project)
    (tmp_path / "mlflow.yaml").write_text("experiment_prefix: p\n")
    assert settings.reports_dir() == Path("reports")


@pytest.mark.parametrize("value", FOLDERS)
@pytest.mark.parametrize("path", [None, "other.yaml"])
def test_mlflow_config_path_is_load_configs(
    monkeypatch: pytest.MonkeyPatch, value: str | None, path: str | None, tmp_path: Path
) -> None:
    """The file c0d9f37 read (experiments/tracking/store.py:45, frozen) when it was named
    (`path`, $WORKBENCH_MLFLOW_CONFIG) or is in the working folder; absolute now."""
    _set(monkeypatch, "WORKBENCH_MLFLOW_CONFIG", value)
    (tmp_path / "mlflow.yaml").write_text("experiment_prefix: p\n")
    old = Path(path or os.environ.get("WORKBENCH_MLFLOW_CONFIG") or "mlflow.yaml")
    assert settings.mlflow_config_path(path) == old.expanduser().resolve()
    assert str(settings.mlflow_config_path(path)) == load_config(path).source


# ---- local models -----------------------------------------------------------------------------
N_CTX = [None, "4096", "256", "512", "200", "0", "-256", "x", "", " 512", "4096.0", "1000000"]


@pytest.mark.parametrize("value", N_CTX)
def test_local_n_ctx_is_llamas(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    _set(monkeypatch, "WORKBENCH_LOCAL_N_CTX", value)
    assert _refusal(settings.local_n_ctx, ModelError) == _refusal(llama.local_n_ctx)


def test_cpu_env_names_are_cpus() -> None:
    assert settings.CPUINFO_ENV == cpu.CPUINFO_ENV
    assert settings.EXTRA_BUFTS_ENV == cpu.EXTRA_BUFTS_ENV


# ---- Ray --------------------------------------------------------------------------------------
def _start_timeout() -> float:  # experiments/sweeps/executors.py:254-264 `_start_timeout`
    START_TIMEOUT_ENV, DEFAULT_START_TIMEOUT = "WORKBENCH_RAY_START_TIMEOUT", 180.0  # as there

    raw = os.environ.get(START_TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_START_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise ExecutorError(f"{START_TIMEOUT_ENV} must be a number of seconds > 0, not {raw!r}")
    if not value <= 86_400:  # issue 30: every number has bounds (inf waited for ever)
        raise ExecutorError(
            f"{START_TIMEOUT_ENV} must be a number of seconds > 0 and <= 86400, not {raw!r}"
        )
    return value


def _actors_from_env() -> int | None:  # experiments/sweeps/executors.py:475-481
    ACTORS_ENV = "WORKBENCH_RAY_ACTORS"  # as there

    raw = os.environ.get(ACTORS_ENV)
    if raw is None:
        return None
    if not raw.strip().isdigit() or int(raw) < 1:
        raise ExecutorError(f"{ACTORS_ENV} must be an integer >= 1, not {raw!r}")
    if int(raw) > 4096:  # issue 30: every number has bounds
        raise ExecutorError(f"{ACTORS_ENV} must be an integer from 1 to 4096, not {raw!r}")
    return int(raw)


RAY = [None, "", "0", "1", "3", " 2 ", "-1", "1.5", "x", "nan", "inf", "1e3", "1e9", "99999"]


@pytest.mark.parametrize("value", RAY)
def test_ray_settings_are_the_executors(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:

    _set(monkeypatch, "WORKBENCH_RAY_START_TIMEOUT", value)
    _set(monkeypatch, "WORKBENCH_RAY_ACTORS", value)
    assert _refusal(settings.ray_start_timeout, ExecutorError) == _refusal(_start_timeout)
    assert _refusal(settings.ray_actors, ExecutorError) == _refusal(_actors_from_env)


# ---- tracking and optimisation ----------------------------------------------------------------
def test_no_track_env_is_the_options() -> None:
    """`workbench run --no-track` and `workbench grade import --no-track` read it."""
    from experiments.cli import app

    group: Any = typer.main.get_command(app)  # typer's own (vendored) click group
    commands = [group.commands["run"], group.commands["grade"].commands["import"]]
    for command in commands:
        (option,) = [p for p in command.params if p.name == "no_track"]
        assert option.envvar == settings.NO_TRACK_ENV


def test_default_optuna_storage_is_optimizes(tmp_path: Path) -> None:
    """Run from the project root, the default storage is the file c0d9f37 opened
    (experiments/optimize/study.py:83: `cfg.storage or "sqlite:///optuna.db"`, relative to
    the cwd), now named by its absolute path, and the study key's storage is unchanged."""
    (tmp_path / "mlflow.yaml").write_text("experiment_prefix: p\n")
    assert settings.default_optuna_storage() == f"sqlite:///{(tmp_path / 'optuna.db').resolve()}"
    # c0d9f37 experiments/optimize/study.py:174 (`_study_key`): the default file resolved
    assert settings.resolved_optuna_storage() == f"sqlite:///{Path('optuna.db').resolve()}"
