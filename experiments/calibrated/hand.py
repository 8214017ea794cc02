"""Hand grades as a calibrated estimate reads them: each row's current grade, and whether
the graded rows are a random subset (what every PPI interval assumes).

A row's grade is the mean over graders of each grader's latest grade of it, counting only
grades of the generation the trial holds now (a grade of a changed generation is stale:
dropped and counted). The rows graded are a random subset when, in every sheet they were
graded on, they are the first ones of the sheet's shuffled order among the trials at hand
(`prefix_of_sheets`): a grader working down a sheet grades a uniform random sample, one who
picked rows did not.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from experiments.calibrated.frames import CalibratedError

GRADES_FILE = "grades.jsonl"
SHEETS_FOLDER = "sheets"


@dataclass(frozen=True)
class Grade:
    """One stored hand grade (a line of grades/grades.jsonl)."""

    trial_id: str
    index: str
    criterion: str
    grade: float
    grader: str
    sheet: str | None
    generation_sha256: str
    position: int | None
    graded_at: str


def load_grades(root: Path) -> list[Grade]:
    """Every grade in `root`/grades.jsonl, in file order ([] when there is none)."""
    path = root / GRADES_FILE
    if not path.is_file():
        return []
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            out.append(
                Grade(
                    trial_id=str(d["trial_id"]),
                    index=str(d["index"]),
                    criterion=str(d["criterion"]),
                    grade=float(d["grade"]),
                    grader=str(d.get("grader") or ""),
                    sheet=d.get("sheet"),
                    generation_sha256=str(d.get("generation_sha256") or ""),
                    position=d.get("position"),
                    graded_at=str(d.get("graded_at") or ""),
                )
            )
        except (ValueError, KeyError, TypeError) as e:
            raise CalibratedError(
                f"{path}:{n}: not a stored grade ({e}); fix or remove that line"
            ) from None
    return out


@dataclass(frozen=True)
class CurrentGrades:
    """One trial's current hand grades for one criterion: index -> grade, and how many
    stored grades were stale (of a generation the trial no longer holds)."""

    grades: Mapping[str, float]
    stale: int
    fresh: tuple[Grade, ...]


def current_grades(
    grades: Iterable[Grade], trial_id: str, criterion: str, hashes: Mapping[str, str]
) -> CurrentGrades:
    """Each row's grade: the mean over graders of each grader's latest fresh grade (file
    order breaks ties of `graded_at`). `hashes`: index -> the generation's sha256 now."""
    latest: dict[tuple[str, str], Grade] = {}
    stale = 0
    fresh = []
    for g in grades:
        if g.trial_id != trial_id or g.criterion != criterion:
            continue
        if hashes.get(g.index) != g.generation_sha256:
            stale += 1
            continue
        fresh.append(g)
        key = (g.index, g.grader)
        if key not in latest or g.graded_at >= latest[key].graded_at:
            latest[key] = g
    by_row: dict[str, list[float]] = {}
    for (index, _), g in latest.items():
        by_row.setdefault(index, []).append(g.grade)
    return CurrentGrades(
        {i: sum(v) / len(v) for i, v in by_row.items()}, stale, tuple(fresh)
    )


def _sheet_order(root: Path, sheet: str) -> list[tuple[str, str]] | None:
    """(trial_id, index) of a sheet's items in its shuffled order, or None without its key."""
    path = root / SHEETS_FOLDER / f"{sheet}.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        items = sorted(doc["items"], key=lambda it: int(it["position"]))
        return [(str(it["trial_id"]), str(it["index"])) for it in items]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def prefix_of_sheets(
    root: Path, fresh: Iterable[Grade], trial_ids: Collection[str]
) -> tuple[bool, str | None]:
    """Whether the rows graded (per criterion) are, in every sheet they came from, the first
    rows of its shuffled order among `trial_ids`; else False and why."""
    by_sheet: dict[tuple[str | None, str], set[tuple[str, str]]] = {}
    for g in fresh:
        if g.trial_id in trial_ids:
            by_sheet.setdefault((g.sheet, g.criterion), set()).add((g.trial_id, g.index))
    for (sheet, criterion), graded in sorted(by_sheet.items(), key=lambda kv: str(kv[0])):
        if not sheet:
            return False, (
                f"{len(graded)} {criterion} grade(s) came from no sheet: the rows graded may "
                "not be a random subset"
            )
        order = _sheet_order(root, sheet)
        if order is None:
            return False, (
                f"sheet {sheet}'s key (grades/sheets/{sheet}.json) is missing: cannot tell "
                "whether the rows graded are a random subset"
            )
        mine = [item for item in order if item[0] in trial_ids]
        head = set(mine[: len(graded)])
        if graded != head:
            skipped = len(head - graded)
            return False, (
                f"sheet {sheet}, {criterion}: the {len(graded)} rows graded are not the first "
                f"{len(graded)} of its shuffled order ({skipped} earlier row(s) left ungraded): "
                "not a random subset, so the intervals may be biased; grade the sheet in order"
            )
    return True, None
