"""`workbench grade export|import`, `workbench doctor` and `workbench ui`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from experiments import bounds, output
from experiments.cli.app import app, grade_app
from experiments.cli.options import HF, JSON, DataDir, PromptsDir, _catalog, bounded, friendly
from experiments.settings import NO_TRACK_ENV


@grade_app.command("export")
@friendly
def grade_export(
    trial: Annotated[
        str, typer.Argument(help="A trial id (or a unique prefix) or its folder under runs/.")
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="CSV to write (default: grades-<trial id>.csv)."),
    ] = None,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
) -> None:
    """Write a trial's generations to a CSV with an empty 'grade' column for graders."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.trials.grading import export_csv, find_trial

    trial_dir = find_trial(trial)
    target = out or Path(f"grades-{trial_dir.name[:12]}.csv")
    n = export_csv(trial_dir, _catalog(data_dir, hf, prompts_dir), target)
    typer.echo(output.grade_export(str(target), n, trial_dir.name))


@grade_app.command("import")
@friendly
def grade_import(
    file: Annotated[Path, typer.Argument(help="A CSV written by 'workbench grade export'.")],
    no_track: Annotated[
        bool,
        typer.Option("--no-track", envvar=NO_TRACK_ENV, help="Do not update the MLflow run."),
    ] = False,
    as_json: JSON = False,
) -> None:
    """Check a graded CSV and score it into its trial (and its MLflow run, if tracked)."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.tracking.grades import import_grades

    summary = import_grades(file, track=not no_track)
    typer.echo(output.as_json(summary) if as_json else output.grade_import(summary))


@app.command()
@friendly
def doctor() -> None:
    """Check that the embedded models run on this machine.

    Prints the llama.cpp build, the CPU, the load settings and each model's file and sha256,
    then runs a real prompt through each model in a child process. Exit 1 on a problem.
    """
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.llm.doctor import report

    raise typer.Exit(report(typer.echo))


@app.command()
@friendly
def ui(
    port: Annotated[int, bounded("--port", bounds.PORT, "Port for the MLflow UI.")] = 5000,
    host: Annotated[
        str, typer.Option("--host", help="Address the MLflow UI listens on.")
    ] = "127.0.0.1",
) -> None:
    """Start the MLflow UI on the configured tracking store (exit 1 if it cannot serve)."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.tracking import serve_ui

    raise typer.Exit(serve_ui(port, host, say=lambda text: typer.echo(text, err=True)))
