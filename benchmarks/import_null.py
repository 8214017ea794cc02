"""Size of `workbench import`'s paired test under the null, on LegalBench's repeated texts.

The test splits of cuad_audit_rights (1,215 rows, 775 distinct texts) and overruling (2,385
rows, 1,499 texts) repeat texts under several row indices. A deterministic harness gives each
distinct text one answer per variant, so rows are not independent: an import that takes rows
as its units rejects a true null far above alpha (#29). Each simulation here is a jsonl file of
two exchangeable variants, as such a harness would write it: per distinct text and variant one
draw (right with p = 0.9 on half the texts, 0.3 on the other half, the same p in both variants,
as `benchmarks/cluster_size.py`), copied to every row with that text; each line has the row's
real `index`, `correct`, `prediction` and `answer`. The file is read and compared by the
functions `workbench import jsonl` runs:

- library path (every simulation): `run.read_all` reads the file, `arms.to_records` pairs the
  rows and clusters them (`experiments.imports.identity`: here by the task's texts, read from
  the catalog), and the comparison's paired permutation test (`analysis.compare.pair`, as
  `verdict` calls it through the sweep's `compare`, with its seed 0, without the interval and
  MDE it adds). The p-value is checked equal to the whole `verdict`'s on the first simulations;
- "rows": the same files with rows as units (`to_records` without the task's texts: the
  clustering every import had before #29), to show the simulation detects the bug;
- CLI path (the first `--cli-sims` of the same files): `workbench import jsonl FILE --no-track
  --json` in-process (typer's runner), each p-value checked equal to the library path's, and
  once as a subprocess (the installed `workbench` command).

Each with and without `--rescore` (balanced accuracy of the generations, or the source's 0/1
correctness). Size = share of p <= alpha; s.e. = sqrt(alpha (1 - alpha) / sims); a size passes
when <= alpha + 2 s.e.

    LEGALBENCH_DIR=../shared/legalbench .venv/bin/python benchmarks/import_null.py \\
        [--sims 1000] [--cli-sims 100] [--tasks cuad_audit_rights,overruling]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments.analysis import compare
from experiments.analysis.align import row_order
from experiments.imports.arms import Arms, to_records
from experiments.imports.identity import TaskTexts, catalog_texts, shown_columns
from experiments.imports.records import ReadOptions
from experiments.imports.run import read_all
from experiments.imports.verdict import cluster_rule, verdict
from promptlib import Catalog, default_source

TASKS = ("cuad_audit_rights", "overruling")
EASY, HARD = 0.9, 0.3  # per-text accuracy, the same in both variants (the null)
ALPHAS = (0.05, 0.01)
R = 1000  # permutations per test (p = (b + 1) / (R + 1))
CHECKED = 3  # simulations whose p-value is checked equal to the whole verdict's


@dataclass(frozen=True)
class NullTask:
    """A task's real test rows and which distinct text each row shows."""

    name: str
    indices: list[str]
    answers: list[str]
    other: list[str]  # the other label: a wrong answer
    text: np.ndarray  # distinct-text id per row
    p_text: np.ndarray  # per-text accuracy (both variants)

    @property
    def n_texts(self) -> int:
        return len(self.p_text)


def null_task(catalog: Catalog, name: str) -> NullTask:
    task = catalog.task(name)
    rows = task.rows("test")
    columns = shown_columns(task.files.prompt_files(), task.prompt, rows)
    ids: dict[tuple[str, ...], int] = {}
    text = np.array([ids.setdefault(tuple(r[c] for c in columns), len(ids)) for r in rows])
    labels = sorted({r["answer"] for r in rows})
    if len(labels) != 2:
        raise SystemExit(f"{name}: a binary task is needed (labels {labels})")
    answers = [r["answer"] for r in rows]
    # half the distinct texts easy, half hard: a fixed split per task
    p_text = np.where(np.random.default_rng(1).random(len(ids)) < 0.5, EASY, HARD)
    return NullTask(name, [r["index"] for r in rows], answers,
                    [next(x for x in labels if x != a) for a in answers], text, p_text)  # fmt: skip


def null_lines(task: NullTask, rng: np.random.Generator) -> list[dict[str, Any]]:
    """Two exchangeable variants: one draw per (variant, distinct text), on all its rows."""
    lines = []
    for variant in ("A", "B"):
        hit = rng.random(task.n_texts) < task.p_text
        for i, t in enumerate(task.text.tolist()):
            right = bool(hit[t])
            lines.append({
                "row": task.indices[i], "variant": variant, "model": "deterministic",
                "task": task.name, "correct": int(right), "answer": task.answers[i],
                "prediction": task.answers[i] if right else task.other[i],
            })  # fmt: skip
    return lines


def write_jsonl(path: Path, lines: Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def paired_p(arms: Arms, seed: int = 0) -> tuple[float, int]:
    """The import's paired test as `verdict` runs it (its records in name order, its cluster
    rule, the sweep comparison's arguments and seed), without the interval and MDE: p and
    the number of clusters."""
    records = sorted(arms.records, key=lambda r: row_order(r.variant))
    a, b = records
    row = compare.pair(
        a, b, n_resamples=R, seed=seed, where=f"{a.task} ({a.model})",
        cluster_by=cluster_rule(records), intervals=False, peers=records,
    )  # fmt: skip
    assert row.p_value is not None and row.n_clusters is not None, row.status
    return float(row.p_value), int(row.n_clusters)


def library_run(
    task: NullTask,
    texts: TaskTexts,
    known: Sequence[str],
    sims: int,
    tmp: Path,
    seed: int,
    rescores: Sequence[bool] = (False, True),
) -> dict[tuple[bool, str], list[float]]:
    """p-values per (rescore, units) over `sims` simulated files (units: "clustered", the
    import as it is; "rows", rows as units)."""
    out: dict[tuple[bool, str], list[float]] = {}
    clusters: dict[tuple[bool, str], set[int]] = {}
    t0 = time.perf_counter()
    for sim in range(sims):
        path = write_jsonl(tmp / f"{task.name}.jsonl", null_lines(task, sim_rng(task, seed, sim)))
        trials = read_all("jsonl", [path], ReadOptions())
        for rescore in rescores:
            for units, given in (("clustered", texts), ("rows", None)):
                arms = to_records(trials, rescore=rescore, known_tasks=known, texts=given)
                p, n_clusters = paired_p(arms)
                out.setdefault((rescore, units), []).append(p)
                clusters.setdefault((rescore, units), set()).add(n_clusters)
                if sim < CHECKED and units == "clustered":
                    whole = verdict("null", arms, n_resamples=R)["comparisons"][0]
                    assert whole["p_value"] == p, (task.name, sim, whole["p_value"], p)
        if sim in (0, 9) or (sim + 1) % 100 == 0:
            print(f"  {task.name}: {sim + 1} sims, {time.perf_counter() - t0:.0f} s", flush=True)
    expected = {"clustered": task.n_texts, "rows": len(task.indices)}
    for (rescore, units), seen in clusters.items():
        assert seen == {expected[units]}, (task.name, rescore, units, seen)
    return out


def cli_import(path: Path, rescore: bool) -> dict[str, Any]:
    """`workbench import jsonl PATH --no-track --json` in this process."""
    from typer.testing import CliRunner

    from experiments.cli import app

    args = ["import", "jsonl", str(path), "--no-track", "--json", "--n-resamples", str(R)]
    result = CliRunner().invoke(app, args + (["--rescore"] if rescore else []))
    if result.exit_code != 0:
        raise SystemExit(f"workbench import failed ({result.exit_code}): {result.output}")
    return dict(json.loads(result.stdout))


def sim_rng(task: NullTask, seed: int, sim: int) -> np.random.Generator:
    """The draws of simulation `sim` on `task` (the same file for the library and CLI paths)."""
    return np.random.default_rng((seed, sim, sum(map(ord, task.name))))


def cli_run(
    task: NullTask,
    sims: int,
    tmp: Path,
    seed: int,
    library: dict[tuple[bool, str], list[float]],
) -> dict[tuple[bool, str], list[float]]:
    """p-values of `workbench import jsonl` on the first `sims` simulated files, each equal to
    the library path's on the same file."""
    out: dict[tuple[bool, str], list[float]] = {}
    t0 = time.perf_counter()
    for sim in range(sims):
        path = write_jsonl(
            tmp / f"{task.name}-cli.jsonl", null_lines(task, sim_rng(task, seed, sim))
        )
        for rescore in (False, True):
            (row,) = cli_import(path, rescore)["comparisons"]
            assert row["n_clusters"] == task.n_texts, row
            assert row["clustered_by"] == f"task texts ({task.name})", row["clustered_by"]
            p = float(row["p_value"])
            assert p == library[(rescore, "clustered")][sim], (task.name, sim, rescore, p)
            out.setdefault((rescore, "clustered"), []).append(p)
        if sim in (0, 9) or (sim + 1) % 50 == 0:
            print(f"  {task.name} (CLI): {sim + 1} sims, {time.perf_counter() - t0:.0f} s")
    return out


def subprocess_check(task: NullTask, tmp: Path, seed: int) -> str:
    """The installed `workbench` command on one simulated file: the same p as in-process."""
    path = write_jsonl(
        tmp / f"{task.name}-subprocess.jsonl", null_lines(task, sim_rng(task, seed, 10**6))
    )
    exe = Path(sys.executable).with_name("workbench")
    cmd = [str(exe), "import", "jsonl", str(path), "--no-track", "--json",
           "--n-resamples", str(R)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy(), check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr}")
    (row,) = json.loads(done.stdout)["comparisons"]
    (inproc,) = cli_import(path, rescore=False)["comparisons"]
    assert (row["p_value"], row["n_clusters"]) == (inproc["p_value"], inproc["n_clusters"])
    return (
        f"subprocess `workbench import jsonl` on {task.name}: p = {row['p_value']:.4f}, "
        f"{row['n']} rows in {row['n_clusters']} clusters, clustered by {row['clustered_by']} "
        "(equal to the in-process run)"
    )


def size_rows(
    task: NullTask, path_name: str, pvals: dict[tuple[bool, str], list[float]]
) -> Iterator[str]:
    for (rescore, units), ps in sorted(pvals.items()):
        n = len(ps)
        for alpha in ALPHAS:
            size = sum(p <= alpha for p in ps) / n
            se = math.sqrt(alpha * (1 - alpha) / n)
            ok = "yes" if size <= alpha + 2 * se else "NO"
            clusters = task.n_texts if units == "clustered" else len(task.indices)
            yield (
                f"| {task.name} | {path_name} | {'--rescore' if rescore else 'correct'} | "
                f"{units} ({clusters}) | {n} | {alpha} | {size:.4f} | {se:.4f} | {ok} |"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--sims", type=int, default=1000, help="library-path simulations per task")
    ap.add_argument("--cli-sims", type=int, default=100, help="CLI simulations per task")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    catalog = Catalog(default_source())
    texts, known = catalog_texts(catalog), catalog.names()
    lines = [
        "| task | path | scored by | units (clusters) | sims | alpha | size | s.e. | "
        "<= alpha + 2 s.e. |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in [t for t in args.tasks.split(",") if t]:
            task = null_task(catalog, name)
            lib = library_run(task, texts, known, args.sims, Path(tmp), args.seed)
            lines += size_rows(task, "library", lib)
            if args.cli_sims:
                cli = cli_run(task, min(args.cli_sims, args.sims), Path(tmp), args.seed, lib)
                lines += size_rows(task, "CLI", cli)
                notes.append(subprocess_check(task, Path(tmp), args.seed))
    print(
        f"\nnull: two exchangeable variants, one answer per (variant, distinct text), per-text "
        f"accuracy {EASY} on half the texts and {HARD} on the others; R = {R} permutations, "
        "seed 0 (the import's); the CLI runs are the first simulations' files again; size = "
        "share of p <= alpha; s.e. = sqrt(alpha (1 - alpha) / sims)\n"
    )
    print("\n".join(lines))
    for n in notes:
        print(n)


if __name__ == "__main__":
    main()
