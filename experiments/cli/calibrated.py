"""`workbench grade report` and `workbench grade next`: hand grades and judge scores combined
(`experiments.calibrated`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from experiments import bounds, output
from experiments.cli.app import grade_app
from experiments.cli.options import (
    HF,
    JSON,
    DataDir,
    Explain,
    PromptsDir,
    _catalog,
    bounded,
    friendly,
)
from experiments.settings import NO_TRACK_ENV

SweepRef = Annotated[
    str, typer.Argument(help="A sweep's name (its latest run), a sweep id or an MLflow run id.")
]
Judge = Annotated[
    str | None,
    typer.Option("--judge", help="The judge run's id (or prefix); needed when there are several."),
]


@grade_app.command("report")
@friendly
def grade_report(
    sweep: SweepRef,
    judge: Judge = None,
    task: Annotated[str | None, typer.Option("--task", help="Only this task.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only this model.")] = None,
    as_json: JSON = False,
    explain: Explain = False,
    no_track: Annotated[
        bool,
        typer.Option(
            "--no-track", envvar=NO_TRACK_ENV, help="Do not put the numbers on the sweep's runs."
        ),
    ] = False,
) -> None:
    """The calibrated comparison of a sweep: hand grades and judge scores by PPI."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.calibrated import sweep_arms
    from experiments.calibrated.by_cell import report_by_cell
    from experiments.calibrated.refresh import refresh_sweep
    from experiments.tracking import Tracker

    tracker = Tracker()
    found = sweep_arms(tracker, sweep)
    # each (task, model) with its own judge run (a rubric, so a judge id, is per task)
    report = report_by_cell(
        found.name, found.arms, found.pairs, judge=judge, task=task, model=model,
        pairs_note=found.note,
    )  # fmt: skip
    # the whole sweep's numbers on its MLflow runs (a --task/--model view logs them all)
    whole = report if task is None and model is None else None
    logged = refresh_sweep(tracker, sweep, report=whole) if judge is None and not no_track else None
    if as_json:
        typer.echo(output.as_json(report.to_dict()))
    else:
        text = output.calibrated_table(report, explain)
        typer.echo(text if logged is None else f"{text}\n{logged.line()}")


@grade_app.command("next")
@friendly
def grade_next(
    sweep: SweepRef,
    task: Annotated[str, typer.Option("--task", help="The task of the comparison.")],
    model: Annotated[str | None, typer.Option("--model", help="Its model.")] = None,
    pair: Annotated[str | None, typer.Option("--pair", help="A,B (default: the first).")] = None,
    criterion: Annotated[str, typer.Option("--criterion")] = "correctness",
    target: Annotated[
        float | None,
        bounded("--target", bounds.HALF_WIDTH, "Stop at this half-width of A − B."),
    ] = None,
    n: Annotated[int, bounded("-n", bounds.PROPOSE, "How many items to propose.")] = 20,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="The new sheet's CSV (default: <sheet>-next-<j>.csv here)."
        ),
    ] = None,
    judge: Judge = None,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
    explain: Explain = False,
) -> None:
    """The next rows to grade for a comparison, as a new blind sheet, or when to stop.

    The rows are the next of the first sheet's random order (uniform sampling keeps the
    graded rows a random subset)."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.calibrated import CalibratedError, sweep_arms
    from experiments.calibrated.next import next_items
    from experiments.tracking import Tracker

    found = sweep_arms(Tracker(), sweep)
    arms = [a for a in found.arms if a.task == task and (model is None or a.model == model)]
    models = sorted({a.model for a in arms})
    if len(models) != 1:
        tasks = sorted({a.task for a in found.arms})
        raise CalibratedError(
            f"--task {task}"
            + (f" --model {model}" if model else "")
            + (
                f": no trial of the sweep (its tasks: {', '.join(tasks)}); choose one of them"
                if not models
                else f": the sweep ran {len(models)} models on it ({', '.join(models)}); "
                "choose one with --model"
            )
        )
    planned = found.pairs.get((task, models[0])) or ()
    chosen = tuple(pair.split(",", 1)) if pair else (planned[0] if planned else None)
    if chosen is None or len(chosen) != 2:
        raise CalibratedError("--pair: give two variants as A,B")
    result = next_items(
        arms, (chosen[0].strip(), chosen[1].strip()), criterion, judge=judge, target=target,
        k=n, catalog=_catalog(data_dir, hf, prompts_dir), out=out,
    )  # fmt: skip
    typer.echo(output.as_json(result.to_dict()) if as_json else output.next_items(result, explain))
