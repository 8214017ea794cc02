"""Sequential sweeps end to end: kill and resume, the reduced real-path acceptance (size,
savings, adaptive best-of-k; `benchmarks/sequential_path.py` is the full size), and a real
local model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from experiments.testing.sequential_sim import SetAccuracy, prepare, simulate, task_dir
from experiments.testing.stub_server import StubOpenAI, _prompt
from promptlib import Catalog, LocalSource
from tests.conftest import workbench_env

SPEC = """
name: seq_resume
tasks: [cuad_audit_rights]
limit: 150
fixed: {demos: none}
axes: {register: [plain, technical]}
comparisons: [[register=plain, register=technical]]
design: sequential
sequential: {batch: 10, max_rows: 70}
"""


def _env(root: Path, lb_dir: Path) -> dict[str, str]:
    return {**workbench_env(root, lb_dir, "t"), "OPENAI_API_KEY": "sk-dummy-key-for-the-stub"}


def _parent_status(root: Path) -> str | None:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    exp = client.get_experiment_by_name("t/seq_resume")
    runs = [] if exp is None else client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("workbench.kind") == "sweep"]
    assert len(parents) <= 1
    return parents[0].info.status if parents else None


@pytest.mark.data
@pytest.mark.slow
def test_a_killed_sequential_sweep_resumes_without_repeating_or_losing_a_row(
    lb_dir: Path, catalog: Catalog, tmp_path: Path
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    model = SetAccuracy(prepare(spec, catalog).prompts, {"register=plain": 0.1}, ("Yes", "No"), 9)
    clean_root, killed_root = tmp_path / "clean", tmp_path / "killed"
    clean_root.mkdir()
    killed_root.mkdir()
    with StubOpenAI(reply_fn=model.reply, latency=0.05) as stub:
        cmd = [
            sys.executable, "-m", "experiments.cli", "sweep", str(spec), "--model", "openai/stub",
            "--api-base", stub.url, "--concurrency", "1", "--json",
        ]  # fmt: skip
        clean = subprocess.run(cmd, env=_env(clean_root, lb_dir), cwd=clean_root, capture_output=True, text=True, timeout=600)  # fmt: skip
        assert clean.returncode == 0, clean.stderr
        clean_sent = [_prompt(b) for b in stub.requests]
        stub.requests.clear()

        proc = subprocess.Popen(cmd, env=_env(killed_root, lb_dir), cwd=killed_root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.time() + 300
        while time.time() < deadline and len(stub.requests) < 45:  # mid-loop, past a look
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        before = [_prompt(b) for b in stub.requests]
        stub.requests.clear()
        assert 45 <= len(before) < len(clean_sent), "the kill came too late to test a resume"
        assert _parent_status(killed_root) == "RUNNING"

        resumed = subprocess.run(cmd, env=_env(killed_root, lb_dir), cwd=killed_root, capture_output=True, text=True, timeout=600)  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        after = [_prompt(b) for b in stub.requests]
    # nothing lost: together the two runs sent what the clean run sent; nothing repeated but
    # at most the one call in flight at the kill (its reply never reached the cache)
    assert set(before) | set(after) == set(clean_sent)
    assert len(before) + len(after) <= len(clean_sent) + 1
    out, ref = json.loads(resumed.stdout), json.loads(clean.stdout)
    assert out["sequential"] == ref["sequential"] and out["status"] == "complete"
    assert _parent_status(killed_root) == "FINISHED"


# ---- the reduced acceptance, through the real path (in-process model of set accuracies) ---
PAIR = """name: p
tasks: [overruling]
limit: {n}
fixed: {{demos: none}}
axes: {{format: [base, claude]}}
comparisons: [[format=base, format=claude]]
design: sequential
sequential: {{batch: 10}}
"""
BEST_OF_K = """name: k
tasks: [overruling]
limit: {n}
fixed: {{demos: none}}
axes: {{format: {{draw: 4, seed: 0, with: [base]}}}}
comparisons: best_vs_worst
design: sequential
sequential: {{batch: 10}}
"""


def _prepared(tmp_path: Path, lb_dir: Path, minority: float, text: str, n: int) -> Any:
    data = task_dir(tmp_path / f"data{minority}", lb_dir, "overruling", n, minority)
    catalog = Catalog(LocalSource(data))
    path = tmp_path / f"spec{minority}{len(text)}.yaml"
    path.write_text(text.format(n=n))
    return catalog, prepare(path, catalog)


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize("minority", [0.5, 0.2])
def test_under_the_null_the_sequence_rarely_decides(
    lb_dir: Path, tmp_path: Path, minority: float
) -> None:
    catalog, prepared = _prepared(tmp_path, lb_dir, minority, PAIR, 200)
    rows = [simulate(prepared, catalog, {}, 7_000 + s) for s in range(100)]
    decided = sum(r["decision"] in ("A", "B") for r in rows)
    # size <= 0.05: above 10 of 100 has probability < 0.03 even at 0.05 exactly
    assert decided <= 10, f"{decided} of 100 null simulations decided"
    assert all(r["calls"] == 2 * r["n"] for r in rows)  # every row on both arms, once


@pytest.mark.data
@pytest.mark.slow
def test_a_clear_difference_is_found_on_a_fraction_of_the_rows(
    lb_dir: Path, tmp_path: Path
) -> None:
    catalog, prepared = _prepared(tmp_path, lb_dir, 0.5, PAIR, 300)
    rows = [simulate(prepared, catalog, {"format=base": 0.25}, 8_000 + s) for s in range(30)]
    right = [r for r in rows if r["decision"] == "A"]
    assert len(right) >= 27 and not [r for r in rows if r["decision"] == "B"]
    assert sum(r["n"] for r in right) / len(right) <= 0.4 * 300
    assert all(r["ci_low"] > 0 for r in right)


@pytest.mark.data
@pytest.mark.slow
def test_adaptive_best_of_k_spends_at_most_half_the_grid(lb_dir: Path, tmp_path: Path) -> None:
    catalog, prepared = _prepared(tmp_path, lb_dir, 0.5, BEST_OF_K, 300)
    rows = [simulate(prepared, catalog, {"format=base": 0.3}, 9_000 + s) for s in range(10)]
    assert all(r["grid_calls"] == 1500 for r in rows)
    # counted at the model: every call it received, against 5 x 300
    assert sum(r["calls"] for r in rows) / (10 * 1500) <= 0.5
    assert sum(r["a"] == "format=base" and r["decision"] == "best" for r in rows) >= 9
    for r in rows:
        assert r["calls"] == sum(r["rows_per_arm"].values())
        assert all(r["rows_per_arm"][e["variant"]] == e["rows"] for e in r["eliminated"])


# ---- a real local model ----------------------------------------------------------------------
@pytest.mark.data
@pytest.mark.slow
@pytest.mark.model
def test_a_tiny_sequential_sweep_runs_on_a_local_model(catalog: Catalog, tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="pip install -e '.[local]'")
    from experiments.llm.gateway import get_model
    from experiments.sweeps.driver import run_sweep
    from experiments.sweeps.spec import load_spec
    from experiments.tracking import Tracker, TrackingConfig

    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: local_seq\ntasks: [hearsay]\nlimit: 20\nfixed: {demos: none}\n"
        "axes: {instruction: [reference, description]}\n"
        "comparisons: [[instruction=reference, instruction=description]]\n"
        "design: sequential\nsequential: {batch: 10, max_rows: 20}\n"
    )
    tracker = Tracker(
        TrackingConfig(
            tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
            artifact_location=(tmp_path / "artifacts").as_uri(),
            experiment_prefix="local", prompt_registry=False, source="test",
        )
    )  # fmt: skip
    lm = get_model("local/smollm2")
    result = run_sweep(
        load_spec(spec), catalog, models=("local/smollm2",), tracker=tracker,
        lm_factory=lambda _name: lm, reports_dir=tmp_path / "reports",
    )  # fmt: skip
    assert result.sequential is not None
    row = result.sequential[0]
    assert result.ok and row.decision is not None
    assert row.n in (10, 20) and row.looks == tuple(range(10, row.n + 1, 10))
    assert row.score_a is not None and row.ci_low is not None and row.ci_high is not None
    assert row.ci_low <= row.ci_high
    trials = tracker.sweep_trials(result.parent_run_id)
    assert sorted(t["n"] for t in trials) == [row.n, row.n]
    assert result.cost["rows_evaluated"] == 2 * row.n
