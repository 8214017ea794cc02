"""Planning a sweep on a huge split: 20k and 100k rows, against the old quadratic algorithm.

Planning (`experiments.sweeps.plan.plan_tasks`) finds the rows every variant of a task may be
evaluated on. It once rebuilt a set of one variant's row ids for every row of another
(issue 19, defect 6): a 20k-row split took 17 s and 100k never finished a `--dry-run`. The
target: a 100k-row split plans a `--limit 10` sweep in under 2 s.

This builds a LegalBench-layout copy of hearsay whose test split has N synthetic rows (unique
texts, balanced answers), and times `plan_tasks` from a fresh catalog (reading the TSV
included) for a 4-variant spec (instruction x seed of two demonstrations drawn from
train+test, so the variants keep different rows) at 20k and 100k rows, then the same with
the old intersection swapped in at 20k (the rest of planning as now), and prints the ratio.
Wall and CPU time: on a busy machine the CPU time is the figure to compare with the target.
With `--cli` it also times `workbench sweep --dry-run --limit 10` end to end (process start,
imports, planning and the token estimate) at 100k.

    LEGALBENCH_DIR=/path/to/legalbench .venv/bin/python benchmarks/planning.py [--cli]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from experiments.sweeps import plan
from experiments.sweeps.spec import SweepSpec, load_spec
from promptlib import Catalog, LocalSource

TARGET = 2.0  # seconds, for 100k rows
SPEC = """\
name: planning_benchmark
tasks: [hearsay]
fixed:
  demos: 2
  pool: train+test
axes:
  instruction: [reference, description]
  seed: [0, 1]
comparisons: all_pairs
"""


def make_data(root: Path, lb_dir: Path, n: int) -> Path:
    """A LegalBench layout holding hearsay with an n-row test split (unique rows)."""
    task = root / "tasks" / "hearsay"
    shutil.copytree(lb_dir / "tasks" / "hearsay", task)
    for f in task.iterdir():
        f.chmod(0o644)
    lines = ["index\tanswer\ttext\tslice"]
    for i in range(n):
        answer = "Yes" if i % 2 else "No"
        lines.append(
            f"{i}\t{answer}\tOn the issue of case {i}, the witness said item {i}.\tsynthetic"
        )
    (task / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def old_common_rows(kept_ids: Sequence[Sequence[str]]) -> list[str]:
    """The algorithm at 749198c: a fresh set of one variant's ids for every row tested."""
    common: list[str] | None = None
    for ids in kept_ids:
        ids = list(ids)
        common = ids if common is None else [i for i in common if i in set(ids)]
    return common or []


def plan_seconds(data: Path, spec: SweepSpec) -> tuple[float, float]:
    """Wall and CPU time of planning from a fresh catalog (so the TSV is read)."""
    wall, cpu = time.perf_counter(), time.process_time()
    (planned,) = plan.plan_tasks(spec, Catalog(LocalSource(data)), limit=10)
    assert len(planned.rows) == 10
    return time.perf_counter() - wall, time.process_time() - cpu


def cli_dry_run_seconds(data: Path, spec_path: Path, workdir: Path) -> float:
    env = {**os.environ, "LEGALBENCH_DIR": str(data), "WORKBENCH_NO_TRACK": "1"}
    env["WORKBENCH_CACHE_DIR"] = str(workdir / "cache")
    cmd = [sys.executable, "-m", "experiments.cli", "sweep", str(spec_path)]
    cmd += ["--limit", "10", "--dry-run"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, cwd=workdir, capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"sweep --dry-run failed ({r.returncode}): {r.stderr.strip()}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", action="store_true", help="also time `sweep --dry-run` at 100k")
    args = ap.parse_args()
    lb = os.environ.get("LEGALBENCH_DIR")
    if not lb:
        raise SystemExit("set LEGALBENCH_DIR to a LegalBench checkout (hearsay is copied)")
    with tempfile.TemporaryDirectory(prefix="planning-") as tmp:
        work = Path(tmp)
        spec_path = work / "spec.yaml"
        spec_path.write_text(SPEC)
        spec = load_spec(spec_path)
        data = {n: make_data(work / f"lb{n}", Path(lb), n) for n in (20_000, 100_000)}
        new = {n: plan_seconds(d, spec) for n, d in data.items()}
        saved = plan._common_rows
        plan._common_rows = old_common_rows
        try:
            old20 = plan_seconds(data[20_000], spec)
        finally:
            plan._common_rows = saved
        print(f"variants: {len(spec.variants)}; --limit 10; planning from a fresh catalog")
        print(f"{'rows':>8} {'new wall':>9} {'new cpu':>8} {'old wall':>9} {'old cpu':>8} ratio")
        (w20, c20), (w100, c100) = new[20_000], new[100_000]
        print(f"{20_000:>8} {w20:>9.2f} {c20:>8.2f} {old20[0]:>9.2f} {old20[1]:>8.2f} ", end="")
        print(f"{old20[1] / c20:.0f}x (cpu)")
        print(f"{100_000:>8} {w100:>9.2f} {c100:>8.2f} {'-':>9} {'-':>8} (old: quadratic)")
        verdict = "met" if c100 < TARGET else "MISSED"
        print(f"100k rows: {c100:.2f} s CPU ({w100:.2f} s wall), target < {TARGET:g} s: {verdict}")
        if args.cli:
            took = cli_dry_run_seconds(data[100_000], spec_path, work)
            print(f"workbench sweep --dry-run --limit 10 on 100k rows, end to end: {took:.2f} s")


if __name__ == "__main__":
    main()
