"""A user with only their own data: no LegalBench data configured anywhere (no --data-dir, no
$LEGALBENCH_DIR, no mlflow.yaml naming one). `task new` used to refuse ("no LegalBench data
configured"), so nothing could be made or run; now the catalog is the user's tasks alone, one
line on stderr says so, and a LegalBench task asked by name says how to configure the data."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from experiments.testing.stub_server import StubOpenAI
from tests.conftest import run_cli
from tests.usertask_data import clauses, write_csv

pytestmark = pytest.mark.slow  # each test runs `workbench` in a subprocess, seconds each

REPO = Path(__file__).resolve().parents[3]
NOTE = "no LegalBench data configured ("
UNSET = (
    "LEGALBENCH_DIR",
    "WORKBENCH_MLFLOW_CONFIG",
    "MLFLOW_TRACKING_URI",
    "WORKBENCH_RUNS_DIR",
    "WORKBENCH_TASKS_DIR",
)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No data configured: a tmp HOME and XDG_CONFIG_HOME (no user-level mlflow.yaml)."""
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    return env | {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "WORKBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "WORKBENCH_NO_TRACK": "1",
        "OPENAI_API_KEY": "sk-dummy-key-for-the-local-stub",
        "PYTHONPATH": str(REPO),
        **extra,
    }


def _cwd(tmp_path: Path) -> Path:
    """A working folder with no mlflow.yaml in it or above (the repository has one)."""
    cwd = tmp_path / "work"
    cwd.mkdir(exist_ok=True)
    assert not any((p / "mlflow.yaml").exists() for p in (cwd, *cwd.parents))
    return cwd


def _new(tmp_path: Path, env: dict[str, str], name: str) -> subprocess.CompletedProcess[str]:
    data = write_csv(tmp_path / "clauses.csv", clauses(40))
    args = ["task", "new", name, "--from", str(data), "--input", "clause_text",
            "--answer", "restricts", "--instruction", "Does the clause restrict disclosure?"]  # fmt: skip
    return run_cli(args, env, _cwd(tmp_path), timeout=300)


def _notes(stderr: str) -> list[str]:
    return [x for x in stderr.splitlines() if x.startswith(NOTE)]


def test_own_task_is_made_listed_and_run_without_legalbench_data(tmp_path: Path) -> None:
    env, cwd = _env(tmp_path), _cwd(tmp_path)
    made = _new(tmp_path, env, "clauses")
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "home/.local/share/workbench/tasks/clauses/task.json").is_file()
    listed = run_cli(["tasks"], env, cwd)
    assert listed.returncode == 0, listed.stderr
    rows = listed.stdout.splitlines()[1:]
    assert len(rows) == 1 and rows[0].startswith("clauses ") and rows[0].endswith("(your task)")
    (note,) = _notes(listed.stderr)
    assert note.endswith("): only your own tasks are available")
    # the way to configure names the user-level file, since no project file was found
    assert str(tmp_path / "xdg" / "workbench" / "mlflow.yaml") in note and "--hf" in note
    as_json = run_cli(["tasks", "--json"], env, cwd)
    assert [t["name"] for t in json.loads(as_json.stdout)] == ["clauses"]
    with StubOpenAI(reply="Yes") as stub:
        args = ["run", "clauses", "--model", "openai/stub", "--api-base", stub.url,
                "--limit", "3", "--json"]  # fmt: skip
        ran = run_cli(args, env, cwd)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["task"] == "clauses"
    assert len(_notes(ran.stderr)) == 1


def test_a_legalbench_task_without_data_says_how_to_configure_it(tmp_path: Path) -> None:
    env, cwd = _env(tmp_path), _cwd(tmp_path)
    assert _new(tmp_path, env, "clauses").returncode == 0
    r = run_cli(["run", "hearsay", "--model", "openai/stub"], env, cwd)
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert line.startswith("error: no LegalBench data configured") and "'hearsay'" in line
    for way in ("--data-dir", "LEGALBENCH_DIR", "legalbench_dir:", "--hf"):
        assert way in line, line
    assert "unknown task" not in line
    typo = run_cli(["render", "hersay"], env, cwd)
    assert typo.returncode == 2 and "did you mean 'hearsay'" in typo.stderr


def test_a_legalbench_name_is_refused_without_the_data(tmp_path: Path) -> None:
    env = _env(tmp_path)
    r = _new(tmp_path, env, "hearsay")
    assert r.returncode == 2 and r.stdout == ""
    assert "'hearsay' is a LegalBench task already" in r.stderr
    assert not (tmp_path / "home/.local/share/workbench/tasks/hearsay").exists()


def test_a_configured_folder_that_is_missing_is_still_an_error(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert _new(tmp_path, env, "clauses").returncode == 0
    env["LEGALBENCH_DIR"] = str(tmp_path / "no-such-data")
    for args in (["tasks"], ["render", "clauses", "--limit", "1"]):
        r = run_cli(args, env, _cwd(tmp_path))
        assert r.returncode == 2 and r.stdout == "", r.stdout
        assert f"data directory {tmp_path / 'no-such-data'} does not exist" in r.stderr
        assert _notes(r.stderr) == []
    again = _new(tmp_path, env, "clauses2")
    assert again.returncode == 2 and "does not exist" in again.stderr
