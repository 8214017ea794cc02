"""A small real sweep writes its HTML report (issue 34): reports/<sweep>/<sweep id>/index.html,
reports/<sweep>/index.html opening it, and index.html on the parent run; and a page that cannot
be built never costs the comparisons."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from promptlib import Catalog

SPEC = (
    "name: html_e2e\ntasks: [hearsay]\nlimit: 16\nfixed: {demos: none}\nscoring: loglik\n"
    "axes: {instruction: [reference, description]}\n"
    "comparisons: [[instruction=reference, instruction=description]]\nn_resamples: 200\n"
)


def _tracker(tmp_path: Path) -> Any:
    from experiments.tracking import Tracker, TrackingConfig

    return Tracker(
        TrackingConfig(
            tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
            artifact_location=(tmp_path / "artifacts").as_uri(),
            experiment_prefix="html", prompt_registry=False, source="test",
        )
    )  # fmt: skip


def _sweep(catalog: Catalog, root: Path, lm: Any, reports: str = "reports") -> tuple[Any, Any]:
    from experiments.sweeps.driver import run_sweep
    from experiments.sweeps.spec import load_spec

    spec = root / "spec.yaml"
    spec.write_text(SPEC)
    tracker = _tracker(root)
    result = run_sweep(
        load_spec(spec), catalog, models=("local/smollm2",), tracker=tracker,
        lm_factory=lambda _name: lm, reports_dir=root / reports,
    )  # fmt: skip
    return result, tracker


@pytest.fixture(scope="module")
def smollm2() -> Any:
    pytest.importorskip("llama_cpp", reason="pip install -e '.[local]'")
    from experiments.llm.gateway import get_model

    return get_model("local/smollm2")


@pytest.fixture(scope="module")
def swept(
    catalog: Catalog, tmp_path_factory: pytest.TempPathFactory, smollm2: Any
) -> tuple[Path, Any, Any]:
    """The sweep run once (its root, result and tracker); the tests below share it."""
    root = tmp_path_factory.mktemp("html_e2e")
    return (root, *_sweep(catalog, root, smollm2))


def _doc(page: str) -> dict[str, Any]:
    """The ReportDoc embedded in a page (`render.embedded_json`)."""
    start = page.index('type="application/json"')
    body = page[page.index(">", start) + 1 : page.index("</script>", start)]
    return dict(json.loads(body))


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.model
def test_a_small_sweep_writes_and_logs_its_html_report(swept: tuple[Path, Any, Any]) -> None:
    _, result, tracker = swept
    assert result.ok and result.report is not None
    folder = Path(result.report.report_dir)
    page = (folder / "index.html").read_text(encoding="utf-8")
    assert "index.html" in result.report.report_files
    doc = _doc(page)
    assert doc["kind"] == "sweep" and doc["id"] == result.sweep_id
    # the comparisons as comparisons.json holds them, byte for byte the file's rows
    written = json.loads((folder / "comparisons.json").read_text())
    assert doc["comparisons"] == written["comparisons"]
    # every disagreeing row of the pair, recounted from the trials' rows
    (sample,) = doc["samples"]
    a, b = _rows(tracker, result, sample["a"]), _rows(tracker, result, sample["b"])
    want = sorted(
        (i for i in a if a[i].correct != b[i].correct or a[i].parsed != b[i].parsed), key=int
    )
    assert [r["index"] for r in sample["rows"]] == want
    assert sample["n_disagree"] == len(want) and sample["n_rows"] == 16
    assert sum(sample["counts"].values()) == len(want)
    # hearsay's rows carry their slice; the prompts' diff masks the row's text
    assert all(r["slice"] for r in sample["rows"])
    if want:
        assert all(r["diff"] is not None for r in sample["rows"])
        flat = [t for d in sample["diffs"] for op, t in d if op in "=~"]
        assert any("⟨row input⟩" in t for t in flat)
        assert set(doc["inputs"]["hearsay"]) == set(want)
    assert [t["by"] for t in sample["slices"]] == ["slice"]
    assert [t["by"] for t in sample["classes"]] == ["class"]
    # reports/<sweep>/index.html opens the latest run's report
    top = (folder.parent / "index.html").read_text(encoding="utf-8")
    assert f'url={result.sweep_id}/index.html"' in top
    # the parent run holds the same page
    listed = {x.path for x in tracker.client.list_artifacts(result.parent_run_id)}
    assert "index.html" in listed
    assert tracker.has_report_html(result.parent_run_id)


def _rows(tracker: Any, result: Any, variant: str) -> dict[str, Any]:
    """A trial's rows (index -> its stored `Prediction`), read back from its MLflow run."""
    (run,) = [
        r
        for r in tracker._children(result.parent_run_id)
        if r.data.params.get("variant") == variant
    ]
    return {p.index: p for p in tracker.stored_predictions(run.info.run_id)}


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.model
def test_a_page_that_cannot_be_built_keeps_the_comparisons(
    catalog: Catalog, swept: tuple[Path, Any, Any], smollm2: Any
) -> None:
    """The same sweep again (its trials read back), its renderer broken, into another
    reports folder: every other file is written, and the result says why there is no page."""
    root, first, _ = swept

    def broken(doc: Any) -> str:
        raise RuntimeError("renderer broke")

    with mock.patch("experiments.sweeps.html_report.render_html", broken):
        result, _ = _sweep(catalog, root, smollm2, reports="reports_broken")
    assert result.sweep_id == first.sweep_id
    assert result.ok and result.report is not None
    folder = Path(result.report.report_dir)
    assert (folder / "comparisons.json").is_file() and (folder / "comparisons.csv").is_file()
    assert not (folder / "index.html").exists()
    assert result.html_error == "RuntimeError: renderer broke"
    assert result.to_dict()["html_error"] == "RuntimeError: renderer broke"
    from experiments.output.sweeps import html_report_line

    line = html_report_line(result.to_dict())
    assert line is not None and "renderer broke" in line and "comparisons" in line
    same = (Path(first.report.report_dir) / "comparisons.json").read_bytes()
    assert (folder / "comparisons.json").read_bytes() == same


SEQUENTIAL = (
    "name: html_seq\ntasks: [hearsay]\nlimit: 20\nfixed: {demos: none}\nscoring: loglik\n"
    "axes: {instruction: [reference, description]}\n"
    "comparisons: [[instruction=reference, instruction=description]]\n"
    "design: sequential\nsequential: {batch: 10, max_rows: 20}\n"
)


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.model
def test_a_sequential_sweeps_page_has_its_looks(
    catalog: Catalog, tmp_path: Path, smollm2: Any
) -> None:
    from experiments.sweeps.driver import run_sweep
    from experiments.sweeps.spec import load_spec

    spec = tmp_path / "seq.yaml"
    spec.write_text(SEQUENTIAL)
    result = run_sweep(
        load_spec(spec), catalog, models=("local/smollm2",), tracker=_tracker(tmp_path),
        lm_factory=lambda _name: smollm2, reports_dir=tmp_path / "reports",
    )  # fmt: skip
    assert result.report is not None and result.sequential is not None
    doc = _doc((Path(result.report.report_dir) / "index.html").read_text(encoding="utf-8"))
    (entry,) = doc["sequential"]
    row = result.sequential[0]
    assert entry["row"] == row.to_dict()
    assert [x["n"] for x in entry["looks"]] == list(row.looks)[: len(entry["looks"])]
    last = entry["looks"][-1]
    assert (last["low"], last["high"]) == pytest.approx((row.ci_low, row.ci_high))
    (sample,) = doc["samples"]  # the pair's disagreeing rows, on the rows both arms had
    assert sample["a"] == row.a and sample["b"] == row.b and sample["n_rows"] == row.n


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.model
def test_chromium_shows_every_disagreeing_row_of_the_sweep_with_its_diff(
    swept: tuple[Path, Any, Any],
) -> None:
    """The acceptance check on a real sweep's page (Part B's test walks a hand-built doc)."""
    import os

    from experiments.testing.chromium import Chromium, find_chromium

    if find_chromium() is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install Chromium (apt-get install chromium) for the report's test")
        pytest.skip("no Chromium on PATH: apt-get install chromium")
    _, result, tracker = swept
    page = Path(result.report.report_dir) / "index.html"
    (sample,) = _doc(page.read_text(encoding="utf-8"))["samples"]
    a, b = _rows(tracker, result, sample["a"]), _rows(tracker, result, sample["b"])
    want = sorted((i for i in a if a[i].correct != b[i].correct), key=int)
    assert want, "the two prompts agree on every row: nothing to check"
    rows_js = """[...document.querySelectorAll('section.cmp[data-key=c1] .sample')].map(r => ({
        index: r.dataset.index, outcome: r.dataset.outcome,
        diff: (r.querySelector('.diff') || {}).textContent || null}))"""
    with Chromium(width=1400, height=900) as browser:
        browser.open(page, "document.body.dataset.ready")
        assert browser.evaluate("document.body.dataset.ready") == "1"
        shown = browser.evaluate(rows_js)  # 16 rows: one page
        assert [r["index"] for r in shown] == want
        assert all(r["diff"] and "row input" in r["diff"] for r in shown)
        right_b = [i for i in want if b[i].correct]
        browser.select("section.cmp[data-key=c1] select[data-filter=outcome]", "b_right")
        assert [r["index"] for r in browser.evaluate(rows_js)] == right_b
