"""What start-up costs: each heavy import and the CLI's help, measured two ways.

- `python -X importtime -c "import X"`: the interpreter's own count of the import (the
  cumulative microseconds of X's line), the import alone;
- whole process: `python -c "import X"` (or the command) from start to exit, wall time and
  CPU time (user + system) of the child, so interpreter start-up is included as a user sees it.

Each figure is the median of `--repeat` runs (a loaded machine stretches wall time; CPU time
moves less). Prints a markdown table.

    python benchmarks/startup.py [--repeat 5] [--root CHECKOUT]
Goal: `workbench --help` <= 0.3 s whole process.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from importlib.util import find_spec
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMPORTS = (
    "experiments.cli.app",
    "numpy",
    "llama_cpp",
    "mlflow",
    "datasets",
    "dspy",
    "optuna",
    "litellm",
)
"""Modules measured: the CLI's own, then what a command may need, cheapest first."""


def _workbench() -> list[str]:
    """The `workbench` script beside this interpreter, else `python -m experiments.cli`."""
    script = Path(sys.executable).parent / "workbench"
    if script.is_file():
        return [str(script)]
    found = shutil.which("workbench")
    return [found] if found else [sys.executable, "-m", "experiments.cli"]


def _timed(cmd: list[str], env: dict[str, str], root: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _importtime(module: str, env: dict[str, str], root: Path) -> float | None:
    """Milliseconds `-X importtime` gives `module` (cumulative), or None if it is absent."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        return None
    pattern = re.compile(r"import time:\s+\d+ \|\s+(\d+) \| " + re.escape(module) + r"\s*$")
    found = [int(m.group(1)) for m in map(pattern.search, r.stderr.splitlines()) if m]
    return found[-1] / 1000 if found else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure")
    args = ap.parse_args()
    root = args.root.resolve()
    env = dict(os.environ, PYTHONPATH=str(root))
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price-map download at import
    rows: list[tuple[str, float | None, list[tuple[float, float]]]] = []
    py = sys.executable
    rows.append(("`python -c pass` (the interpreter)", None, []))
    commands = [[py, "-c", "pass"]]
    for argv in (["--help"], ["run", "--help"]):
        rows.append((f"`workbench {' '.join(argv)}`", None, []))
        commands.append([*_workbench(), *argv])
    for module in IMPORTS:
        if find_spec(module.split(".")[0]) is None:
            print(f"{module}: not installed, left out", file=sys.stderr)
            continue
        counted = [_importtime(module, env, root) for _ in range(args.repeat)]
        known = [m for m in counted if m is not None]
        rows.append((f"`import {module}`", statistics.median(known) if known else None, []))
        commands.append([py, "-c", f"import {module}"])
    for _ in range(args.repeat):  # interleaved, so machine noise hits every row alike
        for (_, _, times), cmd in zip(rows, commands, strict=True):
            times.append(_timed(cmd, env, root))
    print(f"start-up, median of {args.repeat} ({os.cpu_count()} CPUs, {sys.version.split()[0]})")
    print()
    print("| what | `-X importtime` (ms) | whole process: wall (s) | CPU (s) |")
    print("|---|---:|---:|---:|")
    for name, ms_, times in rows:
        wall = statistics.median(t[0] for t in times)
        cpu = statistics.median(t[1] for t in times)
        shown = "-" if ms_ is None else f"{ms_:.0f}"
        print(f"| {name} | {shown} | {wall:.2f} | {cpu:.2f} |")
    print()
    print("goal: `workbench --help` <= 0.3 s whole process")


if __name__ == "__main__":
    main()
