"""`workbench tasks` and `workbench render`: the task catalog and rendered prompts."""

from __future__ import annotations

from typing import Annotated

import typer

from experiments import bounds, output
from experiments.cli.app import app
from experiments.cli.options import (
    HF,
    JSON,
    DataDir,
    PromptsDir,
    Split,
    SplitOpt,
    TaskArg,
    Variant,
    _catalog,
    bounded,
    friendly,
)


@app.command()
@friendly
def tasks(
    data_dir: DataDir = None, hf: HF = False, prompts_dir: PromptsDir = None, as_json: JSON = False
) -> None:
    """List every task: type, metric, split sizes and labels.

    A task whose data cannot be read (e.g. a malformed or non-UTF-8 TSV) does not hide the
    others: it is listed with its error (with --json, as {"name", "error"}), the error is
    also printed on stderr, and the command exits 1. Exit 0 means every task is readable.
    """
    # start-up time: the CLI imports a command's modules when it runs
    from promptlib.tasks import TaskProblem

    catalog = _catalog(data_dir, hf, prompts_dir)
    entries = catalog.survey()
    problems = [e for e in entries if isinstance(e, TaskProblem)]
    if as_json:
        out = output.as_json([e.to_json() for e in entries], indent=1)
    else:
        out = output.task_list(entries, getattr(catalog.source, "description", ""))
    typer.echo(out)
    for p in problems:
        typer.echo(output.task_problem(p.name, p.error), err=True)
    if problems:
        raise typer.Exit(1)


@app.command()
@friendly
def render(
    task: TaskArg,
    variant: Variant = "base",
    split: SplitOpt = Split.test,
    limit: Annotated[int | None, bounded("--limit", bounds.FIRST_ROWS, "First N rows.")] = None,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
) -> None:
    """Print the rendered prompts of a task under a variant."""
    # start-up time: the CLI imports a command's modules when it runs
    from promptlib.leakage import evaluation_rows
    from promptlib.render import compile_prompt
    from promptlib.variants import parse_spec

    spec = parse_spec(variant)
    t = _catalog(data_dir, hf, prompts_dir).task(task)
    compiled = compile_prompt(spec, t, split.value)
    rows, excluded = evaluation_rows(compiled.variant, t, split.value)
    if limit is not None:
        rows = rows[:limit]
    items = [
        {"index": r["index"], "prompt": compiled.render(r), "answer": r["answer"]} for r in rows
    ]
    if excluded:
        typer.echo(output.demonstrations_left_out(split.value, excluded), err=True)
    if as_json:
        out = output.as_json(items, indent=1)
    else:
        out = output.rendered_prompts(task, compiled.variant.label, compiled.variant.id, items)
    typer.echo(out)
