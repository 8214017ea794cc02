"""Review of the HTML report (issue 34): where the page gave a wrong count or a wrong row
without a sign. Each test states the number a direct computation gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from experiments.imports.records import ReadOptions
from experiments.imports.report import build_import_report
from experiments.imports.run import Tests as ImportTests
from experiments.imports.run import _arms, _verdict, read_all
from experiments.metrics import row_correct
from experiments.reports.folders import INDEX, latest_id, write_run
from experiments.reports.html.build import build_report
from experiments.sweeps.html_report import decided_rows
from experiments.trials.record import Prediction, TrialRecord, TrialStatus
from promptlib import Catalog
from tests.experiments.reports.test_html_report_sweep import _sweep
from tests.experiments.sweeps.test_sequential_looks import _run

DATA = Path(__file__).resolve().parents[2] / "data" / "imports"
RECORD = {"name": "imp", "import_id": "0" * 64}
CREATED = "2026-12-06T00:00:00+00:00"


def test_a_rescored_imports_page_counts_the_rows_the_test_counts() -> None:
    """--rescore keeps no per-row correctness in the records (the official metric scores the
    predictions): the page read every row as neither right nor wrong and showed 0 disagreeing
    rows where the comparison's test had 5 discordant ones."""
    trials = read_all(
        "promptfoo", [DATA / "promptfoo" / "results.json"], ReadOptions(task="hearsay")
    )
    tests = ImportTests(n_resamples=200, rescore=True)
    compared, arms = _arms(trials, tests, {"hearsay"})
    verdict = _verdict(str(RECORD["name"]), arms, tests, None)
    (cmp,) = verdict["comparisons"]
    doc = build_import_report(RECORD, compared, arms, verdict, created=CREATED).to_dict()
    (sample,) = doc["samples"]
    by = {t.variant: {r.key: r for r in t.rows} for t in trials}
    a, b = by[sample["a"]], by[sample["b"]]
    right = {
        v: {k: (r.prediction or "").strip().lower() == (r.answer or "").strip().lower()
            for k, r in rows.items()}
        for v, rows in ((sample["a"], a), (sample["b"], b))
    }  # fmt: skip
    ra, rb = right[sample["a"]], right[sample["b"]]
    a_right = sorted(k for k in ra if ra[k] and not rb[k])
    b_right = sorted(k for k in ra if rb[k] and not ra[k])
    assert len(a_right) + len(b_right) == cmp["n_discordant"] > 0
    assert sample["counts"] == {"a_right": len(a_right), "b_right": len(b_right), "both_wrong": 0}
    assert sample["n_disagree"] == cmp["n_discordant"]
    shown = {r["index"]: r["outcome"] for r in sample["rows"]}
    assert shown == {**dict.fromkeys(a_right, "a_right"), **dict.fromkeys(b_right, "b_right")}
    for r in sample["rows"]:
        assert (r["a"]["correct"], r["b"]["correct"]) == (ra[r["index"]], rb[r["index"]])


TRIANGLE = (
    "[[register=plain, register=technical], [register=default, register=technical], "
    "[register=plain, register=default]]"
)


@pytest.mark.data
def test_a_sequential_pair_that_stopped_is_shown_on_its_own_rows(
    tmp_path: Path, catalog: Catalog
) -> None:
    """plain vs technical stops at 190 rows (B) while both arms run on to 200 for their other
    pairs: the page counted the 200 rows they share (10 after the stop) as the pair's."""
    rows, records = _run(
        tmp_path, catalog, {"register=technical": 0.3, "register=default": 0.15},
        arms="plain, default, technical", comparisons=TRIANGLE,
    )  # fmt: skip
    seq = [r.to_dict() for r in rows]
    stopped = next(r for r in rows if r.n < min(r.rows_per_arm[x] for x in (r.a, r.b)))  # type: ignore[index]
    kw: dict[str, Any] = dict(
        kind="sweep", title="t", name="t", id="x", status="complete", records=records,
        comparisons=(), sequential=seq, slice_tables=None, created=CREATED,
    )  # fmt: skip
    doc = build_report(**kw, sequential_rows=decided_rows(rows)).to_dict()
    by_variant = {r.variant: {p.index: p for p in r.rows} for r in records}
    for r, s in zip(rows, doc["samples"], strict=True):
        assert (s["a"], s["b"]) == (r.a, r.b)
        assert r.population is not None
        decided = r.population.order[: r.n]
        a, b = by_variant[str(r.a)], by_variant[str(r.b)]
        flips = [(bool(a[i].correct), bool(b[i].correct)) for i in decided]
        assert s["n_rows"] == r.n
        assert s["counts"]["a_right"] == sum(x and not y for x, y in flips)
        assert s["counts"]["b_right"] == sum(y and not x for x, y in flips)
        assert {x["index"] for x in s["rows"]} <= set(decided)
    # without the rows (a document read back): the page says its counts are not the pair's
    doc = build_report(**kw).to_dict()
    where = f"{stopped.task} · {stopped.model} · {stopped.a} vs {stopped.b}"
    assert any(n.startswith(f"sequential {where}") and str(stopped.n) in n for n in doc["notes"])


@pytest.fixture(scope="module")
def local_lm() -> Any:
    pytest.importorskip("llama_cpp", reason="pip install -e '.[local]'")
    from experiments.llm.gateway import get_model

    return get_model("local/smollm2")


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.model
def test_a_page_whose_upload_fails_keeps_the_sweep(
    catalog: Catalog, tmp_path: Path, local_lm: Any
) -> None:
    """The parent run's index.html upload fails (an artifact store refusing it): the sweep
    raised and its parent was abandoned, though its comparisons were logged and its folder
    written. Now it finishes as without the page's upload, and says where the page is."""
    from experiments.output.sweeps import html_report_line
    from experiments.tracking import Tracker, TrackingError

    def refused(self: Any, run_id: str, page: str) -> None:
        raise TrackingError("logging the sweep's HTML report failed: artifact too large")

    with mock.patch.object(Tracker, "log_report_html", refused):
        result, tracker = _sweep(catalog, tmp_path, local_lm)
    assert result.ok and result.report is not None and result.html_error is None
    folder = Path(result.report.report_dir)
    assert (folder / "index.html").is_file() and (folder / "comparisons.json").is_file()
    assert tracker.client.get_run(result.parent_run_id).info.status == "FINISHED"
    assert "artifact too large" in result.to_dict()["html_unlogged"]
    line = html_report_line(result.to_dict())
    assert line is not None and "index.html" in line and "not on the parent run" in line
    # the rerun (its parent FINISHED, the comparisons unchanged) logs the page
    again, _ = _sweep(catalog, tmp_path, local_lm)
    assert again.html_unlogged is None and tracker.has_report_html(again.parent_run_id)


def _numeric(variant: str, said: list[str], gold: list[str], metric: str) -> TrialRecord:
    rows = tuple(
        Prediction(
            index=str(i),
            prompt_hash="",
            answer=g,
            generation=out,
            parsed=None,
            correct=row_correct(metric, out, g),
        )
        for i, (out, g) in enumerate(zip(said, gold, strict=True))
    )
    return TrialRecord(
        task="sara_numeric", model="m", variant=variant, metric=metric,
        status=TrialStatus.COMPLETE, score=0.5, rows=rows, trial_id=f"t-{variant}",
    )  # fmt: skip


def test_a_task_without_labels_shows_two_different_wrong_answers() -> None:
    """sara_numeric has no labels: no row has a parsed answer, so two different wrong numbers
    (parsed None == None) were no disagreement and the page hid them; the same number said
    twice (up to case and punctuation) still is none."""
    metric = "sara_numeric_within_10pct"
    gold = ["$100", "$200", "$300", "$400", "$500"]
    a = _numeric("a", ["$100", "$999", "$5", "$1", "$10"], gold, metric)
    b = _numeric("b", ["$1", "$200", "$7", "$1.", "$10"], gold, metric)
    comparison = {"task": "sara_numeric", "model": "m", "a": "a", "b": "b"}
    doc = build_report(
        kind="sweep", title="t", name="t", id="x", status="complete", records=[a, b],
        comparisons=[comparison], slice_tables=None, created=CREATED,
    ).to_dict()  # fmt: skip
    (s,) = doc["samples"]
    assert {r["index"]: r["outcome"] for r in s["rows"]} == {
        "0": "a_right", "1": "b_right", "2": "both_wrong",
    }  # fmt: skip
    assert s["counts"] == {"a_right": 1, "b_right": 1, "both_wrong": 1}


def test_a_partial_credit_metric_says_what_right_means() -> None:
    metric = "successor_liability_f1"
    gold = ["fraud,express", "continuity"]
    a = _numeric("a", ["fraud", "continuity"], gold, metric)
    b = _numeric("b", ["express", "continuity"], gold, metric)
    doc = build_report(
        kind="sweep", title="t", name="t", id="x", status="complete", records=[a, b],
        comparisons=[{"task": "sara_numeric", "model": "m", "a": "a", "b": "b"}],
        slice_tables=None, created=CREATED,
    ).to_dict()  # fmt: skip
    (s,) = doc["samples"]
    assert [(r["index"], r["outcome"]) for r in s["rows"]] == [("0", "both_wrong")]
    assert any("partial credit" in n and "'both wrong'" in n for n in doc["notes"])


def _labelled(variant: str, said: list[str | None], gold: list[str]) -> TrialRecord:
    rows = tuple(
        Prediction(
            index=str(i),
            prompt_hash="",
            answer=g,
            generation=out,
            parsed=out,
            correct=None if out is None else out == g,
            error="boom" if out is None else None,
        )
        for i, (out, g) in enumerate(zip(said, gold, strict=True))
    )
    errors = sum(out is None for out in said)
    return TrialRecord(
        task="hearsay", model="m", variant=variant, metric="balanced_accuracy",
        status=TrialStatus.of(len(said), errors), score=None if errors else 0.5, rows=rows,
        trial_id=f"t-{variant}",
    )  # fmt: skip


def test_an_untested_comparisons_rows_say_they_are_no_result() -> None:
    """An arm with a failed row: the comparison is not tested, yet its section showed its
    answered rows' counts (A right 1 / B right 1 ...) like any tested pair's."""
    gold = ["Yes", "No", "Yes", "No"]
    a = _labelled("a", ["Yes", "Yes", None, "No"], gold)
    b = _labelled("b", ["No", "No", "Yes", "No"], gold)
    status = "a incomplete (1 of 4 rows failed)"
    fixed = {"task": "hearsay", "model": "m", "a": "a", "b": "b", "status": status}
    doc = build_report(
        kind="sweep", title="t", name="t", id="x", status="incomplete", records=[a, b],
        comparisons=[fixed, {**fixed, "a": "b", "b": "a", "status": "tested"}],
        slice_tables=None, created=CREATED,
    ).to_dict()  # fmt: skip
    untested, tested = doc["samples"]
    assert untested["untested"] == status and tested["untested"] is None
    assert untested["n_rows"] == 3 and untested["counts"]["a_right"] == 1
    assert any("has no result" in n and status in n for n in doc["notes"])
    # a sequential comparison a failed row stopped (no decision) is no result either
    seq = {"task": "hearsay", "model": "m", "a": "a", "b": "b", "decision": None,
           "status": "stopped: a row failed", "n": 3}  # fmt: skip
    doc = build_report(
        kind="sweep", title="t", name="t", id="x", status="incomplete", records=[a, b],
        comparisons=(), sequential=[seq], slice_tables=None, created=CREATED,
    ).to_dict()  # fmt: skip
    assert doc["samples"][0]["untested"] == "stopped: a row failed"


def test_the_sweep_page_never_opens_an_earlier_runs_report_as_the_latest(tmp_path: Path) -> None:
    """Run A wrote a page; run B's page could not be built: reports/<sweep>/index.html went
    on opening A's report as "the latest report" while `latest` pointed at B."""
    a, b = "a" * 64, "b" * 64
    write_run(tmp_path, "demo", a, {"comparisons.json": "{}", INDEX: "<p>A</p>"})
    write_run(tmp_path, "demo", b, {"comparisons.json": "{}"})
    assert latest_id(tmp_path / "demo") == b
    page = (tmp_path / "demo" / INDEX).read_text(encoding="utf-8")
    assert "http-equiv" not in page and "Opening the latest" not in page
    assert f'<a href="{b}/"><code>{b[:12]}</code></a>, has no HTML report' in page
    assert f'<a href="{a}/index.html">' in page  # the earlier report, listed as such
    # and a later page opens again
    c = "c" * 64
    write_run(tmp_path, "demo", c, {"comparisons.json": "{}", INDEX: "<p>C</p>"})
    assert f'content="0; url={c}/index.html"' in (tmp_path / "demo" / INDEX).read_text()
