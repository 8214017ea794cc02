"""Adding a filled sheet's grades to the store (`workbench grade add`).

The whole file is checked before anything is written: its sheet must be known here (its key
in ``grades/sheets/``), each item once and on the sheet, each grade cell 1/0 (or
correct/incorrect, yes/no) or blank, and each graded item's answer still the trial's current
generation (a trial rerun since the sheet was made, or an edited answer cell, is refused).
Every refusal names the line and column and what to do. Then the grades go to grades.jsonl in
one atomic append (`store.append_grades`): blank cells are skipped (partial sheets are fine),
a grade already stored unchanged for that grader is not written again (adding the same file
twice counts once), a changed one is a re-grade kept beside the old.
"""

from __future__ import annotations

import csv
import io
import os
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from experiments.files import csv_uncell
from experiments.grading.sheets import FIXED_COLUMNS, GRADE_WORDS
from experiments.grading.store import (
    HandGrade,
    append_grades,
    generation_sha256,
    load_sheet_key,
    trial_generations,
)
from experiments.trials.grading import same_text
from promptlib import inputs
from promptlib.errors import WorkbenchError

MAX_GRADER = 100


class GradeSheetError(WorkbenchError):
    """A filled sheet does not fit its key or its trials; nothing was written."""

    exit_code = 1


@dataclass(frozen=True)
class AddResult:
    """What one `add_grades` did."""

    sheet: str
    grader: str
    n_items: int  # items on the sheet
    graded_items: int  # items with at least one grade in this file
    cells: int  # grade cells filled in this file
    written: int  # grades appended (new or changed)
    unchanged: int  # grades already stored as they are (not written again)
    prefix: int  # items graded on every criterion before the first one that is not
    criteria: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "sheet": self.sheet,
            "grader": self.grader,
            "n_items": self.n_items,
            "graded_items": self.graded_items,
            "cells": self.cells,
            "written": self.written,
            "unchanged": self.unchanged,
            "prefix": self.prefix,
            "criteria": list(self.criteria),
        }


def check_grader(grader: str) -> str:
    name = grader.strip()
    if not name or len(name) > MAX_GRADER or not name.isprintable():
        raise GradeSheetError(
            f"grader {grader!r}: give your name (printable, 1-{MAX_GRADER} characters) with "
            "--grader; it is stored with each grade"
        )
    return name


def read_sheet_csv(path: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """The header and (first line number, row) of each record of a filled sheet."""
    if not os.path.lexists(path):
        raise GradeSheetError(f"{path}: no such file")
    data = inputs.read_bytes(path, "grade sheet", WorkbenchError, inputs.MAX_DATA_BYTES)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise GradeSheetError(f"{path}: not UTF-8 text (byte {e.start}); save it as UTF-8") from e
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
        header = list(reader.fieldnames or [])
        twice = sorted(c for c, n in Counter(header).items() if n > 1)
        if twice:
            raise GradeSheetError(
                f"{path}: line 1: column(s) {', '.join(map(repr, twice))} appear more than "
                "once; keep one of each"
            )
        rows = []
        end = reader.line_num
        for row in reader:
            start, end = end + 1, reader.line_num
            if None in row or any(v is None for v in row.values()):
                raise GradeSheetError(
                    f"{path}: line {start}: expected {len(header)} fields, as the header has"
                )
            rows.append((start, row))
    except csv.Error as e:
        raise GradeSheetError(f"{path}: not a valid CSV ({e})") from e
    return header, rows


def add_grades(
    path: Path,
    grader: str,
    *,
    root: Path | None = None,
    runs_root: Path | None = None,
    now: datetime | None = None,
) -> AddResult:
    """Check the filled sheet `path` whole, then append its grades by `grader` (see module)."""
    grader = check_grader(grader)
    header, rows = read_sheet_csv(path)
    missing = [c for c in FIXED_COLUMNS if c not in header]
    if missing:
        raise GradeSheetError(
            f"{path}: line 1: missing column(s) {', '.join(missing)}; add the file 'workbench "
            "grade sheet' wrote, with its header as it was"
        )
    if not rows:
        raise GradeSheetError(f"{path}: no rows; add the sheet 'workbench grade sheet' wrote")
    names = {row["sheet"].strip() for _, row in rows}
    if len(names) != 1:
        line = next(n for n, r in rows if r["sheet"].strip() != rows[0][1]["sheet"].strip())
        raise GradeSheetError(
            f"{path}: line {line}, column sheet: rows of {len(names)} sheets in one file; add "
            "each sheet's own file"
        )
    (name,) = names
    try:
        key = load_sheet_key(name, root)
    except WorkbenchError as e:
        raise GradeSheetError(f"{path}: line {rows[0][0]}, column sheet: {e}") from None
    if key is None:
        raise GradeSheetError(
            f"{path}: line {rows[0][0]}, column sheet: unknown sheet {name!r} (no key for it "
            "in the grades folder): add it on the machine where 'workbench grade sheet' made "
            "it, or check WORKBENCH_GRADES_DIR"
        )
    absent = [c for c in key.criteria if c not in header]
    if absent:
        raise GradeSheetError(
            f"{path}: line 1: missing column(s) {', '.join(absent)} (the sheet's criteria); "
            "keep the header as 'workbench grade sheet' wrote it"
        )
    by_item = key.by_item()
    current: dict[str, dict[str, str] | None] = {}  # trial -> index -> generation
    seen: dict[str, int] = {}
    when = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    new: list[HandGrade] = []
    graded_items: set[str] = set()
    for line, row in rows:
        item = row["item"].strip()
        if item not in by_item:
            raise GradeSheetError(
                f"{path}: line {line}, column item: {row['item']!r} is not an item of sheet "
                f"{name!r}; restore the item column as the sheet had it"
            )
        if item in seen:
            raise GradeSheetError(
                f"{path}: line {line}, column item: item {item} appears twice (first on line "
                f"{seen[item]}); keep one row per item"
            )
        seen[item] = line
        it = by_item[item]
        marks: dict[str, int] = {}
        for c in key.criteria:
            raw = row[c].strip().lower()
            if not raw:
                continue
            if raw not in GRADE_WORDS:
                raise GradeSheetError(
                    f"{path}: line {line} (item {item}), column {c}: {row[c]!r} is not a grade; "
                    "use 1 or 0 (correct/incorrect, yes/no), or leave it blank for not graded"
                )
            marks[c] = GRADE_WORDS[raw]
        if not marks:
            continue
        if it.trial_id not in current:
            current[it.trial_id] = trial_generations(it.trial_id, runs_root)
        gens = current[it.trial_id]
        if gens is None:
            raise GradeSheetError(
                f"{path}: line {line} (item {item}): its trial's folder is gone from runs/ (or "
                "unreadable); restore runs/ or grade a new sheet of the trials there"
            )
        now_text = gens.get(it.index)
        if now_text is None or generation_sha256(now_text) != it.generation_sha256:
            raise GradeSheetError(
                f"{path}: line {line} (item {item}), column answer: the trial was rerun since "
                "the sheet was made and this answer changed; its grade would grade another "
                "answer: make a new sheet with 'workbench grade sheet' and grade that"
            )
        # up to what a spreadsheet changes: line endings, spaces at either end of the text
        if not same_text(csv_uncell(row["answer"]).lstrip(), now_text.lstrip()):
            raise GradeSheetError(
                f"{path}: line {line} (item {item}), column answer: not the answer the sheet "
                "showed (edited?); restore the cell as the sheet had it, then add it again"
            )
        graded_items.add(item)
        for c, g in marks.items():
            new.append(
                HandGrade(
                    trial_id=it.trial_id,
                    index=it.index,
                    criterion=c,
                    grade=g,
                    grader=grader,
                    sheet=name,
                    item=item,
                    generation_sha256=it.generation_sha256,
                    position=it.position,
                    graded_at=when,
                )
            )
    written = append_grades(new, root)
    per_item = Counter(g.item for g in new)
    full = {item for item, n in per_item.items() if n == len(key.criteria)}
    prefix = 0
    for it in sorted(key.items, key=lambda i: i.position):
        if it.item not in full:
            break
        prefix += 1
    return AddResult(
        sheet=name,
        grader=grader,
        n_items=len(key.items),
        graded_items=len(graded_items),
        cells=len(new),
        written=len(written),
        unchanged=len(new) - len(written),
        prefix=prefix,
        criteria=key.criteria,
    )


__all__ = ["AddResult", "GradeSheetError", "add_grades", "check_grader", "read_sheet_csv"]
