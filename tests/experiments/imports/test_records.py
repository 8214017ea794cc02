"""The record checks every reader gets: ids present and unique, a score or something to score,
and the tool-version check readers of the tools' own formats call."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.imports import ImportedRow, ImportedTrial, ImportInputError
from experiments.imports.records import check_version

F = Path("run.eval")


def _trial(*rows: ImportedRow) -> ImportedTrial:
    return ImportedTrial(F, "inspect_ai", "0.3.1", "hearsay", "A", "m", None, rows)


def test_epochs_kept_apart_are_rows_of_their_own() -> None:
    t = _trial(ImportedRow("1", 1.0, epoch=1), ImportedRow("1", 0.0, epoch=2))
    assert [r.key for r in t.rows] == ["1#1", "1#2"]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ((), "has no rows"),
        ((ImportedRow(" ", 1.0),), "has no id"),
        ((ImportedRow("1", 1.0), ImportedRow("1", 0.0)), "appears twice"),
        ((ImportedRow("1", None, prediction="Yes"),), "no score and no prediction"),
    ],
)
def test_bad_rows_are_refused_naming_the_file(rows: tuple[ImportedRow, ...], message: str) -> None:
    with pytest.raises(ImportInputError, match=message) as e:
        _trial(*rows)
    assert str(F) in str(e.value)


def test_a_failed_row_needs_no_score() -> None:
    assert _trial(ImportedRow("1", None, status="error")).rows[0].correct is None


@pytest.mark.parametrize(
    ("found", "ok"),
    [("0.3.46", True), ("0.4.0", False), ("0.2.9", False), ("v0.3.1.dev4", True),
     (None, False), ("unknown", False)],
)  # fmt: skip
def test_check_version(found: str | None, ok: bool) -> None:
    if ok:
        check_version(F, "inspect_ai", found, "0.3.0", "0.4")
        return
    with pytest.raises(
        ImportInputError, match=r"supports inspect_ai 0\.3\.0 or later, before 0\.4"
    ):
        check_version(F, "inspect_ai", found, "0.3.0", "0.4")
