"""Errors that carry a message a user can act on.

Every error the workbench raises on bad input derives from `WorkbenchError`; the CLI turns
it into a message on stderr and exit code 2, so callers never see a traceback for a typo.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence


class WorkbenchError(Exception):
    """Bad input or an impossible request; the message says what to do next."""

    exit_code = 2


class UnknownTaskError(WorkbenchError):
    pass


class DataError(WorkbenchError):
    """A data directory, TSV file or archive is missing or malformed."""


class NoLegalBenchDataError(DataError):
    """No LegalBench data is configured at all (not: a configured folder is missing or broken,
    which stays a plain `DataError`): the catalog can still hold the user's own tasks.

    `how` is the ways to configure it, for the note that says only the user's tasks are there.
    """

    def __init__(self, message: str, how: str) -> None:
        super().__init__(message)
        self.how = how


class TemplateError(WorkbenchError):
    """A prompt file cannot be parsed, or names a column the data lacks."""


class VariantError(WorkbenchError):
    """A variant spec is malformed or asks for something the task cannot supply."""


class VariantFileError(VariantError):
    """A variant file (``--variant-file``) is missing, not JSON, or not a variant."""


class LeakageError(WorkbenchError):
    """An evaluated example would appear among its own demonstrations."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A ' — did you mean …?' suffix, or '' when nothing is close."""
    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    if not close:
        return ""
    return " — did you mean " + " or ".join(repr(c) for c in close) + "?"


def first_few(items: Sequence[str], shown: int = 3) -> str:
    """'a, b, c and 7 more' ('a and b', 'a'): the first few of a list a message names."""
    head = list(items[:shown])
    more = len(items) - len(head)
    if more:
        return ", ".join(head) + f" and {more} more"
    return ", ".join(head[:-1]) + " and " + head[-1] if len(head) > 1 else "".join(head)
