"""`workbench variants generate`: a generator model writes an instruction or register text
for a task, into a YAML file with its provenance and `reviewed: false`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from experiments import bounds, output
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
    Mode,
    NoCache,
    PromptsDir,
    Retries,
    Setup,
    TaskArg,
    Timeout,
    bounded,
    friendly,
)
from experiments.settings import NO_TRACK_ENV

variants_app = typer.Typer(
    help="Prompt texts for variants: generate an instruction or register file with a model.",
    no_args_is_help=True,
)
app.add_typer(variants_app, name="variants")


@variants_app.command("generate")
@friendly
def generate(
    task: TaskArg,
    kind: Annotated[
        str,
        typer.Option(
            "--kind",
            help="description or paraphrase (an instruction_file), plain or technical (a "
            "register_file: a query template keeping the task's {{column}} placeholders).",
        ),
    ],
    generator: Annotated[
        str, typer.Option("--generator", help="litellm model that writes the text, or local/...")
    ],
    n: Annotated[int, bounded("--n", bounds.CANDIDATES, "Candidates to generate.")] = 1,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="File to write (with --n N: FILE-1.yaml ... FILE-N.yaml). Default: "
            "ablations/generated/<task>/<kind>-<sha8>.yaml.",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing -o file.")] = False,
    temperature: Annotated[
        float, bounded("--temperature", bounds.GENERATOR_TEMPERATURE, "Generator temperature.")
    ] = 0.7,
    max_tokens: Annotated[
        int, bounded("--max-tokens", bounds.GENERATOR_MAX_TOKENS, "Most tokens per text.")
    ] = 400,
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
            "--no-track", envvar=NO_TRACK_ENV, help="Do not log the generation to MLflow."
        ),
    ] = False,
    data_dir: DataDir = None,
    hf: HF = False,
    prompts_dir: PromptsDir = None,
    as_json: JSON = False,
) -> None:
    """Have a model write an instruction or query-template file for a task, to review.

    --kind description or paraphrase writes a rule description or a paraphrased instruction;
    plain or technical, a query template in that register. The text starts from the task's
    own instruction, query template, labels and README, and the file keeps its provenance
    and 'reviewed: false': a sweep or run using it warns (and tags its MLflow run) until you
    have read it and set 'reviewed: true'. Exit 1 when a candidate was refused (e.g. a
    register text that drops a placeholder): the others are written.
    """
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.generate import GenerateRequest
    from experiments.generate import generate as run_generate
    from experiments.generate.prompt import check_kind

    check_kind(kind)  # one clear line before the catalog or a model is loaded
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
    catalog = setup.catalog()
    catalog.task(task)  # unknown task -> did you mean, before the model
    request = GenerateRequest(
        task=task,
        kind=kind,
        generator=generator,
        n=n,
        out=out,
        force=force,
        temperature=temperature,
        max_tokens=max_tokens,
    )
    tracker = None
    if not no_track:
        # start-up time: the CLI imports a command's modules when it runs
        from experiments.tracking import Tracker

        tracker = Tracker()  # an unusable store fails before any call
    lm = setup.lm(generator)
    result = run_generate(request, catalog, lm, cache=setup.cache(), tracker=tracker)
    doc = result.to_dict()
    typer.echo(output.as_json(doc) if as_json else output.generation_lines(doc))
    refused = [c for c in result.candidates if c.status == "refused"]
    for c in refused:
        typer.echo(output.generation_refused(c.number, c.reason or "refused"), err=True)
    if refused:
        raise typer.Exit(1)
