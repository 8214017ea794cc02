"""Sweep specs: validation errors, planning, and resume after SIGKILL (against a local stub)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from experiments.sweeps.plan import plan_tasks
from experiments.sweeps.spec import SpecError, load_spec
from experiments.testing.stub_server import StubOpenAI, hashed_yes_no
from promptlib import Catalog
from tests.conftest import mlflow_store, workbench_env

REPO = Path(__file__).resolve().parents[3]


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\ntasks: [hearsay]\naxes:\n  instrction: [reference]\n", "unknown axis 'instrction' — did you mean 'instruction'"),
        ("name: x\ntasks: [hearsay]\naxes:\n  instruction: [referance]\n", "unknown instruction level 'referance'"),
        ("name: x\ntasks: [hearsay\n", "malformed YAML at line"),
        ("name: x\ntasks: [hearsay]\nmodel: [a]\n", "unknown field 'model' — did you mean 'models'"),
        ("name: x\n", "field 'tasks' is required"),
        ("name: x\ntasks: [hearsay]\naxes: {instruction: [reference]}\ncomparisons: [[a, b]]\n", "unknown variant 'a'"),
        ("name: x\ntasks: [hearsay]\ncomparisons: best_of\n", "best_vs_worst"),
    ],
)  # fmt: skip
def test_bad_specs_name_the_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert str(path) in str(err.value) and message in str(err.value)


@pytest.mark.data
def test_task_without_the_needed_prompt_file(tmp_path: Path, catalog: Catalog) -> None:
    path = write(
        tmp_path,
        "name: x\ntasks: [hearsay, proa]\nrequires: [zero_shot_simple.txt]\n"
        "fixed: {demos: none}\naxes: {register: [plain, technical]}\n",
    )
    with pytest.raises(SpecError, match=r"task 'hearsay' lacks zero_shot_simple\.txt"):
        plan_tasks(load_spec(path), catalog)


@pytest.mark.data
def test_shipped_specs_plan_and_skip_missing_splits(catalog: Catalog) -> None:
    demo = load_spec(REPO / "ablations" / "demo_resampling.yaml")
    assert [v.name for v in demo.variants] == [f"seed={s}" for s in range(5)]
    planned = {p.task: p for p in plan_tasks(demo, catalog)}
    assert planned["learned_hands_family"].skipped == "no test split in this data"
    over = planned["overruling"]
    # evaluated rows: none of them is a demonstration of any of the five draws
    used: set[str] = set()
    demo_texts: set[str] = set()
    from promptlib import compile_prompt

    for nv in demo.variants:
        compiled = compile_prompt(nv.variant, catalog.task("overruling"))
        used |= {r.index for r in compiled.variant.demo_rows or () if r.split == "test"}
        demo_texts |= {" ".join(d.values["text"].split()) for d in compiled.demos}
    assert used and not used & set(over.rows)
    rows = {
        r["index"]: " ".join(r["text"].split()) for r in catalog.task("overruling").rows("test")
    }
    left_out = set(rows) - set(over.rows)
    # every row left out is a drawn demonstration or repeats one's text under another index
    assert used <= left_out and all(rows[i] in demo_texts for i in left_out)
    assert not {rows[i] for i in over.rows} & demo_texts
    for name in ("reference_vs_description", "plain_vs_technical"):
        spec = load_spec(REPO / "ablations" / f"{name}.yaml")
        assert all(p.skipped or p.rows for p in plan_tasks(spec, catalog))


@pytest.mark.slow
def test_cli_bad_spec_exits_2(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\ntasks: [hearsay]\naxes:\n  colour: [red]\n")
    r = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "sweep", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "LEGALBENCH_DIR": "/nonexistent"},
    )
    assert r.returncode == 2 and "unknown axis 'colour'" in r.stderr and r.stdout == ""


# ---- resume after SIGKILL --------------------------------------------------------------------
SPEC = """
name: resume_check
tasks: [hearsay, personal_jurisdiction]
fixed: {demos: none}
axes:
  instruction: [reference, description]
comparisons: [[instruction=reference, instruction=description]]
n_resamples: 200
"""


def _env(root: Path, lb_dir: Path) -> dict[str, str]:
    return {
        **workbench_env(root, lb_dir, "test"),
        "OPENAI_API_KEY": "sk-dummy-key-for-the-local-stub",
    }


def _child_runs(root: Path) -> list[dict[str, object]]:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    exp = client.get_experiment_by_name("test/resume_check")
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id], filter_string="tags.`workbench.kind` = 'trial'")
    return [
        {"trial": r.data.tags["workbench.trial_id"], "status": r.info.status, "score": r.data.metrics.get("score")}
        for r in runs
    ]  # fmt: skip


def _finished_children(root: Path) -> int:
    """Read the store with plain sqlite while the sweep writes it (no schema creation)."""
    import sqlite3

    db = root / "mlflow.db"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as con:
            row = con.execute(
                "SELECT COUNT(*) FROM runs JOIN tags ON tags.run_uuid = runs.run_uuid "
                "WHERE tags.key = 'workbench.kind' AND tags.value = 'trial' "
                "AND runs.status = 'FINISHED' AND runs.lifecycle_stage = 'active'"
            ).fetchone()
            return int(row[0])
    except sqlite3.Error:
        return 0  # tables not created yet


@pytest.mark.data
@pytest.mark.slow
def test_sweep_killed_with_sigkill_resumes_without_duplicates(lb_dir: Path, tmp_path: Path) -> None:
    spec = write(tmp_path, SPEC)
    with StubOpenAI(latency=0.1, reply_fn=hashed_yes_no) as stub:
        cmd = [
            sys.executable, "-m", "experiments.cli", "sweep", str(spec), "--model", "openai/stub",
            "--api-base", stub.url, "--concurrency", "1", "--limit", "25", "--json",
        ]  # fmt: skip
        clean_root, killed_root = tmp_path / "clean", tmp_path / "killed"
        clean_root.mkdir()
        killed_root.mkdir()
        clean = subprocess.run(
            cmd,
            env=_env(clean_root, lb_dir),
            capture_output=True,
            text=True,
            cwd=clean_root,
            timeout=300,
        )
        assert clean.returncode == 0, clean.stderr

        proc = subprocess.Popen(cmd, env=_env(killed_root, lb_dir), cwd=killed_root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.time() + 120
        while time.time() < deadline and _finished_children(killed_root) < 1:
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        partial = _child_runs(killed_root)
        assert 1 <= sum(r["status"] == "FINISHED" for r in partial) < 4, partial
        killed_parent = [
            r for r in _runs(killed_root, "test/resume_check")
            if r.data.tags.get("workbench.kind") == "sweep"
        ]  # fmt: skip
        assert len(killed_parent) == 1 and killed_parent[0].info.status != "FINISHED"

        resumed = subprocess.run(cmd, env=_env(killed_root, lb_dir), capture_output=True, text=True, cwd=killed_root, timeout=300)  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
    out = json.loads(resumed.stdout)
    assert out["resumed"] >= 1
    runs = _child_runs(killed_root)
    assert len(runs) == 4 and len({r["trial"] for r in runs}) == 4
    assert all(r["status"] == "FINISHED" for r in runs)
    clean_scores = {r["trial"]: r["score"] for r in _child_runs(clean_root)}
    assert {r["trial"]: r["score"] for r in runs} == clean_scores
    p_clean = [c["p_value"] for c in json.loads(clean.stdout)["comparisons"]]
    assert [c["p_value"] for c in out["comparisons"]] == p_clean


# ---- persistent provider failures: incomplete, then resumed -----------------------------------
def _runs(root: Path, experiment: str) -> list[Any]:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else list(client.search_runs([exp.experiment_id]))


def _fails(prompt: str) -> bool:
    """About a quarter of the prompts fail every time they are sent."""
    return hashlib.sha256(prompt.encode()).digest()[1] % 4 == 0


@pytest.mark.data
@pytest.mark.slow
def test_failed_rows_are_not_results_and_a_healthy_rerun_sends_exactly_them(
    lb_dir: Path, tmp_path: Path
) -> None:
    spec = write(tmp_path, SPEC)
    failing, clean_root = tmp_path / "failing", tmp_path / "clean"
    failing.mkdir()
    clean_root.mkdir()
    with StubOpenAI(reply_fn=hashed_yes_no, fail_fn=_fails) as stub:
        cmd = [
            sys.executable, "-m", "experiments.cli", "sweep", str(spec), "--model", "openai/stub",
            "--api-base", stub.url, "--retries", "0", "--limit", "20", "--json",
        ]  # fmt: skip
        first = subprocess.run(cmd, env=_env(failing, lb_dir), capture_output=True, text=True, cwd=failing, timeout=300)  # fmt: skip
        sent = [_prompt_of(r) for r in stub.requests]
        failed_prompts = {p for p in sent if _fails(p)}
        assert failed_prompts, (
            f"the stub failed nothing: the test proves nothing (exit {first.returncode}, "
            f"{len(sent)} requests; stderr: {first.stderr[-2000:]})"
        )

        # 1. exit 1, trials named with their row counts, and how to resume
        assert first.returncode == 1, first.stderr
        assert "incomplete" in first.stderr and "rows failed" in first.stderr
        assert "Rerun the same command" in first.stderr and "Traceback" not in first.stderr
        out = json.loads(first.stdout)
        assert out["status"] == "incomplete" and out["incomplete"]
        # 2. no p-value for a comparison that involves an incomplete trial
        for row in out["comparisons"]:
            assert row["p_value"] is None and "rows failed" in row["status"]
        runs = _runs(failing, "test/resume_check")
        parent = [r for r in runs if r.data.tags.get("workbench.kind") == "sweep"]
        children = [r for r in runs if r.data.tags.get("workbench.kind") == "trial"]
        assert len(parent) == 1 and parent[0].info.status == "FAILED"
        assert not [k for k in parent[0].data.metrics if k.startswith("p_value")]
        # 3. the incomplete trials' runs are FAILED, carry n_errors and no official score
        bad = {t["trial_id"]: t for t in out["incomplete"]}
        for run in children:
            tid = run.data.tags["workbench.trial_id"]
            if tid in bad:
                assert run.info.status == "FAILED"
                assert run.data.metrics["n_errors"] == bad[tid]["n_errors"] > 0
                assert "score" not in run.data.metrics and "score_on_answered" in run.data.metrics
            else:
                assert run.info.status == "FINISHED" and run.data.metrics["n_errors"] == 0

        # 4. a healthy rerun sends exactly the failed prompts, once each, and completes
        stub.fail_fn = None
        stub.requests.clear()
        second = subprocess.run(cmd, env=_env(failing, lb_dir), capture_output=True, text=True, cwd=failing, timeout=300)  # fmt: skip
        assert second.returncode == 0, second.stderr
        resent = [_prompt_of(r) for r in stub.requests]
        assert sorted(resent) == sorted(failed_prompts)

        clean = subprocess.run(cmd, env=_env(clean_root, lb_dir), capture_output=True, text=True, cwd=clean_root, timeout=300)  # fmt: skip
        assert clean.returncode == 0, clean.stderr
    again = json.loads(second.stdout)
    runs = _runs(failing, "test/resume_check")
    children = [r for r in runs if r.data.tags.get("workbench.kind") == "trial"]
    parent = [r for r in runs if r.data.tags.get("workbench.kind") == "sweep"]
    assert parent[0].info.status == "FINISHED"
    assert len(children) == 4 and all(r.info.status == "FINISHED" for r in children)
    assert len({r.data.tags["workbench.trial_id"] for r in children}) == 4
    ps = [c["p_value"] for c in again["comparisons"]]
    assert all(p is not None for p in ps)
    assert ps == [c["p_value"] for c in json.loads(clean.stdout)["comparisons"]]
    assert any(k.startswith("p_value.") for k in parent[0].data.metrics)


def _prompt_of(body: dict[str, Any]) -> str:
    prompt = body.get("prompt")
    if prompt is None:
        prompt = body["messages"][-1]["content"]
    return "".join(prompt) if isinstance(prompt, list) else str(prompt)


@pytest.mark.data
@pytest.mark.slow
def test_dry_run_lists_the_trials_the_sweep_runs_and_calls_no_model(
    lb_dir: Path, tmp_path: Path
) -> None:
    spec = write(tmp_path, SPEC)
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        cmd = [
            sys.executable, "-m", "experiments.cli", "sweep", str(spec), "--model", "openai/stub",
            "--api-base", stub.url, "--limit", "8", "--json",
        ]  # fmt: skip
        dry = subprocess.run([*cmd, "--dry-run"], env=_env(tmp_path, lb_dir), capture_output=True, text=True, cwd=tmp_path, timeout=300)  # fmt: skip
        assert dry.returncode == 0, dry.stderr
        assert not stub.requests
        planned = json.loads(dry.stdout)["trials"]
        assert len(planned) == 4 and all(
            t["n"] == 8 and t["prompt_tokens_est"] > 0 for t in planned
        )
        real = subprocess.run(cmd, env=_env(tmp_path, lb_dir), capture_output=True, text=True, cwd=tmp_path, timeout=300)  # fmt: skip
        assert real.returncode == 0, real.stderr
    assert sorted(t["trial_id"] for t in planned) == sorted(
        r["trial"] for r in _child_runs(tmp_path)
    )


@pytest.mark.data
@pytest.mark.slow
def test_best_vs_worst_uses_the_range_test_and_says_so(lb_dir: Path, tmp_path: Path) -> None:
    spec = write(
        tmp_path,
        "name: draws_check\ntasks: [hearsay, personal_jurisdiction]\n"
        "fixed: {demos: 2, pool: train}\naxes: {seed: [0, 1, 2]}\n"
        "comparisons: best_vs_worst\nn_resamples: 200\n",
    )
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        cmd = [
            sys.executable, "-m", "experiments.cli", "sweep", str(spec), "--model", "openai/stub",
            "--api-base", stub.url, "--limit", "20",
        ]  # fmt: skip
        r = subprocess.run([*cmd, "--json"], env=_env(tmp_path, lb_dir), capture_output=True, text=True, cwd=tmp_path, timeout=300)  # fmt: skip
        assert r.returncode == 0, r.stderr
        text = subprocess.run(cmd, env=_env(tmp_path, lb_dir), capture_output=True, text=True, cwd=tmp_path, timeout=300)  # fmt: skip
    out = json.loads(r.stdout)
    assert len(out["comparisons"]) == 2
    for row in out["comparisons"]:
        assert row["test"].startswith("range permutation test") and row["k"] == 3
        assert row["statistic"] == pytest.approx(row["score_a"] - row["score_b"])
        assert row["score_a"] >= row["score_b"] and 0 < row["p_value"] <= 1
        assert "anti-conservative" in row["post_selection_test"]
        assert row["ci_low"] is None  # no interval for a pair chosen after the fact
    (across,) = out["across_tasks"]
    assert across["test"].startswith("Fisher") and across["n_tasks"] == 2
    assert "range permutation test" in text.stdout and "across tasks:" in text.stdout
    assert "Fisher" in text.stdout


def test_executor_choice_errors_name_the_option() -> None:
    from experiments.sweeps.executors import ExecutorError, LocalExecutor, get_executor

    assert isinstance(get_executor("local"), LocalExecutor)
    with pytest.raises(ExecutorError, match="--ray-address needs --executor ray"):
        get_executor("local", "auto")
    with pytest.raises(ExecutorError, match="--executor must be local or ray, not 'dask'"):
        get_executor("dask")


@pytest.mark.data
def test_a_sweep_leaves_no_figure_open(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyplot keeps every open figure alive: a driver running sweep after sweep (Ray, a
    notebook) would pile up its figures (seen as matplotlib's "more than 20 figures" warning
    in the Ray tests)."""
    import matplotlib.pyplot as plt

    from experiments.llm.gateway import LiteLLMModel
    from experiments.sweeps.driver import run_sweep
    from experiments.tracking import Tracker, TrackingConfig

    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")
    spec = tmp_path / "figs.yaml"
    spec.write_text(
        "name: figs\ntasks: [hearsay]\nfixed: {demos: none}\n"
        "axes:\n  instruction: [reference, description]\n"
        "comparisons: [[instruction=reference, instruction=description]]\nn_resamples: 100\n"
    )
    tracker = Tracker(
        TrackingConfig(
            tracking_uri=mlflow_store(tmp_path),
            artifact_location=(tmp_path / "artifacts").as_uri(),
            experiment_prefix="figs",
            prompt_registry=False,
            source="test",
        )
    )
    before = set(plt.get_fignums())
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        lm = LiteLLMModel("openai/stub", api_base=stub.url, concurrency=1)
        result = run_sweep(
            load_spec(spec), catalog, models=(lm.name,), limit=6, tracker=tracker,
            lm_factory=lambda _name: lm, reports_dir=tmp_path / "reports",
        )  # fmt: skip
    assert result.ok and result.figures  # figures were drawn
    assert set(plt.get_fignums()) == before
