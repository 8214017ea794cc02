"""The `workbench` Typer apps (`app`, its `grade` group), the main options, and `main`, the
entry point. The commands are registered by the modules `experiments.cli` imports.
"""

from __future__ import annotations

from typing import Annotated

import typer

from experiments import output

app = typer.Typer(
    name="workbench",
    help="Prompt-engineering experiment workbench for LegalBench.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
grade_app = typer.Typer(
    help="Hand grading (rule_qa): export a trial's generations to CSV, import the grades.",
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


def main() -> None:
    code: object = 0
    try:
        app()
    except SystemExit as e:
        code = e.code
        raise
    except KeyboardInterrupt:
        code = 130
        raise
    finally:
        # Exiting (also on Ctrl-C): the collector's last pass over litellm's and MLflow's
        # objects frees nothing the OS does not, and took 5.6 s of a busy machine (0.2 s
        # frozen), which Ctrl-C must not wait for.
        import gc

        gc.freeze()
        if code in INTERRUPTED:
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
