"""What a sweep prints under its table (issue 32, point 6): a legend of at most three short
lines that names the tests; the full method behind ``--explain``; variants made from text
files named by the file's stem, not its whole path. The JSON keeps every field as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.testing.stub_server import StubOpenAI

REPO = Path(__file__).resolve().parents[3]
INSTRUCTION = "text: |\n  Is this hearsay? Answer Yes or No.\n"
SPEC = """
name: legend_check
tasks: [hearsay]
fixed: {demos: none}
axes:
  instruction_file: [specs/lawyer.yaml, specs/paralegal.yaml]
comparisons: [[instruction_file=specs/lawyer.yaml, instruction_file=specs/paralegal.yaml]]
n_resamples: 200
"""


def _workbench(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli", *args],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=600,
    )  # fmt: skip


def _legend(stdout: str) -> list[str]:
    """The lines between the comparison table's last row and the across-task section."""
    lines = stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.lstrip().startswith("model") or
                line.startswith("task "))  # fmt: skip
    end = next(i for i, line in enumerate(lines) if line.startswith("across tasks"))
    return [line for line in lines[head + 1 : end] if "hearsay" not in line]


@pytest.mark.data
def test_short_legend_explain_and_file_stems(tmp_path: Path, lb_dir: Path) -> None:
    root = tmp_path / "proj"
    (root / "specs").mkdir(parents=True)
    for name in ("lawyer", "paralegal"):
        (root / "specs" / f"{name}.yaml").write_text(INSTRUCTION.replace("this", f"this ({name})"))
    (root / "spec.yaml").write_text(SPEC)
    (root / "mlflow.yaml").write_text("experiment_prefix: legend\nprompt_registry: false\n")
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"} | {
        "LEGALBENCH_DIR": str(lb_dir),
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "WORKBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "OPENAI_API_KEY": "sk-dummy-key-for-the-local-stub",
        "PYTHONPATH": str(REPO),
    }
    with StubOpenAI(reply_fn=lambda p: "Yes" if "lawyer" in p else "No") as stub:
        model = ["--model", "openai/stub", "--api-base", stub.url, "--limit", "12"]
        sweep = _workbench(["sweep", "spec.yaml", *model], env, root)
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    legend = _legend(sweep.stdout)
    assert 1 <= len(legend) <= 3, legend
    assert all(len(line) <= 130 for line in legend), legend
    text = "\n".join(legend)
    assert "paired permutation test" in text and "Holm over 1 tests" in text
    assert "95% CI:" in text and "--explain" in text
    # the stem, not the path the spec names
    row = next(line for line in sweep.stdout.splitlines() if line.startswith("hearsay"))
    assert "instruction_file=lawyer " in row and "instruction_file=paralegal " in row
    assert "specs/" not in row and str(root) not in sweep.stdout.split("reports written")[0]
    # --explain: the full method, each part on its own line; the JSON keeps the whole names
    report = _workbench(["report", "legend_check", "--explain"], env, root)
    assert report.returncode == 0, report.stderr[-3000:]
    assert "method:" in report.stdout
    assert "MDE80: smallest true difference" in report.stdout
    assert "Holm across this sweep's 1 tested comparisons." in report.stdout
    doc = json.loads(_workbench(["report", "legend_check", "--json"], env, root).stdout)
    row_json = doc["comparisons"][0]
    assert row_json["a"] == "instruction_file=specs/lawyer.yaml"
    assert row_json["ci_method"] and row_json["test"].startswith("paired permutation test")
