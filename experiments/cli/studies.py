"""`workbench sweep`, `workbench optimize` and `workbench report`: studies over many trials."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from experiments import bounds, output, settings
from experiments.cli.app import app
from experiments.cli.options import (
    CONCURRENCY,
    HF,
    JSON,
    RETRIES,
    SCORINGS,
    TIMEOUT,
    ApiBase,
    Concurrency,
    DataDir,
    Explain,
    Method,
    ModelOpt,
    NoCache,
    PromptsDir,
    Pruner,
    Retries,
    Sampler,
    Scoring,
    ScoringOpt,
    Setup,
    TaskArg,
    Timeout,
    bounded,
    friendly,
)
from experiments.llm.backends import DEFAULT_MODEL

if TYPE_CHECKING:
    from experiments.optimize.config import OptimizeConfig
    from experiments.optimize.report import OptimizeReport
    from experiments.tracking import Tracker
    from promptlib.tasks import Catalog


# Long because its signature declares the command's options (Typer reads them from it);
# the body is option wiring over `run_sweep`. Its docstring is the command's --help.
@app.command()
@friendly
def sweep(
    spec_path: Annotated[
        Path, typer.Argument(help="A sweep spec, e.g. ablations/plain_vs_technical.yaml.")
    ],
    model: Annotated[
        str | None, typer.Option("--model", help="Run on this model instead of the spec's.")
    ] = None,
    tasks: Annotated[
        str | None, typer.Option("--tasks", help="Comma-separated subset of the spec's tasks.")
    ] = None,
    limit: Annotated[
        int | None,
        bounded("--limit", bounds.LIMIT, "Evaluate a seeded sample of N rows per task."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List trials and estimates; call no model.")
    ] = False,
    api_base: ApiBase = None,
    concurrency: Concurrency = CONCURRENCY,
    retries: Retries = RETRIES,
    timeout: Timeout = TIMEOUT,
    no_cache: NoCache = False,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
    explain: Explain = False,
    executor: Annotated[
        str,
        typer.Option("--executor", help="Where trials run: local (this process) or ray."),
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            help="Ray cluster to join: auto, HOST:PORT or ray://HOST:10001 (default: a "
            "private local Ray instance). See docs/how-to/ray.md.",
        ),
    ] = None,
    batch: Annotated[
        bool,
        typer.Option(
            "--batch",
            help="Send the uncached calls as provider batches (openai/ models; about half "
            "the price, results within the provider's 24 h window) into the response cache; "
            "a killed sweep resumes polling its batches.",
        ),
    ] = False,
    batch_poll: Annotated[
        float,
        bounded("--batch-poll", bounds.BATCH_POLL, "Seconds between polls of a batch."),
    ] = 30.0,
) -> None:
    """Run (or resume) an ablation sweep, tracked in MLflow, with paired permutation tests."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.sweeps.estimate import too_long
    from experiments.sweeps.plan import dry_run_items, note_items, plan_tasks, trial_plan
    from experiments.sweeps.spec import load_spec

    spec = load_spec(spec_path)
    folders = [str(Path(spec.path).parent)]  # text files' paths shown relative to it if shorter
    _warn_unreviewed(spec.raw)
    setup = Setup(
        data_dir=data_dir,
        hf=hf,
        prompts_dir=prompts_dir,
        api_base=api_base,
        concurrency=concurrency,
        retries=retries,
        timeout=timeout,
        no_cache=no_cache,
    )
    catalog = setup.catalog()
    models = (model,) if model else spec.models
    only = tuple(t.strip() for t in tasks.split(",") if t.strip()) if tasks is not None else None
    if batch and spec.sequential is not None:
        raise typer.BadParameter(
            f"{spec_path}: design: sequential decides after each batch of rows, which a "
            "provider batch (hours) cannot serve; drop --batch, or use design: fixed with it",
            param_hint="--batch",
        )

    if dry_run:
        if batch:
            # start-up time: the CLI imports a command's modules when it runs
            from experiments.llm.batch import check_batchable

            for m in models:
                check_batchable(m, setup.api_base)
        planned = plan_tasks(spec, catalog, only=only, limit=limit)
        items, skipped = dry_run_items(
            catalog, planned, trial_plan(spec, planned, models), setup.lm, spec, batch=batch
        )
        notes = note_items(planned)
        times = _dry_run_times(items)
        typer.echo(
            output.as_json(
                {
                    "trials": items,
                    "skipped": skipped,
                    "notes": notes,
                    "times": [t.to_dict() for t in times],
                }
            )
            if as_json
            else output.dry_run(items, skipped, notes, times, str(spec_path), folders)
        )
        if too_long(times):
            typer.echo(output.time_warning(times), err=True)
        return

    # start-up time: the CLI imports a command's modules when it runs
    from experiments.secrets import safe_url
    from experiments.sweeps.driver import run_sweep
    from experiments.sweeps.executors import check_choice, get_executor
    from experiments.tracking import Tracker

    check_choice(executor, ray_address)
    batches = _batches(batch, batch_poll, executor, setup, models)  # before any store opens
    tracker = Tracker()
    _check_outputs(tracker, [("sweep reports", settings.reports_dir()), *setup.cache_outputs()])
    cache = setup.cache()
    runner = get_executor(executor, ray_address)
    try:
        with output.progress_bar(f"sweep {spec.name}") as bar:
            result = run_sweep(
                spec,
                catalog,
                models=models,
                only=only,
                limit=limit,
                tracker=tracker,
                lm_factory=setup.lm,
                cache=cache,
                progress=bar,
                reports_dir=settings.reports_dir(),
                executor=runner,
                before_trials=batches,
            )
    finally:
        runner.close()
    if result.trial_rows is None:  # per-trial invalid-output rates, from the child runs
        result = dataclasses.replace(result, trial_rows=tracker.sweep_trials(result.parent_run_id))
    if as_json:
        typer.echo(output.as_json(result.to_dict()))
    else:
        uri = safe_url(tracker.config.tracking_uri)
        # output sits below sweeps (tests/test_import_graph.py): it prints the document
        typer.echo(output.sweep_summary(result.to_dict(), uri, folders, explain))
        if result.judge is not None:  # the spec's judge step, after the sweep's own tables
            typer.echo(output.judge_section(result.judge, spec.name))
    if result.rebuilt:
        typer.echo(output.sweep_rebuilt_note(len(result.rebuilt)), err=True)
    if not result.ok:
        typer.echo(output.incomplete_trials_error(list(result.incomplete)), err=True)
        raise typer.Exit(1)


def _dry_run_times(items: list[dict[str, Any]]) -> list[Any]:
    """Each model's share of a dry run, timed from its stored speed here (`llm.speed`; a dry
    run never runs a model, so an unmeasured local model gets no time)."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.llm.speed import cached_speed
    from experiments.sweeps.estimate import model_times

    models = dict.fromkeys(str(it["model"]) for it in items)
    return model_times(items, {m: cached_speed(m) for m in models})


def _batches(batch: bool, poll: float, executor: str, setup: Setup, models: Any) -> Any:
    """The ``--batch`` hook of a sweep (`SweepBatches`), checked before anything runs; None
    without ``--batch``."""
    if not batch:
        return None
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.llm.batch import BatchError
    from experiments.sweeps.batching import SweepBatches

    if executor != "local":
        raise BatchError(
            "--batch sends the calls to the provider's batch API from this process; "
            f"--executor {executor} has nothing to run: drop one of the two"
        )
    hook = SweepBatches(None, poll=poll)  # its cache: the sweep's, given to the hook
    hook.check(models, setup.api_base, no_cache=setup.no_cache)
    return hook


# Long because its signature declares the command's options (Typer reads them from it);
# the body is option wiring over `experiments.optimize.optimize.optimize`. Its docstring is
# the command's --help.
@app.command()
@friendly
def optimize(
    task: TaskArg,
    model: ModelOpt = DEFAULT_MODEL,
    trials: Annotated[int, bounded("--trials", bounds.TRIALS, "Trials for this worker.")] = 8,
    method: Annotated[Method, typer.Option("--method", help="Search method.")] = Method.optuna,
    storage: Annotated[
        str | None,
        typer.Option(
            "--storage",
            help="Optuna storage URL (default: optuna.db beside the project's mlflow.yaml, "
            "or its optuna_storage); "
            "a PostgreSQL URL shares the study between processes.",
        ),
    ] = None,
    study: Annotated[str | None, typer.Option("--study", help="Study name.")] = None,
    sampler: Annotated[Sampler, typer.Option("--sampler", help="Optuna sampler.")] = Sampler.tpe,
    pruner: Annotated[
        Pruner,
        typer.Option(
            "--pruner",
            help="wilcoxon (signed-rank test on per-row values vs the best trial), "
            "median (running score vs the median of earlier trials) or none.",
        ),
    ] = Pruner.wilcoxon,
    seed: Annotated[int, bounded("--seed", bounds.SEED, "Sampler / DSPy seed.")] = 0,
    split_seed: Annotated[
        int, bounded("--split-seed", bounds.SEED, "Seed of the dev/held-out split.")
    ] = 0,
    heldout: Annotated[float, bounded("--heldout", bounds.HELDOUT, "Held-out fraction.")] = 0.5,
    dev_limit: Annotated[
        int | None,
        bounded(
            "--dev-limit", bounds.SPLIT_LIMIT, "Search on a stratified seeded sample of N dev rows."
        ),
    ] = None,
    heldout_limit: Annotated[
        int | None,
        bounded(
            "--heldout-limit", bounds.SPLIT_LIMIT, "Judge on a seeded sample of N held-out rows."
        ),
    ] = None,
    scoring: ScoringOpt = Scoring.generate,
    verdict: Annotated[
        str,
        typer.Option(
            "--verdict",
            help="fixed (every held-out row, permutation test) or sequential (rows in batches "
            "until an anytime-valid interval of best - base decides).",
        ),
    ] = "fixed",
    verdict_batch: Annotated[
        int,
        bounded("--verdict-batch", bounds.VERDICT_BATCH, "Rows per look of --verdict sequential."),
    ] = 10,
    space: Annotated[
        str,
        typer.Option(
            "--space",
            help="base, or extended: also verbalizer, demonstration order and format grammar "
            "points (a new study: its name ends in .extended).",
        ),
    ] = "base",
    instruction_file: Annotated[
        list[str] | None,
        typer.Option(
            "--instruction-file",
            help="A YAML file with a text: entry, searched as an instruction (repeatable; "
            "a new study, named by the files' contents).",
        ),
    ] = None,
    api_base: ApiBase = None,
    concurrency: Concurrency = CONCURRENCY,
    retries: Retries = RETRIES,
    timeout: Timeout = TIMEOUT,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
) -> None:
    """Optimise a task's prompt on dev; report the winner on held-out data it never saw."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.optimize.config import OptimizeConfig
    from experiments.optimize.optimize import optimize as run_optimize
    from experiments.optimize.report import dumps
    from experiments.optimize.study import _study_name
    from experiments.tracking import Tracker

    if scoring is not Scoring.generate:
        # start-up time: the CLI imports a command's modules when it runs
        from experiments.llm.loglik import require_loglik_model

        require_loglik_model(model, api_base)  # one clear line, before any work
    setup = Setup(
        data_dir=data_dir,
        hf=hf,
        prompts_dir=prompts_dir,
        api_base=api_base,
        concurrency=concurrency,
        retries=retries,
        timeout=timeout,
    )
    catalog = setup.catalog()
    catalog.task(task).spec  # noqa: B018 - reads the splits: a bad TSV fails before any write
    cfg = OptimizeConfig(
        task=task,
        model=model,
        n_trials=trials,
        method=method.value,
        sampler=sampler.value,
        seed=seed,
        storage=storage,
        study_name=study,
        heldout_fraction=heldout,
        split_seed=split_seed,
        pruner=pruner.value,
        dev_limit=dev_limit,
        heldout_limit=heldout_limit,
        scoring=SCORINGS[scoring],
        space=space,
        instruction_files=tuple(instruction_file or ()),
        heldout_design=verdict,
        heldout_batch=verdict_batch,
    )
    for path in [f.label for f in cfg.files if f.reviewed is False]:
        typer.echo(output.unreviewed_warning(path), err=True)
    lm = setup.lm(model)
    tracker = Tracker()
    _check_outputs(tracker, [("the winner's variant file", _winners()), *setup.cache_outputs()])
    if cfg.method == "optuna":
        typer.echo(output.search_space(task, _study_name(cfg), _space(cfg, catalog)), err=True)
    with output.progress_bar(f"optimize {task} · {method.value}") as bar:
        report = run_optimize(cfg, catalog, lm, tracker, cache=setup.cache(), progress=bar)
    report = _save_winner(report, cfg, setup)
    typer.echo(dumps(report) if as_json else output.optimize_report(report.to_dict()))


def _winners() -> Path:
    """reports/optimize/: where `optimize` writes each study's winner (`optimize.winner`)."""
    return settings.reports_dir() / "optimize"


def _save_winner(report: OptimizeReport, cfg: OptimizeConfig, setup: Setup) -> OptimizeReport:
    """The report with the winner's variant file written and the command that reruns it
    (with the options of this command a rerun needs: the server, the data, the prompts)."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.optimize.winner import rerun_command, save_winner
    from experiments.secrets import safe_url

    path = save_winner(settings.reports_dir(), report.study, report.best_variant_json)
    extra: list[str] = []
    if setup.api_base:
        extra += ["--api-base", safe_url(setup.api_base)]
    if setup.data_dir is not None:
        extra += ["--data-dir", str(setup.data_dir)]
    if setup.hf:
        extra += ["--hf"]
    if setup.prompts_dir is not None:
        extra += ["--prompts-dir", str(setup.prompts_dir)]
    command = rerun_command(
        cfg.task, path, cfg.model, scoring=cfg.scoring, split=cfg.split, extra=extra
    )
    return dataclasses.replace(report, best_variant_file=str(path), rerun_command=command)


def _space(cfg: OptimizeConfig, catalog: Catalog) -> dict[str, Any]:
    """The search space `optimize` will search, as printed at its start."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.optimize.space import check_space_gold, search_space

    task = catalog.task(cfg.task)
    space = search_space(task, cfg.space, cfg.files)
    check_space_gold(space, task, cfg.split, task.rows(cfg.split))  # refused before it prints
    return space.to_dict()


def _warn_unreviewed(raw: dict[str, object]) -> None:
    """One stderr line per generated text file the spec uses that is not `reviewed: true`."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.generate.review import files_in_sweep, unreviewed

    for path in unreviewed(files_in_sweep(raw)):
        typer.echo(output.unreviewed_warning(path), err=True)


def _check_outputs(tracker: Tracker, outputs: list[tuple[str, Path]]) -> None:
    """Refuse, before any work, a folder the command cannot write: `outputs` and the
    store's artifact folder (when the store has one on disk)."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.files import check_writable

    artifacts = tracker.artifact_dir()
    if artifacts is not None:
        outputs.append(("MLflow artifacts", artifacts))
    check_writable(outputs)


@app.command()
@friendly
def report(
    sweep: Annotated[
        str,
        typer.Argument(
            help="A sweep's name (its latest run), a sweep id or a unique prefix of one, or "
            "an MLflow run id (the sweep's parent run or one of its trial runs).",
        ),
    ],
    model: Annotated[
        str | None,
        typer.Option("--model", help="Show only this model's comparisons and sections."),
    ] = None,
    as_json: JSON = False,
    explain: Explain = False,
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            help="slice: each comparison per value of a data column (--column); class: per "
            "gold answer (per-class recall). Each with its test, Holm over the groups.",
        ),
    ] = None,
    column: Annotated[
        str | None,
        typer.Option("--column", help="With --by slice: the data column (default: slice)."),
    ] = None,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
) -> None:
    """Print a sweep's comparison table again, from MLflow."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.analysis import decision
    from experiments.reports.folders import INDEX, run_folder
    from experiments.sweeps.report_view import only_model, sweep_models
    from experiments.tracking import Tracker

    if column is not None and by != "slice":
        raise typer.BadParameter("--column goes with --by slice", param_hint="--column")
    tracker = Tracker()
    info, doc = tracker.sweep_report(sweep)
    if by is not None:
        setup = Setup(data_dir=data_dir, hf=hf, prompts_dir=prompts_dir)
        _report_by(tracker, info, doc, setup.catalog(), by, column, model, as_json, explain)
        return
    # an older sweep's document: its recommendations worked out here, on the whole sweep
    # (before --model cuts it), so they are the sweep's
    decision.fill(doc)
    name = info["sweep"]
    trial_rows = doc.get("trial_rows") or tracker.sweep_trials(info["run_id"])
    incomplete = doc.get("incomplete") or []  # the whole sweep's: --model does not hide them
    shown: tuple[int, int] | None = None
    if model is not None:
        view = only_model(doc, trial_rows, model, sweep_models(doc, trial_rows, info["params"]))
        doc, trial_rows, shown = view.doc, view.trial_rows, (view.shown, view.total)
    folder = run_folder(settings.reports_dir(), name, info["sweep_id"])
    here = str(folder) if folder.is_dir() else None
    if info["by_name"] and info["others"]:
        typer.echo(output.other_sweep_runs_note(name, info["sweep_id"], info["others"]), err=True)
    if as_json:
        typer.echo(
            output.as_json({"run": info, **doc, "trial_rows": trial_rows, "report_dir": here})
        )
        if incomplete or info["status"] != "FINISHED":
            raise typer.Exit(1)
        return
    page = folder / INDEX if (folder / INDEX).is_file() else None  # its HTML report
    typer.echo(output.sweep_report(name, info, doc, trial_rows, report_dir=here, shown=shown,
                                    explain=explain, page=str(page) if page else None))  # fmt: skip
    # start-up time: the calibrated package only for a sweep's report
    from experiments.calibrated.report import calibration_data

    found = calibration_data([str(r["trial_id"]) for r in trial_rows if r.get("trial_id")])
    if found.any:
        typer.echo(output.grade_report_pointer(name, found.judged, found.graded))
    if incomplete or info["status"] != "FINISHED":
        typer.echo(output.sweep_not_complete_error(name, info["status"]), err=True)
        raise typer.Exit(1)


def _report_by(
    tracker: Tracker,
    info: dict[str, Any],
    doc: dict[str, Any],
    catalog: Catalog,
    by: str,
    column: str | None,
    model: str | None,
    as_json: bool,
    explain: bool,
) -> None:
    """`report --by slice|class`: each tested pair split by a data column or gold answer."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.sweeps.by_slice import sweep_slices
    from experiments.sweeps.report_view import only_model, sweep_models

    if model is not None:  # an unknown model is refused as without --by, naming the models
        only_model(doc, [], model, sweep_models(doc, [], info["params"]))
    declared = str((info.get("params") or {}).get("n_resamples") or "")
    found = sweep_slices(
        tracker, info["run_id"], doc, catalog, by=by, column=column, model=model,
        n_resamples=int(declared) if declared.isdigit() else None,
    )  # fmt: skip
    if as_json:
        typer.echo(output.as_json({"run": info, **found.to_dict()}))
    else:
        typer.echo(output.slice_report(found.to_dict(), info["sweep"], explain))
    if doc.get("incomplete") or info["status"] != "FINISHED":  # as `report` without --by
        if not as_json:
            typer.echo(output.sweep_not_complete_error(info["sweep"], info["status"]), err=True)
        raise typer.Exit(1)
