"""What a reader of another tool's results gives the workbench: `ImportedTrial`s of
`ImportedRow`s, checked once here (ids present, none repeated) so every format gets the same
errors, and the one error type a bad input raises (`ImportInputError`: exit 2, one line)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptlib import inputs
from promptlib.errors import WorkbenchError


class ImportInputError(WorkbenchError):
    """A results file cannot be imported: the message names the file and what to do (exit 2)."""


OK = "ok"  # an `ImportedRow.status` with a score; any other value is a failure state's name


@dataclass(frozen=True)
class ImportedRow:
    """One row of one trial, as the source tool recorded it.

    `correct` is 1.0 or 0.0 (a fractional score is refused by the comparison, not rounded);
    None means no score (a failure state), never counted as wrong."""

    row_id: str
    correct: float | None
    prediction: str | None = None  # the model's text (needed for --rescore)
    answer: str | None = None  # the gold answer (needed for --rescore)
    epoch: int | None = None  # several epochs kept apart: each (row_id, epoch) is a row
    status: str = OK  # or the name of a failure state ("error", "cancelled", ...)
    extra: Mapping[str, Any] = field(default_factory=dict)  # per-sample metrics etc.
    # the source's identity of the prompt the row was given (lm-eval's prompt_hash, a hash of
    # inspect's sample input or of promptfoo's test vars): rows with the same one got the
    # same prompt, so they are one unit of the tests (`experiments.imports.identity`)
    prompt: str | None = None
    # what the report shows (`experiments.imports.report`), where the source records it: the
    # row's input (inspect's sample input, lm-eval's doc text, promptfoo's test vars) and the
    # prompt text the model was sent (inspect's messages, lm-eval's context, promptfoo's
    # prompt.raw); neither is logged in the rows or used by the tests
    input_text: str | None = None
    prompt_text: str | None = None

    @property
    def key(self) -> str:
        """The id rows are paired by: the row id, with the epoch when there is one."""
        return self.row_id if self.epoch is None else f"{self.row_id}#{self.epoch}"


@dataclass(frozen=True)
class ImportedTrial:
    """One (task, variant, model)'s rows from one source file."""

    source_file: Path
    tool: str  # "jsonl", "csv", "inspect_ai", "lm-evaluation-harness", "promptfoo"
    tool_version: str | None
    task: str | None  # None: not known (give --task)
    variant: str
    model: str
    metric: str | None  # the source's own metric name, if any
    rows: tuple[ImportedRow, ...]
    # files besides `source_file` the reader read for this trial (e.g. lm-eval's results
    # file beside its samples): tracked with the sources, so `workbench compare` finds them
    companions: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        check_rows(self.source_file, self.rows, f"{self.variant} / {self.model}")


@dataclass(frozen=True)
class ReadOptions:
    """The `workbench import` options every reader takes (a reader may ignore some)."""

    task: str | None = None  # --task: the LegalBench task, when the file does not say
    variant_from: str | None = None  # --variant-from: the field that names the variant
    model_from: str | None = None  # --model-from: the field that names the model
    # None (the default) is left out of an import's id, so these keep existing ids unchanged
    epochs: str | None = None  # --epochs: "reduce" (default) or "separate" (inspect)
    scorer: str | None = None  # --scorer: the score that is the correctness (inspect, lm-eval)

    def __post_init__(self) -> None:
        # an empty value (a script's empty $FIELD) would silently mean the default field
        for option, value in (
            ("--task", self.task), ("--variant-from", self.variant_from),
            ("--model-from", self.model_from), ("--epochs", self.epochs),
            ("--scorer", self.scorer),
        ):  # fmt: skip
            if value is not None and not value.strip():
                raise ImportInputError(
                    f"{option} is empty; give a name, or leave the option out for the default"
                )


Reader = Callable[[Path, ReadOptions], list[ImportedTrial]]

WHAT = "results file"  # a source file's role in messages about reading it


def read_source(path: Path) -> str:
    """A source file's text: a regular file (a FIFO or device is refused, never waited on)
    of at most `inputs.MAX_DATA_BYTES`, UTF-8."""
    return inputs.read_text(path, WHAT, ImportInputError, inputs.MAX_DATA_BYTES)


def check_source(path: Path) -> None:
    """A source file given or found beside one is a regular file (`inputs.check_file`)."""
    if not os.path.lexists(path):
        raise ImportInputError(f"{path}: no such file; check the path")
    inputs.check_file(path, WHAT, ImportInputError)


def load_json(path: Path, text: str, line: int = 1) -> Any:
    """JSON read from `path` (a jsonl line: `line` is where `text` starts): bounded depth
    and integers, no key given twice (`inputs.loads`); malformed JSON raises
    `json.JSONDecodeError` for the reader's own message."""
    return inputs.loads(text, str(path), ImportInputError, first_line=line)


def check_rows(path: Path, rows: tuple[ImportedRow, ...], what: str) -> None:
    """Refuse a trial with no rows, a row without an id, or an id given twice."""
    if not rows:
        raise ImportInputError(
            f"{path}: {what} has no rows; check the file is complete (a run cut short?)"
        )
    seen: set[str] = set()
    for n, row in enumerate(rows, 1):
        if not str(row.row_id).strip():
            raise ImportInputError(
                f"{path}: row {n} of {what} has no id; every row needs one (rows are paired "
                "by id): add it, or export the results with their sample ids"
            )
        if row.key in seen:
            raise ImportInputError(
                f"{path}: row id {row.key!r} appears twice in {what}; give each row its own "
                "id (several epochs? keep their epoch field)"
            )
        seen.add(row.key)
        if row.status == OK and row.correct is None and None in (row.prediction, row.answer):
            raise ImportInputError(
                f"{path}: row {row.key!r} of {what} has no score and no prediction with its "
                "answer; give `correct`, or `prediction` and `answer`, or a failure status"
            )


def _release(text: str) -> tuple[int, ...] | None:
    """The release numbers of a version string ('0.3.46.dev2' -> (0, 3, 46)), or None."""
    m = re.match(r"v?(\d+(?:\.\d+)*)", text.strip())
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def check_version(
    path: Path, tool: str, found: str | None, lowest: str, below: str | None = None
) -> None:
    """Refuse a file written by a `tool` version outside [lowest, below) (or with none, or
    an unreadable one): its layout may differ from what the reader knows."""
    have = _release(found) if found else None
    low, high = _release(lowest), _release(below) if below else None
    supported = f"{tool} {lowest} or later" + (f", before {below}" if below else "")
    if have is None:
        raise ImportInputError(
            f"{path}: no readable {tool} version in the file ({found!r}); this reader supports "
            f"{supported}: is it a {tool} file? write it again with a supported version"
        )
    assert low is not None
    if have < low or (high is not None and have >= high):
        raise ImportInputError(
            f"{path}: written by {tool} {found}, an unsupported version; this reader supports "
            f"{supported}: write the file again with a supported version"
        )
