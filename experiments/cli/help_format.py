"""How commands show in `--help`, and flags in a usage error: for the person at the terminal.

- Flags look like flags. Typer's help lists a type beside every option, a flag's too:
  `--dry-run <bool>` reads as an option that takes a value, so users typed `--dry-run true`,
  which Typer then refused as "Got unexpected extra argument(s) (true)", or took `true` as
  the command's next argument. A flag shows no type here (`show_flags_bare`), and a flag
  followed by a yes/no word is refused before the command runs, with a usage error that
  says to give the flag alone (`WorkbenchGroup`).
- A description is wrapped to the terminal. Typer's rich help keeps a docstring's line
  breaks, so on an 80-column terminal every line of a 90-column docstring broke in two
  (`reflow`).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable
from typing import Any

import typer.core
from typer._click.core import Context
from typer._click.exceptions import UsageError

FLAG_WORDS = frozenset({"true", "false", "yes", "no", "on", "off"})
"""Words that read as a flag's value. Not digits: a trial id prefix may be one."""


def show_flags_bare() -> None:
    """A flag's type column in `--help` is empty: `--dry-run`, not `--dry-run <bool>`.

    Typer (0.29) asks each option for the type it shows (`display_type_rich`) and has no
    setting to leave a flag's out; its plain-text help already shows a flag alone."""
    option = typer.core.TyperOption
    shown: Callable[..., str | None] = option.display_type_rich
    if getattr(shown, "_workbench_bare_flags", False):
        return

    def display_type_rich(self: typer.core.TyperOption, ctx: Any) -> str | None:
        if self.is_flag and self.metavar is None:
            return None
        return shown(self, ctx)

    display_type_rich._workbench_bare_flags = True  # type: ignore[attr-defined]
    option.display_type_rich = display_type_rich  # type: ignore[method-assign]


def flag_values(command: Any) -> set[str]:
    """The option strings of `command`'s flags (``--dry-run``, ``--no-cache``, ``-f``)."""
    return {
        opt
        for param in getattr(command, "params", ())
        if isinstance(param, typer.core.TyperOption) and param.is_flag
        for opt in (*param.opts, *param.secondary_opts)
    }


def flag_given_a_value(command: Any, args: list[str]) -> tuple[str, str] | None:
    """(flag, word) for the first flag of `command` in `args` followed by a yes/no word."""
    flags = flag_values(command)
    for flag, word in itertools.pairwise(args):
        if flag == "--":
            return None
        if flag in flags and word.lower() in FLAG_WORDS:
            return flag, word
    return None


def flag_message(flag: str, word: str) -> str:
    """The usage error for ``--flag true``."""
    return (
        f"{flag} is a flag and takes no value: write {flag} alone to turn it on, or leave it "
        f"out (not {flag} {word})"
    )


def reflow(text: str | None) -> str | None:
    """A help text with each paragraph on one line, for the terminal to wrap; a paragraph
    starting with ``\\b`` (Click's "keep my line breaks") is kept as it is."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(
        p if p.startswith("\b") else " ".join(line.strip() for line in p.splitlines())
        for p in paragraphs
    )


def _reflow_tree(command: Any) -> None:
    command.help = reflow(command.help)
    for sub in getattr(command, "commands", {}).values():
        _reflow_tree(sub)


class WorkbenchGroup(typer.core.TyperGroup):
    """The `workbench` group: its commands' help wrapped to the terminal (`reflow`), and a
    flag given a value refused before the command runs."""

    def get_command(self, ctx: Context, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _reflow_tree(command)
        return command

    def invoke(self, ctx: Context) -> Any:
        found = _leaf(ctx, [*ctx._protected_args, *ctx.args])
        if found is not None:
            leaf_ctx, args = found
            given = flag_given_a_value(leaf_ctx.command, args)
            if given is not None:
                raise UsageError(flag_message(*given), ctx=leaf_ctx)
        return super().invoke(ctx)


def _leaf(ctx: Context, tokens: list[str]) -> tuple[Context, list[str]] | None:
    """The context of the command `tokens` name (through the groups, ``grade import``), for
    its usage line, and the tokens after its name; None if they name no command."""
    at, command, rest = ctx, ctx.command, tokens
    while isinstance(command, typer.core.TyperGroup):
        if not rest:
            return None
        sub = command.get_command(at, rest[0])
        if sub is None:
            return None  # an unknown command: the group's own error says so
        at = sub.make_context(rest[0], [], parent=at, resilient_parsing=True)
        command, rest = sub, rest[1:]
    return at, rest
