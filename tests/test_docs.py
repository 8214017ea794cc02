"""The README stays short, every link in it and in the docs resolves, and the docs site's CLI
reference is generated from the Typer app (issue 32, part 5).

The site itself is built with `mkdocs build --strict` (`make docs`, run by `make test`), which
also checks the links and anchors between docs pages; these tests pin what the build alone
would not: the README's length and links, and that the CLI page is made from the app rather
than checked in.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MAX_README_LINES = 150
#: [text](target) and ![alt](target); a target is cut at whitespace (a title may follow)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s[^)]*)?\)")


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(DOCS.rglob("*.md"))]


def _relative_links(path: Path) -> list[str]:
    """The links of a markdown file that point into the repository (not URLs, not anchors)."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # code blocks hold no links
    return [
        target
        for target in LINK.findall(text)
        if not re.match(r"[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")
    ]


def _slug(heading: str) -> str:
    """A heading's anchor as mkdocs' toc and GitHub make it (lower case, words joined by -)."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", text)).strip("-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {_slug(h) for h in re.findall(r"^#{1,6}\s+(.+)$", text, flags=re.M)}


def _commands(group: Any, ctx: Any, path: str = "workbench") -> list[str]:
    """Every command path of the Typer app: `workbench run`, `workbench grade export`, ..."""
    from typer._click.core import Context

    found = []
    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)
        found.append(f"{path} {name}")
        if hasattr(sub, "list_commands"):
            found += _commands(sub, Context(sub, info_name=name, parent=ctx), f"{path} {name}")
    return found


def _all_commands() -> list[str]:
    import typer.main
    from typer._click.core import Context

    from experiments.cli import app

    root = typer.main.get_command(app)
    return _commands(root, Context(root, info_name="workbench"))


def test_readme_is_at_most_150_lines() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines (at most {MAX_README_LINES}): move the detail into "
        "a page under docs/ and link it"
    )


def test_the_readme_keeps_the_two_commands_and_the_docs_links() -> None:
    text = (ROOT / "README.md").read_text()
    head = "\n".join(text.splitlines()[:30])
    assert "make demo" in head, "the newcomer's first command belongs on the first screen"
    assert "    make test" in text
    for page in ("docs/tutorial.md", "docs/reference/cli.md", "CONTRIBUTING.md"):
        assert f"]({page})" in text, page


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    broken = []
    for target in _relative_links(path):
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve()
        if not resolved.exists():
            broken.append(f"{target} (no file {resolved})")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target} (no heading #{anchor} in {resolved.name})")
    assert not broken, f"{path.relative_to(ROOT)}: broken links: {broken}"


def test_a_docs_path_the_code_names_exists() -> None:
    """A help text or error pointing at a docs page (`See docs/how-to/ray.md`) is not stale."""
    named = {
        m
        for package in ("experiments", "promptlib")
        for source in (ROOT / package).rglob("*.py")
        for m in re.findall(r"\bdocs/[\w./-]+\.md\b", source.read_text())
    }
    assert named, "the CLI's help names docs/how-to/ray.md: the scan found nothing"
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"the code names docs pages that do not exist: {missing}"


def test_the_cli_page_is_generated_not_checked_in() -> None:
    """The source page holds only the marker; the hook fills in every command of the app."""
    sys.path.insert(0, str(DOCS / "hooks"))
    try:
        import cli_reference
    finally:
        sys.path.remove(str(DOCS / "hooks"))
    source = (DOCS / "reference" / "cli.md").read_text()
    assert cli_reference.MARKER in source
    assert "`workbench sweep`" not in source, "the CLI reference is generated: do not paste it"
    page = cli_reference.on_page_markdown(source, None, None, None)
    for command in _all_commands():
        assert f"`{command}`" in page, command
    assert "--executor" in page and "--variant-file" in page  # options, not only names


@pytest.mark.slow
def test_the_site_builds_strict_with_every_command_on_the_cli_page(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    html = (site / "reference" / "cli.html").read_text()
    for command in _all_commands():
        assert f"<code>{command}</code>" in html, command
    assert (site / "tutorial.html").exists() and (site / "images" / "mlflow-ui.png").exists()
