"""Issue 19, inputs never imagined: huge splits, repeated row ids, YAML aliases (defects 6-8).

- 6: planning a sweep is linear in the rows: a 100k-row split plans a `--limit 10` sweep in
  seconds (it was quadratic: 20k rows took 17 s, 100k never finished);
- 7: a TSV whose `index` values repeat is refused when it is read, in one line naming the file
  and the repeated ids, by `run`, `sweep --dry-run` and `optimize` alike, before anything is
  written (the repeats were collapsed: trials silently lost rows);
- 8: a sweep spec with YAML anchors or aliases is refused before it is built: a few hundred
  bytes of nested aliases took 1.9 GB.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from experiments.llm.gateway import get_model
from experiments.sweeps.plan import plan_tasks
from experiments.sweeps.spec import SpecError, load_spec
from experiments.trials.spec import TrialSpec, resolve_trial, select_rows
from promptlib import Catalog, LocalSource, PromptVariant, evaluation_rows, parse_spec
from promptlib.data import read_tsv
from promptlib.errors import DataError, WorkbenchError
from promptlib.render import compile_prompt
from promptlib.tasks import Task
from tests.conftest import REPO, run_cli, workbench_env

HEADER = "index\tanswer\ttext\tslice"


def _tsv(path: Path, indices: list[str]) -> Path:
    lines = [HEADER] + [
        f"{i}\t{'Yes' if n % 2 else 'No'}\tcase {n}\tx" for n, i in enumerate(indices)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _hearsay(lb_dir: Path, root: Path) -> Path:
    """A LegalBench layout holding a writable copy of hearsay; returns its folder."""
    task = root / "tasks" / "hearsay"
    shutil.copytree(lb_dir / "tasks" / "hearsay", task)
    for f in task.iterdir():
        f.chmod(0o644)  # the shared data is read-only
    return task


def _one_line(r: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith("error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# ---- 7. repeated row ids ---------------------------------------------------------------------
def test_repeated_ids_are_refused_naming_the_file_the_ids_and_what_to_do(tmp_path: Path) -> None:
    path = _tsv(tmp_path / "test.tsv", ["0", "1", "2", "1", "3"])
    with pytest.raises(DataError) as e:
        read_tsv(path)
    msg = str(e.value)
    assert "\n" not in msg
    assert str(path) in msg
    assert "1 index value repeats (index '1' on lines 3 and 5)" in msg
    assert "remove the repeated rows or renumber the index column" in msg


def test_many_repeated_ids_show_the_first_few_and_the_count(tmp_path: Path) -> None:
    ids = [str(i) for i in range(10)] * 2 + ["0"]  # 10 ids repeat; '0' three times
    with pytest.raises(DataError) as e:
        read_tsv(_tsv(tmp_path / "test.tsv", ids))
    msg = str(e.value)
    assert "10 index values repeat" in msg
    assert "index '0' on lines 2, 12 and 22" in msg
    assert "index '2' on lines 4 and 14; and 7 more)" in msg
    assert "'3'" not in msg  # only the first few are listed


def test_ids_that_differ_only_in_whitespace_are_distinct_and_no_index_is_numbered(
    tmp_path: Path,
) -> None:
    assert len(read_tsv(_tsv(tmp_path / "a.tsv", ["1", " 1", "1 "]))) == 3
    (tmp_path / "b.tsv").write_text("answer\ttext\nYes\ta\nYes\ta\n", encoding="utf-8")
    assert [r["index"] for r in read_tsv(tmp_path / "b.tsv").rows] == ["0", "1"]


@pytest.fixture
def dup_data(lb_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    """hearsay with test row 5's index made the same as row 3's: (data root, its test.tsv)."""
    task = _hearsay(lb_dir, tmp_path / "lb")
    tsv = task / "test.tsv"
    lines = tsv.read_text(encoding="utf-8").split("\n")
    first = lines[3].split("\t")[0]
    lines[5] = "\t".join([first, *lines[5].split("\t")[1:]])
    tsv.write_text("\n".join(lines), encoding="utf-8")
    return tmp_path / "lb", tsv


SERVER = ["--model", "openai/stub", "--api-base", "http://127.0.0.1:9", "--retries", "0"]
SWEEP = ["sweep", str(REPO / "ablations" / "reference_vs_description.yaml"), "--tasks", "hearsay"]
COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "run": lambda w: ["run", "hearsay", *SERVER, "--limit", "5"],
    "sweep-dry-run": lambda w: [*SWEEP, *SERVER, "--limit", "5", "--dry-run"],
    "optimize": lambda w: [
        "optimize",
        "hearsay",
        *SERVER,
        "--trials",
        "1",
        "--storage",
        f"sqlite:///{w}/o.db",
    ],
}


@pytest.mark.data
@pytest.mark.parametrize("command", list(COMMANDS))
def test_repeated_ids_stop_every_command_in_one_line_and_nothing_is_written(
    command: str, dup_data: tuple[Path, Path], tmp_path: Path
) -> None:
    data, tsv = dup_data
    work = tmp_path / "work"
    work.mkdir()
    env = workbench_env(work, data, "dup")
    env["WORKBENCH_RUNS_DIR"] = str(work / "runs")
    r = run_cli(COMMANDS[command](work), env, work, timeout=300)
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    _one_line(r, str(tsv), "1 index value repeats (index '2' on lines 4 and 6)", "renumber")
    assert sorted(p.name for p in work.iterdir()) == ["mlflow.yaml"]  # no store, run, cache


@pytest.mark.data
def test_a_trial_asking_for_a_row_twice_is_refused(catalog: Catalog) -> None:
    lm = get_model("openai/stub", api_base="http://127.0.0.1:9")
    spec = TrialSpec(
        task="hearsay", variant=parse_spec("base"), model="openai/stub", rows=("1", "3", "3")
    )
    with pytest.raises(WorkbenchError, match=r"rows 3 are asked for more than once \(1 repe"):
        resolve_trial(spec, catalog, lm)


# ---- 6. planning is linear -------------------------------------------------------------------
SPEC_4 = """\
name: planning_scale
tasks: [hearsay]
fixed:
  demos: 2
  pool: train+test
axes:
  instruction: [reference, description]
  seed: [0, 1]
comparisons: all_pairs
"""


def _evaluated(variant: PromptVariant, task: Task, split: str) -> list[dict[str, str]]:
    """The rows a variant is evaluated on, as planning finds them."""
    return evaluation_rows(compile_prompt(variant, task, split).variant, task, split)[0]


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Fail (instead of running for hours) if the block takes longer than `seconds`."""

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"planning took more than {seconds:g} s: not linear in the rows")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.data
def test_a_100k_row_split_plans_a_limit_10_sweep_in_seconds(lb_dir: Path, tmp_path: Path) -> None:
    task = _hearsay(lb_dir, tmp_path / "lb")
    n = 100_000
    _tsv(task / "test.tsv", [str(i) for i in range(n)])
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(SPEC_4)
    spec = load_spec(spec_path)
    catalog = Catalog(LocalSource(tmp_path / "lb"))
    # Quadratic planning took about 250 s on 20k rows and hours on 100k. Linear: about 1 s of
    # CPU on a quiet machine. Bounds are generous for a busy one; CPU time ignores the wait.
    with _deadline(120):
        wall, cpu = time.perf_counter(), time.process_time()
        (planned,) = plan_tasks(spec, catalog, limit=10)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert cpu < 15, f"planning 100k rows took {cpu:.1f} s of CPU ({wall:.1f} s wall)"
    # the same rows as intersecting every variant's evaluation rows by set, then sampling
    hearsay = catalog.task("hearsay")
    kept = [{r["index"] for r in _evaluated(nv.variant, hearsay, "test")} for nv in spec.variants]
    common = [r for r in catalog.task("hearsay").rows("test") if all(r["index"] in k for k in kept)]
    assert n - 8 <= len(common) < n  # the 2-demo draws (some from test) are left out
    assert planned.rows == tuple(r["index"] for r in select_rows(common, 10, spec.sample_seed))


@pytest.mark.data
def test_planning_the_shipped_specs_is_unchanged(catalog: Catalog) -> None:
    """The linear intersection keeps the rows, and their order, of the quadratic one."""
    for name in ("demo_resampling", "reference_vs_description", "plain_vs_technical"):
        spec = load_spec(REPO / "ablations" / f"{name}.yaml")
        for p in plan_tasks(spec, catalog, limit=None):
            if p.skipped:
                continue
            task = catalog.task(p.task)
            kept = [
                [r["index"] for r in _evaluated(nv.variant, task, spec.split)]
                for nv in spec.variants
            ]
            common = kept[0]
            for ids in kept[1:]:
                common = [i for i in common if i in set(ids)]  # the old algorithm, small data
            assert p.rows == tuple(common), (name, p.task)


# ---- 8. YAML aliases -------------------------------------------------------------------------
def _bomb(levels: int = 9) -> str:
    """Nested aliases: each list holds nine of the one before, 9**9 strings when expanded."""
    lines = ["name: bomb", "tasks:", "  - &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]"]
    for prev, cur in itertools.pairwise("abcdefghijklmnop"[:levels]):
        lines.append(f"  - &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (_bomb(3), "YAML anchor &a at line 3"),
        (
            "name: x\ntasks: [hearsay]\nfixed: &f {demos: none}\naxes:\n  instruction: [base]\n",
            "&f",
        ),
        ("name: x\ntasks: [hearsay]\naxes:\n  instruction: [base]\n  register: *r\n", "alias *r"),
    ],
    ids=["nested", "anchor", "alias"],
)
def test_a_spec_with_anchors_or_aliases_is_refused_naming_the_file(
    tmp_path: Path, text: str, needle: str
) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as e:
        load_spec(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: ") and needle in msg, msg
    assert "write the value out in full" in msg


def _limit_memory() -> None:  # runs in the child: an old, expanding loader dies here, not the box
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS bounds the child on Linux")
def test_an_alias_bomb_spec_is_one_line_fast_and_small(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(_bomb())
    assert len(path.read_bytes()) < 600
    env = {**os.environ, "WORKBENCH_NO_TRACK": "1", "WORKBENCH_CACHE_DIR": str(tmp_path / "c")}
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "sweep", str(path), "--dry-run"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
        preexec_fn=_limit_memory,
    )  # fmt: skip
    took = time.perf_counter() - t0
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    _one_line(r, str(path), "YAML anchor &a at line 3", "not supported")
    assert took < 60, f"refusing the bomb took {took:.1f} s"  # about 1 s: start-up and imports


def test_review_a_bom_does_not_hide_the_index_column(tmp_path: Path) -> None:
    """rev3: a TSV saved with a byte-order mark had its header '\\ufeffindex', so rows were
    renumbered and a repeated id slipped past the check."""
    from promptlib.data import read_tsv
    from promptlib.errors import DataError

    path = tmp_path / "test.tsv"
    path.write_text("\ufeffindex\ttext\tanswer\n0\ta\tYes\n0\ta\tYes\n", encoding="utf-8")
    with pytest.raises(DataError, match="repeat"):
        read_tsv(path)


@pytest.mark.slow
@pytest.mark.parametrize("tasks", ["", " , "])
def test_tasks_naming_no_task_is_refused_not_the_whole_spec(
    lb_dir: Path, tmp_path: Path, tasks: str
) -> None:
    """`--tasks "$TASKS"` with the variable empty named no task and ran every task of the
    spec (3 trials planned instead of none): now one line naming --tasks, exit 2."""
    env = workbench_env(tmp_path, lb_dir, "t")
    spec = str(REPO / "ablations" / "demo.yaml")
    r = run_cli(["sweep", spec, "--tasks", tasks, "--dry-run"], env, tmp_path, timeout=300)
    assert r.returncode == 2, (r.stdout[-2000:], r.stderr[-2000:])
    _one_line(r, "--tasks")
    assert r.stdout == ""
