"""Overhead of a fresh workbench trial vs a bare llama.cpp loop, whole process vs process.

Both run the same 300 rendered cuad_audit_rights prompts through the same GGUF with the same
decoding. The workbench run uses an empty cache, so every prompt is a model call. Runs
alternate (bare, workbench, bare, workbench, ...) so machine noise hits both alike.

    python benchmarks/overhead.py [--rounds 2] [--n 300]
Goal: ratio <= 1.05.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from experiments.runner import TrialSpec, decoding_for, select_rows
from promptlib import Catalog, compile_prompt, default_source, evaluation_rows, parse_spec

HERE = Path(__file__).resolve().parent


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, r.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--task", default="cuad_audit_rights")
    args = ap.parse_args()

    catalog = Catalog(default_source())
    task = catalog.task(args.task)
    spec = TrialSpec(
        task=args.task, variant=parse_spec("base"), model="local/smollm2", limit=args.n
    )
    compiled = compile_prompt(spec.variant, task, "test")
    rows = select_rows(evaluation_rows(compiled.variant, task, "test")[0], args.n, spec.seed)
    prompts = [compiled.render(r) for r in rows]
    max_tokens = decoding_for(task.spec, "completion").max_tokens
    tmp = Path(tempfile.mkdtemp(prefix="wb-bench-"))
    (tmp / "prompts.json").write_text(json.dumps(prompts))

    bare_cmd = [
        sys.executable,
        str(HERE / "bare_llama.py"),
        str(tmp / "prompts.json"),
        str(max_tokens),
    ]
    wb_cmd = [
        sys.executable,
        "-m",
        "experiments.cli",
        "run",
        args.task,
        "--limit",
        str(args.n),
        "--json",
    ]
    bare_times, wb_times = [], []
    for i in range(args.rounds):
        env = {
            **os.environ,
            "WORKBENCH_CACHE_DIR": str(tmp / f"cache{i}"),
            "WORKBENCH_RUNS_DIR": str(tmp / "runs"),
            # the workbench defaults this in load_local; the bare loop must wait alike
            "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
        }
        t, _ = timed(bare_cmd, env)
        bare_times.append(t)
        t, out = timed(wb_cmd, env)
        wb_times.append(t)
        summary = json.loads(out)
        assert summary["model_calls"] == args.n, summary
        print(
            f"round {i + 1}: bare {bare_times[-1]:.2f}s  workbench {wb_times[-1]:.2f}s  "
            f"ratio {wb_times[-1] / bare_times[-1]:.3f}",
            flush=True,
        )
    ratio = sum(wb_times) / sum(bare_times)
    print(
        f"overhead: {args.n} prompts, {args.rounds} round(s): workbench/bare = {ratio:.3f} "
        f"(goal <= 1.05) {'OK' if ratio <= 1.05 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
