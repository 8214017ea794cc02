"""The measured coverage table is package data (issue 32, part 3): a CSV shipped in the wheel,
found through importlib.resources, read back exactly as `benchmarks/coverage.py --emit` writes
it (the notes quote its cells and coverages, so a float that reads back differently would change
a report)."""

from __future__ import annotations

import fnmatch
import importlib.util
import sys
import tomllib
from importlib import resources
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from experiments.analysis import coverage_table
from promptlib.errors import DataError

ROOT = Path(__file__).resolve().parents[3]


def _benchmark() -> ModuleType:
    path = ROOT / "benchmarks" / "coverage.py"
    spec = importlib.util.spec_from_file_location("coverage_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["coverage_benchmark"] = module
    spec.loader.exec_module(module)
    return module


def test_importlib_resources_finds_the_table() -> None:
    resource = resources.files("experiments.analysis").joinpath(coverage_table.COVERAGE_FILE)
    assert resource.is_file()
    assert coverage_table.read_coverage(resource.read_text(encoding="utf-8")) == (
        coverage_table.COVERAGE
    )


def test_pyproject_ships_the_table_in_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["experiments.analysis"]
    assert any(fnmatch.fnmatch(coverage_table.COVERAGE_FILE, p) for p in patterns)


def test_the_table_has_every_family_with_typed_cells() -> None:
    table = coverage_table.COVERAGE
    families = {family for family, _ in table}
    assert families == {
        f + ceiling for f in ("balanced", "classes", "f1", "rows") for ceiling in ("", "+ceiling")
    } | {"spanning"}
    for cells in table.values():
        assert list(cells) == sorted(cells)
        for (n, share), (low, median, worst) in cells.items():
            assert type(n) is int and type(share) is float
            assert 0 < low <= median <= 1 and worst
    # a lookup reads the file's numbers: the cell and coverage the note quotes
    flag, note = coverage_table.coverage_flag("rows", "single", np.array([200.0]))
    assert not flag and "measured 95% coverage 0.938" in note and "at n = 200" in note


def test_the_benchmark_writes_the_file_it_reads() -> None:
    bench = _benchmark()
    text = bench.coverage_csv(coverage_table.COVERAGE)
    assert text == (ROOT / "experiments/analysis" / coverage_table.COVERAGE_FILE).read_text()
    back = coverage_table.read_coverage(text)
    assert repr(back) == repr(coverage_table.COVERAGE)  # same order, same float reprs


def test_the_benchmark_emits_measured_cells_as_the_table(tmp_path: Path) -> None:
    bench = _benchmark()
    cells = [
        bench.Cell("rows", "single", 40, 0.5, {"recall 0.5/0.5": 0.9412, "recall 0.7/0.7": 0.95}),
        bench.Cell("rows", "single", 20, 0.1, {"recall 0.99/0.99": 0.9, "recall 0.5/0.7": 0.96}),
    ]
    out = tmp_path / "coverage.csv"
    bench.emit(cells, 100, out)
    table = coverage_table.read_coverage(out.read_text())
    assert table[("rows", "single")] == {
        (20, 0.1): (0.96, 0.96, "recall 0.5/0.7"),
        (40, 0.5): (0.941, 0.946, "recall 0.5/0.5"),
    }
    assert table[("rows+ceiling", "single")] == {(20, 0.1): (0.9, 0.93, "recall 0.99/0.99")}


def test_a_broken_table_names_the_file_and_line() -> None:
    with pytest.raises(DataError, match="header must be"):
        coverage_table.read_coverage("family,kind,n\nrows,single,20\n")
    bad = ",".join(coverage_table.COVERAGE_COLUMNS) + "\nrows,single,twenty,0.1,0.9,0.9,x\n"
    with pytest.raises(DataError, match=r"interval_coverage\.csv, line 2: .*--emit"):
        coverage_table.read_coverage(bad)
