"""The `workbench` command line.

Every command turns a `WorkbenchError` into a one-line message on stderr and exit code 2,
and builds its whole output before printing, so a failure never leaves half an answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
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


def friendly(fn: F) -> F:
    """Map workbench errors to a clear message and exit code 2."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except WorkbenchError as e:
            typer.echo(f"error: {e}", err=True)
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
    """List every task: type, metric, split sizes and labels."""
    specs = _catalog(data_dir, hf, prompts_dir).specs()
    if as_json:
        out = json.dumps([s.to_json() for s in specs], indent=1, ensure_ascii=False)
    else:
        lines = []
        for s in specs:
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
    from promptlib.demos import evaluation_rows
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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
