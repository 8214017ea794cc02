"""Results made by other tools (inspect_ai, lm-evaluation-harness, promptfoo, plain files)
read into trials, so the workbench's statistics apply to them (`workbench import`)."""

from experiments.imports.formats import FORMATS, reader
from experiments.imports.records import (
    ImportedRow,
    ImportedTrial,
    ImportInputError,
    Reader,
    ReadOptions,
)
from experiments.imports.result import ImportResult

__all__ = [
    "FORMATS",
    "ImportInputError",
    "ImportResult",
    "ImportedRow",
    "ImportedTrial",
    "ReadOptions",
    "Reader",
    "reader",
]
