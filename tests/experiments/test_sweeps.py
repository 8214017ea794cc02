"""Sweep specs: validation errors, planning, and resume after SIGKILL (against a local stub)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.stub_server import StubOpenAI, hashed_yes_no
from experiments.sweeps import SpecError, load_spec, plan_tasks
from promptlib import Catalog
from tests.conftest import workbench_env

REPO = Path(__file__).resolve().parents[2]


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
