"""mkdocs hook: the CLI reference page, generated from the Typer app at every build.

The page `reference/cli.md` holds a marker that this hook replaces with every command's
usage, description and options, read from `typer.main.get_command(app)`: the reference is
the installed command's own help, so it cannot drift from it (tests/test_docs.py checks the
built page names every command).
"""

from __future__ import annotations

import html
import inspect
from typing import Any

MARKER = "<!-- cli-reference -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any, **_: Any) -> str:
    """Replace the marker with the generated reference (other pages pass through)."""
    if MARKER not in markdown:
        return markdown
    # imported here: only the CLI page needs the app (and its start-up cost)
    import typer.main

    from experiments.cli import app

    return markdown.replace(MARKER, cli_markdown(typer.main.get_command(app)))


def cli_markdown(root: Any) -> str:
    """Markdown for `root` and every command under it, in `workbench --help` order."""
    from typer._click.core import Context

    out: list[str] = []

    def walk(command: Any, ctx: Any, path: str) -> None:
        if getattr(command, "hidden", False):
            return
        out.append(_command(command, ctx, path))
        list_commands = getattr(command, "list_commands", None)
        if list_commands is None:
            return
        for name in list_commands(ctx):
            sub = command.get_command(ctx, name)
            walk(sub, Context(sub, info_name=name, parent=ctx), f"{path} {name}")

    walk(root, Context(root, info_name="workbench"), "workbench")
    return "\n".join(out)


def _text(raw: str | None) -> str:
    """A docstring as markdown paragraphs (click's `\\b` and `\\f` markers dropped)."""
    text = inspect.cleandoc((raw or "").split("\f")[0]).replace("\b\n", "")
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
    return "\n\n".join(_escape(p) for p in paragraphs)


def _escape(text: str) -> str:
    return html.escape(text, quote=False).replace("*", r"\*").replace("|", r"\|")


def _command(command: Any, ctx: Any, path: str) -> str:
    level = "##" if path.count(" ") <= 1 else "###"
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    args = [p.name.upper() for p in params if p.param_type_name == "argument"]
    has_options = any(p.param_type_name == "option" for p in params)
    usage = " ".join([path, *(["[OPTIONS]"] if has_options else []), *args])
    if getattr(command, "list_commands", None) is not None and path != "workbench":
        usage += " COMMAND [ARGS]..."
    lines = [f"{level} `{path}`", "", _text(command.help), "", "```", usage, "```", ""]
    rows = []
    for p in params:
        record = p.get_help_record(ctx)
        if record is None:
            continue
        name, help_text = record
        if p.param_type_name == "argument":
            name = p.name.upper()
        rows.append(f"| `{name}` | {_escape(' '.join(help_text.split()))} |")
    if rows:
        lines += ["| option | meaning |", "| --- | --- |", *rows, ""]
    return "\n".join(lines)
