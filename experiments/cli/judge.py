"""`workbench judge`: a judge model grades trials' answers on the paper's criteria."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from experiments import output
from experiments.cli.app import app
from experiments.cli.options import (
    CONCURRENCY,
    HF,
    JSON,
    RETRIES,
    TIMEOUT,
    ApiBase,
    Concurrency,
    DataDir,
    NoCache,
    PromptsDir,
    Retries,
    Setup,
    Timeout,
    friendly,
)
from experiments.settings import NO_TRACK_ENV
from promptlib.errors import WorkbenchError


@app.command()
@friendly
def judge(
    trials: Annotated[
        list[str] | None,
        typer.Argument(help="Trial ids (or unique prefixes) or their folders under runs/."),
    ] = None,
    model: Annotated[
        str,
        typer.Option(
            "--model", help="The judge: any model 'workbench run' takes (local/..., openai/...)."
        ),
    ] = "",
    sweep: Annotated[
        str | None,
        typer.Option(
            "--sweep", help="Judge every trial of a sweep (its name: its latest run; or its id)."
        ),
    ] = None,
    rubric: Annotated[
        list[str] | None,
        typer.Option(
            "--rubric", help="TASK=FILE: a rubric file replacing the shipped one (repeatable)."
        ),
    ] = None,
    criteria: Annotated[
        str, typer.Option("--criteria", help="Comma-separated criteria to judge.")
    ] = "correctness,analysis",
    judge_scoring: Annotated[
        str | None,
        typer.Option(
            "--judge-scoring",
            help="generate (the judge writes its grade) or loglik (the likelier of ' 1' and "
            "' 0'); default: loglik for local models, generate otherwise.",
        ),
    ] = None,
    api_base: ApiBase = None,
    concurrency: Concurrency = CONCURRENCY,
    retries: Retries = RETRIES,
    timeout: Timeout = TIMEOUT,
    no_cache: NoCache = False,
    no_track: Annotated[
        bool,
        typer.Option(
            "--no-track", envvar=NO_TRACK_ENV, help="Do not put the judge scores on MLflow."
        ),
    ] = False,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
) -> None:
    """Score trials' answers with a judge model on correctness and analysis, by rubric.

    One rubric per task; scores, prompts and replies are saved under runs/<trial id>/judge/.

    Judge scores are not correctness: calibrate them with hand grades ('workbench grade
    sheet'). Exit 1 when a judge call failed (rerun: answered calls come from the cache).
    """
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.judge.rubrics import CRITERIA, load_rubrics
    from experiments.judge.run import JUDGE_SCORINGS, default_judge_scoring, judge_trial
    from experiments.judge.text import NOT_CORRECTNESS, run_line, run_record
    from experiments.trials.grading import find_trial

    if not model:
        raise WorkbenchError("give the judge model: --model local/smollm2, openai/gpt-4o-mini, ...")
    if bool(trials) == bool(sweep):
        raise WorkbenchError("give trial ids, or --sweep NAME (not both)")
    chosen = tuple(c.strip() for c in criteria.split(",") if c.strip())
    unknown = [c for c in chosen if c not in CRITERIA]
    if unknown or not chosen:
        raise WorkbenchError(
            f"--criteria {criteria!r}: use {', '.join(CRITERIA)} (comma-separated)"
        )
    if judge_scoring is not None and judge_scoring not in JUDGE_SCORINGS:
        raise WorkbenchError(
            f"--judge-scoring {judge_scoring!r}: use {' or '.join(JUDGE_SCORINGS)}"
        )
    how = judge_scoring or default_judge_scoring(model)
    if how == "loglik":
        # start-up time: the CLI imports a command's modules when it runs
        from experiments.llm.loglik import require_loglik_model

        require_loglik_model(model, api_base)
    overrides: dict[str, Path] = {}
    for item in rubric or []:
        task, sep, file = item.partition("=")
        if not sep or not task.strip() or not file.strip():
            raise WorkbenchError(f"--rubric {item!r}: give TASK=FILE (e.g. hearsay=my_rubric.yaml)")
        overrides[task.strip()] = Path(file.strip())
    trial_dirs = [find_trial(t) for t in trials or []] if not sweep else _sweep_trials(sweep)
    setup = Setup(
        data_dir=data_dir, hf=hf, prompts_dir=prompts_dir, api_base=api_base,
        concurrency=concurrency, retries=retries, timeout=timeout, no_cache=no_cache,
    )  # fmt: skip
    catalog = setup.catalog()
    tasks = {d: _task_of(d) for d in trial_dirs}
    rubrics = {t: load_rubrics(t, overrides.get(t)) for t in sorted(set(tasks.values()))}
    tracker = None if no_track else _tracker()
    lm = setup.lm(model)
    cache = setup.cache()
    lines, records, failed = [], [], False
    for trial_dir in trial_dirs:
        with output.progress_bar(f"judge · {trial_dir.name[:12]} · {model}") as bar:
            run = judge_trial(
                trial_dir, lm, rubrics[tasks[trial_dir]], chosen, cache,
                catalog=catalog, scoring=how, progress=bar,
            )  # fmt: skip
        tracked: list[str] = []
        if tracker is not None:
            # start-up time: mlflow is imported only when a judge run is tracked
            from experiments.judge.tracking import log_judge

            tracked = log_judge(tracker, run, trial_dir)
        failed = failed or not run.complete
        lines.append(run_line(run))
        records.append(run_record(run, tracked))
    if as_json:
        typer.echo(output.as_json({"judged": records, "note": NOT_CORRECTNESS}))
    else:
        typer.echo("\n".join([*lines, NOT_CORRECTNESS]))
    if failed:
        typer.echo(
            "some judge calls failed (their rows have no judge score): run the same command "
            "again; answered calls come from the cache",
            err=True,
        )
        raise typer.Exit(1)


def _task_of(trial_dir: Path) -> str:
    try:
        task = json.loads((trial_dir / "summary.json").read_text(encoding="utf-8"))["task"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise WorkbenchError(
            f"{trial_dir / 'summary.json'}: cannot read the trial's task ({e})"
        ) from None
    return str(task)


def _tracker() -> Any:
    # start-up time: the CLI imports a command's modules when it runs
    from experiments import tracking

    try:
        return tracking.Tracker(tracking.load_config())
    except tracking.TrackingError as e:
        raise tracking.TrackingError(f"{e}; or pass --no-track to judge without MLflow") from None


def _sweep_trials(ref: str) -> list[Path]:
    """The trial folders of a sweep's run (from MLflow: `workbench report` finds it so)."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments import tracking
    from experiments.trials.grading import find_trial

    tracker = tracking.Tracker(tracking.load_config())
    choice = tracker.find_sweep(ref)
    rows = tracker.sweep_trials(choice.run.run_id)
    if not rows:
        raise WorkbenchError(f"sweep {ref!r} has no trial runs in MLflow; run it first")
    return [find_trial(str(r["trial_id"])) for r in rows]
