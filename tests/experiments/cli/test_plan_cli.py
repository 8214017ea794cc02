"""`workbench plan`, the time lines and warning of `workbench sweep --dry-run`, and the header
of `workbench tasks`, through the CLI on the real data. A stored speed stands in for the
measurement, so nothing runs a model and the numbers are fixed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from experiments.llm.speed import Speed, cpu_description, store_speed
from tests.conftest import run_cli

pytestmark = pytest.mark.data

REPO = Path(__file__).resolve().parents[3]
DEMO = str(REPO / "ablations" / "demo.yaml")
FORMAT_SPREAD = str(REPO / "ablations" / "format_spread.yaml")


def _env(tmp_path: Path, lb_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "LEGALBENCH_DIR": str(lb_dir),
        "WORKBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }


def _store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model: str, prompt: float) -> None:
    """A measurement of `model` kept where the subprocess looks (its cache folder)."""
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    when = "2026-01-01T00:00:00Z"
    store_speed(model, Speed(model, cpu_description(), prompt, prompt / 10, when, 0.5))


@pytest.mark.slow
def test_plan_of_the_demo_calls_no_model(
    lb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for model in ("local/smollm2", "local/gemma3-270m"):
        _store(monkeypatch, tmp_path, model, 400.0)
    r = run_cli(["plan", DEMO], _env(tmp_path, lb_dir), tmp_path)
    assert r.returncode == 0, r.stderr
    assert "measuring" not in r.stderr  # the stored speeds: no model was run
    lines = r.stdout.splitlines()
    assert lines[0].startswith("plan of demo") and "Holm over 6 tested comparisons" in lines[0]
    assert lines[1].split() == [
        "task", "model", "rows", "(of)", "train", "calls", "~time", "~price", "MDE80", "MDE80",
        "Holm",
    ]  # fmt: skip
    hearsay = lines[2].split()
    assert hearsay[:6] == ["hearsay", "local/smollm2", "40", "95", "5", "80"]
    assert any(x.startswith("total: 480 calls, about ") for x in lines)
    assert any("measured 400 prompt tok/s, 40 generated tok/s" in x for x in lines)
    assert any(x.startswith("MDE80: the smallest true difference") for x in lines)
    doc = json.loads(run_cli(["plan", DEMO, "--json"], _env(tmp_path, lb_dir), tmp_path).stdout)
    assert doc["family"] == 6 and [t["rows"] for t in doc["tasks"]] == [40, 40, 40]
    assert all(0 < t["mde"]["value"] < t["mde_family"]["value"] < 1 for t in doc["tasks"])


def test_plan_refuses_an_assumption_out_of_range(lb_dir: Path, tmp_path: Path) -> None:
    r = run_cli(["plan", DEMO, "--correlation", "0.95"], _env(tmp_path, lb_dir), tmp_path)
    assert r.returncode == 2 and "--correlation" in r.stderr


@pytest.mark.slow
def test_dry_run_warns_when_the_study_passes_an_hour(
    lb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _store(monkeypatch, tmp_path, "local/smollm2", 100.0)
    env = _env(tmp_path, lb_dir)
    r = run_cli(["sweep", FORMAT_SPREAD, "--dry-run"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    warnings = [x for x in r.stderr.splitlines() if x.startswith("warning:")]
    assert len(warnings) == 1, r.stderr
    assert warnings[0].startswith("warning: about ")
    assert warnings[0].endswith(
        " h on this machine (measured 100 prompt tok/s for local/smollm2); cut rows with "
        "`limit:` or models"
    )
    assert "no model was called" in r.stdout
    assert "local/smollm2: 26866 calls" in r.stdout and "on this machine" in r.stdout
    small = run_cli(["sweep", FORMAT_SPREAD, "--dry-run", "--limit", "5"], env, tmp_path)
    assert small.returncode == 0 and "warning:" not in small.stderr


def test_dry_run_without_a_measurement_says_how_to_get_one(lb_dir: Path, tmp_path: Path) -> None:
    r = run_cli(["sweep", DEMO, "--dry-run"], _env(tmp_path, lb_dir), tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"run `workbench plan --measure {DEMO}`" in r.stdout
    assert "warning:" not in r.stderr


def test_tasks_has_a_header_and_says_what_a_dash_means(lb_dir: Path, tmp_path: Path) -> None:
    r = run_cli(["tasks"], _env(tmp_path, lb_dir), tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["task", "type", "metric", "train", "test", "labels"]
    tasks = sorted(p for p in (lb_dir / "tasks").iterdir() if p.is_dir())
    no_test = [p.name for p in tasks if not (p / "test.tsv").is_file()]
    assert no_test  # the shipped copy holds test splits for some tasks only
    rows = {x.split()[0]: x.split() for x in lines[1:-1]}
    assert all(rows[name][4] == "-" for name in no_test)
    note = lines[-1]
    assert note.startswith('train, test: rows in each task\'s train.tsv and test.tsv; "-": the')
    assert f"no test.tsv: {len(no_test)} of {len(tasks)} tasks" in note
    assert "(--hf)" in note
