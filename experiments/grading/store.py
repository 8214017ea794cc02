"""The hand-grade store: ``grades/grades.jsonl`` (append-only) and ``grades/sheets/<sheet>.json``
(each sheet's key), beside ``runs/`` (`experiments.settings.grades_dir`).

One JSON object per line of grades.jsonl, one grade of one criterion of one item:
``{"trial_id", "index", "criterion", "grade": 0|1, "grader", "sheet", "item",
"generation_sha256", "position", "graded_at"}``. Nothing is ever rewritten in place: a
re-grade (same grader or another) is a new line and both are kept; `current_grades` says
which counts. Appends go through `append_grades`: under the folder's lock, the whole new file
in one atomic write, so a crash leaves the old file.

A sheet key (`SheetKey`) is what the sheet hides: which trial's row each opaque item is, the
generation it showed (sha256) and its place in the sheet's seeded random order. Because the
order is random, the items graded top to bottom (a prefix of the order) are a random subset
of the sheet's rows; `graded_at_random` tells the calibrated estimates whether that holds.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experiments import settings
from experiments.files import atomic_write_text, dir_lock
from experiments.trials.predictions import PREDICTIONS_FILE, decode_predictions
from promptlib.errors import WorkbenchError

GRADES_FILE = "grades.jsonl"
SHEETS_DIR = "sheets"
SHEET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
GRADE_KEYS = (
    "trial_id",
    "index",
    "criterion",
    "grade",
    "grader",
    "sheet",
    "item",
    "generation_sha256",
    "position",
    "graded_at",
)


class GradeStoreError(WorkbenchError):
    """The grade store or a sheet key cannot be read or written; the message says which file."""

    exit_code = 1


def grades_root(root: Path | None = None) -> Path:
    """The grades folder: `root` when given, else `settings.grades_dir()`."""
    return root if root is not None else settings.grades_dir()


def generation_sha256(generation: str | None) -> str:
    """sha256 of a row's generation as UTF-8 ("" for a failed row, which is never graded)."""
    if generation is None:
        return ""
    return hashlib.sha256(generation.encode("utf-8")).hexdigest()


def grader_key(name: str) -> str:
    """Who a grader is: the name up to case and spacing ("Ann Lee", "ann  lee" are one
    grader), so a re-grade under another spelling replaces, not joins, the first grade."""
    return " ".join(name.split()).casefold()


# ---- grades ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HandGrade:
    """One stored grade: grader `grader` gave `grade` (0/1) on `criterion` to row `index` of
    trial `trial_id`, as item `item` at `position` of sheet `sheet`, when its generation had
    sha256 `generation_sha256`."""

    trial_id: str
    index: str
    criterion: str
    grade: int
    grader: str
    sheet: str
    item: str
    generation_sha256: str
    position: int
    graded_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> HandGrade:
        """A stored line, checked field by field (`where` names the file and line)."""
        missing = [k for k in GRADE_KEYS if k not in d]
        if missing:
            raise GradeStoreError(
                f"{where}: not a hand grade (no {', '.join(missing)}); the file is written by "
                "'workbench grade add' only: restore it from a backup or remove that line"
            )
        grade = d["grade"]
        if isinstance(grade, bool) or grade not in (0, 1):
            raise GradeStoreError(f"{where}: grade {grade!r} is not 0 or 1; fix or remove it")
        position = d["position"]
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise GradeStoreError(f"{where}: position {position!r} is not a row number")
        text = ("trial_id", "index", "criterion", "grader", "sheet", "item", "generation_sha256")
        for k in (*text, "graded_at"):
            if not isinstance(d[k], str):
                raise GradeStoreError(f"{where}: {k} {d[k]!r} is not a string")
        return cls(
            trial_id=d["trial_id"],
            index=d["index"],
            criterion=d["criterion"],
            grade=int(grade),
            grader=d["grader"],
            sheet=d["sheet"],
            item=d["item"],
            generation_sha256=d["generation_sha256"],
            position=position,
            graded_at=d["graded_at"],
        )


def grades_path(root: Path | None = None) -> Path:
    return grades_root(root) / GRADES_FILE


def _parse_grades(text: str, path: Path) -> list[HandGrade]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except ValueError as e:
            raise GradeStoreError(
                f"{path}:{n}: not a JSON line ({e}); restore the file or remove that line"
            ) from None
        if not isinstance(d, dict):
            raise GradeStoreError(f"{path}:{n}: not a JSON object; remove that line")
        out.append(HandGrade.from_dict(d, f"{path}:{n}"))
    return out


def load_grades(root: Path | None = None) -> list[HandGrade]:
    """Every stored grade, in the order they were added (oldest first); [] when none."""
    path = grades_path(root)
    if not path.is_file():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise GradeStoreError(f"{path}: cannot read the hand grades ({e})") from e
    return _parse_grades(text, path)


def append_grades(
    new: Sequence[HandGrade],
    root: Path | None = None,
    *,
    skip_same: bool = True,
) -> list[HandGrade]:
    """Append `new` to grades.jsonl in one atomic write under the folder's lock; returns
    the grades actually written.

    With `skip_same` (the default), a grade equal to the same grader's latest stored grade
    of the same row and criterion, on the same generation, is not written again: importing
    one filled sheet twice counts it once. A changed grade is appended (a re-grade: both
    kept). Reading what is stored and writing happen under one lock, so two imports at
    once cannot both decide to write the same grade.
    """
    folder = grades_root(root)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / GRADES_FILE
    with dir_lock(folder):
        old = path.read_text(encoding="utf-8") if path.is_file() else ""
        stored = _parse_grades(old, path)
        latest: dict[tuple[str, str, str, str], HandGrade] = {}
        for g in stored:
            latest[(grader_key(g.grader), g.trial_id, g.index, g.criterion)] = g
        written: list[HandGrade] = []
        for g in new:
            key = (grader_key(g.grader), g.trial_id, g.index, g.criterion)
            before = latest.get(key)
            same = (
                before is not None
                and before.grade == g.grade
                and before.generation_sha256 == g.generation_sha256
            )
            if skip_same and same:
                continue
            latest[key] = g
            written.append(g)
        if written:
            if old and not old.endswith("\n"):
                old += "\n"
            lines = "".join(json.dumps(g.to_dict(), ensure_ascii=False) + "\n" for g in written)
            atomic_write_text(path, old + lines)
    return written


def trial_generations(trial_id: str, runs_root: Path | None = None) -> dict[str, str] | None:
    """Each answered row's generation (index -> text) of a trial as saved in runs/, or None
    when the trial's folder or predictions are gone or unreadable."""
    path = (runs_root or settings.runs_dir()) / trial_id / PREDICTIONS_FILE
    try:
        preds = decode_predictions(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError):
        return None
    return {str(p.index): p.generation for p in preds if p.generation is not None}


def trial_generation_shas(trial_id: str, runs_root: Path | None = None) -> dict[str, str] | None:
    """`trial_generations` as sha256s (index -> `generation_sha256`)."""
    gens = trial_generations(trial_id, runs_root)
    return None if gens is None else {k: generation_sha256(v) for k, v in gens.items()}


def current_grades(
    grades: Iterable[HandGrade],
    trial_id: str,
    *,
    generations: Mapping[str, str] | None = None,
    runs_root: Path | None = None,
) -> dict[tuple[str, str], float]:
    """(index, criterion) -> the row's hand grade for trial `trial_id`.

    Definition: for each grader, that grader's LATEST grade (latest = added last to the
    store) of the row and criterion among those whose generation_sha256 is the row's current
    generation's; the row's grade is the mean of these over graders (1.0, 0.0, or a fraction
    when graders disagree; a grader is `grader_key` of the name). A grade of a generation
    that has since changed (the trial was rerun) does not count. The current generations are
    `generations` (index -> sha256) when given, else read from the trial's folder under
    `runs_root` (default runs/); a trial whose folder is gone has no current grades.
    """
    current = (
        dict(generations) if generations is not None else trial_generation_shas(trial_id, runs_root)
    )
    if current is None:
        return {}
    latest: dict[tuple[str, str, str], int] = {}  # (index, criterion, grader) -> grade
    for g in grades:
        if g.trial_id != trial_id or current.get(g.index) != g.generation_sha256:
            continue
        latest[(g.index, g.criterion, grader_key(g.grader))] = g.grade  # later lines win
    by_row: dict[tuple[str, str], list[int]] = {}
    for (index, criterion, _), grade in latest.items():
        by_row.setdefault((index, criterion), []).append(grade)
    return {k: sum(v) / len(v) for k, v in by_row.items()}


# ---- sheet keys --------------------------------------------------------------------------------
@dataclass(frozen=True)
class SheetItem:
    """One item of a sheet: its opaque id, the trial row it is, and its place in the order."""

    item: str
    trial_id: str
    index: str
    generation_sha256: str
    position: int


@dataclass(frozen=True)
class SheetKey:
    """What a sheet hides (``grades/sheets/<sheet>.json``): its items in the sheet's order."""

    sheet: str
    seed: int
    created_at: str
    criteria: tuple[str, ...]
    items: tuple[SheetItem, ...]
    task: str = ""
    split: str = ""
    trials: tuple[str, ...] = ()  # every trial the sheet drew from (sorted)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sheet": self.sheet,
            "seed": self.seed,
            "created_at": self.created_at,
            "criteria": list(self.criteria),
            "task": self.task,
            "split": self.split,
            "trials": list(self.trials),
            "items": [asdict(i) for i in self.items],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> SheetKey:
        try:
            items = tuple(
                SheetItem(
                    item=str(i["item"]),
                    trial_id=str(i["trial_id"]),
                    index=str(i["index"]),
                    generation_sha256=str(i["generation_sha256"]),
                    position=int(i["position"]),
                )
                for i in d["items"]
            )
            return cls(
                sheet=str(d["sheet"]),
                seed=int(d["seed"]),
                created_at=str(d["created_at"]),
                criteria=tuple(str(c) for c in d["criteria"]),
                items=items,
                task=str(d.get("task", "")),
                split=str(d.get("split", "")),
                trials=tuple(str(t) for t in d.get("trials", ())),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise GradeStoreError(
                f"{where}: not a sheet key ({type(e).__name__}: {e}); it is written by "
                "'workbench grade sheet': restore it, or make a new sheet"
            ) from None

    def by_item(self) -> dict[str, SheetItem]:
        return {i.item: i for i in self.items}


def sheet_key_path(sheet: str, root: Path | None = None) -> Path:
    if not SHEET_NAME.fullmatch(sheet):
        raise GradeStoreError(
            f"{sheet!r} is not a sheet name (letters, digits, '.', '_', '-'; at most 100, "
            "starting with a letter or digit)"
        )
    return grades_root(root) / SHEETS_DIR / f"{sheet}.json"


def load_sheet_key(sheet: str, root: Path | None = None) -> SheetKey | None:
    """The key of sheet `sheet`, or None when no such sheet was made here."""
    path = sheet_key_path(sheet, root)
    if not path.is_file():
        return None
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise GradeStoreError(f"{path}: cannot read the sheet key ({e})") from e
    if not isinstance(d, dict):
        raise GradeStoreError(f"{path}: not a sheet key (not a JSON object)")
    return SheetKey.from_dict(d, str(path))


def load_sheet_keys(root: Path | None = None) -> dict[str, SheetKey]:
    """Every sheet key in the store, by sheet name."""
    folder = grades_root(root) / SHEETS_DIR
    if not folder.is_dir():
        return {}
    out = {}
    for path in sorted(folder.glob("*.json")):
        key = load_sheet_key(path.stem, root) if SHEET_NAME.fullmatch(path.stem) else None
        if key is not None:
            out[key.sheet] = key
    return out


def save_sheet_key(key: SheetKey, root: Path | None = None) -> Path:
    """Write a new sheet's key; refuses a name already used (a key is never replaced)."""
    path = sheet_key_path(key.sheet, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with dir_lock(path.parent):
        if path.exists():
            raise GradeStoreError(
                f"a sheet named {key.sheet!r} exists already ({path}); its grades refer to "
                "it: give the new sheet another file name (--out)"
            )
        atomic_write_text(path, json.dumps(key.to_dict(), indent=1, ensure_ascii=False) + "\n")
    return path


# ---- were the graded items a random subset? ----------------------------------------------------
@dataclass(frozen=True)
class SheetCoverage:
    """How far one sheet was graded on one criterion, in its random order."""

    sheet: str
    criterion: str
    n_items: int  # the sheet's items of the trials asked about (their answers unchanged)
    n_graded: int  # of those, graded (any grader, current generation)
    prefix: int  # graded items before the first ungraded one (in sheet order)
    out_of_order: int  # graded items after the first ungraded one

    @property
    def is_prefix(self) -> bool:
        return self.out_of_order == 0


@dataclass(frozen=True)
class RandomSubset:
    """Whether the current hand grades of some trials on one criterion are a random subset
    of their rows, and which rows are.

    Why: prediction-powered estimates are valid only when which rows were hand-graded does
    not depend on their grades. A sheet's order is a seeded shuffle, so the items graded top
    to bottom (a prefix of it) are a random subset. Items graded past an ungraded one may have
    been picked (skipped the hard ones?): `rows` keeps only each sheet's graded prefix, a
    random subset in every case; `valid` says whether that is every graded row.
    """

    criterion: str
    rows: frozenset[tuple[str, str]]  # (trial_id, index) in graded prefixes
    n_graded: int  # every currently graded (trial_id, index), prefix or not
    sheets: tuple[SheetCoverage, ...]
    valid: bool
    reason: str


def graded_at_random(
    trial_ids: Iterable[str],
    criterion: str,
    *,
    grades: Sequence[HandGrade] | None = None,
    keys: Mapping[str, SheetKey] | None = None,
    generations: Mapping[str, Mapping[str, str]] | None = None,
    root: Path | None = None,
    runs_root: Path | None = None,
) -> RandomSubset:
    """Which of `trial_ids`' rows have current grades on `criterion` in a graded prefix of
    their sheets' random order (see `RandomSubset`).

    `grades`, `keys` (sheet name -> key) and `generations` (trial -> index -> sha256) default
    to the store under `root` and the trials under `runs_root`. A grade counts when its
    generation is the row's current one (as in `current_grades`); a sheet item whose
    generation is no longer the row's is off the sheet. An item is graded when any grader
    graded it; a row appearing in several sheets counts as graded once.
    """
    wanted = set(trial_ids)
    grades = load_grades(root) if grades is None else grades
    keys = load_sheet_keys(root) if keys is None else keys
    gens: dict[str, Mapping[str, str]] = {}
    for t in wanted:
        shas = (
            generations.get(t) if generations is not None else trial_generation_shas(t, runs_root)
        )
        gens[t] = shas or {}
    graded_items: set[tuple[str, str]] = set()  # (sheet, item)
    graded_rows: set[tuple[str, str]] = set()
    for g in grades:
        if g.trial_id not in wanted or g.criterion != criterion:
            continue
        if gens[g.trial_id].get(g.index) != g.generation_sha256:
            continue
        graded_items.add((g.sheet, g.item))
        graded_rows.add((g.trial_id, g.index))
    rows: set[tuple[str, str]] = set()
    cover: list[SheetCoverage] = []
    for name in sorted(keys):
        key = keys[name]
        if criterion not in key.criteria:
            continue
        # an item whose answer changed since (the trial was rerun) can never be graded from
        # this sheet: it is off it, and the rest keep their random order (not a hole that
        # cuts the prefix for good)
        mine = sorted(
            (
                i
                for i in key.items
                if i.trial_id in wanted and gens[i.trial_id].get(i.index) == i.generation_sha256
            ),
            key=lambda i: i.position,
        )
        if not mine:
            continue
        prefix = 0
        while prefix < len(mine) and (name, mine[prefix].item) in graded_items:
            prefix += 1
        n_graded = sum((name, i.item) in graded_items for i in mine)
        for i in mine[:prefix]:
            rows.add((i.trial_id, i.index))
        cover.append(SheetCoverage(name, criterion, len(mine), n_graded, prefix, n_graded - prefix))
    skipped = len(graded_rows - rows)
    if not graded_rows:
        valid, reason = True, "no hand grades yet"
    elif skipped:
        valid = False
        reason = (
            f"{skipped} graded row(s) lie past an ungraded item in their sheet's random order "
            "(graded out of order): only the graded prefix counts as a random subset; grade "
            "the skipped items to use them"
        )
    else:
        valid, reason = True, "every graded row is in a graded prefix of a shuffled sheet"
    return RandomSubset(criterion, frozenset(rows), len(graded_rows), tuple(cover), valid, reason)


__all__ = [
    "GRADES_FILE",
    "GradeStoreError",
    "HandGrade",
    "RandomSubset",
    "SheetCoverage",
    "SheetItem",
    "SheetKey",
    "append_grades",
    "current_grades",
    "generation_sha256",
    "graded_at_random",
    "grader_key",
    "grades_path",
    "grades_root",
    "load_grades",
    "load_sheet_key",
    "load_sheet_keys",
    "save_sheet_key",
    "trial_generation_shas",
    "trial_generations",
]
