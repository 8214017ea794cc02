"""The paper's three studies and the `make demo` study on the embedded models, tracked in
MLflow, then read back: by `workbench report`, by the analysis notebook (nbclient), and in the
MLflow UI (Chromium). Every sweep runs once, in one module-scoped store, on few rows."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.conftest import workbench_env

pytestmark = [pytest.mark.model, pytest.mark.data, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[3]
LIMIT = 20  # rows per task: enough for a p-value, small enough for CI's budget
DEMO_LIMIT = 10  # the demo spec (3 tasks x 2 variants x 2 models) on fewer rows
STUDIES = {
    "reference_vs_description": ("hearsay", "instruction"),
    "plain_vs_technical": ("proa", "register"),
    "demo_resampling": ("overruling", "seed"),
}


def _sweep(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli", "sweep", *args],
        env=env, cwd=root, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, lb_dir: Path) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("studies")
    env = workbench_env(root, lb_dir, "study")
    outputs = {}
    for study, (task, _) in STUDIES.items():
        spec = str(REPO / "ablations" / f"{study}.yaml")
        args = ["--model", "local/smollm2", "--tasks", task, "--limit", str(LIMIT), "--json"]
        r = _sweep(root, env, spec, *args)
        assert r.returncode == 0, r.stderr[-3000:]
        outputs[study] = json.loads(r.stdout)
    # the demo as `make demo` runs it (human-readable output), on fewer rows
    demo = _sweep(root, env, str(REPO / "ablations" / "demo.yaml"), "--limit", str(DEMO_LIMIT))
    assert demo.returncode == 0, demo.stderr[-3000:]
    return {"root": root, "env": env, "outputs": outputs, "demo_stdout": demo.stdout}


def _client(root: Path) -> Any:
    import mlflow

    return mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")


@pytest.mark.parametrize("study", list(STUDIES))
def test_study_is_tracked_with_parent_children_pvalue_and_figure(
    store: dict[str, Any], study: str
) -> None:
    task, axis = STUDIES[study]
    client = _client(store["root"])
    exp = client.get_experiment_by_name(f"study/{study}")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("workbench.kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("workbench.kind") == "trial"]
    assert len(parents) == 1
    parent = parents[0]
    n_variants = 5 if study == "demo_resampling" else 2
    assert len(children) == n_variants
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    assert all(axis in c.data.params and c.data.params["task"] == task for c in children)
    assert len({c.data.params[axis] for c in children}) == n_variants
    assert all(c.data.params["n_rows"] == str(LIMIT) for c in children)
    p_metrics = [k for k in parent.data.metrics if k.startswith("p_value.")]
    assert len(p_metrics) == 1 and 0 < parent.data.metrics[p_metrics[0]] <= 1
    artifacts = [a.path for a in client.list_artifacts(parent.info.run_id)]
    assert any(a.startswith("figure_") and a.endswith(".png") for a in artifacts)
    assert "comparisons.json" in artifacts
    child_art = [a.path for a in client.list_artifacts(children[0].info.run_id)]
    assert {"prompt.txt", "predictions.jsonl", "confusion_matrix.png"} <= set(child_art)
    assert children[0].data.tags.get("mlflow.linkedPrompts")  # Prompt Registry link
    assert children[0].inputs.dataset_inputs  # the split as a dataset input
    assert (store["root"] / "reports" / study).is_dir()


def test_report_prints_the_table_from_mlflow(store: dict[str, Any]) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "report", "demo_resampling", "--json"],
        env=store["env"], cwd=store["root"], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    table = json.loads(r.stdout)["comparisons"]
    assert table == store["outputs"]["demo_resampling"]["comparisons"]
    row = table[0]
    assert row["score_a"] >= row["score_b"]  # best vs worst
    missing = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "report", "no_such_sweep"],
        env=store["env"], cwd=store["root"], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert missing.returncode == 2 and "no sweep named 'no_such_sweep'" in missing.stderr


def test_demo_prints_a_cross_model_table_with_p_values(store: dict[str, Any]) -> None:
    """What `make demo` shows: both embedded models, every comparison tested, figures."""
    out = store["demo_stdout"]
    assert out.startswith("sweep demo: 12 trials")  # 3 tasks x 2 variants x 2 models
    r = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "report", "demo", "--json"],
        env=store["env"], cwd=store["root"], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    table = json.loads(r.stdout)["comparisons"]
    assert {(row["model"], row["task"]) for row in table} == {
        (m, t)
        for m in ("local/smollm2", "local/gemma3-270m")
        for t in ("hearsay", "abercrombie", "personal_jurisdiction")
    }
    for row in table:  # loglik scoring: every trial completes, so every pair is tested
        assert row["p_value"] is not None and 0 < row["p_value"] <= 1
        assert row["n"] == DEMO_LIMIT
        # the printed table shows this row's p-value on the row's line
        assert any(
            row["task"] in line and f"{row['p_value']:.4f}" in line for line in out.splitlines()
        ), out
    across = [line for line in out.splitlines() if " (3 tasks), p = " in line]
    assert len(across) == 2  # one across-task t-test per model
    # `make demo`'s figures: in its sweep run's folder, which reports/demo/latest names
    latest = store["root"] / "reports" / "demo" / "latest"
    assert latest.resolve().parent == (store["root"] / "reports" / "demo").resolve()
    figures = sorted(p.name for p in latest.glob("figure_*.png"))
    assert figures == ["figure_demo_local_gemma3_270m.png", "figure_demo_local_smollm2.png"]
    # and the demo's output names that folder, not reports/demo/ itself
    written = f"reports written to reports/demo/{latest.resolve().name}/ (comparisons.csv"
    assert sum(line.startswith(written) for line in out.splitlines()) == 1, out


def test_analysis_notebook_rebuilds_the_table(store: dict[str, Any]) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(REPO / "notebooks" / "analysis.ipynb", as_version=4)
    figure = store["root"] / "notebook_figure.png"
    env = {**store["env"], "WORKBENCH_SWEEP": "reference_vs_description",
           "WORKBENCH_NOTEBOOK_FIGURE": str(figure)}  # fmt: skip
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # the kernel inherits this environment (no stray MLFLOW_TRACKING_URI)
    try:
        NotebookClient(
            nb, timeout=300, kernel_name="python3",
            resources={"metadata": {"path": str(store["root"])}},
        ).execute()  # fmt: skip
    finally:
        os.environ.clear()
        os.environ.update(old)
    outputs = "".join(
        o.get("text", "") + json.dumps(o.get("data", {}))
        for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )  # fmt: skip
    assert "2 trial runs" in outputs and "instruction=reference" in outputs
    assert figure.stat().st_size > 5000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_mlflow_ui_shows_the_runs_in_headless_chromium(store: dict[str, Any]) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's chromium (.ci/run does)")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    port = _free_port()
    ui = subprocess.Popen(
        [sys.executable, "-m", "experiments.cli", "ui", "--port", str(port)],
        env=store["env"], cwd=store["root"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        client = _client(store["root"])
        exp = client.get_experiment_by_name("study/demo")
        children = client.search_runs(
            [exp.experiment_id], filter_string="tags.`workbench.kind` = 'trial'"
        )
        assert len(children) == 12
        base = f"http://127.0.0.1:{port}/#"
        runs = quote(json.dumps([c.info.run_id for c in children]))
        compare = (
            f"{base}/compare-runs?runs={runs}&experiments={quote(json.dumps([exp.experiment_id]))}"
        )
        flags = [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={store['root'] / 'chromium'}", "--virtual-time-budget=30000",
            "--window-size=1400,900",
        ]  # fmt: skip

        def page(url: str, ready: str) -> str:
            text = ""
            for _ in range(3):  # the UI's first page load can outrun its API: retry
                dom = subprocess.run(
                    [chromium, *flags, "--dump-dom", url],
                    capture_output=True, text=True, timeout=180,
                ).stdout  # fmt: skip
                text = re.sub(r"<[^>]+>", "", dom)
                if ready in text:
                    break
            return text

        text = page(f"{base}/experiments/{exp.experiment_id}/runs", "matching runs")
        assert "study/demo" in text
        assert "13 matching runs" in text  # the demo's parent and its twelve trials
        text = page(compare, "Comparing 12 Runs")
        assert "Comparing 12 Runs" in text
        for c in children:  # every trial of the demo, by name, with its score
            assert c.info.run_name in text
        assert "score" in text and "local/gemma3-270m" in text
        # one task's variants among themselves (issue 34): their axes as params, their
        # hearsay/... metrics, no decoding JSON, no other task's metrics
        hearsay = [c.info.run_id for c in children if c.data.params["task"] == "hearsay"]
        experiments = quote(json.dumps([exp.experiment_id]))
        one_task = (
            f"{base}/compare-runs?runs={quote(json.dumps(hearsay))}&experiments={experiments}"
        )
        text = page(one_task, "Comparing 4 Runs")
        assert "Comparing 4 Runs" in text
        assert "hearsay/score" in text and "hearsay/balanced_accuracy" in text
        assert "decoding.loglik" in text and "instruction" in text
        assert "abercrombie/" not in text and "continuations" not in text
        # the chart view of one model's trials: one section of charts per task (the view
        # takes the URL's filter only with an order; it draws the charts on screen only)
        wanted = "params.model = 'local/gemma3-270m' and tags.`workbench.kind` = 'trial'"
        query = f"searchFilter={quote(wanted, safe='')}&orderByKey=params.%60task%60"
        charts = f"{base}/experiments/{exp.experiment_id}/runs?compareRunsMode=CHART&{query}"
        charts += "&orderByAsc=true"
        flags[-1] = "--window-size=2000,1500"
        text = page(charts, "personal_jurisdiction/score")
        for task in ("hearsay", "abercrombie", "personal_jurisdiction"):
            assert f"{task}/score" in text and f"{task}/balanced_accuracy" in text, task
    finally:
        ui.terminate()  # `workbench ui` takes its MLflow server's process group down with it
        try:
            ui.wait(timeout=30)
        except subprocess.TimeoutExpired:
            ui.kill()
        time.sleep(1)
        leftovers = subprocess.run(
            ["pgrep", "-f", f"--port {port}"], capture_output=True, text=True
        ).stdout.split()
        for pid in leftovers:
            os.kill(int(pid), signal.SIGKILL)
        assert not leftovers, "the MLflow UI left processes behind"
