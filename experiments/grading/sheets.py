"""Making a blind grade sheet from the trials of one task.

Every answered row of every trial becomes an *item*; the items of all trials are mixed and put
in a seeded random order, numbered in that order (the number is all a grader sees of where an
item came from). The sheet (``<out>.csv``) shows each item's own input from the task's data,
the gold answer and the generation, with an empty column per criterion and one for notes;
never the trial, the variant, the model, the rendered prompt or a file path (the prompt would
reveal the variant). The guide (``<out>.guide.md``) says how to grade. The key (which item is
which trial's row, and the generation it showed) goes to ``grades/sheets/<sheet>.json``.

Why the order matters: grading top to bottom keeps the graded items a random subset of the
sheet, the condition the calibrated estimates need (`store.graded_at_random`). `limit` and
`per_trial` cut the shuffled order, so a shorter sheet is a random subset too.
"""

from __future__ import annotations

import csv
import io
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from experiments.files import atomic_write_text, csv_cell
from experiments.grading.criteria import CRITERIA, GUIDE, SOURCE, task_note
from experiments.grading.store import (
    SHEET_NAME,
    GradeStoreError,
    SheetItem,
    SheetKey,
    generation_sha256,
    save_sheet_key,
    sheet_key_path,
)
from experiments.trials.predictions import PREDICTIONS_FILE, decode_predictions
from promptlib.errors import WorkbenchError
from promptlib.tasks import Catalog

FIXED_COLUMNS = ("sheet", "item", "input", "reference_answer", "answer")
NOTES = "notes"
GRADE_WORDS = {
    "1": 1,
    "0": 0,
    "correct": 1,
    "incorrect": 0,
    "yes": 1,
    "no": 0,
}
"""What a grade cell may hold (case and surrounding spaces ignored); blank = not graded."""


class SheetError(WorkbenchError):
    """A sheet cannot be made from these trials; nothing was written."""


def sheet_columns(criteria: Sequence[str] = CRITERIA) -> tuple[str, ...]:
    return (*FIXED_COLUMNS, *criteria, NOTES)


@dataclass(frozen=True)
class SheetTrial:
    """A trial a sheet draws from, as its folder says."""

    trial_id: str
    task: str
    split: str
    status: str
    rows: tuple[tuple[str, str, str], ...]  # (index, gold answer, generation) answered rows
    unanswered: int


@dataclass(frozen=True)
class SheetResult:
    """A sheet as written."""

    sheet: str
    csv_path: Path
    guide_path: Path
    key_path: Path
    task: str
    n_items: int
    n_trials: int
    n_available: int  # answered rows of the trials (before --limit/--per-trial)
    unanswered: int  # rows of the trials with no generation (not on the sheet)
    seed: int
    criteria: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "sheet": self.sheet,
            "csv": str(self.csv_path),
            "guide": str(self.guide_path),
            "key": str(self.key_path),
            "task": self.task,
            "n_items": self.n_items,
            "n_trials": self.n_trials,
            "n_available": self.n_available,
            "unanswered": self.unanswered,
            "seed": self.seed,
            "criteria": list(self.criteria),
        }


def read_trial(trial_dir: Path) -> SheetTrial:
    """A trial folder's task, split and answered rows (refused, naming the file, if broken)."""
    try:
        summary = json.loads((trial_dir / "summary.json").read_text(encoding="utf-8"))
        preds = decode_predictions((trial_dir / PREDICTIONS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError) as e:
        raise SheetError(
            f"{trial_dir}: cannot read the trial ({type(e).__name__}: {e}); rerun it with "
            "'workbench run'"
        ) from None
    if not isinstance(summary, dict) or not all(
        isinstance(summary.get(k), str) for k in ("task", "split", "trial_id")
    ):
        raise SheetError(f"{trial_dir}/summary.json: not a trial summary; rerun the trial")
    rows = tuple((str(p.index), p.answer, p.generation) for p in preds if p.generation is not None)
    return SheetTrial(
        trial_id=summary["trial_id"],
        task=summary["task"],
        split=summary["split"],
        status=str(summary.get("status")),
        rows=rows,
        unanswered=len(preds) - len(rows),
    )


def input_text(row: dict[str, str], columns: Sequence[str]) -> str:
    """A data row's own input: its one input column's value, or ``column: value`` lines."""
    if len(columns) == 1:
        return row.get(columns[0], "")
    return "\n".join(f"{c}: {row.get(c, '')}" for c in columns)


def _input_columns(catalog: Catalog, task: str, split: str) -> tuple[str, ...]:
    """The columns the task's own base prompt fills (the same for every variant), else every
    column but the index, the answer and LegalBench's slice/label bookkeeping."""
    t = catalog.task(task)
    try:
        cols = tuple(t.prompt("base_prompt.txt").columns)
    except WorkbenchError:
        cols = ()
    if cols:
        return cols
    skip = {"index", "answer", "label", "slice"}
    return tuple(c for c in t.table(split).columns if c not in skip)


def sheet_name_for(out: Path) -> str:
    """The sheet's name: the CSV's file name without .csv (checked to be a plain name)."""
    name = out.name[: -len(".csv")] if out.name.lower().endswith(".csv") else out.name
    if not SHEET_NAME.fullmatch(name):
        raise SheetError(
            f"{out}: the file name {name!r} is the sheet's name and must be letters, digits, "
            "'.', '_' or '-' (at most 100, starting with a letter or digit); choose another --out"
        )
    return name


def make_sheet(
    trial_dirs: Sequence[Path],
    catalog: Catalog,
    *,
    seed: int,
    out: Path,
    limit: int | None = None,
    per_trial: int | None = None,
    criteria: Sequence[str] = CRITERIA,
    task: str | None = None,
    root: Path | None = None,
    now: datetime | None = None,
    order: Sequence[tuple[str, str]] | None = None,
) -> SheetResult:
    """Write a blind, shuffled sheet of `trial_dirs`' answered rows (see the module).

    Refuses trials of more than one task, a sheet name already used, and an empty sheet,
    before anything is written. The order depends only on the set of rows and `seed`, not on
    the order the trials are given in. `order`: the (trial id, row index) items to put on
    the sheet in this order instead of a shuffle (answered rows of `trial_dirs`): the next
    stretch of another sheet's random order (`workbench grade next`); `seed` is recorded.
    """
    if not trial_dirs:
        raise SheetError("no trials to grade: give trial ids (--trial) or a sweep")
    unknown = [c for c in criteria if c not in CRITERIA]
    if unknown or not criteria:
        raise SheetError(f"criteria {unknown or '(none)'}: choose from {', '.join(CRITERIA)}")
    trials = {t.trial_id: t for t in (read_trial(d) for d in trial_dirs)}
    tasks = sorted({t.task for t in trials.values()})
    if len(tasks) != 1:
        raise SheetError(
            f"the trials are of {len(tasks)} tasks ({', '.join(tasks)}): a sheet grades one "
            "task; choose one with --task"
        )
    if task is not None and tasks != [task]:
        raise SheetError(
            f"the trials are of task {tasks[0]!r}, not {task!r}: give trials of {task!r}"
        )
    (task,) = tasks
    name = sheet_name_for(out)
    key_path = sheet_key_path(name, root)
    if key_path.exists():
        raise SheetError(
            f"a sheet named {name!r} exists already ({key_path}); its grades refer to it: "
            "give the new sheet another file name (--out)"
        )
    entries = sorted((tid, idx) for tid, t in trials.items() for idx, _, _ in t.rows)
    if not entries:
        raise SheetError(
            f"the {len(trials)} trial(s) have no answered row: rerun them with 'workbench run'"
        )
    if order is not None:
        unknown_rows = sorted(set(order) - set(entries))
        if unknown_rows or len(set(order)) != len(order) or not order:
            raise SheetError(
                f"{len(unknown_rows)} item(s) asked for are not answered rows of these trials "
                f"(e.g. {unknown_rows[:1]}), or repeat, or none was asked for"
            )
        order = list(order)
    else:
        order = list(entries)
        random.Random(seed).shuffle(order)
    if per_trial is not None:
        taken: dict[str, int] = {}
        kept = []
        for tid, idx in order:
            if taken.get(tid, 0) < per_trial:
                taken[tid] = taken.get(tid, 0) + 1
                kept.append((tid, idx))
        order = kept
    if limit is not None:
        order = order[:limit]
    rows_by = {tid: {idx: (gold, gen) for idx, gold, gen in t.rows} for tid, t in trials.items()}
    data: dict[tuple[str, str], dict[str, str]] = {}
    cols: dict[str, tuple[str, ...]] = {}
    for split in sorted({t.split for t in trials.values()}):
        cols[split] = _input_columns(catalog, task, split)
        for r in catalog.task(task).rows(split):
            data[(split, str(r.get("index", "")))] = r
    width = max(3, len(str(len(order))))
    items: list[SheetItem] = []
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(sheet_columns(criteria))
    for position, (tid, idx) in enumerate(order):
        split = trials[tid].split
        row = data.get((split, idx))
        if row is None:
            raise SheetError(
                f"row {idx!r} of trial {tid[:12]} is not in task {task!r}'s {split} data: the "
                "data changed since the trial ran; rerun the trial on this data"
            )
        gold, gen = rows_by[tid][idx]
        item = f"{position + 1:0{width}d}"
        items.append(SheetItem(item, tid, idx, generation_sha256(gen), position))
        cells = [name, item, input_text(row, cols[split]), gold, gen]
        w.writerow([csv_cell(c) for c in cells] + [""] * len(criteria) + [""])
    when = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    key = SheetKey(
        sheet=name,
        seed=seed,
        created_at=when,
        criteria=tuple(criteria),
        items=tuple(items),
        task=task,
        split=",".join(sorted({t.split for t in trials.values()})),
        trials=tuple(sorted(trials)),
    )
    guide_path = out.with_name(f"{name}.guide.md")
    guide = guide_text(name, out.name, len(items), criteria, task_note(_readme(catalog, task)))
    try:
        save_sheet_key(key, root)
    except GradeStoreError as e:
        raise SheetError(str(e)) from None
    atomic_write_text(out, buf.getvalue())
    atomic_write_text(guide_path, guide)
    return SheetResult(
        sheet=name,
        csv_path=out,
        guide_path=guide_path,
        key_path=key_path,
        task=task,
        n_items=len(items),
        n_trials=len(trials),
        n_available=len(entries),
        unanswered=sum(t.unanswered for t in trials.values()),
        seed=seed,
        criteria=tuple(criteria),
    )


def sweep_trial_ids(sweep: str, task: str, model: str | None = None) -> list[str]:
    """The trial ids of a sweep's (task, model) trials, from its MLflow child runs, as
    `workbench report` finds them (`Tracker.find_sweep`, `Tracker.sweep_trials`)."""
    # start-up time: MLflow loads only when a sweep is named
    from experiments.tracking import Tracker

    tracker = Tracker()
    run = tracker.find_sweep(sweep).run
    rows = tracker.sweep_trials(run.run_id)
    mine = [r for r in rows if r.get("task") == task and (model is None or r.get("model") == model)]
    if not mine:
        tasks = sorted({str(r.get("task")) for r in rows})
        models = sorted({str(r.get("model")) for r in rows if r.get("task") == task})
        what = f"task {task!r}" + (f" and model {model!r}" if model else "")
        raise SheetError(
            f"sweep {run.name!r} has no trial of {what} (tasks: {', '.join(tasks) or 'none'}"
            + (f"; models of {task}: {', '.join(models)}" if models else "")
            + "); choose them with --task and --model"
        )
    return sorted({str(r["trial_id"]) for r in mine})


def _readme(catalog: Catalog, task: str) -> str | None:
    try:
        return catalog.task(task).files.readme()
    except WorkbenchError:
        return None


def guide_text(
    sheet: str, csv_name: str, n_items: int, criteria: Sequence[str], note: str | None
) -> str:
    """The grader's guide: what each criterion means and how to fill the sheet.

    It names the sheet and its file name only: no trial, variant, model, prompt or folder.
    """
    parts = [
        f"# Grading guide for sheet {sheet}",
        "",
        f"The sheet ({csv_name}) has {n_items} answers to grade. Each row shows the input "
        "the model was given (from the task's data), the reference answer, and the model's "
        "answer. You are not told which prompt or model wrote an answer, on purpose.",
        "",
        "## The criteria",
        "",
        SOURCE,
        "",
    ]
    for c in criteria:
        parts += [f"- **{c}**: {GUIDE[c]}", ""]
    if note:
        parts += ["## The rule (from the task's description)", "", note, ""]
    parts += [
        "## How to fill a cell",
        "",
        f"- Put 1 or 0 in each of the columns {', '.join(criteria)} (correct/incorrect and "
        "yes/no are read as 1/0). Leave a cell blank for not graded yet.",
        "- Grade from the top down, without skipping. The rows are in a random order, so the "
        "rows graded from the top are a random sample of all of them: a partly graded sheet "
        "is still usable. Rows graded after a skipped one count less (they are no longer a "
        "random sample), so grade a skipped row before going on.",
        "- Do not edit the sheet, item, input, reference_answer or answer cells; use the "
        "notes column for remarks.",
        "- Save the file as CSV (UTF-8). Partial sheets can be added, then added again when "
        "you have graded more: a grade already added is not counted twice, and a changed "
        "grade is kept as a re-grade beside the old one.",
        "",
        "## When done (or part done)",
        "",
        f"    workbench grade add {csv_name} --grader YOUR_NAME",
        "",
    ]
    return "\n".join(parts)


__all__ = [
    "FIXED_COLUMNS",
    "GRADE_WORDS",
    "NOTES",
    "SheetError",
    "SheetResult",
    "SheetTrial",
    "guide_text",
    "input_text",
    "make_sheet",
    "read_trial",
    "sheet_columns",
    "sheet_name_for",
    "sweep_trial_ids",
]
