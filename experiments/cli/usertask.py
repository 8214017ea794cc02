"""`workbench task new` and `workbench task list`: your own labelled data as a task.

`task new` reads a CSV, JSONL or Parquet file (or ``hf:owner/name``), checks it, infers the
task type and labels, and writes a task folder in LegalBench's layout into the user task
folder (``WORKBENCH_TASKS_DIR``), which every command's catalog lists beside LegalBench's.
The work is `promptlib.usertasks`; this module wires the options to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from experiments import bounds, output
from experiments.cli.app import app
from experiments.cli.options import HF, JSON, DataDir, PromptsDir, Setup, bounded, friendly
from promptlib.errors import DataError, NoLegalBenchDataError

task_app = typer.Typer(
    help="Your own labelled data as a task: task new (from a CSV, JSONL or Parquet file), "
    "task list.",
    no_args_is_help=True,
)
app.add_typer(task_app, name="task")


@task_app.command("new")
@friendly
def task_new(
    name: Annotated[str, typer.Argument(help="The task's name, e.g. nda_disclosure.")],
    source: Annotated[
        str,
        typer.Option(
            "--from",
            help="The rows: a .csv, .jsonl or .parquet file, or hf:owner/name (a Hugging Face "
            "dataset; needs the network). Without --train, the test rows (and the "
            "demonstrations).",
        ),
    ],
    inputs: Annotated[
        list[str],
        typer.Option(
            "--input", help="A column the prompt shows (repeat for several, in prompt order)."
        ),
    ],
    answer: Annotated[str, typer.Option("--answer", help="The column holding each row's label.")],
    instruction: Annotated[
        str | None, typer.Option("--instruction", help="The instruction the prompt starts with.")
    ] = None,
    instruction_file: Annotated[
        Path | None,
        typer.Option("--instruction-file", help="A UTF-8 text file holding the instruction."),
    ] = None,
    labels: Annotated[
        str | None,
        typer.Option(
            "--labels",
            help='The label set, comma-separated (e.g. "Yes,No"), in the order shown. '
            "Default: inferred from the answers.",
        ),
    ] = None,
    task_type: Annotated[
        str | None,
        typer.Option(
            "--type", help="binary, multi-class, extraction or generation. Default: inferred."
        ),
    ] = None,
    metric: Annotated[
        str | None,
        typer.Option(
            "--metric",
            help="balanced_accuracy (classification default), f1 (macro over the labels) or "
            "exact_match (extraction and generation default).",
        ),
    ] = None,
    train: Annotated[
        str | None,
        typer.Option("--train", help="A second file of the same columns: the train split."),
    ] = None,
    train_fraction: Annotated[
        float | None,
        bounded(
            "--train-fraction",
            bounds.TRAIN_FRACTION,
            "Share of --from's rows (per label) kept for train instead of test",
        ),
    ] = None,
    demos: Annotated[
        int,
        bounded(
            "--demos",
            bounds.DEMOS,
            "Demonstrations in base_prompt.txt, drawn from train (one per label in turn)",
        ),
    ] = 4,
    seed: Annotated[
        int, bounded("--seed", bounds.SEED, "Seed of the split and of the demonstrations")
    ] = 0,
    slice_column: Annotated[
        str | None,
        typer.Option("--slice", help="A column splitting the rows into slices (kept, not shown)."),
    ] = None,
    hf_split: Annotated[
        str, typer.Option("--hf-split", help="With --from hf:NAME: the split to read.")
    ] = "train",
    force: Annotated[
        bool, typer.Option("--force", help="Replace a task of yours of this name (atomically).")
    ] = False,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
) -> None:
    """Make a task of your own labelled rows, beside LegalBench's in every command.

    Refused, with nothing written, when a column is unknown, the answer column is empty,
    constant or has missing values, a row is in both train and test, there are too few rows
    for the demonstrations asked, or the name is a LegalBench task's.
    """
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.settings import tasks_dir
    from promptlib.data import read_text
    from promptlib.legalbench_names import LEGALBENCH_TASKS
    from promptlib.usertasks.build import TaskRequest, draft_task
    from promptlib.usertasks.check import check_draft
    from promptlib.usertasks.infer import parse_labels
    from promptlib.usertasks.write import write_task

    if (instruction is None) == (instruction_file is None):
        raise DataError(
            "give the instruction the prompt starts with: --instruction TEXT or "
            "--instruction-file FILE (one of them)"
        )
    text = instruction if instruction is not None else None
    if instruction_file is not None:
        text = read_text(instruction_file, "instruction file")
    assert text is not None
    request = TaskRequest(
        name=name,
        source=source,
        inputs=tuple(inputs),
        answer=answer,
        instruction=text,
        labels=parse_labels(labels) if labels is not None else None,
        task_type=task_type,
        metric=metric,
        train_source=train,
        train_fraction=train_fraction,
        demos=demos,
        seed=seed,
        slice_column=slice_column,
        hf_split=hf_split,
    )
    # LegalBench's names are refused even with no LegalBench data configured (it would
    # shadow the task once there is); a configured folder's own names too
    try:
        configured = Setup(data_dir=data_dir, hf=hf, prompts_dir=prompts_dir).legalbench().names()
    except NoLegalBenchDataError:
        configured = ()
    draft = draft_task(request, tuple(sorted({*LEGALBENCH_TASKS, *configured})))
    folder = write_task(tasks_dir(), name, draft.files, force, check=check_draft(draft))
    if as_json:
        typer.echo(
            output.as_json(
                {
                    "task": name,
                    "folder": str(folder),
                    **draft.meta.to_json(),
                    "n_train": draft.n_train,
                    "n_test": draft.n_test,
                    "n_demos": draft.n_demos,
                    "how": draft.inferred.how,
                },
                indent=1,
            )
        )
    else:
        typer.echo("\n".join(draft.lines(str(folder))))
    if draft.meta.labels is None:
        typer.echo(
            f"warning: task {name!r} is {draft.meta.task_type} with no label set: a reply that "
            "is no valid answer cannot be detected (every run says so); give --labels if the "
            "answers are a fixed set",
            err=True,
        )


@task_app.command("list")
@friendly
def task_list(as_json: JSON = False) -> None:
    """List your own tasks (the folder WORKBENCH_TASKS_DIR) with their type, labels and rows."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.settings import tasks_dir
    from promptlib.tasks import Catalog, TaskProblem
    from promptlib.usertasks.source import UserTaskSource

    folder = tasks_dir()
    entries = Catalog(UserTaskSource(folder)).survey()
    if as_json:
        typer.echo(output.as_json({"folder": str(folder), "tasks": [e.to_json() for e in entries]}))
        return
    if not entries:
        typer.echo(
            f"no tasks of yours in {folder} yet; make one with: workbench task new NAME "
            "--from FILE --input COLUMN --answer COLUMN --instruction TEXT"
        )
        return
    typer.echo(f"# your tasks in {folder}")
    typer.echo(output.task_list(entries))
    problems = [e for e in entries if isinstance(e, TaskProblem)]
    for p in problems:
        typer.echo(output.task_problem(p.name, p.error), err=True)
    if problems:
        raise typer.Exit(1)
