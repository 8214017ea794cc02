"""reports/<sweep>/index.html (issue 34): opens the latest run's HTML report, lists every run."""

from __future__ import annotations

import re
from pathlib import Path

from experiments.reports.folders import INDEX, latest_id, write_run

A, B = "a" * 64, "b" * 64


def test_the_sweep_page_opens_the_latest_report_and_lists_the_runs(tmp_path: Path) -> None:
    write_run(tmp_path, "demo", A, {"comparisons.json": "{}", INDEX: "<p>A</p>"})
    page = (tmp_path / "demo" / INDEX).read_text(encoding="utf-8")
    assert f'content="0; url={A}/index.html"' in page
    write_run(tmp_path, "demo", B, {"comparisons.json": "{}", INDEX: "<p>B</p>"})
    page = (tmp_path / "demo" / INDEX).read_text(encoding="utf-8")
    assert latest_id(tmp_path / "demo") == B
    assert f'content="0; url={B}/index.html"' in page  # relative: the folder can move
    links = re.findall(r'<li><a href="([^"]+)"', page)
    assert links == [f"{B}/index.html", f"{A}/index.html"]  # the latest first
    assert "(latest)" in page.split(f"{A}/index.html")[0]
    assert (tmp_path / "demo" / B / INDEX).read_text() == "<p>B</p>"


def test_a_run_without_a_page_is_listed_by_its_folder(tmp_path: Path) -> None:
    write_run(tmp_path, "demo", A, {"comparisons.json": "{}"})
    assert not (tmp_path / "demo" / INDEX).exists()  # no page anywhere yet: none written
    write_run(tmp_path, "demo", B, {"comparisons.json": "{}", INDEX: "<p>B</p>"})
    page = (tmp_path / "demo" / INDEX).read_text(encoding="utf-8")
    assert f'<a href="{A}/">' in page and "no HTML report" in page


def test_the_sweep_name_is_escaped(tmp_path: Path) -> None:
    write_run(tmp_path, "a&b", A, {INDEX: "x"})
    page = (tmp_path / "a&b" / INDEX).read_text(encoding="utf-8")
    assert "Sweep a&amp;b" in page and "Sweep a&b" not in page
