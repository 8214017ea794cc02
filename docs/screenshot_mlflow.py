"""Screenshot the MLflow UI comparing a sweep's trial runs, in headless Chromium.

Used for the docs' picture of `make demo` (docs/images/mlflow-ui.png). It serves the store named
in mlflow.yaml (or $WORKBENCH_MLFLOW_CONFIG) with `workbench ui` on a free loopback port,
opens the compare view of the sweep's latest parent run's child runs, and writes a PNG. The
MLflow UI is a JavaScript app: Chromium gets a virtual-time budget to load it, and a PNG too
small to hold a table (a spinner) is retried, then refused.

    .venv/bin/python docs/screenshot_mlflow.py --sweep demo --out docs/images/mlflow-ui.png
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
import urllib.parse
import urllib.request
from pathlib import Path

MIN_BYTES = 60_000  # a loaded compare view with tables; a spinner page is a few kB


HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def compare_url(base: str, sweep: str, view: str) -> str:
    """The UI address of the sweep's trial runs: the compare view or the runs table."""
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
    ids = sorted(
        (r for r in children), key=lambda r: (r.data.params.get("model", ""), r.info.run_name)
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
    ap.add_argument("--view", choices=("compare", "runs"), default="compare")
    ap.add_argument("--size", default="1600,1200", help="window size W,H in pixels")
    ap.add_argument("--budget", type=int, default=40_000, help="virtual time budget (ms)")
    args = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("error: chromium not found (apt-get install chromium)", file=sys.stderr)
        return 2
    port = free_port()
    base = f"http://{HOST}:{port}"
    ui = subprocess.Popen(
        [sys.executable, "-m", "experiments.cli", "ui", "--port", str(port), "--host", HOST],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.time() + 300
        while True:
            try:
                urllib.request.urlopen(base + "/", timeout=2)
                break
            except OSError:
                if time.time() > deadline or ui.poll() is not None:
                    print("error: the MLflow UI did not come up", file=sys.stderr)
                    return 1
                time.sleep(0.5)
        url = compare_url(base, args.sweep, args.view)
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
