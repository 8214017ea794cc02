"""Drawn formats, verbalizers and orders as sweep axes on a task with neither rule nor register
files: the sweep runs, and its parent run holds the spread, the range test's p-value and a
variance share for each new factor, with the heatmap and the forest plot (issue 21)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest

from experiments.sweeps.spec import load_spec
from experiments.testing.stub_server import StubOpenAI, hashed_yes_no
from promptlib import Catalog
from promptlib.formats import draw_formats
from tests.conftest import workbench_env

pytestmark = [pytest.mark.data, pytest.mark.slow]

TASK = "overruling"  # neither rule nor register prompt files (checked below)
SPEC = f"""
name: fmt_check
tasks: [{TASK}, hearsay]
fixed: {{demos: base}}
axes:
  format: {{draw: 3, seed: 0, with: [base]}}
  verbalizer: [official, letters]
  order: [drawn, 1]
comparisons: best_vs_worst
across_tasks: permutation
n_resamples: 200
"""


def test_the_task_has_neither_rule_nor_register_files(catalog: Catalog) -> None:
    files = set(catalog.task(TASK).spec.prompt_files)
    assert not files & {
        "rule_reference_prompt.txt",
        "rule_description_prompt.txt",
        "zero_shot_simple.txt",
        "zero_shot_jargon.txt",
    }


def test_a_drawn_format_axis_expands_to_the_drawn_points(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SPEC)
    spec = load_spec(path)
    formats = sorted({nv.variant.format for nv in spec.variants})
    assert formats == sorted(["base", *draw_formats(3, 0)])
    assert len(spec.variants) == 4 * 2 * 2
    for bad, message in (
        ("{draw: 0}", "axes.format.draw must be an integer from 1 to 10000"),
        ("{draw: 2, seed: -1}", "axes.format.seed must be an integer from 0 to 4294967295"),
        ("{draw: 2, k: 1}", "unknown key 'k'"),
    ):
        path.write_text(SPEC.replace("{draw: 3, seed: 0, with: [base]}", bad))
        with pytest.raises(Exception, match=message):
            load_spec(path)


def test_a_format_sweep_logs_spread_range_test_and_the_new_factors_shares(
    lb_dir: Path, tmp_path: Path, catalog: Catalog
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    env = {**workbench_env(tmp_path, lb_dir, "test"), "OPENAI_API_KEY": "sk-dummy-key-for-stub"}
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        run = subprocess.run(
            [sys.executable, "-m", "experiments.cli", "sweep", str(spec), "--model",
             "openai/stub", "--api-base", stub.url, "--limit", "16", "--json"],
            env=env, capture_output=True, text=True, cwd=tmp_path, timeout=600,
        )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert result["trials"] == 2 * 16 and result["status"] == "complete"
    ranges = [r for r in result["comparisons"] if r["task"] == TASK]
    assert ranges and all(r["p_value"] is not None and 0 < r["p_value"] <= 1 for r in ranges)
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    parent = client.get_run(result["parent_run_id"])
    metrics = parent.data.metrics
    assert f"sensitivity.{TASK}.openai/stub.spread" in metrics, sorted(metrics)
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    shares = json.loads(
        Path(
            client.download_artifacts(parent.info.run_id, "variance_shares.json", str(tmp_path))
        ).read_text()
    )
    (per_model,) = shares.values()
    factors = set(per_model["shares"])
    # format and verbalizer are pooled axes (same levels on both tasks); order is a draw,
    # whose seed means nothing across tasks, so its share is within task
    assert {"format", "verbalizer", "order (within task)"} <= factors, factors
    assert sum(per_model["shares"].values()) == pytest.approx(1.0)
    assert any("heatmap" in a for a in artifacts) and any("forest" in a for a in artifacts)
    sens = json.loads(
        Path(
            client.download_artifacts(parent.info.run_id, "sensitivity.json", str(tmp_path))
        ).read_text()
    )
    pooled_axes = {r["axis"] for r in sens["meta_analysis"]}
    assert {"format", "verbalizer"} <= pooled_axes, pooled_axes  # the forest plot's rows
