"""Hand grading, for tasks LegalBench grades by hand (rule_qa).

Such a task has no automatic metric, so the runner records its generations and no score
(`runner.resolve_trial(..., hand_graded=True)`): its trial is *complete* and *ungraded*
(`metric` "manual", `score` None), never scored by a stand-in. This module only moves grades:
`export_csv` writes the generations for graders, one row per evaluated row with an empty
`grade` column (formula-like cells quoted for spreadsheets); `import_grades` (in
`experiments.tracking.grades`, above both this module and tracking) checks a filled
CSV against its trial (every row once with the trial's current generation, every grade 1/0 or
correct/incorrect) and only then writes `grades.json` and the updated
`summary.json` into the trial's folder together (metric "human-graded accuracy", `graded`
rows), and puts the same numbers on the trial's MLflow run when it was tracked; a rerun keeps
the grades only while the generations they graded are unchanged (`save_keeping_grades`).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from experiments.files import (  # csv_cell, csv_uncell: their home is files; kept here too
    atomic_write_dir,
    atomic_write_text,
    csv_cell,
    csv_uncell,
    dir_lock,
)
from experiments.trials.predictions import stored_prediction
from experiments.trials.record import Prediction, TrialStatus
from experiments.trials.run import TrialResult
from experiments.trials.spec import MANUAL
from experiments.trials.store import KEPT_FOLDERS, kept_files, runs_dir, save_result
from promptlib import inputs
from promptlib.errors import WorkbenchError
from promptlib.tasks import Catalog

HUMAN_METRIC = "human-graded accuracy"
COLUMNS = ("trial_id", "index", "question", "reference_answer", "generation", "grade")
GRADE_VALUES = {"1": 1, "0": 0, "correct": 1, "incorrect": 0}


class GradingError(WorkbenchError):
    """A grades file does not fit its trial; nothing was written."""

    exit_code = 1


# ---- finding and reading a trial -------------------------------------------------------------
# A trial id is the sha256 of everything that decides its answers (`runner.ResolvedTrial.id`);
# only a name of that shape is a folder of runs/ that grading reads or rewrites.
TRIAL_ID = re.compile(r"[0-9a-f]{64}")
_ID_PREFIX = re.compile(r"[0-9a-f]{1,64}")
# What a trial's folder holds; grading rewrites the folder, so anything else stops it.
TRIAL_FILES = ("predictions.jsonl", "summary.json", "grades.json")
_RERUN = "rerun the trial with 'workbench run' to write it again"


def find_trial(ref: str, root: Path | None = None) -> Path:
    """A trial folder from its id, a unique id prefix, or its path."""
    root = root or runs_dir()
    as_path = Path(ref)
    if (as_path / "summary.json").is_file():
        return as_path
    key = ref.strip().lower()
    if not _ID_PREFIX.fullmatch(key):
        raise GradingError(
            f"{ref!r}: neither a trial id (hex digits, as 'workbench run' shows) nor a trial "
            "folder (no summary.json in it)"
        )
    matches = sorted(
        p
        for p in root.glob(f"{key}*")
        if TRIAL_ID.fullmatch(p.name) and p.is_dir() and (p / "summary.json").is_file()
    )
    if not matches:
        raise GradingError(
            f"no trial {ref!r} under {root}/; give a trial id from 'workbench run' (its "
            "predictions path shows it) or the trial's folder"
        )
    if len(matches) > 1:
        shown = ", ".join(p.name[:16] for p in matches[:5])
        raise GradingError(f"trial id prefix {ref!r} is ambiguous ({shown}); give more of it")
    return matches[0]


def trial_folder(root: Path, trial_id: str, where: str) -> Path:
    """`root/<trial_id>`, refused unless `trial_id` is a trial id and the folder is a real
    folder directly inside `root` (not a link elsewhere): grading rewrites that folder."""
    if not TRIAL_ID.fullmatch(trial_id):
        raise GradingError(
            f"{where}: {trial_id!r} is not a trial id (64 hex digits, as 'workbench grade "
            "export' writes); grade a file exported from this machine's runs/ folder"
        )
    folder = root / trial_id
    if folder.is_symlink() or (folder.exists() and folder.resolve().parent != root.resolve()):
        raise GradingError(
            f"{folder}: a link out of {root}/, not a trial folder; grading only writes inside "
            f"{root}/: replace the link with the trial's folder"
        )
    return folder


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise GradingError(f"{path}: cannot read the trial's file ({e})") from e


def _json_kind(value: object) -> str:
    return {list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number" if isinstance(value, (int, float)) else "object"
    )


def _summary(trial_dir: Path) -> dict[str, Any]:
    """The trial's summary.json, checked to be one (an object with its task, split, id)."""
    path = trial_dir / "summary.json"
    summary = _read_json(path)
    if not isinstance(summary, dict):
        raise GradingError(
            f"{path}: not a trial summary (a JSON {_json_kind(summary)}, expected an object); "
            f"{_RERUN}"
        )
    for key in ("task", "split", "trial_id"):
        if not isinstance(summary.get(key), str):
            raise GradingError(f"{path}: not a trial summary (no {key!r}); {_RERUN}")
    return summary


def _predictions(path: Path) -> list[Prediction]:
    """The rows of predictions.jsonl, each checked to be a prediction with a unique index
    (each fault named by its line), read as `Prediction`s (`trials.predictions`)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, ValueError) as e:
        raise GradingError(f"{path}: cannot read it ({e}); {_RERUN}") from e
    preds: list[Prediction] = []
    seen: set[str] = set()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            p = json.loads(line)
        except ValueError as e:
            raise GradingError(f"{path}:{n}: not a JSON line ({e}); {_RERUN}") from None
        if not isinstance(p, dict):
            raise GradingError(
                f"{path}:{n}: not a prediction (a JSON {_json_kind(p)}, expected an object); "
                f"{_RERUN}"
            )
        for key, types in (("index", (str, int)), ("generation", (str, type(None)))):
            if key not in p or isinstance(p[key], bool) or not isinstance(p[key], types):
                what = "no" if key not in p else f"a JSON {_json_kind(p[key])} as its"
                raise GradingError(f"{path}:{n}: not a prediction ({what} {key!r}); {_RERUN}")
        if "answer" not in p:
            raise GradingError(f"{path}:{n}: not a prediction (no 'answer'); {_RERUN}")
        if str(p["index"]) in seen:
            raise GradingError(f"{path}:{n}: row {p['index']!r} appears twice; {_RERUN}")
        seen.add(str(p["index"]))
        preds.append(stored_prediction({"correct": None, **p}))  # graded by hand: no `correct`
    return preds


def _trial(trial_dir: Path) -> tuple[dict[str, Any], list[Prediction]]:
    summary = _summary(trial_dir)
    preds = _predictions(trial_dir / "predictions.jsonl")
    if summary.get("metric") not in (MANUAL, HUMAN_METRIC):
        raise GradingError(
            f"trial {trial_dir.name[:12]} ({summary.get('task')}) is scored automatically "
            f"({summary.get('metric')}); only hand-graded tasks such as rule_qa are graded here"
        )
    if summary.get("status") != TrialStatus.COMPLETE:
        raise GradingError(
            f"trial {trial_dir.name[:12]} is {summary.get('status')}: some rows have no "
            "generation; rerun it with 'workbench run' until it is complete, then export"
        )
    return summary, preds


# ---- export ----------------------------------------------------------------------------------
def same_text(a: str, b: str) -> bool:
    """Equal up to what a spreadsheet may change: line endings and trailing whitespace."""

    def norm(t: str) -> str:
        lines = t.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        return "\n".join(x.rstrip() for x in lines).rstrip()

    return norm(a) == norm(b)


def export_csv(trial_dir: Path, catalog: Catalog, out: Path) -> int:
    """Write the grading CSV (header `COLUMNS`, empty grades); returns the number of rows."""

    summary, preds = _trial(trial_dir)
    data = {r["index"]: r for r in catalog.task(summary["task"]).rows(summary["split"])}
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(COLUMNS)
    for p in preds:
        row = data.get(p.index, {})
        w.writerow(
            [
                summary["trial_id"],
                p.index,
                csv_cell(row.get("text", "")),
                csv_cell(p.answer),
                csv_cell(p.generation or ""),
                "",
            ]
        )
    atomic_write_text(out, buf.getvalue())
    return len(preds)


# ---- import ----------------------------------------------------------------------------------
def read_graded_csv(path: Path) -> list[tuple[int, dict[str, str]]]:
    """(first line number, row) of each record; a generation may span several lines."""
    if not os.path.lexists(path):
        raise GradingError(f"{path}: no such file")
    # a regular file of bounded size (a FIFO would wait forever): bad input, exit 2
    data = inputs.read_bytes(path, "grades file", WorkbenchError, inputs.MAX_DATA_BYTES)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise GradingError(f"{path}: not UTF-8 text (byte {e.start}); save it as UTF-8") from e
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
        header = list(reader.fieldnames or [])
        twice = sorted(c for c, n in Counter(header).items() if n > 1)  # linear
        if twice:  # a reader keeps only the last of two same-named columns
            raise GradingError(
                f"{path}: line 1: column(s) {', '.join(map(repr, twice))} appear more than "
                f"once; keep one of each (expected {', '.join(COLUMNS)})"
            )
        missing = [c for c in COLUMNS if c not in header]
        extra = [c for c in header if c not in COLUMNS]
        if missing or extra:
            what = "; ".join(
                x
                for x in (
                    f"missing column(s) {', '.join(missing)}" if missing else "",
                    f"unknown column(s) {', '.join(extra)}" if extra else "",
                )
                if x
            )
            raise GradingError(
                f"{path}: line 1: {what}; expected {', '.join(COLUMNS)} (as written by "
                "'workbench grade export')"
            )
        rows = []
        end = reader.line_num
        for row in reader:
            start, end = end + 1, reader.line_num
            if None in row or any(v is None for v in row.values()):
                raise GradingError(f"{path}: line {start}: expected {len(COLUMNS)} fields")
            rows.append((start, row))
    except csv.Error as e:
        raise GradingError(f"{path}: not a valid CSV ({e})") from e
    return rows


def grades_doc(
    path: Path, rows: list[tuple[int, dict[str, str]]], trial_dir: Path
) -> tuple[dict[str, Any], dict[str, Any], dict[str, str | bytes]]:
    """The trial's summary, grades.json and new folder contents for these CSV rows.

    Raises `GradingError` naming the CSV line and column (or the trial's file) for anything
    that does not fit; reads only.
    """
    trial_id = trial_dir.name
    summary, preds = _trial(trial_dir)
    if summary["trial_id"] != trial_id:
        raise GradingError(
            f"{trial_dir}/summary.json: belongs to trial {summary['trial_id'][:12]!r}, not to "
            f"the folder it is in; {_RERUN}"
        )
    by_index = {p.index: p for p in preds}
    grades: dict[str, int] = {}
    for line, row in rows:
        idx = _row_index(path, line, row["index"], by_index, trial_id)
        if idx in grades:
            raise GradingError(
                f"{path}: line {line}, column index: row {idx!r} appears twice"
                f"{_look_alikes(idx, by_index, trial_id)}"
            )
        raw = row["grade"].strip().lower()
        if not raw:
            raise GradingError(
                f"{path}: line {line} (row {idx}), column grade: empty; every row needs a "
                "grade, 1/0 or correct/incorrect"
            )
        if raw not in GRADE_VALUES:
            raise GradingError(
                f"{path}: line {line} (row {idx}), column grade: {row['grade']!r} is not a "
                "grade; use 1/0 or correct/incorrect"
            )
        now = by_index[idx].generation or ""
        if not same_text(csv_uncell(row["generation"]), now):
            raise GradingError(
                f"{path}: line {line} (row {idx}), column generation: not the trial's current "
                "generation (the trial was rerun since this file was exported, or the text was "
                f"edited); export it again with 'workbench grade export {trial_id[:12]}' and "
                "grade the new file"
            )
        grades[idx] = GRADE_VALUES[raw]
    missing = [i for i in by_index if i not in grades]
    if missing:
        raise GradingError(
            f"{path}: column index: {len(missing)} row(s) of trial {trial_id[:12]} are missing "
            f"(first: {missing[0]!r}); every exported row needs its grade"
        )
    n = len(grades)
    accuracy = sum(grades.values()) / n
    doc = {
        "trial_id": trial_id,
        "source": str(path),
        "metric": HUMAN_METRIC,
        "score": accuracy,
        "graded": n,
        "grades": [
            {"index": i, "grade": grades[i], "generation": by_index[i].generation} for i in by_index
        ],
    }
    new_summary = {**summary, "metric": HUMAN_METRIC, "score": accuracy, "graded": n}
    files = _folder_files(trial_dir)
    files["summary.json"] = json.dumps(new_summary, indent=1, ensure_ascii=False)
    files["grades.json"] = json.dumps(doc, indent=1, ensure_ascii=False)
    return summary, doc, files


def _row_index(path: Path, line: int, cell: str, by_index: dict[str, Any], trial_id: str) -> str:
    """The trial's row id that the CSV's index `cell` names.

    The cell as exported names its row exactly (ids are kept as the data has them, spaces
    included). A cell a spreadsheet padded or trimmed names the row whose id equals it up
    to surrounding whitespace, if only one does; when the trial has several such rows (ids
    "12" and " 12") it cannot say which was meant, and says so.
    """
    if cell in by_index:
        return cell
    near = [i for i in by_index if i.strip() == cell.strip()]
    if len(near) == 1:
        return near[0]
    if near:
        raise GradingError(
            f"{path}: line {line}, column index: {cell!r} is none of trial {trial_id[:12]}'s "
            f"rows {', '.join(map(repr, near))}, which differ only by spaces, and cannot say "
            f"which it grades; export again with 'workbench grade export {trial_id[:12]}' and "
            "fill in the grade column without editing the index column"
        )
    raise GradingError(
        f"{path}: line {line}, column index: row {cell.strip()!r} is not a row of trial "
        f"{trial_id[:12]}; remove it"
    )


def _look_alikes(idx: str, by_index: dict[str, Any], trial_id: str) -> str:
    """A hint when `idx` has look-alike ids in the trial (the cell was trimmed or padded)."""
    near = [i for i in by_index if i != idx and i.strip() == idx.strip()]
    if not near:
        return ""
    return (
        f" (trial {trial_id[:12]} also has row(s) {', '.join(map(repr, near))}, which differ "
        "only by spaces: a spreadsheet may have trimmed the cell); export again with "
        f"'workbench grade export {trial_id[:12]}' and fill in the grade column without "
        "editing the index column"
    )


def _folder_files(trial_dir: Path) -> dict[str, str | bytes]:
    """The text of every file of a trial's folder, which is about to be rewritten.

    Its judge scores (`store.KEPT_FOLDERS`) are carried over as bytes; anything else in it (a
    subfolder, a file the workbench does not write) stops the rewrite, naming it: the swap
    would delete it.
    """
    files: dict[str, str | bytes] = dict(kept_files(trial_dir))
    for entry in sorted(trial_dir.iterdir()):
        if entry.name in KEPT_FOLDERS and entry.is_dir() and not entry.is_symlink():
            continue
        if entry.name not in TRIAL_FILES or not entry.is_file() or entry.is_symlink():
            raise GradingError(
                f"{entry}: not a file the workbench writes in a trial folder; grading rewrites "
                f"{trial_dir}, which would delete it: move it out and import again"
            )
        try:
            files[entry.name] = entry.read_text(encoding="utf-8")
        except (OSError, ValueError) as e:
            raise GradingError(f"{entry}: cannot read it ({e}); {_RERUN}") from None
    return files


def grade_metrics(doc: dict[str, Any]) -> dict[str, float]:
    """The MLflow metrics of a grades.json document."""
    return {"human_graded_accuracy": doc["score"], "score": doc["score"], "n_graded": doc["graded"]}


def _grades_match(doc: dict[str, Any], generations: dict[str, str | None]) -> bool:
    """True when `doc` graded exactly these generations (row index -> text)."""
    return {str(g["index"]): g["generation"] for g in doc["grades"]} == generations


def parse_grades(text: str) -> dict[str, Any] | None:
    """A grades.json document (as `import_grades` writes it), or None if `text` is not one.

    Why: the file sits in runs/ where anything may be written over it; a rerun must not
    crash on it, nor apply it.
    """
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("grades"), list):
        return None
    if not all(isinstance(g, dict) and {"index", "generation"} <= set(g) for g in doc["grades"]):
        return None
    score, graded = doc.get("score"), doc.get("graded")
    numbers = isinstance(score, (int, float)) and isinstance(graded, int)
    if not numbers or isinstance(score, bool) or isinstance(graded, bool):
        return None
    return doc


def current_grades(result: TrialResult, root: Path | None = None) -> dict[str, Any] | None:
    """The saved grades.json of `result`'s trial if they grade exactly its generations."""
    text = previous_grades((root or runs_dir()) / result.trial_id)
    if text is None or not result.complete:
        return None
    doc = parse_grades(text)
    now = {str(p.index): p.generation for p in result.predictions}
    return doc if doc is not None and _grades_match(doc, now) else None


def carry_grades(trial_dir: Path, previous: str | None) -> dict[str, Any] | None:
    """After a rerun rewrote a trial's folder, put its earlier grades back.

    `previous` is the old grades.json text. Grades are kept only if every generation is the
    one that was graded; otherwise they are dropped (returns None) and must be exported again.
    Reads the folder as it is (no completeness check: the caller decides what to save).
    """

    if previous is None:
        return None
    doc = parse_grades(previous)
    if doc is None:
        return None
    with dir_lock(trial_dir):
        summary = _read_json(trial_dir / "summary.json")
        if not isinstance(summary, dict) or summary.get("status") != TrialStatus.COMPLETE:
            return None
        try:
            preds = _predictions(trial_dir / "predictions.jsonl")
        except GradingError:
            return None
        now = {p.index: p.generation for p in preds}
        if not _grades_match(doc, now):
            return None
        new_summary = {
            **summary,
            "metric": HUMAN_METRIC,
            "score": doc["score"],
            "graded": doc["graded"],
        }
        files: dict[str, str | bytes] = {
            f.name: f.read_text(encoding="utf-8") for f in trial_dir.iterdir() if f.is_file()
        }
        files.update(kept_files(trial_dir))
        files["summary.json"] = json.dumps(new_summary, indent=1, ensure_ascii=False)
        files["grades.json"] = previous
        atomic_write_dir(trial_dir, files)
    return new_summary


def save_keeping_grades(result: TrialResult) -> tuple[Path, dict[str, Any]]:
    """`runner.save_result`, keeping a hand-graded trial's grades across a rerun.

    Returns the folder of the saved predictions and the summary to show. When the generations
    changed since they were graded, the grades are dropped and `grades_dropped` says so. An
    unfinished rerun of a complete trial never replaces it (`runner.save_result`): the attempt
    is saved beside it and `grades_kept` (a graded trial) or `trial_kept` says so. The
    folder's lock is held throughout, so a grade import cannot land between the save and
    the carrying over of the grades (and be lost).
    """

    trial_dir = runs_dir() / result.trial_id
    with dir_lock(trial_dir):
        previous = previous_grades(trial_dir) if result.metric == MANUAL else None
        saved = save_result(result)
        summary = result.summary()
        if saved.kept is not None:
            if previous is None:
                summary["trial_kept"] = saved.kept_note(result)
            else:
                summary["grades_kept"] = saved.kept_note(
                    result, "graded trial", "its grades and score"
                )
            return saved.folder, summary
        if previous is not None and parse_grades(previous) is None:
            # not grades (written over by hand?): put back as it was, never applied
            files: dict[str, str | bytes] = {
                f.name: f.read_text(encoding="utf-8") for f in trial_dir.iterdir() if f.is_file()
            }
            files.update(kept_files(trial_dir))
            atomic_write_dir(trial_dir, {**files, "grades.json": previous})
            summary["grades_dropped"] = (
                f"{trial_dir / 'grades.json'} is not a grades file written by 'workbench grade "
                "import'; it was kept as it was and not applied: export and grade the trial again"
            )
        elif previous is not None:
            carried = carry_grades(saved.folder, previous)
            if carried is None:
                summary["grades_dropped"] = (
                    f"the generations of trial {result.trial_id[:12]} changed since they were "
                    "graded; its grades were dropped: export and grade it again"
                )
            else:
                summary.update(carried)
    return saved.folder, summary


def previous_grades(trial_dir: Path) -> str | None:
    """The grades.json text of a trial folder, if it was graded."""
    p = trial_dir / "grades.json"
    return p.read_text(encoding="utf-8", errors="replace") if p.is_file() else None


__all__ = [
    "COLUMNS",
    "HUMAN_METRIC",
    "TRIAL_FILES",
    "TRIAL_ID",
    "GradingError",
    "carry_grades",
    "csv_cell",
    "csv_uncell",
    "current_grades",
    "export_csv",
    "find_trial",
    "grade_metrics",
    "grades_doc",
    "parse_grades",
    "previous_grades",
    "read_graded_csv",
    "save_keeping_grades",
    "trial_folder",
]
