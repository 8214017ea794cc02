"""`workbench grade sheet|add|agreement`: blind hand grading on the paper's two criteria
(`experiments.grading`). `grade export|import` (rule_qa, one grade) stay in `tools`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from experiments import bounds, output
from experiments.cli.app import grade_app
from experiments.cli.options import HF, JSON, DataDir, PromptsDir, _catalog, bounded, friendly


@grade_app.command("sheet")
@friendly
def grade_sheet(
    sweep: Annotated[
        str | None,
        typer.Argument(help="A sweep (name, sweep id or run id) whose trials to grade."),
    ] = None,
    trial: Annotated[
        list[str] | None,
        typer.Option("--trial", help="A trial id (or unique prefix, or folder); repeatable."),
    ] = None,
    task: Annotated[str | None, typer.Option("--task", help="The task to grade.")] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="With a sweep: only this model's trials.")
    ] = None,
    seed: Annotated[int, bounded("--seed", bounds.SEED, "Seed of the sheet's order.")] = 0,
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="The sheet's CSV; its name (without .csv) names it."),
    ] = Path("sheet.csv"),
    limit: Annotated[
        int | None, bounded("--limit", bounds.LIMIT, "At most N items (a random N).")
    ] = None,
    per_trial: Annotated[
        int | None,
        bounded("--per-trial", bounds.LIMIT, "At most N items of each trial (random)."),
    ] = None,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
) -> None:
    """Write a blind grade sheet: every answered row of the trials, mixed and shuffled."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.grading.lines import sheet_lines
    from experiments.grading.sheets import SheetError, make_sheet, sweep_trial_ids
    from experiments.trials.grading import find_trial

    if (sweep is None) == (not trial):
        raise SheetError("give either a sweep or --trial IDs (one or more), not both")
    if sweep is not None:
        if task is None:
            raise SheetError("with a sweep, choose the task to grade with --task")
        ids = sweep_trial_ids(sweep, task, model)
    else:
        ids = list(trial or [])
    dirs = [find_trial(t) for t in ids]
    result = make_sheet(
        dirs,
        _catalog(data_dir, hf, prompts_dir),
        seed=seed,
        out=out,
        limit=limit,
        per_trial=per_trial,
        task=task,
    )
    typer.echo(output.as_json(result.to_dict()) if as_json else sheet_lines(result))


@grade_app.command("add")
@friendly
def grade_add(
    file: Annotated[Path, typer.Argument(help="A sheet written by 'workbench grade sheet'.")],
    grader: Annotated[str, typer.Option("--grader", help="Your name, stored with each grade.")],
    as_json: JSON = False,
) -> None:
    """Check a filled (or partly filled) sheet and add its grades to grades/grades.jsonl."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.grading.add import add_grades
    from experiments.grading.lines import add_lines

    result = add_grades(file, grader)
    tracked = _track_grades(result.sheet)  # the sweep's MLflow runs, when it was tracked
    if as_json:
        typer.echo(output.as_json({**result.to_dict(), "mlflow": tracked}))
    else:
        typer.echo("\n".join([add_lines(result), *tracked]))


def _track_grades(sheet: str) -> list[str]:
    """Put the new grades (and the calibrated numbers they change) on the MLflow runs of the
    sweeps that ran the sheet's trials; lines saying what was updated, or that nothing was
    tracked (never an error: the grades are saved)."""
    # start-up time: the store and the calibrated report, only once grades were added
    from experiments.calibrated.refresh import refresh_trials
    from experiments.grading.store import load_sheet_key
    from experiments.settings import NO_TRACK_ENV
    from experiments.tracking import Tracker, TrackingError

    key = load_sheet_key(sheet)
    if key is None or os.environ.get(NO_TRACK_ENV):
        return []
    try:
        done, note = refresh_trials(Tracker(), [i.trial_id for i in key.items])
    except TrackingError as e:
        return [f"MLflow not updated: {e}"]
    except Exception as e:  # the grades are saved: a store's failure is said, never raised
        return [f"MLflow not updated ({type(e).__name__}: {e}); 'workbench grade report' "
                "logs them again"]  # fmt: skip
    return [r.line() for r in done] + ([f"MLflow: {note}"] if note else [])


@grade_app.command("agreement")
@friendly
def grade_agreement(
    task: Annotated[str | None, typer.Option("--task", help="Only sheets of this task.")] = None,
    as_json: JSON = False,
) -> None:
    """Cohen's kappa with its interval for each pair of graders who graded the same rows."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.grading.agreement import grader_agreement
    from experiments.grading.lines import agreement_lines

    rows = grader_agreement(task=task)
    if as_json:
        typer.echo(output.as_json([r.to_dict() for r in rows]))
    else:
        typer.echo(agreement_lines(rows, task))
