"""Review of the HTML report (issue 34): where the page gave a wrong count or a wrong row
without a sign. Each test states the number a direct computation gives."""

from __future__ import annotations

from pathlib import Path

from experiments.imports.records import ReadOptions
from experiments.imports.report import build_import_report
from experiments.imports.run import Tests, _arms, _verdict, read_all

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
    tests = Tests(n_resamples=200, rescore=True)
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
