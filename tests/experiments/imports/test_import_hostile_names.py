"""An import whose names MLflow would refuse is logged (issue 30, defect 4), its formula-like
names are text in comparisons.csv (defect 14), and a long import says how far it is (defect
16). Before: a variant named `a//b`, or promptfoo's HTTP provider named by its URL, computed
every comparison, then failed with "store failed", exit 2, a FAILED parent, on every rerun."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest

from experiments.analysis import power
from experiments.files import csv_uncell
from experiments.imports import ReadOptions
from experiments.imports.run import Tests, import_results
from tests.experiments.imports.conftest import Workbench, correctness, lines, write_jsonl

pytestmark = pytest.mark.data
PROMPTFOO = Path(__file__).resolve().parents[2] / "data" / "imports" / "promptfoo" / "results.json"
FORMULA = '=HYPERLINK("http://x","y")'


@pytest.fixture
def wb(tmp_path: Path, lb_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Workbench:
    (tmp_path / "store").mkdir()
    return Workbench(tmp_path / "store", lb_dir, monkeypatch)


def _parent(wb: Workbench, name: str) -> tuple[object, Path]:
    (parent,) = [r for r in wb.runs(name) if r.data.tags["workbench.kind"] == "import"]
    return parent, Path(parent.info.artifact_uri.removeprefix("file://"))  # type: ignore[attr-defined]


def test_an_import_with_names_mlflow_refuses_is_logged(wb: Workbench, tmp_path: Path) -> None:
    vec = correctness(40, 0.7, 0.5, seed=5)
    rows = lines({"a//b": vec["A"], FORMULA: vec["B"]}, model="https://api.example.com/v1")
    path = write_jsonl(tmp_path / "r.jsonl", rows)
    for attempt in range(2):  # the rerun reuses the finished import
        result = wb("import", "jsonl", str(path), "--name", "hostile", "--n-resamples", "200")
        assert result.exit_code == 0, result.output
        assert ("already tracked" in result.stdout) == (attempt == 1)
    parent, art = _parent(wb, "hostile")
    assert parent.info.status == "FINISHED"  # type: ignore[attr-defined]
    names = json.loads((art / "metric_names.json").read_text())
    p_values = [k for k in parent.data.metrics if k.startswith("p_value.")]  # type: ignore[attr-defined]
    assert len(p_values) == 1 and "a//b" in names[p_values[0]]
    with (art / "comparisons.csv").open(newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert {row["a"], row["b"]} == {"'" + FORMULA, "a//b"}  # text to a spreadsheet
    assert {csv_uncell(row["a"]), csv_uncell(row["b"])} == {FORMULA, "a//b"}


def test_promptfoos_http_provider_named_by_its_url_is_logged(wb: Workbench, tmp_path: Path) -> None:
    data = json.loads(PROMPTFOO.read_text())
    for result in data["results"]["results"]:
        result["provider"] = {"id": "https://api.example.com/v1/chat//completions"}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    out = wb("import", "promptfoo", str(path), "--task", "hearsay", "--name", "url",
             "--n-resamples", "200")  # fmt: skip
    assert out.exit_code == 0, out.output
    parent, _ = _parent(wb, "url")
    assert parent.info.status == "FINISHED"  # type: ignore[attr-defined]


def test_a_long_import_reports_its_progress(lb_dir: Path, tmp_path: Path) -> None:
    """Every comparison ticks the progress (100 variants' all_pairs are 4,950), after the
    files are read, up to the total."""
    arms = {f"v{i:02d}": correctness(30, 0.5 + i / 40, 0.6, seed=i)["A"] for i in range(12)}
    path = write_jsonl(tmp_path / "r.jsonl", lines(arms))
    seen: list[tuple[int, int, str]] = []
    import_results(
        "jsonl", [path], ReadOptions(), tests=Tests(n_resamples=100), known_tasks=("hearsay",),
        track=False, progress=lambda done, total, what: seen.append((done, total, what)),
    )  # fmt: skip
    assert seen[0][2] == "reading r.jsonl"
    ticks = [(d, t) for d, t, what in seen if what.startswith("comparisons")]
    assert ticks == [(d, 66) for d in range(1, 67)]  # 12 * 11 / 2 pairs, one tick each


def test_the_mde_of_a_huge_trial_is_not_simulated() -> None:
    """The MDE simulation grows with the square of the units: 45 s at 20,000 rows and out of
    memory (a 37 GiB table) at 100,000, so a 1M-line import never finished."""
    n = 5_001  # power.MAX_UNITS + 1
    y, a, b = ["1"] * n, ["1", "0"] * (n // 2) + ["1"], ["0", "1"] * (n // 2) + ["0"]
    start = time.process_time()
    mde = power.minimum_detectable_effect(y, a, b, metric="accuracy", by_class=False)
    assert time.process_time() - start < 1.0
    assert mde.value is None and "not simulated" in mde.note and f"{n:,} rows" in mde.note


def test_a_sensitivity_bootstrap_too_big_for_memory_is_left_out_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its bootstrap holds resamples x rows counts at once: ~40 GB for a 1M-line import at
    the default 10,000 resamples. Over the bound it is left out with the reason, and the
    comparisons are made as ever (here the bound is lowered to 30 rows x 100 resamples)."""
    from experiments.imports import verdict

    monkeypatch.setattr(verdict, "MAX_BOOTSTRAP_CELLS", 30 * 100 - 1)
    path = write_jsonl(tmp_path / "r.jsonl", lines(correctness(30, 0.7, 0.5)))
    doc = import_results(
        "jsonl", [path], ReadOptions(), tests=Tests(n_resamples=100), known_tasks=("hearsay",),
        track=False,
    )  # fmt: skip
    assert doc.sensitivity["per_task"] == []
    assert "30 rows x 100 resamples" in doc.sensitivity["error"]
    assert doc.comparisons[0]["p_value"] is not None


def test_all_pairs_cluster_the_rows_once_per_task_and_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every pair's clusters come from all k arms; computed per pair, k variants' all_pairs
    cost k^3 (a fifth of a 50-variant import's time besides the MDE). They are the same for
    every pair (rows linked under any arm), so they are computed once, and the comparisons
    are those of clusters computed per pair."""
    from experiments.analysis import compare as cmp

    arms = {f"v{i:02d}": correctness(30, 0.5 + i / 40, 0.6, seed=i)["A"] for i in range(8)}
    path = write_jsonl(tmp_path / "r.jsonl", lines(arms))
    calls: list[int] = []
    real = cmp.clustering

    def counted(*args: object, **kw: object) -> object:
        calls.append(1)
        return real(*args, **kw)  # type: ignore[arg-type]

    def run() -> list[dict[str, object]]:
        doc = import_results(
            "jsonl", [path], ReadOptions(), tests=Tests(n_resamples=100),
            known_tasks=("hearsay",), track=False,
        )  # fmt: skip
        return list(doc.comparisons)

    monkeypatch.setattr(cmp, "clustering", counted)
    once = run()
    assert len(once) == 28 and len(calls) == 1
    per_pair = cmp.pair
    monkeypatch.setattr(cmp, "pair", lambda *a, memo=None, **kw: per_pair(*a, **kw))
    assert run() == once and len(calls) == 1 + 28
