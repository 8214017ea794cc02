"""benchmarks/report_size.py measures the sweep's own report path (issue 34, point 4): its
synthetic sweep is made of real records, prompts and comparisons, and its page is what
`build_sweep_report` + `render_html` write through the sweep's writer. Reduced here to a few
variants and rows; the full run (20 x 2,000, opened in Chromium) is the benchmark."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = [pytest.mark.data]


def _bench() -> ModuleType:
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "report_size.py"
    spec = importlib.util.spec_from_file_location("report_size_bench", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["report_size_bench"] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _doc(page: str) -> dict[str, Any]:
    start = page.index('type="application/json"')
    return dict(json.loads(page[page.index(">", start) + 1 : page.index("</script>", start)]))


@pytest.mark.parametrize("explained", [False, True])
def test_the_benchmark_writes_the_builders_page(tmp_path: Path, explained: bool) -> None:
    bench = _bench()
    lb = Path(os.environ.get("LEGALBENCH_DIR", "/work/shared/legalbench"))
    sweep = bench.synth_sweep(4, 400, lb, explained=explained)
    # distinct inputs with hearsay's 5 slices and Yes/No gold
    rows = sweep.resolved[0].rows
    assert len({r["text"] for r in rows}) == 400
    assert len({r["slice"] for r in rows}) == 5 and {r["answer"] for r in rows} == {"Yes", "No"}
    # every row scored as the runner scores it: `correct` is what the metric counts
    for rec in sweep.records:
        assert all(p.correct == (p.scored_text == p.answer) for p in rec.rows), rec.variant
    # the comparisons are the plan's: each variant against the base, tested
    table = sweep.doc["comparisons"]
    assert [(c["a"], c["b"]) for c in table] == [
        (sweep.records[0].variant, r.variant) for r in sweep.records[1:]
    ]
    assert all(c["p_value"] is not None and c["mde_80"] is not None for c in table)
    info = bench.make_report(sweep, tmp_path)
    path = info.path
    assert path == tmp_path / sweep.name / sweep.sweep_id / "index.html"  # the sweep's folder
    doc = _doc(path.read_text(encoding="utf-8"))
    assert len(doc["samples"]) == 3 and info.embedded == sum(s["n_shown"] for s in doc["samples"])
    for s in doc["samples"]:
        # ~25% of rows disagree with the base (binomial sd ~2 points at 400 rows)
        assert 0.15 < s["n_disagree"] / s["n_rows"] < 0.40, s["n_disagree"]
        # the builder's own tables and diffs, with the slices of the data
        assert [g["group"] for g in s["slices"][0]["rows"]] == sorted({r["slice"] for r in rows})
        assert [g["group"] for g in s["classes"][0]["rows"]] == ["No", "Yes"]
        assert len(s["diffs"]) == 1 and any(op == "+" for op, _ in s["diffs"][0])
    assert info.tables == "3 + 3" and info.tables_s > 0
    assert doc["figures"] and doc["figures"][0]["png_base64"]
