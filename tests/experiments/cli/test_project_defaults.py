"""`workbench` run from a subfolder of a project, or from no project at all (issue 31, point 5).

The store, runs/ and reports/ follow the project's mlflow.yaml (found from the working folder
up), else the user-level one; a store the workbench creates there is said in one line on
stderr, once. Before, each landed silently in the working folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.testing.stub_server import StubOpenAI

REPO = Path(__file__).resolve().parents[3]
SPEC = """
name: where_check
tasks: [hearsay]
fixed: {demos: none}
axes:
  instruction: [reference, description]
comparisons: [[instruction=reference, instruction=description]]
n_resamples: 200
"""
UNSET = (
    "MLFLOW_TRACKING_URI",
    "WORKBENCH_MLFLOW_CONFIG",
    "WORKBENCH_RUNS_DIR",
    "WORKBENCH_NO_TRACK",
    "LEGALBENCH_DIR",
)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No setting names a place: only the project file (or the user default) does."""
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    return env | {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "WORKBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "OPENAI_API_KEY": "sk-dummy-key-for-the-local-stub",
        "PYTHONPATH": str(REPO),
        **extra,
    }


def _workbench(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )


def _project(tmp_path: Path, lb_dir: Path) -> tuple[Path, Path]:
    """A project whose mlflow.yaml names the data relative to itself, and a subfolder."""
    root = (tmp_path / "proj").resolve()
    sub = root / "notebooks" / "deep"
    sub.mkdir(parents=True)
    (root / "mlflow.yaml").write_text(
        f"experiment_prefix: where\nprompt_registry: false\n"
        f"legalbench_dir: {os.path.relpath(lb_dir.resolve(), root)}\n"
    )
    return root, sub


def _announced(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("new tracking store: ")]


@pytest.mark.data
def test_run_and_sweep_from_a_subfolder_land_in_the_project(tmp_path: Path, lb_dir: Path) -> None:
    root, sub = _project(tmp_path, lb_dir)
    (sub / "spec.yaml").write_text(SPEC)
    env = _env(tmp_path, LEGALBENCH_DIR=str(lb_dir))  # the data default has its own test
    with StubOpenAI(reply="Yes") as stub:
        model = ["--model", "openai/stub", "--api-base", stub.url]
        run = _workbench(["run", "hearsay", *model, "--limit", "3", "--json"], env, sub)
        assert run.returncode == 0, run.stderr[-3000:]
        trial = json.loads(run.stdout)["trial_id"]
        assert (root / "runs" / trial / "predictions.jsonl").is_file()
        assert (root / "mlflow.db").is_file() and (root / "mlartifacts").is_dir()
        # the store is new: one line says where it is and which file put it there
        line = f"new tracking store: sqlite:///{root}/mlflow.db (from {root / 'mlflow.yaml'})"
        assert _announced(run.stderr) == [line]
        sweep = _workbench(["sweep", "spec.yaml", *model, "--limit", "4"], env, sub)
        assert sweep.returncode == 0, sweep.stderr[-3000:]
        assert _announced(sweep.stderr) == []  # the store exists: nothing said again
    # the sweep run's own folder (reports/<sweep>/<sweep id>/), which `latest` names
    folder = (root / "reports" / "where_check" / "latest").resolve()
    assert folder.parent == (root / "reports" / "where_check").resolve()
    assert (folder / "comparisons.csv").is_file()
    written = f"reports written to {root / 'reports' / 'where_check' / folder.name}/ ("
    assert written in sweep.stdout
    assert sorted(p.name for p in sub.iterdir()) == ["spec.yaml"]  # nothing in the subfolder
    # `workbench ui` there serves the project's store (what `make ui` at the root serves)
    ui = subprocess.run(
        [sys.executable, "-c", "from experiments.tracking import load_config as c; "
         "from experiments.tracking.ui import ui_command as u; print(u(c(), 5000)[5])"],
        capture_output=True, text=True, env=env, cwd=sub, timeout=120,
    )  # fmt: skip
    assert ui.stdout.strip() == f"sqlite:///{root}/mlflow.db", ui.stderr


@pytest.mark.data
def test_no_project_file_uses_the_user_default_and_says_so_once(
    tmp_path: Path, lb_dir: Path
) -> None:
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    user = tmp_path / "xdg" / "workbench"
    env = _env(tmp_path, LEGALBENCH_DIR=str(lb_dir))
    with StubOpenAI(reply="Yes") as stub:
        args = ["run", "hearsay", "--model", "openai/stub", "--api-base", stub.url, "--limit", "2"]
        first = _workbench([*args, "--json"], env, nowhere)
        second = _workbench([*args, "--json"], env, nowhere)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert _announced(first.stderr) == [
        f"new tracking store: sqlite:///{user}/mlflow.db (user default {user / 'mlflow.yaml'} "
        f"(absent: the defaults): no mlflow.yaml in {nowhere.resolve()} or above)"
    ]
    assert _announced(second.stderr) == []
    trial = json.loads(first.stdout)["trial_id"]
    assert (user / "runs" / trial).is_dir() and (user / "mlflow.db").is_file()
    assert list(nowhere.iterdir()) == []


@pytest.mark.data
def test_settings_in_the_environment_still_win(tmp_path: Path, lb_dir: Path) -> None:
    root, sub = _project(tmp_path, lb_dir)
    named = tmp_path / "named"
    env = _env(
        tmp_path,
        LEGALBENCH_DIR=str(lb_dir),
        MLFLOW_TRACKING_URI=f"sqlite:///{named}/m.db",
        WORKBENCH_RUNS_DIR=str(named / "runs"),
    )
    named.mkdir()
    with StubOpenAI(reply="Yes") as stub:
        args = ["run", "hearsay", "--model", "openai/stub", "--api-base", stub.url, "--limit", "2"]
        r = _workbench([*args, "--json"], env, sub)
    assert r.returncode == 0, r.stderr[-3000:]
    assert _announced(r.stderr) == []  # the user named this store
    trial = json.loads(r.stdout)["trial_id"]
    assert (named / "m.db").is_file() and (named / "runs" / trial).is_dir()
    assert not (root / "mlflow.db").exists() and not (root / "runs").exists()


@pytest.mark.data
def test_the_data_folder_comes_from_the_project_file(tmp_path: Path, lb_dir: Path) -> None:
    root, sub = _project(tmp_path, lb_dir)
    r = _workbench(["tasks", "--json"], _env(tmp_path), sub)
    assert r.returncode == 0, r.stderr
    assert "hearsay" in {t["name"] for t in json.loads(r.stdout)}
    (root / "mlflow.yaml").write_text("legalbench_dir: ../missing\n")
    r = _workbench(["tasks"], _env(tmp_path), sub)
    assert r.returncode == 2 and r.stdout == ""
    for way in ("--data-dir", "LEGALBENCH_DIR", f"legalbench_dir: in {root / 'mlflow.yaml'}"):
        assert way in r.stderr, r.stderr
    assert str(tmp_path.resolve() / "missing") in r.stderr


def test_no_data_configured_anywhere_says_all_three_ways(tmp_path: Path) -> None:
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    r = _workbench(["tasks"], _env(tmp_path), nowhere)
    assert r.returncode == 2 and r.stdout == ""
    assert "no LegalBench data configured" in r.stderr
    user = tmp_path / "xdg" / "workbench" / "mlflow.yaml"
    for way in ("--data-dir", "LEGALBENCH_DIR", "legalbench_dir:", str(user), "--hf"):
        assert way in r.stderr, r.stderr
