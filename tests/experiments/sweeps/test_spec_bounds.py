"""Every number of a sweep spec has bounds (issue 30, the class of defects 10 and 12).

A spec's numbers reach the same code as the CLI's options (n_resamples the permutation
tests, limit and seeds the sampler, Optuna's and numpy's generators take seeds of 32 bits):
each is checked when the spec is loaded, with the file, the field and its range, before any
trial runs. The variant levels' numbers (demos=k, seed, order) are checked by promptlib.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from experiments import bounds
from experiments.sweeps.spec import SpecError, load_spec
from promptlib.variants import MAX_K, MAX_SEED

BASE = "name: x\ntasks: [hearsay]\n"
AXES = "fixed: {demos: none}\naxes: {instruction: [reference, description]}\n"
SEQ = BASE + AXES + "design: sequential\n"

CASES = [
    (BASE + AXES + "n_resamples: 1000000000000\n", "n_resamples must be " + bounds.N_RESAMPLES.describe()),
    (BASE + AXES + "limit: 100000000000\n", "limit must be " + bounds.LIMIT.describe()),
    (BASE + AXES + "sample_seed: 4294967296\n", "sample_seed must be " + bounds.SEED.describe()),
    (BASE + "axes: {format: {draw: 1000000}}\n", "axes.format.draw must be " + bounds.FORMAT_DRAW.describe()),
    (BASE + "axes: {format: {draw: 2, seed: 4294967296}}\n", "axes.format.seed must be " + bounds.SEED.describe()),
    (SEQ + "sequential: {batch: 1000000000}\n", "sequential.batch must be " + bounds.SEQUENTIAL_BATCH.describe()),
    (SEQ + "sequential: {max_rows: 100000000000}\n", "sequential.max_rows must be " + bounds.LIMIT.describe()),
    (SEQ + "sequential: {seed: 4294967296}\n", "sequential.seed must be " + bounds.SEED.describe()),
    (SEQ + "sequential: {delta: .nan}\n", "sequential.delta must be " + bounds.SEQUENTIAL_DELTA.describe()),
    (SEQ + "sequential: {alpha: .inf}\n", "sequential.alpha must be " + bounds.SEQUENTIAL_ALPHA.describe()),
    (SEQ + "sequential: {alpha: .nan}\n", "sequential.alpha must be " + bounds.SEQUENTIAL_ALPHA.describe()),
    (BASE + "axes: {demos: [4, 100000], seed: [0]}\n", f"demos=k must be an integer from 1 to {MAX_K}"),
    (BASE + "axes: {demos: [4], seed: [0, 4294967296]}\n", f"seed must be an integer from 0 to {MAX_SEED}"),
    (BASE + "fixed: {demos: 2, seed: 0}\naxes: {order: [0, 4294967296]}\n", f"to {MAX_SEED}"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), CASES, ids=[m for _, m in CASES])
def test_a_spec_number_out_of_range_names_the_file_field_and_range(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert str(path) in str(err.value) and message in str(err.value), str(err.value)


def test_promptlibs_seed_range_is_the_workbenchs() -> None:
    assert bounds.SEED.high == MAX_SEED and bounds.SEED.low == 0


@pytest.mark.slow
def test_the_cli_refuses_such_a_spec_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(CASES[0][0])
    r = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "sweep", str(path), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: n_resamples must be ")
    assert "Traceback" not in r.stderr
