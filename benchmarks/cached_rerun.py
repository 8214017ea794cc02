"""A cached rerun vs the first run of the same trial, whole process vs whole process, both
tracked in a fresh MLflow store (a rerun that changes nothing reads the SQLite store directly
and never opens MLflow: `experiments.tracking.reusable_run`).

    python benchmarks/cached_rerun.py [--task hearsay]
Goal: rerun <= 0.5 s of wall time, tracking included, with 0 model calls.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="hearsay")
    ap.add_argument("--model", default="local/smollm2")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="wb-bench-")
    with open(f"{tmp}/mlflow.yaml", "w") as f:
        f.write(f"tracking_uri: sqlite:///{tmp}/mlflow.db\nartifact_location: {tmp}/artifacts\n")
    dropped = ("MLFLOW_TRACKING_URI", "WORKBENCH_NO_TRACK", "WORKBENCH_MLFLOW_CONFIG")
    env = {
        **{k: v for k, v in os.environ.items() if k not in dropped},
        "WORKBENCH_CACHE_DIR": f"{tmp}/cache",
        "WORKBENCH_RUNS_DIR": f"{tmp}/runs",
        "WORKBENCH_MLFLOW_CONFIG": f"{tmp}/mlflow.yaml",
    }
    cmd = [
        sys.executable,
        "-m",
        "experiments.cli",
        "run",
        args.task,
        "--model",
        args.model,
        "--json",
    ]
    times, summaries = [], []
    for _ in range(4):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        times.append(time.perf_counter() - t0)
        summaries.append(json.loads(out))
    first, *reruns = summaries
    worst = max(times[1:])
    print(f"first run: {times[0]:.2f}s, {first['model_calls']} model calls, n={first['n']}")
    for t, rerun in zip(times[1:], reruns, strict=True):
        print(
            f"rerun:     {t:.2f}s, {rerun['model_calls']} model calls, "
            f"{rerun['cache_hits']} cache hits, MLflow run reused: {rerun['mlflow_reused']}"
        )
    # the truth from MLflow itself, not the fast path's own flag: one active run, the first's
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp}/mlflow.db")
    exp = client.get_experiment_by_name(first["mlflow_experiment"])
    active = [r.info.run_id for r in client.search_runs([exp.experiment_id])] if exp else []
    same = all(r["mlflow_run_id"] == first["mlflow_run_id"] for r in reruns)
    print(f"MLflow holds {len(active)} active run(s); every rerun names the first run: {same}")
    ok = worst <= 0.5 and same and active == [first["mlflow_run_id"]]
    ok = ok and all(r["model_calls"] == 0 and r["mlflow_reused"] for r in reruns)
    print(
        f"cached rerun: worst {worst:.2f} s wall, tracking included (goal <= 0.5 s), "
        f"{times[0] / worst:.1f}x faster than the first run {'OK' if ok else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
