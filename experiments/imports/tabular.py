"""The plain formats, `jsonl` and `csv`: one row per line with `row`, `variant`, `model`, and
either `correct` or `prediction` plus `answer` (optional: `task`, `epoch`, `status`)."""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from experiments.imports.records import (
    OK,
    WHAT,
    ImportedRow,
    ImportedTrial,
    ImportInputError,
    ReadOptions,
    load_json,
)
from promptlib import inputs

KNOWN = ("row", "variant", "model", "task", "correct", "prediction", "answer", "epoch", "status")
_TRUE = {"1", "1.0", "true", "yes", "correct"}
_FALSE = {"0", "0.0", "false", "no", "incorrect", "wrong"}


def read_jsonl(path: Path, opts: ReadOptions) -> list[ImportedTrial]:
    """A JSON-lines file: one object per line (blank lines skipped)."""
    return _trials(path, _jsonl_lines(path), opts, "jsonl")


def read_csv(path: Path, opts: ReadOptions) -> list[ImportedTrial]:
    """A CSV file with a header line."""
    return _trials(path, _csv_lines(path), opts, "csv")


def _text(path: Path) -> str:
    data = inputs.read_bytes(path, WHAT, ImportInputError, inputs.MAX_DATA_BYTES)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        what = "a zip archive (an inspect_ai .eval log? use `workbench import inspect`)"
        if data[:2] != b"PK":
            what = "not UTF-8 text"
        raise ImportInputError(f"{path}: {what}; give a results file of this format") from None


def _jsonl_lines(path: Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    lines = _text(path).splitlines()
    last = max((n for n, line in enumerate(lines, 1) if line.strip()), default=0)
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = load_json(path, line, n)
        except json.JSONDecodeError:
            raise ImportInputError(_not_json(path, n, line, n == last)) from None
        if not isinstance(obj, dict):
            raise ImportInputError(
                f"{path}: line {n} is JSON but not an object; jsonl needs one object per "
                "line with row, variant, model and correct (or prediction and answer)"
            )
        yield n, obj


def _not_json(path: Path, n: int, line: str, last: bool) -> str:
    head = line.lstrip()[:1]
    if last and n > 1 and head == "{":
        return f"{path}: line {n}, the last, is cut off (a truncated file?); rewrite the file whole"
    if n == 1 and head in ("{", "["):
        return (
            f"{path}: line 1 is not a JSON object on its own line: one JSON document, not jsonl "
            "(an inspect, lm-eval or promptfoo file? use that format's name)"
        )
    if n == 1 and "," in line:
        return f"{path}: line 1 is not JSON but looks like CSV; use `workbench import csv`"
    return f"{path}: line {n} is not JSON; jsonl needs one JSON object per line"


def _csv_lines(path: Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    text = _text(path)
    if text.lstrip()[:1] in ("{", "["):
        raise ImportInputError(
            f"{path}: looks like JSON, not CSV; use `workbench import jsonl` (one object a line)"
            " or the format of the tool that wrote it"
        )
    reader = csv.DictReader(text.splitlines())
    try:
        if not reader.fieldnames:
            raise ImportInputError(f"{path}: empty; a CSV file needs a header line and rows")
        header = [k.strip() for k in reader.fieldnames]
        twice = sorted(k for k, n in Counter(header).items() if n > 1)  # linear
        if twice:  # a reader keeps only the last of two same-named columns
            raise ImportInputError(
                f"{path}: line 1: column {twice[0]!r} is given twice in the header; keep one "
                "(a CSV reader silently keeps the last)"
            )
        width = len(reader.fieldnames)
        for n, rec in enumerate(reader, 2):
            if None in rec or len(rec) != width or any(v is None for v in rec.values()):
                raise ImportInputError(
                    f"{path}: line {n} has a different number of fields than the header "
                    f"({width}); a cut-off or hand-edited file? fix that line"
                )
            yield n, {k.strip(): v for k, v in rec.items()}
    except csv.Error as e:  # e.g. a field over the csv module's 131,072-character limit
        raise ImportInputError(
            f"{path}: line {reader.line_num}: not valid CSV ({e}); fix that line"
        ) from None


def _trials(
    path: Path, lines: Iterator[tuple[int, Mapping[str, Any]]], opts: ReadOptions, tool: str
) -> list[ImportedTrial]:
    """The lines grouped by (task, variant, model), each group a trial, in file order."""
    variant_key, model_key = opts.variant_from or "variant", opts.model_from or "model"
    groups: dict[tuple[str | None, str, str], list[ImportedRow]] = {}
    for n, rec in lines:
        where = f"{path}: line {n}"
        task = _task(where, rec, opts)
        variant = _field(where, rec, variant_key, "--variant-from")
        model = _field(where, rec, model_key, "--model-from")
        groups.setdefault((task, variant, model), []).append(
            _row(where, rec, variant_key, model_key)
        )
    if not groups:
        raise ImportInputError(f"{path}: no rows; is the file empty or cut off?")
    return [
        ImportedTrial(
            source_file=path,
            tool=tool,
            tool_version=None,
            task=task,
            variant=variant,
            model=model,
            metric=None,
            rows=tuple(rows),
        )
        for (task, variant, model), rows in groups.items()
    ]


def _field(where: str, rec: Mapping[str, Any], key: str, option: str) -> str:
    value = rec.get(key)
    if value is None or not str(value).strip():
        raise ImportInputError(
            f"{where}: no {key!r} field; give it on every line, or name the field that holds "
            f"it with {option} FIELD (fields here: {', '.join(map(str, rec))})"
        )
    return str(value).strip()


def _task(where: str, rec: Mapping[str, Any], opts: ReadOptions) -> str | None:
    value = rec.get("task")
    task = str(value).strip() if value is not None and str(value).strip() else None
    if task and opts.task and task != opts.task:
        raise ImportInputError(
            f"{where}: task {task!r} but --task {opts.task}; drop --task or the file's task"
        )
    return task or opts.task


def _row(where: str, rec: Mapping[str, Any], *names: str) -> ImportedRow:
    row_id = rec.get("row")
    if row_id is None or not str(row_id).strip():
        raise ImportInputError(
            f"{where}: no `row` id; every line needs one (rows are paired by id): add it"
        )
    status = str(rec.get("status") or OK).strip() or OK
    correct = _correct(where, rec.get("correct")) if status == OK else None
    return ImportedRow(
        row_id=str(row_id).strip(),
        correct=correct,
        prediction=_opt(rec.get("prediction")),
        answer=_opt(rec.get("answer")),
        epoch=_epoch(where, rec.get("epoch")),
        status=status,
        extra={k: v for k, v in rec.items() if k not in KNOWN and k not in names},
        # shown by the report when the file has them (they stay in `extra` as well)
        input_text=_opt(rec.get("input", rec.get("text"))),
        prompt_text=_opt(rec.get("prompt")),
    )


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)


def _correct(where: str, value: Any) -> float | None:
    """`correct` as 1.0 / 0.0 (or a number in [0, 1]); None when absent."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        return float(value)
    text = str(value).strip().lower()
    if text in _TRUE:
        return 1.0
    if text in _FALSE:
        return 0.0
    try:
        number = float(text)
    except ValueError:
        number = -1.0
    if not 0.0 <= number <= 1.0:
        raise ImportInputError(
            f"{where}: correct = {value!r}; give 1/0, true/false, or a score in [0, 1]"
        )
    return number


def _epoch(where: str, value: Any) -> int | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        raise ImportInputError(f"{where}: epoch = {value!r}; give a whole number") from None
