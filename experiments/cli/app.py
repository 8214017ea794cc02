"""The `workbench` Typer apps (`app`, its `grade` group), the main options, and `main`, the
entry point. The commands are registered by the modules `experiments.cli` imports.

A command stopped by Ctrl-C exits 130 with one line on stderr (`interrupted_line`): the
commands whose work a rerun picks up say so. How help and flags show: `help_format`.
"""

from __future__ import annotations

import gc
import sys
from typing import Annotated

import typer

from experiments import output
from experiments.cli.help_format import WorkbenchGroup, show_flags_bare
from promptlib.errors import WorkbenchError

show_flags_bare()
app = typer.Typer(
    name="workbench",
    cls=WorkbenchGroup,
    help="Prompt-engineering experiment workbench for LegalBench.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
grade_app = typer.Typer(
    help="Hand grading: blind sheets, agreement, calibrated comparisons, rule_qa's 1/0 grades.",
    no_args_is_help=True,
)
app.add_typer(grade_app, name="grade")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(output.version_line(version("legal-prompt-workbench")))
        except PackageNotFoundError:
            typer.echo(output.version_line(None))
        raise typer.Exit(0)


@app.callback()
def main_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Prompt-engineering experiment workbench for LegalBench."""


INTERRUPTED = (130, 143)  # the shell's exit codes for SIGINT and SIGTERM
RESUMABLE = ("run", "sweep", "optimize", "import")
"""Commands whose work a rerun picks up (answers in the response cache, trials and studies
in their stores): their Ctrl-C line says so."""


def interrupted_line(argv: list[str]) -> str:
    """The stderr line of a command stopped by Ctrl-C (or SIGTERM) that said nothing itself."""
    command = next((a for a in argv if not a.startswith("-")), "")
    return (
        "interrupted; rerun the same command to resume" if command in RESUMABLE else "interrupted"
    )


def _said(exc: BaseException) -> bool:
    """Whether the user was told why the command exited: by a workbench error's line (an
    interrupted study's), or it was no interrupt. Not for a KeyboardInterrupt that Typer
    turned into exit 130 with nothing said."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    if any(isinstance(e, WorkbenchError) for e in seen):
        return True
    return not any(isinstance(e, KeyboardInterrupt) for e in seen)


GC_THRESHOLD = (100_000, 10, 10)
"""The collector's thresholds while a command runs. A command's imports (MLflow, SQLAlchemy,
matplotlib) allocate objects that live as long as the process; at CPython's default (700
young objects) the collector ran ~900 times over them and found nothing: 0.3 s of a fresh
`workbench run` (`benchmarks/overhead.py`). A cycle is still collected: one that dies young
after 100,000 allocations; one that outlived a young pass when the middle generation is
collected (every 1M allocations, against 7,000 by default) or the oldest (every 10M, and only
once a quarter of it is new, as by default): a long sweep holds such garbage longer, not
for ever."""


def main() -> None:
    code: object = 0
    silent = False  # an interrupt nothing has said a line about
    default_threshold = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLD)
    try:
        app()
    except SystemExit as e:
        code = e.code
        silent = not _said(e)
        raise
    except KeyboardInterrupt:
        code = 130
        silent = True
        raise
    finally:
        # Exiting (also on Ctrl-C): the collector's last pass over litellm's and MLflow's
        # objects frees nothing the OS does not, and took 5.6 s of a busy machine (0.2 s
        # frozen), which Ctrl-C must not wait for.
        gc.freeze()
        gc.set_threshold(*default_threshold)
        if code in INTERRUPTED:
            if silent:
                print(interrupted_line(sys.argv[1:]), file=sys.stderr)
            _exit_now(int(str(code)))


def _exit_now(code: int) -> None:
    """Leave at once after an interrupt. Every result was written (atomically) before; what
    is left are abandoned call threads, one of which may hold the import lock half-way
    through a lazy import: interpreter shutdown then waits on it for ever."""
    import contextlib
    import os
    import sys

    # start-up time: the CLI imports a command's modules when it runs
    from experiments.llm.calls import stop_all_calls

    stop_all_calls()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
