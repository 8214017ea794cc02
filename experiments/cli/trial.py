"""`workbench run` (one trial) and `workbench score` (given generations)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from experiments import output
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
    Setup,
    Split,
    SplitOpt,
    TaskArg,
    Timeout,
    Variant,
    _catalog,
    friendly,
)
from promptlib.errors import WorkbenchError


@app.command()
@friendly
def run(
    task: TaskArg,
    model: ModelOpt = "local/smollm2",
    variant: Variant = "base",
    variant_file: Annotated[
        str | None,
        typer.Option(
            "--variant-file",
            help="A variant saved as JSON: PromptVariant.canonical_json(), or a "
            "'workbench optimize --json' report (reruns its winner, best_variant_json). "
            "Instead of --variant.",
        ),
    ] = None,
    split: SplitOpt = Split.test,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Evaluate a seeded sample of N rows.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the --limit sample.")] = 0,
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
            envvar="WORKBENCH_NO_TRACK",
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
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.files import check_writable
    from experiments.trials.grading import save_keeping_grades
    from experiments.trials.runner import TrialSpec, resolve_trial, run_trial, runs_dir
    from promptlib.errors import VariantFileError
    from promptlib.variants import load_variant_file, parse_spec

    if variant_file is not None and variant != "base":
        raise VariantFileError("give --variant or --variant-file, not both")
    chosen = load_variant_file(variant_file) if variant_file is not None else parse_spec(variant)
    if chosen.task not in (None, task):
        raise VariantFileError(
            f"variant file {variant_file} holds a variant of task {chosen.task!r}, not {task!r}"
        )
    if scoring is not Scoring.generate:
        # start-up time: the CLI imports a command's modules when it runs
        from experiments.llm.loglik import require_loglik_model

        # a remote model without a server that echoes prompt log-probabilities: one clear
        # line, before any work
        require_loglik_model(model, api_base)
    setup = Setup(
        data_dir=data_dir,
        hf=hf,
        prompts_dir=prompts_dir,
        api_base=api_base,
        concurrency=concurrency,
        retries=retries,
        timeout=timeout,
        mode=mode.value if mode else None,
        no_cache=no_cache,
    )
    spec = TrialSpec(
        task=task,
        variant=chosen,
        model=model,
        split=split.value,
        limit=limit,
        seed=seed,
        scoring=SCORINGS[scoring],
        definition=DEFINITIONS[definition],
    )
    catalog = setup.catalog()
    catalog.task(task)  # unknown task -> clear error before loading any model
    lm = setup.lm(model)
    # bad variant/rows fail here, before calls; a hand-graded task (rule_qa) gets no score
    resolved = resolve_trial(spec, catalog, lm, hand_graded=True)
    tracker = None
    outputs = [("trial results", runs_dir()), *setup.cache_outputs()]
    if not no_track:
        # start-up time: the CLI imports a command's modules when it runs
        from experiments import tracking

        config = tracking.load_config()
        # A trial tracked before is most often a cached rerun that changes nothing: the store
        # was just read, so MLflow (1.5 s to open) waits until something must be written.
        if not tracking.tracked_before(config, task, resolved.id):
            try:
                tracker = tracking.Tracker(config)  # an unusable store fails before any call
            except tracking.TrackingError as e:
                raise tracking.TrackingError(
                    f"{e}; or pass --no-track to run without MLflow"
                ) from None
        artifacts = tracking.artifact_dir(config)
        if artifacts is not None:
            outputs.append(("MLflow artifacts", artifacts))
    check_writable(outputs)
    cache = setup.cache()
    with output.progress_bar(f"{task} · {spec.variant.label} · {model}") as bar:
        result = run_trial(resolved, catalog, lm, cache=cache, progress=bar)
    # on disk before tracking: a store failure loses nothing (hand grades carried over, a
    # complete trial never replaced by an unfinished rerun)
    out_dir, summary = save_keeping_grades(result)
    for key in ("grades_dropped", "grades_kept", "trial_kept"):
        if summary.get(key):
            typer.echo(f"note: {summary[key]}", err=True)
    summary["predictions"] = str(out_dir / "predictions.jsonl")
    track_error = None
    if not no_track:
        # a rerun that changes nothing is answered from the store without MLflow
        tracked = tracking.reusable_run(result, config) if tracker is None else None
        try:
            if tracked is None:
                tracker = tracker or tracking.Tracker(config)
                tracked = tracker.log_run(
                    result,
                    resolved.compiled,
                    resolved.rows,
                    source=str(catalog.task(task).files.split_path(spec.split)),
                )
            summary.update(tracked)
        except tracking.TrackingError as e:
            track_error = e
    typer.echo(output.as_json(summary) if as_json else output.trial_summary(summary))
    if track_error is not None:
        typer.echo(
            f"error: the trial is saved in {out_dir} but not tracked: {track_error}. Run the "
            "same command again to track it (answers come from the cache), or add --no-track",
            err=True,
        )
        raise typer.Exit(track_error.exit_code)
    if not result.complete:
        # an error the same prompt meets every time (longer than the context) gets its fix,
        # not the advice to run again
        then = (
            "Run the same command again to retry only those rows."
            if result.rerun_helps
            else "The same prompts fail the same way every time: see the fix in the error."
        )
        typer.echo(
            f"error: trial {result.status}: {result.failure_reason()}; see 'error' in "
            f"{summary['predictions']}. It has no score. {then}",
            err=True,
        )
        raise typer.Exit(1)


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
    """Score given generations with the task's official LegalBench metric."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.metrics import official_metric
    from experiments.metrics import score as score_fn
    from experiments.trials.predictions import read_predictions

    how = DEFINITIONS[definition]
    spec = _catalog(data_dir, hf, prompts_dir).task(task).spec  # unknown task -> did you mean
    labels = spec.labels if spec.is_classification else None
    multi = spec.task_type == "multi-label"
    gens, answers, lines = read_predictions(predictions, labels, multi_label=multi)
    try:
        value = score_fn(task, gens, answers, how)
    except (ValueError, TypeError, ArithmeticError) as e:
        # A metric could not read some row (e.g. sara_numeric's answer is not a number):
        # find the first such row and name it.
        for gen, ans, n in zip(gens, answers, lines, strict=True):
            try:
                score_fn(task, [gen], [ans], how)
            except (ValueError, TypeError, ArithmeticError) as row_error:
                raise WorkbenchError(
                    f"{predictions}:{n}: cannot score this row for {task} ({row_error})"
                ) from row_error
        raise WorkbenchError(f"{predictions}: cannot score {task} ({e})") from e
    metric = official_metric(task, how)
    if as_json:
        typer.echo(output.as_json({"task": task, "metric": metric, "score": value, "n": len(gens)}))
    else:
        typer.echo(output.score_line(task, metric, value, len(gens)))
