"""llama.cpp's OpenMP wait setting: the bare loop under each, quiet and with busy processes.

The workbench sets GOMP_SPINCOUNT=200 unless the user set a wait variable
(`experiments/llm/llama.py`). This prints, side by side in one run, the bare loop
(`benchmarks/bare_llama.py`, the overhead benchmark's baseline, over the same prompts `workbench
run` sends) under libgomp's default, OMP_WAIT_POLICY=PASSIVE and each given spin count:
seconds by round, and each setting's summed time over the fastest setting's, quiet and loaded.
A setting for every machine is one whose worse ratio of the two is smallest. Settings run in
reverse order every other round; a run past `--timeout` is stopped and counted as the timeout
(marked "+": libgomp's default spin under load can run away).

    python benchmarks/wait_settings.py [--n 60] [--rounds 2] [--busy 2] [--spins 200,5000,30000]
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

from overhead import WAIT_VARS, busy, trial_prompts

HERE = Path(__file__).resolve().parent


def run_once(cmd: list[str], env: dict[str, str], timeout: float) -> tuple[float, bool]:
    """Wall seconds, and whether the run finished before `timeout` (else the timeout)."""
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return timeout, False
    if r.returncode != 0:
        sys.exit(f"bare loop failed ({r.returncode}) under {env}: {r.stderr[-2000:]}")
    return time.perf_counter() - t0, True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--busy", type=int, default=2)
    ap.add_argument("--spins", default="200,5000,30000", help="GOMP_SPINCOUNT values")
    ap.add_argument("--task", default="cuad_audit_rights")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds a run may take")
    args = ap.parse_args()

    prompts, max_tokens = trial_prompts(args.task, args.n)
    tmp = Path(tempfile.mkdtemp(prefix="wb-wait-"))
    (tmp / "prompts.json").write_text(json.dumps(prompts))
    cmd = [sys.executable, str(HERE / "bare_llama.py"), str(tmp / "prompts.json")]
    cmd.append(str(max_tokens))
    base = {k: v for k, v in os.environ.items() if k not in WAIT_VARS}
    settings: dict[str, dict[str, str]] = {"default": {}, "PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"}}
    settings |= {f"spin {s}": {"GOMP_SPINCOUNT": s} for s in args.spins.split(",")}
    times: dict[str, dict[str, list[tuple[float, bool]]]] = {
        c: {k: [] for k in settings} for c in ("quiet", "loaded")
    }
    for i in range(args.rounds):
        order = list(settings)[:: -1 if i % 2 else 1]
        for name in order:
            times["quiet"][name].append(run_once(cmd, base | settings[name], args.timeout))
        hogs = busy(args.busy)
        try:
            for name in order:
                times["loaded"][name].append(run_once(cmd, base | settings[name], args.timeout))
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        print(f"round {i + 1} done", flush=True)

    sums = {c: {k: sum(t for t, _ in v) for k, v in side.items()} for c, side in times.items()}
    best = {c: min(s.values()) for c, s in sums.items()}
    print(
        f"bare loop, {args.n} {args.task} prompts, {args.rounds} round(s), "
        f"{args.busy} busy processes for 'loaded'; seconds by round ('+': stopped at "
        f"{args.timeout:.0f} s), and summed time / the fastest setting's:"
    )
    worst: dict[str, float] = {}
    for name in settings:
        cells = []
        for c in ("quiet", "loaded"):
            each = " ".join(f"{t:.2f}{'' if ok else '+'}" for t, ok in times[c][name])
            cells.append(f"{c} {each} ({sums[c][name] / best[c]:.3f})")
        worst[name] = max(sums[c][name] / best[c] for c in sums)
        print(f"  {name:>12}: " + " | ".join(cells) + f" | worse of the two {worst[name]:.3f}")
    pick = min(worst, key=lambda k: worst[k])
    print(f"smallest worse ratio: {pick} ({worst[pick]:.3f})")


if __name__ == "__main__":
    main()
