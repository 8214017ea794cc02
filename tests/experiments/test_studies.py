"""The paper's three studies on the embedded model, tracked in MLflow, then read back: by
`workbench report`, by the analysis notebook (nbclient), and in the MLflow UI (Chromium)."""

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

import pytest

from tests.conftest import workbench_env

pytestmark = [pytest.mark.model, pytest.mark.data, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
STUDIES = {
    "reference_vs_description": ("hearsay", "instruction"),
    "plain_vs_technical": ("proa", "register"),
    "demo_resampling": ("overruling", "seed"),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, lb_dir: Path) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("studies")
    env = workbench_env(root, lb_dir, "study")
    outputs = {}
    for study, (task, _) in STUDIES.items():
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "experiments.cli",
                "sweep",
                str(REPO / "ablations" / f"{study}.yaml"),
                "--model",
                "local/smollm2",
                "--tasks",
                task,
                "--limit",
                "40",
                "--json",
            ],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        outputs[study] = json.loads(r.stdout)
    return {"root": root, "env": env, "outputs": outputs}


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
    assert all(c.data.params["n_rows"] == "40" for c in children)
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
        exp = _client(store["root"]).get_experiment_by_name("study/demo_resampling")
        url = f"http://127.0.0.1:{port}/#/experiments/{exp.experiment_id}/runs"
        flags = [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={store['root'] / 'chromium'}", "--virtual-time-budget=30000",
            "--window-size=1400,900",
        ]  # fmt: skip
        text = ""
        for _ in range(3):  # the UI's first page load can outrun its API: retry
            dom = subprocess.run(
                [chromium, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=180
            ).stdout
            text = re.sub(r"<[^>]+>", "", dom)
            if "matching runs" in text:
                break
        assert "demo_resampling" in text
        assert "6 matching runs" in text  # the parent and its five draws
        shot = store["root"] / "mlflow_ui.png"
        subprocess.run(
            [chromium, *flags, f"--screenshot={shot}", url], capture_output=True, timeout=180
        )
        assert shot.stat().st_size > 20_000
        keep = REPO / "reports" / "mlflow_ui_screenshot.png"
        keep.parent.mkdir(exist_ok=True)
        shutil.copy(shot, keep)
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
