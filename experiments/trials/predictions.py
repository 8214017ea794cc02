"""Predictions files: a trial's own (predictions.jsonl, in runs/ and on its MLflow run), with
its one writer and one reader, and a user's file `workbench score` reads, where every bad
line is named, never scored (a gold label no local file documents is read only where the
official metric scores it, and listed: `PredictionsFile.undocumented`).

A trial's file has one `Prediction.to_dict()` per line (`encode_predictions`); it is read
back as `Prediction`s (`decode_predictions`), so no reader indexes a stored row by key.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.metrics import normalize
from experiments.trials.record import Prediction, stored_row
from promptlib import inputs
from promptlib.data import is_empty_answer
from promptlib.errors import WorkbenchError, first_few

PREDICTIONS_FILE = "predictions.jsonl"
STORED_KEYS = ("index", "answer", "generation", "correct")
"""The keys every stored prediction has had, in every version (the others default)."""


def encode_predictions(predictions: Iterable[Prediction]) -> str:
    """A trial's predictions.jsonl: one JSON object per line, non-ASCII kept as UTF-8."""
    return "".join(json.dumps(p.to_dict(), ensure_ascii=False) + "\n" for p in predictions)


def decode_predictions(text: str) -> list[Prediction]:
    """A trial's predictions.jsonl read back. A line that is not JSON raises ValueError;
    one that is no stored prediction (an object with `STORED_KEYS`) raises KeyError."""
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [stored_prediction(r) for r in rows]


def stored_prediction(row: Mapping[str, Any]) -> Prediction:
    """One stored row as a `Prediction` (keys a version did not write take their defaults;
    no stored prompt hash is "", which `TrialRecord.from_stored` fills in)."""
    if not isinstance(row, Mapping) or any(k not in row for k in STORED_KEYS):
        raise KeyError(f"not a stored prediction (needs {', '.join(STORED_KEYS)})")
    return stored_row(row, {})


@dataclass(frozen=True)
class UndocumentedLabel:
    """A gold label no local file documents, which `workbench score` scored as the official
    metric does (`experiments.metrics.scores_undocumented_gold`): its rows and first line."""

    label: str
    rows: int
    first_line: int


@dataclass(frozen=True)
class PredictionsFile:
    """A user's predictions file as `workbench score` scores it."""

    generations: list[str]
    answers: list[str]
    lines: list[int]
    #: gold labels outside the task's documented ones, in order of first appearance
    undocumented: tuple[UndocumentedLabel, ...] = ()


def read_predictions(
    path: Path, labels: tuple[str, ...] | None = None, *, multi_label: bool = False
) -> tuple[list[str], list[str], list[int]]:
    """Generations, answers and their line numbers from a JSONL predictions file; an answer
    outside `labels` is an error (`read_predictions_file` with no undocumented labels)."""
    read = read_predictions_file(path, labels, multi_label=multi_label)
    return read.generations, read.answers, read.lines


def read_predictions_file(
    path: Path,
    labels: tuple[str, ...] | None = None,
    *,
    multi_label: bool = False,
    undocumented: str | None = None,
) -> PredictionsFile:
    """A JSONL predictions file, every bad line named.

    Each line is an object whose "generation" and "answer" are strings (an integer is read
    as its digits). null, lists, objects, booleans or other numbers are errors, as are
    answers outside `labels` (compared as LegalBench normalises; for multi-label tasks each
    comma-separated part), bytes that are not UTF-8 and JSON that cannot be parsed; every
    error names the file and line. Empty answers (`promptlib.data.is_empty_answer`) are
    refused together once the file is read, naming the first few lines and how many.

    `undocumented`: how the task's official metric scores a gold label outside `labels`
    (`experiments.metrics.scores_undocumented_gold`), or None to refuse it. When given, such
    a label is read and listed in `PredictionsFile.undocumented`, except an empty part (a
    stray comma) or one a letter or two away from a documented label (a typo): those stay
    errors, since the official metric would score a typo as a label of its own.
    """
    # a regular file of bounded size: a FIFO or /dev/zero is one line, never a hang
    raw = inputs.read_bytes(path, "predictions file", WorkbenchError, inputs.MAX_DATA_BYTES)
    allowed = {normalize(label) for label in labels} if labels else None
    found: dict[str, list[int]] = {}  # an undocumented gold label's normalised form -> lines
    surface: dict[str, str] = {}  # ... -> its first spelling
    gens: list[str] = []
    answers: list[str] = []
    lines: list[int] = []
    empty: list[int] = []  # lines whose answer is empty: refused together, once read
    for n, raw_line in enumerate(raw.splitlines(), 1):
        try:
            line = raw_line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise WorkbenchError(
                f"{path}:{n}: not UTF-8 (byte 0x{raw_line[e.start]:02x} at column {e.start + 1})"
            ) from None
        if not line.strip():
            continue
        try:  # bounded depth and integers, no key given twice (`promptlib.inputs`)
            obj = inputs.loads(line, str(path), WorkbenchError, first_line=n)
        except json.JSONDecodeError as e:
            raise WorkbenchError(f"{path}:{n}: not valid JSON ({e.msg})") from e
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
        if is_empty_answer(row["answer"]):
            empty.append(n)
        elif allowed is not None:
            parts = row["answer"].split(",") if multi_label else [row["answer"]]
            outside = [p.strip() for p in parts if normalize(p) not in allowed]
            for part in dict.fromkeys(outside):  # a part named twice is one row
                if undocumented is None or _refused(part, labels or ()):
                    raise WorkbenchError(_not_a_label(path, n, part, labels or (), undocumented))
                surface.setdefault(normalize(part), part)
                found.setdefault(normalize(part), []).append(n)
        # a verbalized trial's rows carry what the metric scored (the reply mapped back to
        # the official label): its raw generation ("A") would score as wrong
        scored = obj.get("scored")
        if scored is not None and not isinstance(scored, str):
            raise WorkbenchError(f"{path}:{n}: field 'scored' must be a string or absent")
        gens.append(scored if scored is not None else row["generation"])
        answers.append(row["answer"])
        lines.append(n)
    if empty:
        n = len(empty)
        raise WorkbenchError(
            f"{path}: {n} row{'s' if n > 1 else ''} of {len(answers)} ha{'ve' if n > 1 else 's'} "
            f"an empty answer (blank, or only spaces or punctuation: line{'s' if n > 1 else ''} "
            f"{first_few([str(x) for x in empty])}); an empty gold answer is no label, and an "
            "empty generation would be scored right on it: fill in each answer or remove those "
            "lines"
        )
    listed = tuple(UndocumentedLabel(surface[k], len(ns), ns[0]) for k, ns in found.items())
    return PredictionsFile(gens, answers, lines, listed)


def _near(part: str, labels: tuple[str, ...]) -> str | None:
    """The documented label `part` is probably a typo of (normalised forms close), if any."""
    forms = {normalize(label): label for label in labels}
    close = difflib.get_close_matches(normalize(part), list(forms), n=1, cutoff=0.85)
    return forms[close[0]] if close else None


def _refused(part: str, labels: tuple[str, ...]) -> bool:
    """An undocumented gold part read as a file error even where the metric scores it."""
    return not normalize(part) or _near(part, labels) is not None


def _not_a_label(
    path: Path, n: int, part: str, labels: tuple[str, ...], undocumented: str | None
) -> str:
    """The error for a gold answer `workbench score` refuses, and what to do next."""
    shown = ", ".join(repr(label) for label in labels)
    head = f"{path}:{n}: answer {part!r} is not a label of this task (labels: {shown})"
    near = _near(part, labels) if normalize(part) else None
    if undocumented is None:
        return f"{head}; is the file for another task, or the answer mistyped? Correct it"
    if near is not None:
        return f"{head}; a typo of {near!r}? Correct the answer and score again"
    return f"{head}; an empty part (a stray comma?): remove it and score again"
