"""The `workbench` command line.

Every command turns a `WorkbenchError` into a one-line message on stderr and exit code 2,
and builds its whole output before printing, so a failure never leaves half an answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from promptlib.errors import WorkbenchError

app = typer.Typer(
    name="workbench",
    help="Prompt-engineering experiment workbench for LegalBench.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])

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
DefinitionOpt = Annotated[
    str, typer.Option("--definition", help="Metric definition: code (default) or paper.")
]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Ignore the response cache.")]
ScoringOpt = Annotated[
    str,
    typer.Option(
        "--scoring",
        help="generate (default, as the paper), loglik (summed label log-likelihood) or "
        "loglik-norm (per byte, like lm-eval's acc_norm); loglik* need a local model.",
    ),
]
ApiBase = Annotated[str | None, typer.Option("--api-base", help="OpenAI-compatible server URL.")]
Concurrency = Annotated[
    int, typer.Option("--concurrency", min=1, help="Parallel calls to remote models.")
]
Retries = Annotated[int, typer.Option("--retries", min=0, help="Retries per call.")]
Timeout = Annotated[
    float, typer.Option("--timeout", help="Seconds per call (a finite number > 0).")
]


def _choice(value: str | None, allowed: tuple[str | None, ...], flag: str) -> None:
    if value not in allowed:
        shown = " or ".join(str(a) for a in allowed if a is not None)
        raise WorkbenchError(f"{flag} must be {shown}, not {value!r}")


def friendly(fn: F) -> F:
    """Map workbench errors to a clear message and exit code 2."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except WorkbenchError as e:
            from experiments.secrets import redact

            typer.echo(f"error: {redact(str(e))}", err=True)
            raise typer.Exit(e.exit_code) from None

    return wrapper  # type: ignore[return-value]


def _catalog(data_dir: str | None, hf: bool, prompts_dir: str | None) -> Any:
    from promptlib.data import default_source
    from promptlib.tasks import Catalog

    return Catalog(default_source(data_dir=data_dir, hf=hf, prompts_dir=prompts_dir))


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
    from promptlib.tasks import TaskProblem

    entries = _catalog(data_dir, hf, prompts_dir).survey()
    problems = [e for e in entries if isinstance(e, TaskProblem)]
    if as_json:
        out = json.dumps([e.to_json() for e in entries], indent=1, ensure_ascii=False)
    else:
        lines = []
        for s in entries:
            if isinstance(s, TaskProblem):
                lines.append(f"{s.name:<60} error: {s.error}")
                continue
            labels = ",".join(s.labels) if s.labels else "-"
            if len(labels) > 50:
                labels = labels[:47] + "..."
            n_test = "-" if s.n_test is None else str(s.n_test)
            n_train = "-" if s.n_train is None else str(s.n_train)
            lines.append(
                f"{s.name:<60} {s.task_type:<11} {s.metric:<36} "
                f"train={n_train:<4} test={n_test:<5} labels={labels}"
            )
        out = "\n".join(lines)
    typer.echo(out)
    for p in problems:
        typer.echo(f"error: task {p.name!r}: {p.error}", err=True)
    if problems:
        raise typer.Exit(1)


@app.command()
@friendly
def render(
    task: Annotated[str, typer.Argument(help="Task name, e.g. hearsay.")],
    variant: Annotated[
        str,
        typer.Option(
            "--variant",
            help="key=value,... e.g. 'instruction=description,demos=none' or "
            "'demos=4,seed=3,pool=train+test'. 'base' is the base prompt.",
        ),
    ] = "base",
    split: Annotated[str, typer.Option("--split", help="train or test.")] = "test",
    limit: Annotated[int | None, typer.Option("--limit", min=0, help="First N rows.")] = None,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
) -> None:
    """Print the rendered prompts of a task under a variant."""
    from promptlib.leakage import evaluation_rows
    from promptlib.render import compile_prompt
    from promptlib.variants import parse_spec

    spec = parse_spec(variant)
    t = _catalog(data_dir, hf, prompts_dir).task(task)
    compiled = compile_prompt(spec, t, split)
    rows, excluded = evaluation_rows(compiled.variant, t, split)
    if limit is not None:
        rows = rows[:limit]
    items = [
        {"index": r["index"], "prompt": compiled.render(r), "answer": r["answer"]} for r in rows
    ]
    if excluded:
        typer.echo(
            f"note: {len(excluded)} {split} row(s) left out because they are demonstrations: "
            + ", ".join(excluded),
            err=True,
        )
    if as_json:
        out = json.dumps(items, indent=1, ensure_ascii=False)
    else:
        header = f"# task={task} variant={compiled.variant.label} id={compiled.variant.id[:12]}"
        blocks = [header] + [
            f"----- index={it['index']} answer={it['answer']}\n{it['prompt']}" for it in items
        ]
        out = "\n".join(blocks)
    typer.echo(out)


Variant = Annotated[
    str,
    typer.Option(
        "--variant",
        help="key=value,... e.g. 'instruction=description,demos=none' or "
        "'demos=4,seed=3,pool=train+test'. 'base' is the base prompt.",
    ),
]


@app.command()
@friendly
def run(
    task: Annotated[str, typer.Argument(help="Task name, e.g. hearsay.")],
    model: Annotated[
        str, typer.Option("--model", help="litellm model, e.g. openai/gpt-4o-mini.")
    ] = "local/smollm2",
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
    split: Annotated[str, typer.Option("--split", help="train or test.")] = "test",
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Evaluate a seeded sample of N rows.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the --limit sample.")] = 0,
    scoring: ScoringOpt = "generate",
    mode: Annotated[
        str | None, typer.Option("--mode", help="chat or completion (default by provider).")
    ] = None,
    api_base: ApiBase = None,
    concurrency: Concurrency = 8,
    retries: Retries = 4,
    timeout: Timeout = 60.0,
    no_cache: NoCache = False,
    definition: DefinitionOpt = "code",
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
) -> None:
    """Run one trial: a variant of a task through a model, scored like LegalBench."""
    from experiments.cache import ResponseCache, cache_dir
    from experiments.files import check_writable
    from experiments.models import get_model
    from experiments.runner import TrialSpec, resolve_trial, run_trial, runs_dir, save_trial
    from promptlib.errors import VariantFileError
    from promptlib.variants import load_variant_file, parse_spec

    if variant_file is not None and variant != "base":
        raise VariantFileError("give --variant or --variant-file, not both")
    chosen = load_variant_file(variant_file) if variant_file is not None else parse_spec(variant)
    if chosen.task not in (None, task):
        raise VariantFileError(
            f"variant file {variant_file} holds a variant of task {chosen.task!r}, not {task!r}"
        )
    _choice(scoring, ("generate", "loglik", "loglik-norm"), "--scoring")
    if scoring.startswith("loglik"):
        from experiments.models import require_loglik_model

        require_loglik_model(model)  # a remote model: one clear line, before any work
    _choice(mode, (None, "chat", "completion"), "--mode")
    _choice(definition, ("code", "paper"), "--definition")
    spec = TrialSpec(
        task=task,
        variant=chosen,
        model=model,
        split=split,
        limit=limit,
        seed=seed,
        scoring=scoring,  # type: ignore[arg-type]
        definition=definition,  # type: ignore[arg-type]
    )
    catalog = _catalog(data_dir, hf, prompts_dir)
    catalog.task(task)  # unknown task -> clear error before loading any model
    lm = get_model(
        model,
        api_base=api_base,
        concurrency=concurrency,
        max_retries=retries,
        timeout=timeout,
        mode=mode,
    )
    resolved = resolve_trial(spec, catalog, lm)  # bad variant/rows fail here, before any call
    outputs = [("trial results", runs_dir())]
    if not no_cache:
        outputs.append(("the response cache", cache_dir()))
    check_writable(outputs)
    cache = None if no_cache else ResponseCache()
    result = _with_progress(
        lambda progress: run_trial(resolved, catalog, lm, cache=cache, progress=progress),
        f"{task} · {spec.variant.label} · {model}",
    )
    out_dir = save_trial(result)
    summary = result.summary()
    summary["predictions"] = str(out_dir / "predictions.jsonl")
    if as_json:
        typer.echo(json.dumps(summary, ensure_ascii=False))
    else:
        typer.echo(_format_summary(summary))
    if not result.complete:
        typer.echo(
            f"error: trial {result.status}: {result.failure_reason()}; see 'error' in "
            f"{summary['predictions']}. It has no score. "
            "Run the same command again to retry only those rows.",
            err=True,
        )
        raise typer.Exit(1)


def _with_progress(fn: Callable[[Any], Any], description: str) -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        tid = bar.add_task(description, total=None)

        def progress(done: int, total: int) -> None:
            bar.update(tid, completed=done, total=total)

        return fn(progress)


def _format_summary(s: dict[str, Any]) -> str:
    def fmt(x: Any, spec: str = ".4f") -> str:
        return "-" if x is None else format(x, spec)

    lines = [
        f"task      {s['task']}   split={s['split']}   n={s['n']}   status={s['status']}",
        f"variant   {s['variant']}   ({s['variant_id'][:12]})",
        f"model     {s['model']}   scoring={s['scoring']}",
        f"{s['metric']:<28}{fmt(s['score'])}"
        + (
            ""
            if s["score"] is not None
            else f"   (on answered rows: {fmt(s['score_on_answered'])})"
        ),
        f"{'accuracy':<28}{fmt(s['accuracy'])}",
        f"{'invalid rate':<28}{fmt(s['invalid_rate'])}",
        f"{'errors':<28}{s['n_errors']}",
        f"{'model calls / cache hits':<28}{s['model_calls']} / {s['cache_hits']}",
        f"{'tokens in / out':<28}{s['tokens_in']} / {s['tokens_out']}",
        f"{'cost (USD)':<28}{fmt(s['cost'], '.6f')}",
        f"{'wall time (s)':<28}{s['wall_time']}",
        f"predictions {s['predictions']}",
    ]
    return "\n".join(lines)


@app.command()
@friendly
def score(
    task: Annotated[str, typer.Argument(help="Task name, e.g. hearsay.")],
    predictions: Annotated[
        Path, typer.Argument(help='JSONL, one {"generation": ..., "answer": ...} per line.')
    ],
    definition: DefinitionOpt = "code",
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
) -> None:
    """Score given generations with the task's official LegalBench metric."""
    from experiments.metrics import official_metric
    from experiments.metrics import score as score_fn

    _choice(definition, ("code", "paper"), "--definition")
    spec = _catalog(data_dir, hf, prompts_dir).task(task).spec  # unknown task -> did you mean
    labels = spec.labels if spec.is_classification else None
    multi = spec.task_type == "multi-label"
    gens, answers, lines = _read_predictions(predictions, labels, multi_label=multi)
    try:
        value = score_fn(task, gens, answers, definition)  # type: ignore[arg-type]
    except (ValueError, TypeError, ArithmeticError) as e:
        # A metric could not read some row (e.g. sara_numeric's answer is not a number):
        # find the first such row and name it.
        for gen, ans, n in zip(gens, answers, lines, strict=True):
            try:
                score_fn(task, [gen], [ans], definition)  # type: ignore[arg-type]
            except (ValueError, TypeError, ArithmeticError) as row_error:
                raise WorkbenchError(
                    f"{predictions}:{n}: cannot score this row for {task} ({row_error})"
                ) from row_error
        raise WorkbenchError(f"{predictions}: cannot score {task} ({e})") from e
    metric = official_metric(task, definition)  # type: ignore[arg-type]
    if as_json:
        out = {"task": task, "metric": metric, "score": value, "n": len(gens)}
        typer.echo(json.dumps(out))
    else:
        typer.echo(f"{task}  {metric} = {value:.4f}  (n={len(gens)})")


def _read_predictions(
    path: Path, labels: tuple[str, ...] | None = None, *, multi_label: bool = False
) -> tuple[list[str], list[str], list[int]]:
    """Generations, answers and their line numbers from a JSONL predictions file.

    Each line is an object whose "generation" and "answer" are strings (an integer is read
    as its digits). null, lists, objects, booleans or other numbers are errors, as are
    answers outside `labels` (compared as LegalBench normalises; for multi-label tasks each
    comma-separated part), bytes that are not UTF-8 and JSON that cannot be parsed; every
    error names the file and line.
    """
    from experiments.metrics import normalize

    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise WorkbenchError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise WorkbenchError(f"{path}: is a directory, not a JSONL file") from None
    except OSError as e:
        raise WorkbenchError(f"{path}: cannot read ({e.strerror or type(e).__name__})") from e
    allowed = {normalize(label) for label in labels} if labels else None
    gens: list[str] = []
    answers: list[str] = []
    lines: list[int] = []
    for n, raw_line in enumerate(raw.splitlines(), 1):
        try:
            line = raw_line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise WorkbenchError(
                f"{path}:{n}: not UTF-8 (byte 0x{raw_line[e.start]:02x} at column {e.start + 1})"
            ) from None
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise WorkbenchError(f"{path}:{n}: not valid JSON ({e.msg})") from e
        except RecursionError:
            raise WorkbenchError(f"{path}:{n}: JSON nested too deeply to read") from None
        except ValueError as e:  # e.g. an integer longer than Python reads (4300 digits)
            raise WorkbenchError(f"{path}:{n}: not valid JSON ({e})") from None
        if not isinstance(obj, dict):
            raise WorkbenchError(f"{path}:{n}: expected a JSON object")
        row: dict[str, str] = {}
        for key in ("generation", "answer"):
            if key not in obj:
                raise WorkbenchError(f"{path}:{n}: missing field {key!r}")
            value = obj[key]
            if isinstance(value, int) and not isinstance(value, bool):
                value = str(value)
            if not isinstance(value, str):
                kinds = {
                    bool: "a boolean",
                    list: "a list",
                    dict: "an object",
                    float: "a decimal number",
                }
                kind = "null" if value is None else kinds.get(type(value), type(value).__name__)
                failed = value is None and key == "generation"
                hint = " (a failed row? rerun it before scoring)" if failed else ""
                raise WorkbenchError(
                    f"{path}:{n}: field {key!r} is {kind}, expected a string{hint}"
                )
            row[key] = value
        if allowed is not None:
            parts = row["answer"].split(",") if multi_label else [row["answer"]]
            outside = [p.strip() for p in parts if normalize(p) not in allowed]
            if outside:
                shown = ", ".join(repr(label) for label in labels or ())
                raise WorkbenchError(
                    f"{path}:{n}: answer {outside[0]!r} is not a label of this task "
                    f"(labels: {shown})"
                )
        gens.append(row["generation"])
        answers.append(row["answer"])
        lines.append(n)
    return gens, answers, lines


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
    concurrency: Concurrency = 8,
    retries: Retries = 4,
    timeout: Timeout = 60.0,
    no_cache: NoCache = False,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
) -> None:
    """Run (or resume) an ablation sweep, tracked in MLflow, with paired permutation tests."""
    from experiments.sweeps import load_spec, plan_tasks, trial_plan

    spec = load_spec(spec_path)
    catalog = _catalog(data_dir, hf, prompts_dir)
    models = (model,) if model else spec.models
    only = tuple(t.strip() for t in tasks.split(",") if t.strip()) if tasks else None
    from experiments.models import get_model

    def lm_factory(name: str) -> Any:
        return get_model(
            name,
            api_base=api_base,
            concurrency=concurrency,
            max_retries=retries,
            timeout=timeout,
        )

    if dry_run:
        planned = plan_tasks(spec, catalog, only=only, limit=limit)
        trials = trial_plan(spec, planned, models)
        typer.echo(_dry_run(spec, catalog, planned, trials, lm_factory, as_json))
        return

    from experiments.cache import ResponseCache, cache_dir
    from experiments.files import check_writable
    from experiments.secrets import safe_url
    from experiments.sweeps import run_sweep
    from experiments.tracking import Tracker

    tracker = Tracker()
    outputs = [("sweep reports", Path("reports"))]
    if not no_cache:
        outputs.append(("the response cache", cache_dir()))
    artifacts = tracker.artifact_dir()
    if artifacts is not None:
        outputs.append(("MLflow artifacts", artifacts))
    check_writable(outputs)
    cache = None if no_cache else ResponseCache()

    def go(progress: Any) -> Any:
        def step(done: int, total: int, what: str) -> None:
            progress(done, total)

        return run_sweep(
            spec,
            catalog,
            models=models,
            only=only,
            limit=limit,
            tracker=tracker,
            lm_factory=lm_factory,
            cache=cache,
            progress=step,
            reports_dir=Path("reports"),
        )

    result = _with_progress(go, f"sweep {spec.name}")
    if as_json:
        typer.echo(json.dumps(result, default=str))
    else:
        lines = [
            f"sweep {result['sweep']}: {result['trials']} trials "
            f"({result['resumed']} resumed from MLflow), parent run {result['parent_run_id']}",
        ]
        lines += [f"skipped {s['task']}: {s['reason']}" for s in result["skipped"]]
        lines.append(_comparison_table(result["comparisons"]))
        lines.append(_across_table(result["across_tasks"]))
        lines.append(
            f"figures and table: reports/{result['sweep']}/ ; "
            f"MLflow: {safe_url(tracker.config.tracking_uri)}"
        )
        typer.echo("\n".join(lines))
    if result["incomplete"]:
        listed = "; ".join(
            f"{t['task']} · {t['variant']} · {t['model']} ({t['status']}: {t['n_errors']} of "
            f"{t['n']} rows failed)"
            for t in result["incomplete"]
        )
        typer.echo(
            f"error: {len(result['incomplete'])} trial(s) incomplete: {listed}. Their "
            "comparisons have no p-value. Rerun the same command to resume: only the failed "
            "rows are sent again.",
            err=True,
        )
        raise typer.Exit(1)


def _comparison_table(table: list[dict[str, Any]]) -> str:
    if not table:
        return "no comparisons (nothing to compare)"

    def f(x: Any, spec: str) -> str:
        return "-" if x is None else format(x, spec)

    head = (
        f"{'task':<28} {'A':<24} {'B':<24} {'score A':>8} {'score B':>8} {'diff':>7} "
        f"{'95% CI':>17} {'p':>7} {'p corr':>7} {'n':>5} {'MDE80':>6}"
    )
    out = [head]
    for r in table:
        left = (
            f"{r['task'][:28]:<28} {r['a'][:24]:<24} {r['b'][:24]:<24} "
            f"{f(r['score_a'], '.3f'):>8} {f(r['score_b'], '.3f'):>8} "
        )
        if r["p_value"] is None:
            out.append(left + f"not tested: {r['status']}")
            continue
        ci = f"[{r['ci_low']:+.3f},{r['ci_high']:+.3f}]" if r.get("ci_low") is not None else "-"
        flag = " !" if r.get("ci_note") else ""
        out.append(
            left + f"{r['statistic']:>+7.3f} {ci:>17} {r['p_value']:>7.4f} "
            f"{r['p_corrected']:>7.4f} {r['n']:>5} {f(r.get('mde_80'), '.3f'):>6}{flag}"
        )
    tested = [r for r in table if r["p_value"] is not None]
    if not tested:
        out.append("no comparison was tested: every one involves an incomplete trial")
        return "\n".join(out)
    first = tested[0]
    metrics = sorted({r["metric"] for r in tested})
    parts = [f"metric: each task's official metric ({', '.join(metrics)}), diff = A - B"]
    if "k" in first:
        parts.append(
            f"test: {first['test']} of max - min over the {first['k']} draws "
            f"(R={first['n_resamples']} resamples, p=(b+1)/(R+1)); A = best, B = worst. "
            "The paper's post-selection pair test (anti-conservative) is in the JSON as "
            "p_post_selection"
        )
    else:
        mc = sorted({r["n_resamples"] for r in tested if not r["exact"]})
        how = []
        if any(r["exact"] for r in tested):
            how.append("exact over all swap patterns where few rows differ")
        if mc:
            how.append(f"Monte Carlo with R={', '.join(map(str, mc))} resamples, p=(b+1)/(R+1)")
        parts.append(f"test: {first['test']}, two-sided; p: {'; '.join(how)}")
        parts.append(
            f"95% CI: paired bootstrap ({2000} resamples) of A - B; '!' marks an interval "
            "flagged degenerate or unreliable (smallest class < 10 rows)"
        )
        parts.append("MDE80: smallest difference detectable at 80% power")
    parts.append(
        f"p corr: {first.get('correction', 'Holm')} across this sweep's {len(tested)} "
        "tested comparisons"
    )
    out.append(". ".join(parts) + ".")
    return "\n".join(out)


def _across_table(across: list[dict[str, Any]]) -> str:
    if not across:
        return "across tasks: no across-task test (a single task, or no comparison)"
    lines = ["across tasks:"]
    for r in across:
        p = "-" if r.get("p_value") is None else f"{r['p_value']:.4f}"
        diff = r.get("mean_difference")
        d = "" if diff is None else f", mean diff {diff:+.3f}"
        note = f" ({r['note']})" if r.get("note") else ""
        missing = (
            f"; no score for {', '.join(r['missing_tasks'])}" if r.get("missing_tasks") else ""
        )
        lines.append(
            f"  {r['model']}: {r['a']} vs {r['b']}: {r['test']} over {r['n_tasks']} tasks, "
            f"p = {p}{d}{note}{missing}"
        )
    return "\n".join(lines)


def _dry_run(
    spec: Any, catalog: Any, planned: Any, trials: Any, lm_factory: Any, as_json: bool
) -> str:
    from experiments.runner import decoding_for, resolve_trial

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
    if as_json:
        return json.dumps({"trials": items, "skipped": skipped})
    lines = [f"{'task':<40} {'variant':<28} {'model':<20} {'n':>5} {'~tokens':>9} {'~cost':>9}"]
    for it in items:
        cost = "?" if it["cost_est"] is None else f"${it['cost_est']:.4f}"
        lines.append(
            f"{it['task'][:40]:<40} {it['variant'][:28]:<28} {it['model'][:20]:<20} "
            f"{it['n']:>5} {it['prompt_tokens_est']:>9} {cost:>9}"
        )
    total = sum(it["prompt_tokens_est"] for it in items)
    costs = [it["cost_est"] for it in items]
    known = all(c is not None for c in costs)
    lines.append(
        f"{len(items)} trials, ~{total} prompt tokens (4 characters per token), cost "
        + (f"~${sum(c for c in costs if c is not None):.4f}" if known else "unknown for this model")
        + "; no model was called"
    )
    lines += [f"skipped {s['task']}: {s['reason']}" for s in skipped]
    return "\n".join(lines)


def _cost_estimate(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    if model.startswith("local/"):
        return 0.0
    from experiments.models import estimate_cost

    return estimate_cost(model, prompt_tokens, completion_tokens)


@app.command()
@friendly
def optimize(
    task: Annotated[str, typer.Argument(help="Task name, e.g. hearsay.")],
    model: Annotated[str, typer.Option("--model", help="litellm model.")] = "local/smollm2",
    trials: Annotated[int, typer.Option("--trials", min=1, help="Trials for this worker.")] = 8,
    method: Annotated[
        str,
        typer.Option("--method", help="optuna, dspy-labeled, dspy-bootstrap or dspy-mipro."),
    ] = "optuna",
    storage: Annotated[
        str | None,
        typer.Option(
            "--storage",
            help="Optuna storage URL (default sqlite:///optuna.db); "
            "a PostgreSQL URL shares the study between processes.",
        ),
    ] = None,
    study: Annotated[str | None, typer.Option("--study", help="Study name.")] = None,
    sampler: Annotated[str, typer.Option("--sampler", help="tpe, random or grid.")] = "tpe",
    pruner: Annotated[
        str,
        typer.Option(
            "--pruner",
            help="wilcoxon (default: signed-rank test on per-row values vs the best trial), "
            "median (running score vs the median of earlier trials) or none.",
        ),
    ] = "wilcoxon",
    seed: Annotated[int, typer.Option("--seed", min=0, help="Sampler / DSPy seed.")] = 0,
    split_seed: Annotated[
        int, typer.Option("--split-seed", min=0, help="Seed of the dev/held-out split.")
    ] = 0,
    heldout: Annotated[float, typer.Option("--heldout", help="Held-out fraction.")] = 0.5,
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
    scoring: ScoringOpt = "generate",
    api_base: ApiBase = None,
    concurrency: Concurrency = 8,
    retries: Retries = 4,
    timeout: Timeout = 60.0,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
) -> None:
    """Optimise a task's prompt on dev; report the winner on held-out data it never saw."""
    from experiments.cache import ResponseCache, cache_dir
    from experiments.files import check_writable
    from experiments.models import get_model
    from experiments.optimize import OptimizeConfig, dumps, report_text
    from experiments.optimize import optimize as run_optimize
    from experiments.tracking import Tracker

    _choice(method, ("optuna", "dspy-labeled", "dspy-bootstrap", "dspy-mipro"), "--method")
    _choice(pruner, ("wilcoxon", "median", "none"), "--pruner")
    _choice(scoring, ("generate", "loglik", "loglik-norm"), "--scoring")
    if scoring.startswith("loglik"):
        from experiments.models import require_loglik_model

        require_loglik_model(model)  # a remote model: one clear line, before any work
    if not 0.05 <= heldout <= 0.95:
        raise WorkbenchError("--heldout must be a fraction between 0.05 and 0.95")
    catalog = _catalog(data_dir, hf, prompts_dir)
    catalog.task(task)
    cfg = OptimizeConfig(
        task=task,
        model=model,
        n_trials=trials,
        method=method,
        sampler=sampler,
        seed=seed,
        storage=storage,
        study_name=study,
        heldout_fraction=heldout,
        split_seed=split_seed,
        pruner=pruner,
        dev_limit=dev_limit,
        heldout_limit=heldout_limit,
        scoring=scoring,  # type: ignore[arg-type]
    )
    lm = get_model(
        model, api_base=api_base, concurrency=concurrency, max_retries=retries, timeout=timeout
    )
    tracker = Tracker()
    outputs = [("the response cache", cache_dir())]
    artifacts = tracker.artifact_dir()
    if artifacts is not None:
        outputs.append(("MLflow artifacts", artifacts))
    check_writable(outputs)
    report = run_optimize(cfg, catalog, lm, tracker, cache=ResponseCache())
    typer.echo(dumps(report) if as_json else report_text(report))


@app.command()
@friendly
def report(
    sweep_name: Annotated[str, typer.Argument(help="Sweep name, e.g. plain_vs_technical.")],
    as_json: JSON = False,
) -> None:
    """Print a sweep's comparison table again, from MLflow."""
    from experiments.tracking import Tracker

    info, doc = Tracker().sweep_report(sweep_name)
    table = doc["comparisons"]
    incomplete = doc.get("incomplete") or []
    if as_json:
        typer.echo(json.dumps({"run": info, **doc}, default=str))
        if incomplete or info["status"] != "FINISHED":
            raise typer.Exit(1)
        return
    lines = [f"sweep {sweep_name} (run {info['run_id']}, {info['status']})"]
    lines.append(_comparison_table(table))
    lines.append(_across_table(doc.get("across_tasks") or []))
    lines += [
        f"incomplete: {t['task']} · {t['variant']} · {t['model']} ({t['n_errors']} of {t['n']} "
        "rows failed); rerun the sweep to resume"
        for t in incomplete
    ]
    typer.echo("\n".join(lines))
    if incomplete or info["status"] != "FINISHED":
        typer.echo(
            f"error: sweep {sweep_name!r} is not complete (parent run {info['status']}); "
            "its table is partial. Rerun the sweep to resume it",
            err=True,
        )
        raise typer.Exit(1)


@app.command()
@friendly
def ui(
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="Port for the MLflow UI.")
    ] = 5000,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
) -> None:
    """Start the MLflow UI on the configured tracking store (exit 1 if it cannot serve)."""
    import contextlib
    import os
    import signal
    import socket
    import subprocess

    from experiments.secrets import safe_url
    from experiments.tracking import load_config, ui_command

    try:  # a port in use or not ours to bind: say so now, not after the server gives up
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, port))
    except OSError as e:
        raise WorkbenchError(
            f"cannot serve the MLflow UI on {host}:{port} ({e.strerror or e}); "
            "pass another --port (or stop what uses it)"
        ) from None
    cmd = ui_command(load_config(), port, host)
    shown = " ".join(safe_url(c) for c in cmd[3:])
    typer.echo(f"MLflow UI on http://{host}:{port}  ({shown})", err=True)
    # The MLflow server forks workers and job consumers; run it as its own process group
    # and take the whole group down with us, so no worker outlives the command.
    proc = subprocess.Popen(cmd, env=os.environ.copy(), start_new_session=True)

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        code = proc.wait()
        # The server only returns by itself when it failed to serve.
        typer.echo(f"error: the MLflow server stopped (exit code {code})", err=True)
        code = code or 1
    except KeyboardInterrupt:
        code = 0
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    raise typer.Exit(code)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
