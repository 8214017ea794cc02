"""`--help` is for the person at the terminal (issue 31, points 6 and 8).

`workbench sweep --help` printed a code comment ("Long because its signature declares the
command's options (Typer reads them from it)..."), and every flag showed as `--dry-run
<bool>`, so users typed `--dry-run true`. The tests walk every command and group of the CLI,
so a command added later is held to the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer.main
from typer.core import TyperGroup, TyperOption
from typer.testing import CliRunner

from experiments.cli import app

# the click command built once, not at each of the hundreds of `invoke`s
pytestmark = pytest.mark.usefixtures("one_click_command")

WIDTH = 80
"""The terminal the help must fit."""
SUMMARY_CHARS = 90
"""The most a command's one-line summary (its line in the commands list) may take."""
DESCRIPTION_LINES = 12
"""The most lines a command's description may take above its options, at `WIDTH`."""
CODE_NOTES = [
    r"\bTyper\b",
    r"\bsignature\b",
    r"fmt:",
    r"noqa",
    r"type: ignore",
    r"\bdocstring",
    r"\bwiring\b",
    r"Long because",
    r"`",  # a code reference
    r"\w\(\)",  # a call: canonical_json()
    r"\b(?:experiments|promptlib)\.\w",  # a module path
    "\f",
]


def _walk(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    if isinstance(command, TyperGroup):
        for name, sub in sorted(command.commands.items()):
            yield from _walk(sub, (*path, name))


COMMANDS = list(_walk(typer.main.get_command(app)))
IDS = [" ".join(path) or "workbench" for path, _ in COMMANDS]
LEAVES = [(path, c) for path, c in COMMANDS if not isinstance(c, TyperGroup)]
FLAGS = [
    (path, param.opts[0])
    for path, command in LEAVES
    for param in command.params
    if isinstance(param, TyperOption) and param.is_flag
]


def _help(path: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.setenv("NO_COLOR", "1")
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, (path, result.output, result.exception)
    return re.sub(r"\x1b\[[0-9;]*m", "", result.output)


def test_the_walk_finds_every_command() -> None:
    found = {" ".join(path) for path, _ in COMMANDS}
    for name in ["run", "sweep", "optimize", "import", "grade export", "variants generate"]:
        assert name in found
    assert len(LEAVES) >= 14
    assert {(("sweep",), "--dry-run"), (("run",), "--no-cache")} <= set(FLAGS)


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=IDS)
def test_help_has_no_code_notes_and_fits_a_terminal(
    path: tuple[str, ...], command: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = _help(path, monkeypatch)
    notes = [(p, line) for line in shown.splitlines() for p in CODE_NOTES if re.search(p, line)]
    assert notes == [], "move these notes into code comments"
    assert all(len(line.rstrip()) <= WIDTH for line in shown.splitlines()), shown
    if path:  # a command's or group's own help: the line the commands list shows
        summary = (command.help or "").strip().split("\n\n")[0]
        assert "\n" not in summary and 0 < len(summary) <= SUMMARY_CHARS, summary
    lines = shown.splitlines()
    top = [line for line in lines[: next(i for i, x in enumerate(lines) if "╭" in x)]]
    description = [line for line in top if line.strip() and "Usage:" not in line]
    assert len(description) <= DESCRIPTION_LINES, "\n".join(description)


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=IDS)
def test_flags_show_no_value(
    path: tuple[str, ...], command: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flag is shown as `--dry-run`, never `--dry-run <bool>` (or BOOLEAN)."""
    shown = _help(path, monkeypatch)
    assert "<bool>" not in shown and "BOOLEAN" not in shown, shown
    for param in command.params:
        if isinstance(param, TyperOption) and param.is_flag:
            row = next(line for line in shown.splitlines() if f"{param.opts[0]} " in line)
            after = row.split(param.opts[0], 1)[1].split()
            assert not after or not after[0].startswith("<"), row


@pytest.mark.parametrize(("path", "flag"), FLAGS, ids=[f"{' '.join(p)} {f}" for p, f in FLAGS])
def test_a_flag_given_true_says_to_give_it_alone(path: tuple[str, ...], flag: str) -> None:
    result = CliRunner().invoke(app, [*path, flag, "true"])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.replace("│", " ").split())
    assert f"{flag} is a flag and takes no value: write {flag} alone" in said, said
    assert f"(not {flag} true)" in said and "Traceback" not in said


@pytest.mark.parametrize("word", ["yes", "FALSE", "off"])
def test_dry_run_true_is_refused_before_the_spec_is_read(word: str) -> None:
    """Before the fix: `sweep spec.yaml --dry-run true` said "Got unexpected extra
    argument(s) (true)", and `sweep --dry-run true` read a spec file named "true"."""
    for args in (["sweep", "missing.yaml", "--dry-run", word], ["sweep", "--dry-run", word]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "--dry-run is a flag and takes no value" in result.output, result.output
        assert "unexpected extra argument" not in result.output


def test_only_a_yes_no_word_after_a_flag_is_refused() -> None:
    """`--hf 0abc`: a trial id (hex, maybe digits only) after a flag is the command's
    argument, not the flag's value; after `--` nothing is an option."""
    from experiments.cli.help_format import flag_given_a_value

    export = dict(LEAVES)[("grade", "export")]
    assert flag_given_a_value(export, ["--hf", "0abc"]) is None
    assert flag_given_a_value(export, ["--hf", "1"]) is None
    assert flag_given_a_value(export, ["x", "--", "--hf", "true"]) is None
    assert flag_given_a_value(export, ["x", "--hf", "On"]) == ("--hf", "On")
