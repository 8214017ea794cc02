"""`workbench import FORMAT PATH...` and `workbench compare NAME`: results made by other tools,
read into trials and compared with the workbench's own statistics."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from experiments import bounds, output
from experiments.cli.app import app
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

if TYPE_CHECKING:
    from experiments.imports.identity import TaskTexts
    from experiments.imports.report import TaskRows
    from experiments.imports.run import Tests

Rescore = Annotated[
    bool,
    typer.Option(
        "--rescore",
        help="Score the generations with the task's official LegalBench metric (the task must "
        "be recognised and every compared row have a prediction and an answer).",
    ),
]
Comparisons = Annotated[
    str,
    typer.Option(
        "--comparisons",
        help="all_pairs (paired permutation test of every pair) or best_vs_worst (the range "
        "test over the k variants).",
    ),
]
Between = Annotated[
    str,
    typer.Option(
        "--between",
        help="variants (compare the prompts, per model) or models (compare the models, per "
        "prompt).",
    ),
]
Correction = Annotated[str, typer.Option("--correction", help="holm or bh.")]
Across = Annotated[
    str, typer.Option("--across-tasks", help="Across-task test: t, wilcoxon or permutation.")
]
Resamples = Annotated[int, bounded("--n-resamples", bounds.N_RESAMPLES, "Permutations.")]


def _tests(
    rescore: bool,
    comparisons: str,
    correction: str,
    across: str,
    n_resamples: int,
    between: str,
) -> Tests:
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.imports.run import Tests
    from promptlib.errors import WorkbenchError

    checks = {
        "--comparisons": (comparisons, ("all_pairs", "best_vs_worst")),
        "--correction": (correction, ("holm", "bh")),
        "--across-tasks": (across, ("t", "wilcoxon", "permutation")),
        "--between": (between, ("variants", "models")),
    }
    for option, (value, allowed) in checks.items():
        if value not in allowed:
            raise WorkbenchError(f"{option} {value!r}: use one of {', '.join(allowed)}")
    return Tests(rescore, comparisons, correction, across, n_resamples, between)


def _tasks(
    data_dir: str | None, hf: bool, prompts_dir: str | None
) -> tuple[dict[str, str], TaskTexts, TaskRows]:
    """Every known task's official metric by name (a user task's from its task.json, which
    `--rescore` must score with) and their test rows' texts (read when a task is compared):
    an import's rows are clustered by them where the source gives no prompt identity; and
    their test rows (the report's inputs where the source records none)."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments import metrics
    from experiments.imports.identity import catalog_texts
    from experiments.imports.report import catalog_rows
    from promptlib.usertasks.source import user_task_names

    catalog = _catalog(data_dir, hf, prompts_dir)
    source = catalog.source
    mine = user_task_names(source)
    known = {
        n: metrics.task_metric(catalog.task(n)) if n in mine else metrics.official_metric(n)
        for n in catalog.names()
    }
    return known, catalog_texts(catalog), catalog_rows(catalog)


@app.command("import")
@friendly
def import_(
    fmt: Annotated[
        str, typer.Argument(metavar="FORMAT", help="jsonl, csv, inspect, lm-eval or promptfoo.")
    ],
    paths: Annotated[list[Path], typer.Argument(metavar="PATH...", help="Results files.")],
    task: Annotated[
        str | None, typer.Option("--task", help="The LegalBench task, when a file names none.")
    ] = None,
    variant_from: Annotated[
        str | None, typer.Option("--variant-from", help="The field naming each row's variant.")
    ] = None,
    model_from: Annotated[
        str | None, typer.Option("--model-from", help="The field naming each row's model.")
    ] = None,
    epochs: Annotated[
        str | None,
        typer.Option("--epochs", help="inspect: 'reduce' (as the log says) or 'separate'."),
    ] = None,
    scorer: Annotated[
        str | None,
        typer.Option("--scorer", help="inspect: the scorer; lm-eval: the per-sample metric."),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="The import's name (default: FORMAT-<id>).")
    ] = None,
    rescore: Rescore = False,
    comparisons: Comparisons = "all_pairs",
    between: Between = "variants",
    correction: Correction = "holm",
    across_tasks: Across = "t",
    n_resamples: Resamples = 10_000,
    no_track: Annotated[
        bool, typer.Option("--no-track", envvar=NO_TRACK_ENV, help="Do not log to MLflow.")
    ] = False,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
    explain: Explain = False,
) -> None:
    """Import results made elsewhere, compare their variants with paired tests, track it."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments import settings
    from experiments.imports.records import ReadOptions
    from experiments.imports.run import import_results

    tests = _tests(rescore, comparisons, correction, across_tasks, n_resamples, between)
    known, texts, rows = _tasks(data_dir, hf, prompts_dir)
    with output.progress_bar(f"import {fmt}") as bar:  # stderr, on a terminal only
        result = import_results(
            fmt, paths, ReadOptions(task, variant_from, model_from, epochs, scorer), tests=tests,
            known_tasks=known, name=name, track=not no_track, texts=texts, progress=bar,
            reports_dir=settings.reports_dir(), task_rows=rows,
        )  # fmt: skip
    doc = result.to_dict()  # output sits below imports: it prints the document
    typer.echo(output.as_json(doc) if as_json else output.import_summary(doc, explain))


@app.command("compare")
@friendly
def compare(
    name: Annotated[str, typer.Argument(help="An import's name (printed by workbench import).")],
    rescore: Rescore = False,
    comparisons: Comparisons = "all_pairs",
    between: Between = "variants",
    correction: Correction = "holm",
    across_tasks: Across = "t",
    n_resamples: Resamples = 10_000,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
    explain: Explain = False,
) -> None:
    """Compare a tracked import again (e.g. --rescore, or the range test for best-of-k)."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.imports.run import compare_import

    tests = _tests(rescore, comparisons, correction, across_tasks, n_resamples, between)
    known, texts, _ = _tasks(data_dir, hf, prompts_dir)
    with output.progress_bar(f"compare {name}") as bar:  # stderr, on a terminal only
        result = compare_import(name, tests=tests, known_tasks=known, texts=texts, progress=bar)
    doc = result.to_dict()
    typer.echo(output.as_json(doc) if as_json else output.import_summary(doc, explain))
