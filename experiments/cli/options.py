"""The options several commands share (data source, model connection, cache), declared once,
their choices, `Setup` (turns them into a catalog, a model and a cache) and `friendly`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from experiments import bounds, output, settings
from experiments.bounds import Bounds, BoundsError

# the calls' defaults are the gateway's (their own module: --help must not load the gateway)
from experiments.llm.defaults import CONCURRENCY as CONCURRENCY
from experiments.llm.defaults import MAX_RETRIES
from experiments.llm.defaults import TIMEOUT as TIMEOUT
from promptlib.errors import WorkbenchError

RETRIES = MAX_RETRIES  # --retries, named as the option

if TYPE_CHECKING:
    from experiments.llm import types as llm_types
    from experiments.trials import spec as trial_spec


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
SCORINGS: dict[Scoring, llm_types.Scoring] = {
    Scoring.generate: "generate",
    Scoring.loglik: "loglik",
    Scoring.loglik_norm: "loglik-norm",
}
DEFINITIONS: dict[Definition, trial_spec.Definition] = {
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


# ---- numbers ---------------------------------------------------------------------------------
class _Bounded:
    """An option's parser: the number typed, checked against its range (`experiments.bounds`)
    as it is parsed, before the command runs. Out of range, nan or infinite: one line naming
    the option and its range, exit 2 (typer's own message is a box without the range)."""

    def __init__(self, option: str, limits: Bounds) -> None:
        self.option = option
        self.bounds = limits
        self.__name__ = option  # typer names a parser's type by it

    def __call__(self, raw: Any) -> Any:
        try:
            return self.bounds.parse(raw, self.option)
        except BoundsError as e:
            typer.echo(output.command_error(str(e)), err=True)
            raise typer.Exit(e.exit_code) from None


def bounded(option: str, limits: Bounds, help: str, **kwargs: Any) -> Any:
    """A numeric `typer.Option` whose value is checked against `limits` at parse time; its
    help says the range. Every numeric option of the CLI is declared with it (a test walks
    the commands and refuses one that is not)."""
    return typer.Option(
        option,
        parser=_Bounded(option, limits),
        metavar="INTEGER" if limits.integer else "NUMBER",
        help=f"{help.rstrip('.')}: {limits.describe()}.",
        **kwargs,
    )


# ---- options shared by several commands (declared once) --------------------------------------
DataDir = Annotated[
    str | None,
    typer.Option(
        "--data-dir",
        help="LegalBench-layout folder (tasks/<task>/...). Default: $LEGALBENCH_DIR, else "
        "legalbench_dir in the project's mlflow.yaml.",
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
Explain = Annotated[
    bool,
    typer.Option("--explain", help="Under the table, the full method of every test and interval."),
]
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
    int, bounded("--concurrency", bounds.CONCURRENCY, "Parallel calls to remote models.")
]
Retries = Annotated[int, bounded("--retries", bounds.RETRIES, "Retries per call.")]
Timeout = Annotated[
    float,
    bounded(
        "--timeout",
        bounds.TIMEOUT,
        "Deadline in seconds for each attempt of a call, the whole reply included (not a"
        " limit per read); each retry (--retries) gets its own.",
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


#: the catalog notes already printed (once a process, however many catalogs a command makes)
_NOTED: set[str] = set()


def _note_once(note: str) -> None:
    if note not in _NOTED:
        _NOTED.add(note)
        typer.echo(note, err=True)


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

    def _project_file(self) -> dict[str, Any]:
        """Where `legalbench_dir:` is read from when neither --hf, --data-dir nor
        $LEGALBENCH_DIR gives the data: the project file, or (none found) the user-level one,
        which the error names when no file sets it."""
        given = self.hf or self.data_dir or os.environ.get(settings.DATA_DIR_ENV)
        if given:
            return {}
        project = settings.data_default()
        return {"project_dir": project.path, "project_file": project.file}

    def legalbench(self) -> Any:
        """LegalBench's tasks alone (`promptlib.data.default_source`); raises
        `NoLegalBenchDataError` when no data is configured."""
        # start-up time: the CLI imports a command's modules when it runs
        from promptlib.data import default_source

        return default_source(
            data_dir=self.data_dir,
            hf=self.hf,
            prompts_dir=self.prompts_dir,
            **self._project_file(),
        )

    def catalog(self) -> Any:
        if self._catalog is None:
            # start-up time: the CLI imports a command's modules when it runs
            from promptlib.tasks import Catalog
            from promptlib.usertasks.source import catalog_source

            # LegalBench's tasks, and the user's own (WORKBENCH_TASKS_DIR) beside them; with
            # no LegalBench data configured, the user's alone, which one line says
            self._catalog = Catalog(
                catalog_source(
                    data_dir=self.data_dir,
                    hf=self.hf,
                    prompts_dir=self.prompts_dir,
                    **self._project_file(),
                    announce=_note_once,
                )
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

            typer.echo(output.command_error(redact(str(e))), err=True)
            raise typer.Exit(e.exit_code) from None

    return wrapper  # type: ignore[return-value]
