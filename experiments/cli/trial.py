"""`workbench run` (one trial) and `workbench score` (given generations)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from experiments import bounds, output
from experiments.cli.app import app
from experiments.cli.options import (
    CONCURRENCY,
    DEFINITIONS,
    HF,
    JSON,
    RETRIES,
    SCORINGS,
    TIMEOUT,
    ApiBase,
    Concurrency,
    DataDir,
    Definition,
    DefinitionOpt,
    Mode,
    ModelOpt,
    NoCache,
    PromptsDir,
    Retries,
    Scoring,
    ScoringOpt,
    Split,
    SplitOpt,
    TaskArg,
    Timeout,
    Variant,
    _catalog,
    bounded,
    friendly,
)
from experiments.cli.single import SingleRequest, run_single
from experiments.llm.backends import DEFAULT_MODEL
from experiments.settings import NO_TRACK_ENV
from promptlib.errors import WorkbenchError


@app.command()
@friendly
def run(
    task: TaskArg,
    model: ModelOpt = DEFAULT_MODEL,
    variant: Variant = "base",
    variant_file: Annotated[
        str | None,
        typer.Option(
            "--variant-file",
            help="A variant saved as JSON, or a 'workbench optimize --json' report (runs "
            "its winner, exactly). Instead of --variant.",
        ),
    ] = None,
    split: SplitOpt = Split.test,
    limit: Annotated[
        int | None, bounded("--limit", bounds.LIMIT, "Evaluate a seeded sample of N rows.")
    ] = None,
    seed: Annotated[int, bounded("--seed", bounds.SEED, "Seed of the --limit sample.")] = 0,
    scoring: ScoringOpt = Scoring.generate,
    mode: Annotated[
        Mode | None, typer.Option("--mode", help="chat or completion (default by provider).")
    ] = None,
    api_base: ApiBase = None,
    concurrency: Concurrency = CONCURRENCY,
    retries: Retries = RETRIES,
    timeout: Timeout = TIMEOUT,
    no_cache: NoCache = False,
    no_track: Annotated[
        bool,
        typer.Option(
            "--no-track",
            envvar=NO_TRACK_ENV,
            help="Do not log the trial to MLflow (it is still saved under runs/).",
        ),
    ] = False,
    definition: DefinitionOpt = Definition.code,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
) -> None:
    """Run one trial: a variant of a task through a model, scored like LegalBench.

    The trial is saved under runs/<trial id>/ and logged to MLflow (an experiment per task,
    '<prefix>/run/<task>'; --no-track skips it). A rerun of the same trial reuses its run.
    A task graded by hand (rule_qa) gets generations and no score: grade them with
    'workbench grade export'.
    """
    request = SingleRequest(
        task=task,
        model=model,
        variant=variant,
        variant_file=variant_file,
        split=split.value,
        limit=limit,
        seed=seed,
        scoring=SCORINGS[scoring],
        mode=mode.value if mode else None,
        api_base=api_base,
        concurrency=concurrency,
        retries=retries,
        timeout=timeout,
        no_cache=no_cache,
        no_track=no_track,
        definition=DEFINITIONS[definition],
        data_dir=data_dir,
        hf=hf,
        prompts_dir=prompts_dir,
        as_json=as_json,
    )
    outcome = run_single(request, note=lambda line: typer.echo(line, err=True))
    typer.echo(outcome.text)
    if outcome.error is not None:
        typer.echo(outcome.error, err=True)
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)


@app.command()
@friendly
def score(
    task: TaskArg,
    predictions: Annotated[
        Path, typer.Argument(help='JSONL, one {"generation": ..., "answer": ...} per line.')
    ],
    definition: DefinitionOpt = Definition.code,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
) -> None:
    """Score given generations with the task's official LegalBench metric.

    A gold label no local file documents is scored as LegalBench's evaluation.py scores it
    where that metric scores it (successor_liability's exceptions), with a note naming it.
    """
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.metrics import score as score_fn
    from experiments.metrics import scores_undocumented_gold, task_metric
    from experiments.trials.predictions import read_predictions_file

    how = DEFINITIONS[definition]
    loaded = _catalog(data_dir, hf, prompts_dir).task(task)  # unknown task -> did you mean
    spec = loaded.spec
    metric = task_metric(loaded, how)  # a user task's own (task.json), else LegalBench's
    labels = spec.labels if spec.is_classification else None
    multi = spec.task_type == "multi-label"
    undocumented = scores_undocumented_gold(metric, multi) if labels else None
    read = read_predictions_file(predictions, labels, multi_label=multi, undocumented=undocumented)
    gens, answers, lines = read.generations, read.answers, read.lines
    try:
        value = score_fn(task, gens, answers, how, metric=metric)
    except (ValueError, TypeError, ArithmeticError) as e:
        # A metric could not read some row (e.g. sara_numeric's answer is not a number):
        # find the first such row and name it.
        for gen, ans, n in zip(gens, answers, lines, strict=True):
            try:
                score_fn(task, [gen], [ans], how, metric=metric)
            except (ValueError, TypeError, ArithmeticError) as row_error:
                raise WorkbenchError(
                    f"{predictions}:{n}: cannot score this row for {task} ({row_error})"
                ) from row_error
        raise WorkbenchError(f"{predictions}: cannot score {task} ({e})") from e
    notes = [output.undocumented_note(read.undocumented, undocumented or "")]
    notes = [n for n in notes if n]
    if as_json:
        payload = {"task": task, "metric": metric, "score": value, "n": len(gens)}
        typer.echo(output.as_json({**payload, "notes": notes}))
    else:
        typer.echo(output.score_line(task, metric, value, len(gens)))
        for note in notes:
            typer.echo(f"note: {note}", err=True)
