"""The HTML report in a real browser (issue 34's acceptance): headless Chromium opens the page
of a small hand-built doc; every disagreeing row of every comparison is reachable (page by
page) with its diff, the counts shown are the doc's, filters (by select and by the URL's hash)
leave exactly the rows they should, and no row text runs as code."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from experiments.reports.html.render import render_html
from experiments.testing.chromium import Chromium, find_chromium
from tests.support.report_docs import XSS_INPUT, XSS_OUTPUT, small_doc

READY = "document.body.dataset.ready"
PAGE = 25


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    if find_chromium() is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install Chromium (apt-get install chromium) for the report's test")
        pytest.skip("no Chromium on PATH: apt-get install chromium")
    with Chromium(width=1400, height=900) as b:
        yield b


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "index.html"
    path.write_text(render_html(small_doc()), encoding="utf-8")
    return path


def _open(browser: Chromium, page: Path, hash_: str = "") -> None:
    browser.open("about:blank")
    browser.open(page.resolve().as_uri() + hash_, READY)
    assert browser.evaluate(READY) == "1", browser.evaluate("document.body.dataset.error")


WALK = """(() => {
  const sec = document.querySelector('section.cmp[data-key=%s]');
  const next = sec.querySelector('button[data-page=next]');
  const prev = sec.querySelector('button[data-page=prev]');
  while (!prev.disabled) prev.click();
  const rows = []; const infos = []; let most = 0;
  for (;;) {
    const here = sec.querySelectorAll('.sample');
    most = Math.max(most, here.length);
    infos.push(sec.querySelector('.page-info').textContent);
    here.forEach(r => {
      const d = r.querySelector('.diff');
      rows.push({index: r.dataset.index, outcome: r.dataset.outcome, label: r.dataset.label,
        input: r.querySelector('.input').textContent,
        outputs: [...r.querySelectorAll('.output')].map(o => o.textContent),
        diff: d && d.textContent, del: d && [...d.querySelectorAll('del')].map(x => x.textContent),
        ins: d && [...d.querySelectorAll('ins')].map(x => x.textContent),
        collapsed: d && [...d.querySelectorAll('.collapsed')].map(x => x.textContent)});
    });
    if (next.disabled) break;
    next.click();
  }
  return {rows, infos, most};
})()"""


def _walk(browser: Chromium, key: str) -> dict[str, Any]:
    out: dict[str, Any] = browser.evaluate(WALK % json.dumps(key))
    return out


def _diff_text(ops: list[list[str]]) -> str:
    return "".join(text for _, text in ops)


def test_every_disagreeing_row_is_reachable_with_its_diff(browser: Chromium, page: Path) -> None:
    doc = small_doc()
    _open(browser, page)
    keys = browser.evaluate("[...document.querySelectorAll('section.cmp')].map(s => s.dataset.key)")
    assert keys == ["c1", "c2", "c3"]
    for s in doc["samples"]:
        seen = _walk(browser, s["key"])
        assert seen["most"] <= PAGE
        pages = -(-len(s["rows"]) // PAGE)
        assert seen["infos"][-1].startswith(f"page {pages} of {pages}")
        assert [r["index"] for r in seen["rows"]] == [r["index"] for r in s["rows"]]
        for want, got in zip(s["rows"], seen["rows"], strict=True):
            assert got["outcome"] == want["outcome"] and got["label"] == want["label"]
            assert got["input"] == doc["inputs"][s["task"]][want["index"]]
            assert got["outputs"] == [want["a"]["output"], want["b"]["output"]]
            if want["diff"] is None:
                assert got["diff"] == "no prompts recorded for this comparison"
                continue
            ops = s["diffs"][want["diff"]]
            assert got["diff"] == _diff_text(ops)
            assert got["del"] == [t for op, t in ops if op == "-"]
            assert got["ins"] == [t for op, t in ops if op == "+"]
            assert got["collapsed"] == [t for op, t in ops if op == "~"]


def test_the_counts_and_the_cap_are_the_docs(browser: Chromium, page: Path) -> None:
    doc = small_doc()
    _open(browser, page)
    for s in doc["samples"]:
        sec = f"section.cmp[data-key={s['key']}]"
        counts = browser.evaluate(f"document.querySelector('{sec} .counts').textContent")
        c = s["counts"]
        assert counts.startswith(
            f"A right {c['a_right']} / B right {c['b_right']} / both wrong {c['both_wrong']} "
            f"of {s['n_disagree']} disagreeing rows of {s['n_rows']} rows"
        )
        cap = browser.evaluate(f"(document.querySelector('{sec} .cap-note') || {{}}).textContent")
        if s["n_shown"] < s["n_disagree"]:
            assert (
                cap
                == f"showing {s['n_shown']} of {s['n_disagree']} (cap {s['cap']} per comparison)"
            )
        else:
            assert cap is None


def test_filters_leave_exactly_the_matching_rows(browser: Chromium, page: Path) -> None:
    rows = small_doc()["samples"][0]["rows"]
    _open(browser, page)
    browser.select("section.cmp[data-key=c1] select[data-filter=outcome]", "b_right")
    got = [r["index"] for r in _walk(browser, "c1")["rows"]]
    assert got == [r["index"] for r in rows if r["outcome"] == "b_right"] and got
    browser.select("section.cmp[data-key=c1] select[data-filter=label]", "Yes")
    got = [r["index"] for r in _walk(browser, "c1")["rows"]]
    want = [r["index"] for r in rows if r["outcome"] == "b_right" and r["label"] == "Yes"]
    assert got == want and got
    assert browser.evaluate("location.hash") == "#c1:label=Yes&outcome=b_right"
    browser.select("section.cmp[data-key=c1] select[data-filter=slice]", "Standard hearsay")
    got = [r["index"] for r in _walk(browser, "c1")["rows"]]
    want = [
        i for i in want if rows[[r["index"] for r in rows].index(i)]["slice"] == "Standard hearsay"
    ]
    assert got == want
    # the other comparisons are untouched
    assert len(_walk(browser, "c2")["rows"]) == 7


def test_a_url_with_a_filter_opens_filtered(browser: Chromium, page: Path) -> None:
    rows = small_doc()["samples"][0]["rows"]
    _open(browser, page, "#c1:outcome=a_right&label=No")
    got = [r["index"] for r in _walk(browser, "c1")["rows"]]
    want = [r["index"] for r in rows if r["outcome"] == "a_right" and r["label"] == "No"]
    assert got == want and got
    assert (
        browser.evaluate(
            "document.querySelector('section.cmp[data-key=c1] select[data-filter=outcome]').value"
        )
        == "a_right"
    )
    # a hash set later (a link, the address bar) applies too
    browser.evaluate("location.hash = '#c2:label=generic'")
    browser.wait_for("document.querySelectorAll('section.cmp[data-key=c2] .sample').length === 2")
    labels = browser.evaluate(
        "[...document.querySelectorAll('section.cmp[data-key=c2] .sample')].map(r => r.dataset.label)"
    )
    assert labels == ["generic", "generic"]


def test_row_texts_are_text_not_code(browser: Chromium, page: Path) -> None:
    _open(browser, page)
    first = "section.cmp[data-key=c1] .sample[data-index='0']"
    assert browser.evaluate(f'document.querySelector("{first} .input").textContent') == XSS_INPUT
    outputs = browser.evaluate(
        f'[...document.querySelectorAll("{first} .output")].map(o => o.textContent)'
    )
    assert outputs[1] == XSS_OUTPUT
    assert browser.evaluate("typeof window.__xss") == "undefined"
    assert browser.evaluate("document.scripts.length") == 2
    assert browser.evaluate("document.querySelectorAll('main img').length") == 1  # the figure
    notes = browser.evaluate("document.querySelector('ul.notes').textContent")
    assert "<script>window.__xss = 3</script>" in notes
    assert browser.evaluate("document.title") == "Sweep demo <b>bold?</b>"


def test_the_tables_say_what_was_tested(browser: Chromium, page: Path) -> None:
    _open(browser, page)
    table = browser.evaluate("document.querySelector('table.comparisons').innerText")
    assert "2000 resamples, 94 clusters by prompt" in table
    assert "0.0360\nHolm over 3 tests" in table
    assert "best vs worst of k = 4; p after selection 0.0400" in table
    assert "+0.550 [−0.120, +0.020]" not in table and "−0.050 [−0.120, +0.020]" in table
    notes = browser.evaluate("document.querySelector('#report').innerText")
    assert "T1: paired permutation test (per-example swaps of A and B)" in notes
    assert "I1: Bayesian: per-group Jeffreys Dirichlet posteriors, 4000 draws" in notes
    link = browser.evaluate(
        "document.querySelector('section.cmp[data-key=c1] .sample a.run-link').href"
    )
    assert link == "http://127.0.0.1:5000/#/experiments/7/runs/run-a1"
    assert (
        browser.evaluate("document.querySelectorAll('section.cmp[data-key=c2] a.run-link').length")
        == 0
    )
    slices = browser.evaluate(
        "[...document.querySelectorAll('section.cmp[data-key=c1] table.slice-table')].map(t => t.innerText)"
    )
    assert len(slices) == 2
    # the flag says "small" once, the note goes on from there
    assert "\tsmall (10 rows < 30): not intended for rigorous" in slices[0]
    said = browser.evaluate(
        "document.querySelector('section.cmp[data-key=c1] .slices .footnotes').textContent"
    )
    assert "Holm over the k slices of this comparison" in said and "2000 resamples" in said
    looks = browser.evaluate("document.querySelectorAll('.seq table.looks tbody tr').length")
    assert looks == 4
    assert browser.evaluate("document.querySelectorAll('.seq svg circle').length") == 4
    # the first look has no bounds yet: both halves of its bar are drawn dashed
    dashed = "document.querySelectorAll('.seq svg line[stroke-dasharray=\"2 3\"]').length"
    assert browser.evaluate(dashed) == 2


def test_it_fits_an_800px_window(browser: Chromium, page: Path) -> None:
    try:
        browser.viewport(800, 900)
        _open(browser, page)
        assert browser.evaluate("document.documentElement.scrollWidth") <= 800
    finally:
        browser.viewport(1400, 900)


def test_it_works_inside_mlflows_artifact_view(browser: Chromium, tmp_path: Path) -> None:
    """MLflow shows an HTML artifact in `<iframe sandbox="allow-scripts">` of a blob: URL (an
    opaque origin): the page must build, filter and keep its filter without failing there."""
    html = render_html(small_doc())
    wrapper = tmp_path / "mlflow_like.html"
    wrapper.write_text(
        '<!DOCTYPE html><html><body><iframe id="f" sandbox="allow-scripts" '
        'style="width:1200px;height:800px"></iframe><script>const html = '
        + json.dumps(html).replace("</", "<\\/")
        + ';document.getElementById("f").src = URL.createObjectURL('
        'new Blob([html], {type: "text/html"}));</script></body></html>',
        encoding="utf-8",
    )
    browser.open("about:blank")
    browser.open(wrapper)
    frame = browser.frame(READY)
    assert browser.evaluate(READY, frame) == "1"
    assert browser.evaluate("location.protocol", frame) == "blob:"
    browser.select("section.cmp[data-key=c1] select[data-filter=outcome]", "b_right", frame)
    outcomes = browser.evaluate(
        "[...document.querySelectorAll('section.cmp[data-key=c1] .sample')]"
        ".map(r => r.dataset.outcome)",
        frame,
    )
    want = [r for r in small_doc()["samples"][0]["rows"] if r["outcome"] == "b_right"]
    assert outcomes == ["b_right"] * min(PAGE, len(want))
    assert browser.evaluate("location.hash", frame) == "#c1:outcome=b_right"
    assert browser.evaluate("typeof window.__xss", frame) == "undefined"


def test_a_page_turned_from_below_starts_at_its_first_row(browser: Chromium, page: Path) -> None:
    _open(browser, page)
    sec = "section.cmp[data-key=c1]"
    browser.evaluate(f"document.querySelectorAll('{sec} .sample')[24].scrollIntoView()")
    browser.evaluate(f"document.querySelector('{sec} button[data-page=next]').click()")
    first = browser.evaluate(f"document.querySelector('{sec} .sample').getBoundingClientRect().top")
    assert 0 <= first < browser.evaluate("innerHeight") / 2
    assert browser.evaluate(f"document.querySelector('{sec} .sample').dataset.index") == "75"


def test_numbers_round_as_the_console_does(browser: Chromium, tmp_path: Path) -> None:
    """An exact tie rounds to even, as Python's format (the console, comparisons.csv) does:
    an exact permutation p of 0.53125 reads 0.5312 on the page too, not toFixed's 0.5313."""
    doc = small_doc()
    doc["comparisons"][0] = {**doc["comparisons"][0], "p_value": 0.53125, "score_a": 0.4375}
    path = tmp_path / "index.html"
    path.write_text(render_html(doc), encoding="utf-8")
    _open(browser, path)
    row = browser.evaluate("document.querySelector('table.comparisons tbody tr').innerText")
    assert f"{0.53125:.4f}" == "0.5312" and "0.5312" in row and "0.5313" not in row
    assert f"{0.4375:.3f}" in row  # 0.438: a tie with an odd last digit rounds up in both
