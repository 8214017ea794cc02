"""`workbench plan`: size a study before running it (rows, MDE80, calls, time, price)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from experiments import bounds, output
from experiments.cli.app import app
from experiments.cli.options import HF, JSON, ApiBase, DataDir, PromptsDir, Setup, bounded, friendly


@app.command()
@friendly
def plan(
    spec_path: Annotated[Path, typer.Argument(help="A sweep spec, e.g. ablations/demo.yaml.")],
    model: Annotated[
        str | None, typer.Option("--model", help="Plan on this model instead of the spec's.")
    ] = None,
    tasks: Annotated[
        str | None, typer.Option("--tasks", help="Comma-separated subset of the spec's tasks.")
    ] = None,
    limit: Annotated[
        int | None,
        bounded("--limit", bounds.LIMIT, "Plan a seeded sample of N rows per task."),
    ] = None,
    measure: Annotated[
        bool,
        typer.Option(
            "--measure",
            help="Measure the local models' speed on this machine again (a few seconds each; "
            "without it a stored measurement is used, and a model never measured here is "
            "measured once).",
        ),
    ] = False,
    accuracy: Annotated[
        float,
        bounded(
            "--accuracy",
            bounds.PLAN_ACCURACY,
            "MDE80's assumption: each arm's recall in every answer class",
        ),
    ] = 0.7,
    correlation: Annotated[
        float,
        bounded(
            "--correlation",
            bounds.PLAN_CORRELATION,
            "MDE80's assumption: correlation of the two arms' per-row hits (0: independent)",
        ),
    ] = 0.5,
    api_base: ApiBase = None,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
) -> None:
    """Size a sweep before running it: rows, MDE80, calls, time and price.

    Per task and model: the rows every variant is evaluated on, the MDE80 of the comparisons
    (under a stated assumption), the calls, the time on this machine (local models, from a
    measured speed) and the price (API models). Calls no model, except to measure a local
    model's speed once.
    """
    # Long because its signature declares the command's options (Typer reads them from it).
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.analysis.planned_power import Assumption, check_assumption
    from experiments.sweeps.estimate import plan_study, too_long
    from experiments.sweeps.spec import load_spec

    spec = load_spec(spec_path)
    setup = Setup(data_dir=data_dir, hf=hf, prompts_dir=prompts_dir, api_base=api_base)
    catalog = setup.catalog()
    models = (model,) if model else spec.models
    only = tuple(t.strip() for t in tasks.split(",") if t.strip()) if tasks is not None else None
    assumption = check_assumption(Assumption(accuracy, correlation))
    result = plan_study(
        spec,
        catalog,
        models,
        setup.lm,
        lambda m: _speed(m, measure),
        only=only,
        limit=limit,
        assumption=assumption,
    )
    typer.echo(output.as_json(result.to_dict()) if as_json else output.study_plan(result))
    if too_long(result.times):
        typer.echo(output.time_warning(result.times), err=True)


def _speed(model: str, again: bool) -> Any:
    """A local model's speed here: stored, or measured now (once, or again with `again`);
    None, with a stderr line, where it cannot be measured."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.llm.speed import cached_speed, measure_speed, speed_path
    from experiments.llm.types import ModelError

    speed = None if again else cached_speed(model)
    if speed is not None:
        return speed
    typer.echo(output.measuring_note(model, str(speed_path())), err=True)
    try:
        return measure_speed(model)
    except ModelError as e:
        typer.echo(output.not_measured_note(model, str(e)), err=True)
        return None
