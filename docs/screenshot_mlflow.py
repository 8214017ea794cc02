"""Screenshot the MLflow UI comparing a sweep's trial runs, in headless Chromium.

Used for the docs' picture of `make demo` (docs/images/mlflow-ui.png). It serves the store named
in mlflow.yaml (or $WORKBENCH_MLFLOW_CONFIG) with `workbench ui` on a free loopback port,
opens a view of the sweep's latest parent run's child runs, and writes a PNG:

- `--view compare --task hearsay`: the compare view of one task's trial runs (its variants on
  each model side by side: their axes as params, the `hearsay/...` metrics); without
  `--task`, every trial run of the sweep;
- `--view charts`: the experiment's chart view, one section of charts per task (the trial
  runs' `<task>/...` metrics);
- `--view runs`: the experiment's runs table.

The MLflow UI is a JavaScript app: Chromium gets a virtual-time budget to load it, and a PNG
too small to hold a table (a spinner) is retried, then refused.

    .venv/bin/python docs/screenshot_mlflow.py --sweep demo --task hearsay \
        --out docs/images/mlflow-ui.png
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

MIN_BYTES = 60_000  # a loaded compare view with tables; a spinner page is a few kB


def ui_host() -> str:
    """A loopback address for the UI: 127.0.0.2 where the OS has it (Linux), as MLflow 3.17's
    Assistant panel opens itself on 'localhost' and '127.0.0.1' and covers a third of the
    page; else 127.0.0.1."""
    for host in ("127.0.0.2", "127.0.0.1"):
        with socket.socket() as s:
            try:
                s.bind((host, 0))
            except OSError:
                continue
            return host
    return "127.0.0.1"


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def compare_url(
    base: str, sweep: str, view: str, task: str | None = None, model: str | None = None
) -> str:
    """The UI address of the sweep's trial runs: the compare view (of one task's runs when
    `task` is given, one model's when `model` is), the experiment's chart view of its trial
    runs (one model's: the view draws only the first 10 runs of its table), or its runs
    table."""
    from experiments.tracking import Tracker

    tracker = Tracker()
    info, _ = tracker.sweep_report(sweep)
    parent = tracker.client.get_run(info["run_id"])
    exp = parent.info.experiment_id
    if view == "runs":
        return f"{base}/#/experiments/{exp}/runs"
    children = tracker.client.search_runs(
        [exp], filter_string=f"tags.`mlflow.parentRunId` = '{info['run_id']}'"
    )
    if model is not None:
        models = sorted({r.data.params.get("model", "?") for r in children})
        children = [r for r in children if r.data.params.get("model") == model]
        if not children:
            raise SystemExit(f"error: sweep {sweep} has no trial run of model {model!r}: {models}")
    if view == "charts":
        # the trial runs alone (no parent to fold them under), sorted by task (the view
        # takes the URL's filter only with an order)
        wanted = f"tags.`mlflow.parentRunId` = '{info['run_id']}'"
        if model is not None:
            wanted += f" and params.model = '{model}'"
        query = urllib.parse.urlencode(
            {"compareRunsMode": "CHART", "searchFilter": wanted, "orderByKey": "params.`task`",
             "orderByAsc": "true"}, quote_via=urllib.parse.quote,
        )  # fmt: skip
        return f"{base}/#/experiments/{exp}/runs?{query}"
    if task is not None:
        tasks = sorted({r.data.params.get("task", "?") for r in children})
        children = [r for r in children if r.data.params.get("task") == task]
        if not children:
            raise SystemExit(f"error: sweep {sweep} has no trial run of task {task!r}: {tasks}")
    ids = sorted(
        children,
        key=lambda r: (r.data.params.get("model", ""), r.data.params.get("variant", "")),
    )
    runs = urllib.parse.quote(json.dumps([r.info.run_id for r in ids]))
    return f"{base}/#/compare-runs?runs={runs}&experiments={urllib.parse.quote(json.dumps([exp]))}"


def shoot(chromium: str, url: str, out: Path, size: str, budget_ms: int) -> None:
    with tempfile.TemporaryDirectory() as profile:
        flags = [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
            f"--window-size={size}", "--hide-scrollbars", f"--screenshot={out}",
        ]  # fmt: skip
        subprocess.run([chromium, *flags, url], capture_output=True, timeout=300, check=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", default="demo", help="sweep name (its MLflow experiment)")
    ap.add_argument("--out", type=Path, default=Path("docs/images/mlflow-ui.png"))
    ap.add_argument("--view", choices=("compare", "charts", "runs"), default="compare")
    ap.add_argument("--task", help="compare only this task's trial runs (--view compare)")
    ap.add_argument("--model", help="only this model's trial runs (e.g. local/gemma3-270m)")
    ap.add_argument("--size", default="1600,1200", help="window size W,H in pixels")
    ap.add_argument("--budget", type=int, default=40_000, help="virtual time budget (ms)")
    args = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("error: chromium not found (apt-get install chromium)", file=sys.stderr)
        return 2
    host = ui_host()
    port = free_port(host)
    base = f"http://{host}:{port}"
    # MLflow's security middleware admits only localhost names unless told this one
    env = os.environ | {
        "MLFLOW_SERVER_ALLOWED_HOSTS": f"{host}:{port},{host}",
        "MLFLOW_SERVER_CORS_ALLOWED_ORIGINS": base,
    }
    ui = subprocess.Popen(
        [sys.executable, "-m", "experiments.cli", "ui", "--port", str(port), "--host", host],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.time() + 300
        while True:
            try:
                urllib.request.urlopen(base + "/", timeout=2)
                break
            except urllib.error.HTTPError as e:  # up, and refusing: no point in waiting
                print(f"error: the MLflow UI answered {e.code} at {base}/", file=sys.stderr)
                return 1
            except OSError:
                if time.time() > deadline or ui.poll() is not None:
                    print("error: the MLflow UI did not come up", file=sys.stderr)
                    return 1
                time.sleep(0.5)
        url = compare_url(base, args.sweep, args.view, args.task, args.model)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(".tmp.png")
        for _ in range(3):  # the app's first load can outrun its API: retry
            tmp.unlink(missing_ok=True)
            shoot(chromium, url, tmp, args.size, args.budget)
            if tmp.is_file() and tmp.stat().st_size >= MIN_BYTES:
                os.replace(tmp, args.out)
                print(f"{args.out}: {url}")
                return 0
        tmp.unlink(missing_ok=True)
        print(f"error: the screenshot of {url} stayed nearly empty", file=sys.stderr)
        return 1
    finally:
        ui.send_signal(signal.SIGTERM)  # `workbench ui` takes its server's group down with it
        try:
            ui.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(ui.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
