"""A cached rerun vs the first run of the same trial, whole process vs whole process.

    python benchmarks/cached_rerun.py [--task hearsay]
Goal: rerun >= 50x faster, with 0 model calls.
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
    env = {**os.environ, "WORKBENCH_CACHE_DIR": f"{tmp}/cache", "WORKBENCH_RUNS_DIR": f"{tmp}/runs"}
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
    for _ in range(2):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        times.append(time.perf_counter() - t0)
        summaries.append(json.loads(out))
    first, rerun = summaries
    ratio = times[0] / times[1]
    print(f"first run: {times[0]:.2f}s, {first['model_calls']} model calls, n={first['n']}")
    print(
        f"rerun:     {times[1]:.2f}s, {rerun['model_calls']} model calls, "
        f"{rerun['cache_hits']} cache hits"
    )
    print(
        f"cached rerun speed-up: {ratio:.1f}x (goal >= 50x) "
        f"{'OK' if ratio >= 50 and rerun['model_calls'] == 0 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
