"""Ctrl-C says what happened and what to do (issue 31, point 6).

Before: `workbench run`, `sweep` and `import` stopped by Ctrl-C exited 130 and printed nothing.
Now one stderr line: "interrupted; rerun the same command to resume" (an interrupted study
keeps its own line, which says the same and more). Each test starts the CLI in a subprocess,
waits for a sign that it is at work (the stub server saw a request, or the command printed
that it is ready), and only then sends SIGINT: no fixed sleeps.
"""

from __future__ import annotations

import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from experiments.cli.app import RESUMABLE, interrupted_line
from experiments.testing.stub_server import StubOpenAI
from tests.conftest import REPO, workbench_env

LINE = "interrupted; rerun the same command to resume"
STARTUP = 300.0
"""Seconds the CLI may take to reach its work on a loaded machine."""


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["run", "hearsay", "--model", "openai/x"], LINE),
        (["sweep", "spec.yaml"], LINE),
        (["optimize", "hearsay"], LINE),
        (["import", "jsonl", "a.jsonl"], LINE),
        (["tasks", "--json"], "interrupted"),  # nothing to resume
        (["grade", "import", "g.csv"], "interrupted"),
        ([], "interrupted"),
    ],
)
def test_the_line_says_rerun_where_a_rerun_resumes(argv: list[str], line: str) -> None:
    assert interrupted_line(argv) == line
    assert set(RESUMABLE) == {"run", "sweep", "optimize", "import"}


def _default_sigint() -> None:
    # A test run in the background of a non-interactive shell (CI) ignores SIGINT, and an
    # ignored SIGINT survives exec: the CLI would rightly ignore this test's Ctrl-C.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(
    command: list[str], env: dict[str, str], cwd: Path, ready: Callable[[str], bool]
) -> subprocess.CompletedProcess[str]:
    """Start `command`, send SIGINT once `ready(stderr so far)` is true, and wait for it."""
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        preexec_fn=_default_sigint,
    )
    assert proc.stderr is not None
    said = ""
    try:
        selector = selectors.DefaultSelector()
        selector.register(proc.stderr, selectors.EVENT_READ)
        deadline = time.monotonic() + STARTUP
        while not ready(said):
            assert proc.poll() is None, (proc.returncode, said + proc.stderr.read())
            assert time.monotonic() < deadline, f"not at work after {STARTUP} s: {said}"
            if selector.select(timeout=0.05):
                said += proc.stderr.readline()
        selector.close()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, said + err)


def _one_interrupted_line(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 130, (r.returncode, r.stderr[-3000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = [x for x in r.stderr.splitlines() if "interrupted" in x.lower()]
    assert len(lines) == 1, r.stderr[-3000:]
    return lines[0]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "experiments.cli", *args]


def _env(tmp_path: Path, lb_dir: Path) -> dict[str, str]:
    return workbench_env(tmp_path, lb_dir, "interrupts") | {
        "OPENAI_API_KEY": "sk-dummy-key-for-the-local-stub",
        "WORKBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "WORKBENCH_REPORTS_DIR": str(tmp_path / "reports"),
        "PYTHONPATH": str(REPO),
    }


def _dripping() -> StubOpenAI:
    """A server whose every reply drips: a call in flight stays in flight."""
    return StubOpenAI(fault_rate=1.0, faults=("drip",), drip_interval=1.0)


@pytest.mark.data
@pytest.mark.slow
def test_ctrl_c_during_run_says_rerun(lb_dir: Path, tmp_path: Path) -> None:
    env = _env(tmp_path, lb_dir) | {"WORKBENCH_NO_TRACK": "1"}
    with _dripping() as stub:
        args = ["run", "hearsay", "--model", "openai/stub", "--api-base", stub.url, "--limit", "4"]
        r = _interrupt(_cli(*args), env, tmp_path, lambda _said: bool(stub.requests))
    assert _one_interrupted_line(r) == LINE


@pytest.mark.data
@pytest.mark.slow
def test_ctrl_c_during_sweep_says_rerun(lb_dir: Path, tmp_path: Path) -> None:
    spec = tmp_path / "interrupted.yaml"
    spec.write_text(
        "name: interrupted\ntasks: [hearsay]\nmodels: [openai/stub]\nlimit: 4\n"
        "fixed:\n  demos: none\naxes:\n  instruction: [reference, description]\n"
        "comparisons:\n  - [instruction=reference, instruction=description]\n"
        "n_resamples: 100\n"
    )
    with _dripping() as stub:
        r = _interrupt(
            _cli("sweep", str(spec), "--api-base", stub.url),
            _env(tmp_path, lb_dir),
            tmp_path,
            lambda _said: bool(stub.requests),
        )
    assert _one_interrupted_line(r) == LINE


@pytest.mark.data
@pytest.mark.slow
def test_ctrl_c_during_optimize_says_rerun_once(lb_dir: Path, tmp_path: Path) -> None:
    """The study's own line (what was kept) is the only one: no second, generic line."""
    with _dripping() as stub:
        args = ["optimize", "hearsay", "--model", "openai/stub", "--api-base", stub.url]
        args += ["--trials", "2", "--storage", f"sqlite:///{tmp_path}/optuna.db"]
        args += ["--dev-limit", "4", "--heldout-limit", "4"]
        r = _interrupt(_cli(*args), _env(tmp_path, lb_dir), tmp_path, lambda _: bool(stub.requests))
    line = _one_interrupted_line(r)
    assert line.startswith("error: study ") and "rerun the same command to resume" in line.lower()


# `workbench import` calls no model: the import is held at its start (the command's readiness
# line), then interrupted for real. The patch is the child's, not this process's.
_HELD_IMPORT = """
import sys, threading
import experiments.imports.run as run

def held(*args, **kwargs):
    print("ready: importing", file=sys.stderr, flush=True)
    threading.Event().wait()

run.import_results = held
from experiments.cli import main
sys.argv = ["workbench", "import", "jsonl", "results.jsonl", "--no-track"]
main()
"""


@pytest.mark.data
def test_ctrl_c_during_import_says_rerun(lb_dir: Path, tmp_path: Path) -> None:
    env = _env(tmp_path, lb_dir)
    r = _interrupt(
        [sys.executable, "-c", _HELD_IMPORT], env, tmp_path, lambda said: "ready:" in said
    )
    assert _one_interrupted_line(r) == LINE
