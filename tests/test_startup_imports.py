"""Start-up costs what the command needs (issue 35, point 2): which heavy packages a command
imports, read from `sys.modules` of the command's own process, never from a timing.

- `workbench --help` and `workbench run --help` import no model gateway, numpy, YAML, MLflow;
- `workbench run` and `workbench sweep` on an embedded model (local/smollm2), tracked in
  MLflow, import neither litellm, nor dspy, nor optuna.

Each command runs in a fresh interpreter (`_PROBE`) that calls the CLI's `main` in-process,
then writes the watched modules it loaded, each with the project lines that first imported
it (so a failure says who to fix).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, mlflow_store, workbench_env

HEAVY = ("litellm", "dspy", "optuna")
"""What a run on an embedded model must not import: the API gateway, the optimisers."""

_PROBE = r"""
import json, sys, traceback
out, watched = sys.argv[1], set(sys.argv[2].split(","))
found = {}

class Watch:
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in watched and top not in found:
            stack = traceback.extract_stack()[:-1]
            found[top] = [
                f"{'/'.join(f.filename.split('/')[-3:])}:{f.lineno} {f.line}"
                for f in stack if "/experiments/" in f.filename or "/promptlib/" in f.filename
            ][-8:]
        return None

sys.meta_path.insert(0, Watch())
from experiments.cli import main
sys.argv = ["workbench", *sys.argv[3:]]
code = 0
try:
    main()
except SystemExit as e:
    code = e.code or 0
with open(out, "w") as f:
    json.dump({"code": code, "loaded": {m: found.get(m, []) for m in watched
                                        if m in sys.modules}}, f)
"""


def _imports(
    args: list[str], watched: tuple[str, ...], env: dict[str, str], cwd: Path, tmp: Path
) -> dict[str, list[str]]:
    """The watched packages `workbench ARGS` imported (name -> the project lines that first
    imported it). The command must succeed."""
    out = tmp / "imports.json"
    r = subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), ",".join(watched), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=900,
    )
    assert r.returncode == 0 and out.is_file(), r.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["code"] == 0, r.stderr[-3000:]
    return dict(doc["loaded"])


HELP_HEAVY = (
    "numpy",
    "yaml",
    "mlflow",
    "litellm",
    "dspy",
    "optuna",
    "llama_cpp",
    "scipy",
    "pandas",
    "datasets",
    "experiments.llm.gateway",
    "experiments.trials.run",
    "promptlib.tasks",
)


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["sweep", "--help"]])
def test_help_imports_only_what_it_prints(args: list[str], tmp_path: Path) -> None:
    """--help lists the commands and options: it needs Typer and the option declarations,
    not the engine behind them (0.38 s before, most of it numpy, YAML and the gateway)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    loaded = _imports(args, HELP_HEAVY, env, tmp_path, tmp_path)
    assert loaded == {}, json.dumps(loaded, indent=1)


SWEEP = """
name: startup_imports
tasks: [hearsay]
models: [local/smollm2]
limit: 2
scoring: loglik
fixed:
  demos: none
axes:
  instruction: [reference, description]
comparisons:
  - [instruction=reference, instruction=description]
n_resamples: 200
"""


@pytest.fixture(scope="module")
def tracked(lb_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A folder with its own MLflow store (tracking on), response cache and runs."""
    pytest.importorskip("llama_cpp")
    root = tmp_path_factory.mktemp("startup")
    env = workbench_env(root, lb_dir, "startup", tracking_uri=mlflow_store(root)) | {
        "WORKBENCH_RUNS_DIR": str(root / "runs"),
        "PYTHONPATH": str(REPO),
    }
    return root, env


@pytest.mark.data
@pytest.mark.model
@pytest.mark.slow
def test_tracked_run_on_an_embedded_model_imports_no_gateway_nor_optimisers(
    tracked: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    root, env = tracked
    args = ["run", "hearsay", "--model", "local/smollm2", "--limit", "2"]
    loaded = _imports(args, (*HEAVY, "mlflow"), env, root, tmp_path)
    assert "mlflow" in loaded  # tracked: the store was written, the probe sees imports
    del loaded["mlflow"]
    assert loaded == {}, json.dumps(loaded, indent=1)


@pytest.mark.data
@pytest.mark.model
@pytest.mark.slow
def test_tracked_sweep_on_an_embedded_model_imports_no_gateway_nor_optimisers(
    tracked: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    root, env = tracked
    spec = root / "startup_imports.yaml"
    spec.write_text(SWEEP)
    loaded = _imports(["sweep", str(spec)], (*HEAVY, "mlflow"), env, root, tmp_path)
    assert "mlflow" in loaded
    del loaded["mlflow"]
    assert loaded == {}, json.dumps(loaded, indent=1)
