"""The project file (`experiments.project`): every default place follows the nearest mlflow.yaml
from the working folder up, else the user-level one, not the working folder (issue 31, point 5).

Before, run from a subfolder, the workbench silently started a new mlflow.db, mlartifacts/,
runs/ and reports/ there, and `make ui` at the project root did not show them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from experiments import ids, project, settings
from experiments.secrets import safe_url
from experiments.tracking.store import load_config, new_store_line, open_client
from promptlib.data import default_source
from promptlib.errors import DataError, WorkbenchError

ENV = (
    "WORKBENCH_MLFLOW_CONFIG",
    "WORKBENCH_RUNS_DIR",
    "MLFLOW_TRACKING_URI",
    "LEGALBENCH_DIR",
)


@pytest.fixture
def proj(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder with an mlflow.yaml naming no folder (the defaults), and a subfolder
    two levels down as the working folder; HOME and XDG_CONFIG_HOME point into tmp_path."""
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    root = (tmp_path / "proj").resolve()
    (root / "notebooks" / "deep").mkdir(parents=True)
    (root / "mlflow.yaml").write_text("experiment_prefix: p\nprompt_registry: false\n")
    monkeypatch.chdir(root / "notebooks" / "deep")
    return root


def test_a_subfolder_uses_the_projects_store_and_folders(proj: Path) -> None:
    config = load_config()
    assert config.tracking_uri == f"sqlite:///{proj}/mlflow.db"
    assert config.artifact_location == (proj / "mlartifacts").as_uri()
    assert config.source == str(proj / "mlflow.yaml")
    assert config.origin == f"from {proj / 'mlflow.yaml'}"
    assert settings.runs_dir() == proj / "runs"
    assert settings.reports_dir() == proj / "reports"
    assert settings.generated_dir() == proj / "ablations" / "generated"
    assert settings.default_optuna_storage() == f"sqlite:///{proj}/optuna.db"
    assert settings.mlflow_config_path() == proj / "mlflow.yaml"


def test_from_the_project_root_nothing_moves(proj: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folders read as they did (relative, the same names); the store is the same file."""
    monkeypatch.chdir(proj)
    assert settings.runs_dir() == Path("runs")
    assert settings.reports_dir() == Path("reports")
    assert settings.generated_dir() == Path("ablations/generated")
    assert load_config().tracking_uri == f"sqlite:///{Path('mlflow.db').resolve()}"


def test_the_nearest_file_wins(proj: Path) -> None:
    inner = proj / "notebooks"
    (inner / "mlflow.yaml").write_text("experiment_prefix: inner\n")
    assert load_config().tracking_uri == f"sqlite:///{inner}/mlflow.db"
    assert settings.runs_dir() == inner / "runs"


def test_relative_paths_in_the_file_are_relative_to_its_folder(
    proj: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "lb"
    (proj / "mlflow.yaml").write_text(
        "tracking_uri: sqlite:///store/m.db\nartifact_location: store/art\n"
        "runs_dir: out/runs\nreports_dir: ../shared-reports\ngenerated_dir: gen\n"
        "optuna_storage: sqlite:///store/o.db?timeout=10\nlegalbench_dir: ../lb\n"
    )
    config = load_config()
    assert config.tracking_uri == f"sqlite:///{proj}/store/m.db"
    assert config.artifact_location == (proj / "store" / "art").as_uri()
    assert settings.runs_dir() == proj / "out" / "runs"
    assert settings.reports_dir().resolve() == tmp_path / "shared-reports"
    assert settings.generated_dir() == proj / "gen"
    assert settings.default_optuna_storage() == f"sqlite:///{proj}/store/o.db?timeout=10"
    assert settings.data_default() == settings.DataDefault(str(data), str(proj / "mlflow.yaml"))
    monkeypatch.chdir(tmp_path)  # a folder with no mlflow.yaml above: the user default
    assert settings.data_default().path is None


def test_env_settings_still_win(
    proj: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "team.yaml").write_text("experiment_prefix: team\nruns_dir: r\n")
    monkeypatch.setenv("WORKBENCH_MLFLOW_CONFIG", str(other / "team.yaml"))
    config = load_config()
    assert config.tracking_uri == f"sqlite:///{other.resolve()}/mlflow.db"
    assert config.origin is None  # named by the user: a new store there is not announced
    assert settings.runs_dir() == other.resolve() / "r"
    monkeypatch.delenv("WORKBENCH_MLFLOW_CONFIG")
    monkeypatch.setenv("WORKBENCH_RUNS_DIR", "mine")
    assert settings.runs_dir() == Path("mine")  # as given, as before
    # MLflow reads a relative SQLite path against the working folder: so does the workbench
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///here.db")
    config = load_config()
    assert config.tracking_uri == f"sqlite:///{Path.cwd() / 'here.db'}"
    assert config.origin is None
    assert config.artifact_location == (proj / "mlartifacts").as_uri()


def test_no_project_file_uses_the_user_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    monkeypatch.chdir(nowhere)
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    user = xdg / "workbench"
    config = load_config()
    assert config.tracking_uri == f"sqlite:///{user}/mlflow.db"
    assert settings.runs_dir() == user / "runs"
    assert settings.reports_dir() == user / "reports"
    assert config.origin == (
        f"user default {user / 'mlflow.yaml'} (absent: the defaults): "
        f"no mlflow.yaml in {nowhere.resolve()} or above"
    )
    # XDG_CONFIG_HOME unset, or relative (the XDG spec says to ignore it): ~/.config
    for value in (None, "rel/config"):
        if value is None:
            monkeypatch.delenv("XDG_CONFIG_HOME")
        else:
            monkeypatch.setenv("XDG_CONFIG_HOME", value)
        home_user = tmp_path / "home" / ".config" / "workbench"
        assert load_config().tracking_uri == f"sqlite:///{home_user}/mlflow.db"
    # the user-level file, when written, is read like a project's
    home_user.mkdir(parents=True)
    (home_user / "mlflow.yaml").write_text("runs_dir: /elsewhere/runs\n")
    assert settings.runs_dir() == Path("/elsewhere/runs")
    assert load_config().origin == (
        f"user default {home_user / 'mlflow.yaml'}: no mlflow.yaml in {nowhere.resolve()} or above"
    )


def test_a_bad_field_names_the_file_and_the_fields(proj: Path) -> None:
    (proj / "mlflow.yaml").write_text("run_dir: runs\n")
    with pytest.raises(WorkbenchError, match="unknown field") as e:
        settings.runs_dir()
    assert str(proj / "mlflow.yaml") in str(e.value) and "runs_dir" in str(e.value)
    (proj / "mlflow.yaml").write_text("reports_dir: [a, b]\n")
    with pytest.raises(WorkbenchError, match=r"reports_dir must be a path \(text\)"):
        settings.reports_dir()


def test_the_study_key_of_the_default_storage_is_unchanged(
    proj: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ids.study_key` hashes the default storage's absolute path: from the project root it
    is the path c0d9f37 hashed (`Path('optuna.db').resolve()`), and from a subfolder the same
    (one project, one study), where c0d9f37 made a second study in the subfolder."""
    from experiments.optimize.config import OptimizeConfig
    from experiments.optimize.study import _study_key

    cfg = OptimizeConfig(task="hearsay", model="openai/stub")
    from_sub = _study_key(cfg)
    monkeypatch.chdir(proj)
    old = f"sqlite:///{Path('optuna.db').resolve()}"  # c0d9f37 experiments/optimize/study.py:174
    name = "hearsay.openai_stub.optuna"
    assert ids.study_key(safe_url(old), name, cfg.method) == _study_key(cfg)
    assert _study_key(cfg) == from_sub


# ---- the data folder ----------------------------------------------------------------------------
def test_the_project_names_the_data_folder(
    proj: Path, tmp_path: Path, lb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rel = os.path.relpath(lb_dir, proj)
    (proj / "mlflow.yaml").write_text(f"legalbench_dir: {rel}\n")
    default = settings.data_default()
    assert default.path == str(lb_dir.resolve())
    source = default_source(project_dir=default.path, project_file=default.file)
    assert "hearsay" in source.names()
    # LEGALBENCH_DIR and --data-dir still win
    monkeypatch.setenv("LEGALBENCH_DIR", str(tmp_path / "env-data"))
    with pytest.raises(DataError, match="env-data does not exist; set LEGALBENCH_DIR"):
        default_source(project_dir=default.path, project_file=default.file)
    with pytest.raises(DataError, match="arg-data does not exist"):
        default_source(str(tmp_path / "arg-data"), project_dir=default.path)


def test_a_missing_data_folder_says_all_three_ways(proj: Path) -> None:
    (proj / "mlflow.yaml").write_text("legalbench_dir: ../no-such-data\n")
    default = settings.data_default()
    with pytest.raises(DataError) as e:
        default_source(project_dir=default.path, project_file=default.file)
    msg = str(e.value)
    assert msg.startswith(f"data directory {proj.parent / 'no-such-data'} (legalbench_dir: in ")
    for way in ("--data-dir", "LEGALBENCH_DIR", f"legalbench_dir: in {proj / 'mlflow.yaml'}"):
        assert way in msg, msg
    (proj / "mlflow.yaml").write_text("experiment_prefix: p\n")
    default = settings.data_default()
    with pytest.raises(DataError) as e:
        default_source(project_dir=default.path, project_file=default.file)
    msg = str(e.value)
    assert msg.startswith("no LegalBench data configured: ") and "--hf" in msg
    for way in ("--data-dir", "LEGALBENCH_DIR", f"legalbench_dir: in {proj / 'mlflow.yaml'}"):
        assert way in msg, msg


# ---- the new store's line ------------------------------------------------------------------------
@pytest.mark.slow
def test_a_new_store_is_announced_once(proj: Path, capfd: pytest.CaptureFixture[str]) -> None:
    config = load_config()
    capfd.readouterr()
    open_client(config)
    line = f"new tracking store: sqlite:///{proj}/mlflow.db (from {proj / 'mlflow.yaml'})"
    assert new_store_line(config) == line
    assert capfd.readouterr().err.splitlines() == [line]
    assert (proj / "mlflow.db").is_file()
    open_client(load_config())  # the store exists now: nothing said
    assert capfd.readouterr().err == ""


@pytest.mark.slow
def test_a_store_the_user_named_is_not_announced(
    proj: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/named.db")
    capfd.readouterr()
    open_client(load_config())
    assert (tmp_path / "named.db").is_file()
    assert capfd.readouterr().err == ""


def test_project_module_reads_nothing_from_the_working_folder_when_named(
    proj: Path, tmp_path: Path
) -> None:
    """A path given to `locate` is that file, even with an mlflow.yaml nearer."""
    given = tmp_path / "given.yaml"
    given.write_text("experiment_prefix: g\n")
    found = project.locate(given)
    assert (found.path, found.found, found.exists) == (given.resolve(), "given", True)
    assert found.fields == {"experiment_prefix": "g"}
