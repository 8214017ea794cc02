"""The `workbench` command line: option wiring only.

Every command turns a `WorkbenchError` into a one-line message on stderr and its exit code,
and builds its whole output before printing, so a failure never leaves half an answer. What
is printed is built in `experiments.output`; the options several commands share (data
source, model connection, cache) are declared once below and turned into a catalog, a model
and a cache by `Setup`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from experiments import output
from promptlib.errors import WorkbenchError

if TYPE_CHECKING:
    from experiments.trials import runner

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

F = TypeVar("F", bound=Callable[..., Any])


# ---- choices ---------------------------------------------------------------------------------
class Scoring(StrEnum):
    generate = "generate"
    loglik = "loglik"
    loglik_norm = "loglik-norm"


class Split(StrEnum):
    train = "train"
    test = "test"


class Mode(StrEnum):
    chat = "chat"
    completion = "completion"


class Definition(StrEnum):
    code = "code"
    paper = "paper"


# the runner's own (Literal) names of the same choices, checked by mypy
SCORINGS: dict[Scoring, runner.Scoring] = {
    Scoring.generate: "generate",
    Scoring.loglik: "loglik",
    Scoring.loglik_norm: "loglik-norm",
}
DEFINITIONS: dict[Definition, runner.Definition] = {
    Definition.code: "code",
    Definition.paper: "paper",
}


class Method(StrEnum):
    optuna = "optuna"
    dspy_labeled = "dspy-labeled"
    dspy_bootstrap = "dspy-bootstrap"
    dspy_mipro = "dspy-mipro"


class Sampler(StrEnum):
    tpe = "tpe"
    random = "random"
    grid = "grid"


class Pruner(StrEnum):
    wilcoxon = "wilcoxon"
    median = "median"
    none = "none"


class ExecutorName(StrEnum):
    """Where a sweep's trials run (`sweeps.executors.get_executor`); for `--executor`."""

    local = "local"
    ray = "ray"


# ---- options shared by several commands (declared once) --------------------------------------
DataDir = Annotated[
    str | None,
    typer.Option(
        "--data-dir",
        help="LegalBench-layout folder (tasks/<task>/...). Default: $LEGALBENCH_DIR.",
    ),
]
HF = Annotated[
    bool, typer.Option("--hf", help="Use the Hugging Face dataset nguha/legalbench (cached).")
]
PromptsDir = Annotated[
    str | None,
    typer.Option("--prompts-dir", help="With --hf: a LegalBench checkout's tasks/ folder."),
]
JSON = Annotated[bool, typer.Option("--json", help="Print JSON.")]
TaskArg = Annotated[str, typer.Argument(help="Task name, e.g. hearsay.")]
ModelOpt = Annotated[
    str, typer.Option("--model", help="litellm model, e.g. openai/gpt-4o-mini, or local/...")
]
DefinitionOpt = Annotated[
    Definition, typer.Option("--definition", help="Metric definition: code or paper.")
]
SplitOpt = Annotated[Split, typer.Option("--split", help="train or test.")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Ignore the response cache.")]
ScoringOpt = Annotated[
    Scoring,
    typer.Option(
        "--scoring",
        help="generate (as the paper), loglik (summed label log-likelihood) or "
        "loglik-norm (per byte, like lm-eval's acc_norm); loglik* need a local model.",
    ),
]
ApiBase = Annotated[str | None, typer.Option("--api-base", help="OpenAI-compatible server URL.")]
Concurrency = Annotated[
    int, typer.Option("--concurrency", min=1, help="Parallel calls to remote models.")
]
Retries = Annotated[int, typer.Option("--retries", min=0, help="Retries per call.")]
Timeout = Annotated[
    float,
    typer.Option(
        "--timeout",
        help=(
            "Deadline in seconds for each attempt of a call, the whole reply included (not a"
            " limit per read); each retry (--retries) gets its own; a finite number > 0."
        ),
    ),
]
Variant = Annotated[
    str,
    typer.Option(
        "--variant",
        help="key=value,... e.g. 'instruction=description,demos=none' or "
        "'demos=4,seed=3,pool=train+test'. 'base' is the base prompt.",
    ),
]
# the shared defaults, in one place
CONCURRENCY = 8
RETRIES = 4
TIMEOUT = 60.0


@dataclass
class Setup:
    """The shared options of a command, turned into a catalog, models and a cache on demand."""

    data_dir: str | None = None
    hf: bool = False
    prompts_dir: str | None = None
    api_base: str | None = None
    concurrency: int = CONCURRENCY
    retries: int = RETRIES
    timeout: float = TIMEOUT
    mode: str | None = None
    no_cache: bool = False
    _catalog: Any = field(default=None, repr=False)

    def catalog(self) -> Any:
        if self._catalog is None:
            # start-up time: the CLI imports a command's modules when it runs
            from promptlib.data import default_source
            from promptlib.tasks import Catalog

            self._catalog = Catalog(
                default_source(data_dir=self.data_dir, hf=self.hf, prompts_dir=self.prompts_dir)
            )
        return self._catalog

    def lm(self, model: str) -> Any:
        # start-up time: the CLI imports a command's modules when it runs
        from experiments.llm.gateway import get_model

        kwargs: dict[str, Any] = {
            "api_base": self.api_base,
            "concurrency": self.concurrency,
            "max_retries": self.retries,
            "timeout": self.timeout,
        }
        if self.mode is not None:
            kwargs["mode"] = self.mode
        return get_model(model, **kwargs)

    def cache_outputs(self) -> list[tuple[str, Path]]:
        """Folders this setup writes to (for `check_writable`)."""
        # start-up time: the CLI imports a command's modules when it runs
        from experiments.settings import cache_dir

        return [] if self.no_cache else [("the response cache", cache_dir())]

    def cache(self) -> Any:
        # start-up time: the CLI imports a command's modules when it runs
        from experiments.llm.cache import ResponseCache

        return None if self.no_cache else ResponseCache()


def _catalog(data_dir: str | None, hf: bool, prompts_dir: str | None) -> Any:
    return Setup(data_dir=data_dir, hf=hf, prompts_dir=prompts_dir).catalog()


def friendly(fn: F) -> F:
    """Map workbench errors to a clear message and their exit code (2 unless said)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except WorkbenchError as e:
            # start-up time: the CLI imports a command's modules when it runs
            from experiments.secrets import redact

            typer.echo(f"error: {redact(str(e))}", err=True)
            raise typer.Exit(e.exit_code) from None

    return wrapper  # type: ignore[return-value]


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"workbench {version('legal-prompt-workbench')}")
        except PackageNotFoundError:
            typer.echo("workbench (version unknown: the package is not installed)")
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

    entries = _catalog(data_dir, hf, prompts_dir).survey()
    problems = [e for e in entries if isinstance(e, TaskProblem)]
    if as_json:
        out = output.as_json([e.to_json() for e in entries], indent=1)
    else:
        out = output.task_list(entries)
    typer.echo(out)
    for p in problems:
        typer.echo(f"error: task {p.name!r}: {p.error}", err=True)
    if problems:
        raise typer.Exit(1)


@app.command()
@friendly
def render(
    task: TaskArg,
    variant: Variant = "base",
    split: SplitOpt = Split.test,
    limit: Annotated[int | None, typer.Option("--limit", min=0, help="First N rows.")] = None,
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
        typer.echo(
            f"note: {len(excluded)} {split.value} row(s) left out because they are "
            "demonstrations: " + ", ".join(excluded),
            err=True,
        )
    if as_json:
        out = output.as_json(items, indent=1)
    else:
        out = output.rendered_prompts(task, compiled.variant.label, compiled.variant.id, items)
    typer.echo(out)


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
        from experiments.tracking import tracking

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
        typer.Option("--limit", min=1, help="Evaluate a seeded sample of N rows per task."),
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
    executor: Annotated[
        str,
        typer.Option("--executor", help="Where trials run: local (this process) or ray."),
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            help="Ray cluster to join: auto, HOST:PORT or ray://HOST:10001 (default: a "
            "private local Ray instance). See docs/scale-out.md.",
        ),
    ] = None,
) -> None:
    """Run (or resume) an ablation sweep, tracked in MLflow, with paired permutation tests."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.sweeps.sweeps import load_spec, plan_tasks, trial_plan

    spec = load_spec(spec_path)
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
    only = tuple(t.strip() for t in tasks.split(",") if t.strip()) if tasks else None

    if dry_run:
        planned = plan_tasks(spec, catalog, only=only, limit=limit)
        trials = trial_plan(spec, planned, models)
        items, skipped = _dry_run_items(catalog, planned, trials, setup.lm)
        typer.echo(
            output.as_json({"trials": items, "skipped": skipped})
            if as_json
            else output.dry_run(items, skipped)
        )
        return

    # start-up time: the CLI imports a command's modules when it runs
    from experiments.files import check_writable
    from experiments.secrets import safe_url
    from experiments.sweeps.executors import check_choice, get_executor
    from experiments.sweeps.sweeps import run_sweep
    from experiments.tracking.tracking import Tracker

    check_choice(executor, ray_address)
    tracker = Tracker()
    outputs = [("sweep reports", Path("reports")), *setup.cache_outputs()]
    artifacts = tracker.artifact_dir()
    if artifacts is not None:
        outputs.append(("MLflow artifacts", artifacts))
    check_writable(outputs)
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
                cache=setup.cache(),
                progress=bar,
                reports_dir=Path("reports"),
                executor=runner,
            )
    finally:
        runner.close()
    if "trial_rows" not in result:  # per-trial invalid-output rates, from the child runs
        result["trial_rows"] = tracker.sweep_trials(result["parent_run_id"])
    if as_json:
        typer.echo(output.as_json(result))
    else:
        typer.echo(output.sweep_summary(result, safe_url(tracker.config.tracking_uri)))
    if result.get("rebuilt"):
        typer.echo(
            f"note: {len(result['rebuilt'])} trial run(s) had lost their MLflow artifacts; "
            "they were run again (answers from the response cache) and logged anew",
            err=True,
        )
    if result["incomplete"]:
        typer.echo(output.incomplete_trials_error(result["incomplete"]), err=True)
        raise typer.Exit(1)


def _dry_run_items(
    catalog: Any, planned: Any, trials: Any, lm_factory: Callable[[str], Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The planned trials with prompt-token and cost estimates (no model call)."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.trials.runner import decoding_for, resolve_trial

    items = []
    lms = {t.model: lm_factory(t.model) for t in trials}
    for t in trials:
        pt, nv, model = t.planned, t.variant, t.model
        task = catalog.task(pt.task)
        resolved = resolve_trial(t.spec, catalog, lms[model])
        chars = sum(len(resolved.compiled.render(r)) for r in resolved.rows)
        tokens = chars // 4
        out_tokens = len(pt.rows) * decoding_for(task.spec, "chat").max_tokens
        items.append(
            {
                "trial_id": resolved.id,
                "task": pt.task,
                "variant": nv.name,
                "model": model,
                "n": len(pt.rows),
                "prompt_tokens_est": tokens,
                "cost_est": _cost_estimate(model, tokens, out_tokens),
            }
        )
    skipped = [{"task": p.task, "reason": p.skipped} for p in planned if p.skipped]
    return items, skipped


def _cost_estimate(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    if model.startswith("local/"):
        return 0.0
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.llm.gateway import estimate_cost

    return estimate_cost(model, prompt_tokens, completion_tokens)


@app.command()
@friendly
def optimize(
    task: TaskArg,
    model: ModelOpt = "local/smollm2",
    trials: Annotated[int, typer.Option("--trials", min=1, help="Trials for this worker.")] = 8,
    method: Annotated[Method, typer.Option("--method", help="Search method.")] = Method.optuna,
    storage: Annotated[
        str | None,
        typer.Option(
            "--storage",
            help="Optuna storage URL (default sqlite:///optuna.db); "
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
    seed: Annotated[int, typer.Option("--seed", min=0, help="Sampler / DSPy seed.")] = 0,
    split_seed: Annotated[
        int, typer.Option("--split-seed", min=0, help="Seed of the dev/held-out split.")
    ] = 0,
    heldout: Annotated[
        float, typer.Option("--heldout", min=0.05, max=0.95, help="Held-out fraction.")
    ] = 0.5,
    dev_limit: Annotated[
        int | None,
        typer.Option(
            "--dev-limit", min=2, help="Search on a stratified seeded sample of N dev rows."
        ),
    ] = None,
    heldout_limit: Annotated[
        int | None,
        typer.Option("--heldout-limit", min=2, help="Judge on a seeded sample of N held-out rows."),
    ] = None,
    scoring: ScoringOpt = Scoring.generate,
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
    from experiments.files import check_writable
    from experiments.optimize.optimize import OptimizeConfig, dumps
    from experiments.optimize.optimize import optimize as run_optimize
    from experiments.tracking.tracking import Tracker

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
    )
    lm = setup.lm(model)
    tracker = Tracker()
    outputs = setup.cache_outputs()
    artifacts = tracker.artifact_dir()
    if artifacts is not None:
        outputs.append(("MLflow artifacts", artifacts))
    check_writable(outputs)
    with output.progress_bar(f"optimize {task} · {method.value}") as bar:
        report = run_optimize(cfg, catalog, lm, tracker, cache=setup.cache(), progress=bar)
    typer.echo(dumps(report) if as_json else output.optimize_report(report.to_dict()))


@app.command()
@friendly
def report(
    sweep_name: Annotated[str, typer.Argument(help="Sweep name, e.g. plain_vs_technical.")],
    as_json: JSON = False,
) -> None:
    """Print a sweep's comparison table again, from MLflow."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.tracking.tracking import Tracker

    tracker = Tracker()
    info, doc = tracker.sweep_report(sweep_name)
    trial_rows = doc.get("trial_rows") or tracker.sweep_trials(info["run_id"])
    incomplete = doc.get("incomplete") or []
    if as_json:
        typer.echo(output.as_json({"run": info, **doc, "trial_rows": trial_rows}))
        if incomplete or info["status"] != "FINISHED":
            raise typer.Exit(1)
        return
    typer.echo(output.sweep_report(sweep_name, info, doc, trial_rows))
    if incomplete or info["status"] != "FINISHED":
        typer.echo(
            f"error: sweep {sweep_name!r} is not complete (parent run {info['status']}); "
            "its table is partial. Rerun the sweep to resume it",
            err=True,
        )
        raise typer.Exit(1)


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
        typer.Option(
            "--no-track", envvar="WORKBENCH_NO_TRACK", help="Do not update the MLflow run."
        ),
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
    """Check the embedded models on this machine: llama.cpp build, CPU, load settings, each
    model's file and sha256, and a real prompt through each in a child process."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.llm.doctor import report

    raise typer.Exit(report(typer.echo))


@app.command()
@friendly
def ui(
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="Port for the MLflow UI.")
    ] = 5000,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
) -> None:
    """Start the MLflow UI on the configured tracking store (exit 1 if it cannot serve)."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.tracking.tracking import serve_ui

    raise typer.Exit(serve_ui(port, host, say=lambda text: typer.echo(text, err=True)))


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


if __name__ == "__main__":
    main()
