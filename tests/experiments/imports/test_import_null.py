"""A reduced null simulation of `workbench import` on LegalBench's repeated texts (#29; the
full table, both tasks, --rescore and the CLI: benchmarks/import_null.py).

cuad_audit_rights's 1,215 test rows show 775 distinct texts. Two exchangeable variants answer
each distinct text once (a deterministic harness), written as jsonl and read, paired, clustered
and tested by the functions `workbench import jsonl` runs. Clustered by the task's texts, the
test keeps its size (<= alpha + 3 s.e. over 200 simulations); with rows as units (every
import before #29) it rejects the true null far more often, which this simulation detects."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

from experiments.imports.identity import catalog_texts
from promptlib import Catalog

pytestmark = [pytest.mark.data, pytest.mark.slow]
SIMS = 200


def _bench() -> ModuleType:
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "import_null.py"
    spec = importlib.util.spec_from_file_location("import_null_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_null_benchmark"] = module
    spec.loader.exec_module(module)
    return module


def test_import_keeps_its_size_on_repeated_texts_and_rows_as_units_do_not(
    catalog: Catalog, tmp_path: Path
) -> None:
    bench = _bench()
    task = bench.null_task(catalog, "cuad_audit_rights")
    assert (len(task.indices), task.n_texts) == (1215, 775)
    pvals = bench.library_run(
        task, catalog_texts(catalog), catalog.names(), SIMS, tmp_path, seed=0, rescores=(False,)
    )
    clustered, rows = pvals[(False, "clustered")], pvals[(False, "rows")]
    assert len(clustered) == len(rows) == SIMS

    def size(ps: list[float], alpha: float) -> float:
        return sum(p <= alpha for p in ps) / len(ps)

    for alpha in (0.05, 0.01):
        bound = alpha + 3 * math.sqrt(alpha * (1 - alpha) / SIMS)
        assert size(clustered, alpha) <= bound, (alpha, size(clustered, alpha), bound)
    bound = 0.05 + 3 * math.sqrt(0.05 * 0.95 / SIMS)
    assert size(rows, 0.05) > bound, ("rows as units", size(rows, 0.05), bound)
