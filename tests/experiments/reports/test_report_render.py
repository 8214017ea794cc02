"""The HTML report's renderer without a browser (issue 34): the page holds the whole doc as
JSON that no row text can break out of, is the same bytes for the same doc, and ships its
assets as package data."""

from __future__ import annotations

import json
import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

from experiments.reports.html import render
from experiments.reports.html.render import ReportDocError, embedded_json, render_html
from tests.support.report_docs import XSS_INPUT, XSS_OUTPUT, small_doc

ROOT = Path(__file__).resolve().parents[3]
DATA = re.compile(r'<script type="application/json" id="report-data">(.*?)</script>', re.S)


def _data(page: str) -> str:
    found = DATA.findall(page)
    assert len(found) == 1
    return str(found[0])


def test_the_page_embeds_the_whole_doc() -> None:
    doc = small_doc()
    back = json.loads(_data(render_html(doc)))
    assert back == doc
    shown = [(s["key"], r["index"]) for s in back["samples"] for r in s["rows"]]
    assert len(shown) == 42 and len(set(shown)) == 42


def test_no_row_text_can_close_the_script() -> None:
    page = render_html(small_doc())
    data = _data(page)
    # the regex stops at the first "</script>": had a text closed it, the JSON would be cut
    assert json.loads(data)["inputs"]["hearsay"]["0"] == XSS_INPUT
    assert json.loads(data)["samples"][0]["rows"][0]["b"]["output"] == XSS_OUTPUT
    assert "<" not in data and ">" not in data and "&" not in data
    assert page.count("</script>") == 2  # the data's and the script's own
    assert page.lower().count("<script") == 2


def test_the_title_is_escaped() -> None:
    page = render_html(small_doc())
    assert "<title>Sweep demo &lt;b&gt;bold?&lt;/b&gt;</title>" in page


def test_same_doc_same_bytes() -> None:
    assert render_html(small_doc()) == render_html(small_doc())


def test_a_slot_word_in_the_data_stays_data() -> None:
    doc = small_doc()
    doc["notes"] = ["{{CSS}} {{DATA}} {{JS}}"]
    page = render_html(doc)
    assert json.loads(_data(page))["notes"] == ["{{CSS}} {{DATA}} {{JS}}"]
    assert page.count("{{") == 3  # the note's own three, inside the JSON


def test_nan_becomes_null() -> None:
    doc = small_doc()
    doc["comparisons"][0]["score_a"] = float("nan")
    doc["comparisons"][0]["ci_high"] = float("inf")
    back = json.loads(embedded_json(doc))
    assert back["comparisons"][0]["score_a"] is None
    assert back["comparisons"][0]["ci_high"] is None


def test_a_wrong_doc_says_what_to_do() -> None:
    doc = small_doc()
    doc["version"] = 2
    with pytest.raises(ReportDocError, match=r"version 2.*rebuild"):
        render_html(doc)
    with pytest.raises(ReportDocError, match="lacks samples"):
        render_html({"version": 1, "title": "t", "comparisons": []})


def test_the_page_needs_nothing_from_the_network() -> None:
    page = render_html(small_doc())
    outside = re.findall(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)
    assert outside == []
    assert "@import" not in page and "fetch(" not in page


def test_the_assets_ship_as_package_data() -> None:
    """A wheel holds only what pyproject's package-data names: every asset must match."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["experiments.reports.html"]
    folder = Path(render.__file__).parent
    assets = sorted(p.relative_to(folder).as_posix() for p in (folder / "assets").iterdir())
    assert assets == ["assets/page.html", "assets/report.css", "assets/report.js"]
    for name in assets:
        assert any(fnmatch(name, p) for p in patterns), name
