"""Instruction files given to a study (`--instruction-file`): read once, before any model
call, and named by their content so a study with other files is never resumed as the same."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from promptlib.errors import LeakageError, WorkbenchError
from promptlib.leakage import query_columns
from promptlib.tasks import Task
from promptlib.variants import PromptVariant, read_text_file, text_file_review

PARAM = "instruction_file"  # the Optuna param: a new name, so studies made before resume
NO_FILE = "none"  # its level without a file: the `instruction` axis decides alone
MIN_QUOTED = 20  # characters of a row's text: shorter ones ("Yes", a name) match by chance


@dataclass(frozen=True)
class InstructionFile:
    label: str  # the path as given: the Optuna level
    text: str
    sha256: str  # of the text
    reviewed: bool | None  # None: the user's own text; False: generated, not yet reviewed


def read_instruction_files(paths: tuple[str, ...]) -> tuple[InstructionFile, ...]:
    """Each file's text (YAML with `text:`, as `instruction_file=PATH` reads it); a missing,
    unreadable or malformed file, or one given twice, is a one-line error."""
    found: list[InstructionFile] = []
    for path in paths:
        if path == NO_FILE or path in (f.label for f in found):
            raise WorkbenchError(
                f"--instruction-file {path!r} "
                + ("is the name of the no-file level" if path == NO_FILE else "is given twice")
                + "; give each file once"
            )
        try:
            text = read_text_file(path, "--instruction-file")
            reviewed = text_file_review(path, "--instruction-file")
        except WorkbenchError as e:  # names the file; say which option gave it
            why = str(e)
            raise WorkbenchError(
                why if why.startswith("--instruction-file") else f"--instruction-file: {why}"
            ) from None
        if not text.strip():
            raise WorkbenchError(f"--instruction-file: {path}: its 'text' is empty; write one")
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        found.append(InstructionFile(path, text, digest, reviewed))
    return tuple(found)


def files_digest(files: tuple[InstructionFile, ...]) -> str:
    """One short digest of the files' labels (the Optuna levels) and texts, in order."""
    doc = json.dumps([[f.label, f.sha256] for f in files], separators=(",", ":"))
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()[:12]


def refuse_quoted_heldout(
    files: tuple[InstructionFile, ...], task: Task, heldout: Iterable[Mapping[str, str]]
) -> None:
    """A file quoting a held-out row's text (a worked example, say) would show that row to
    every trial of the search, and the verdict would call it unseen: refused (LeakageError)."""
    if not files:
        return
    cols = query_columns(PromptVariant(), task)
    texts = [(f, " ".join(f.text.split())) for f in files]
    for row in heldout:
        values = [v for v in (" ".join(str(row.get(c) or "").split()) for c in cols) if v]
        if sum(map(len, values)) < MIN_QUOTED:
            continue
        for f, text in texts:
            if all(v in text for v in values):
                raise LeakageError(
                    f"--instruction-file {f.label}: its text quotes held-out row "
                    f"{row['index']} of {task.name}, which the search must not see; remove "
                    "that row from the file (quote rows outside the held-out split)"
                )
