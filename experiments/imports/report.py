"""An import's sample-level HTML report: where the imported variants differ, row by row.

The same page as a sweep's (`experiments.reports.html`): per comparison, the rows where A and
B disagree, each with the source tool's own sample id (inspect's sample id, lm-eval's doc_id,
promptfoo's test index, a jsonl/csv file's ``row``), its input, both outputs, the answer the
source scored (inspect's scored answer; the parsed answer when rescored), the gold answer and
whether each arm was right as the comparisons counted it. The input is the one the source
recorded (`ImportedRow.input_text`), else the LegalBench test row the id matched. Where the
source recorded the prompt sent on every row of both arms (`ImportedRow.prompt_text`), the two
prompts are word-diffed with the row's input masked, as a sweep's; otherwise there is no diff.

The report is written to reports/<import name>/<import id>/index.html (`reports.folders`,
whole or not at all) and logged on the import's parent run as ``index.html``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.imports.arms import NO_TASK, Arms
from experiments.imports.identity import TEXTS_SPLIT
from experiments.imports.records import ImportedRow, ImportedTrial
from experiments.metrics import METRICS, base_metric, row_correct
from experiments.reports.folders import ReportFolder, write_run
from experiments.reports.html.build import INPUT_COLUMN, Sources, build_report
from experiments.reports.html.model import ReportDoc
from experiments.trials.record import Prediction, SweepStatus, TrialRecord
from promptlib.errors import WorkbenchError
from promptlib.tasks import Catalog

REPORT_FILE = "index.html"
# task -> its LegalBench test rows by index (None: not a LegalBench task), for the inputs
TaskRows = Callable[[str], Mapping[str, Mapping[str, Any]] | None]


@dataclass(frozen=True)
class RecordedPrompts:
    """An arm's prompts as its source recorded them, by row index: what `build_report`
    diffs (the `Prompt` protocol), the row's input (the ``text`` column) masked."""

    texts: Mapping[str, str]
    query: str = "{{" + INPUT_COLUMN + "}}"
    labels: tuple[str, ...] | None = None

    def render(self, example: Mapping[str, str]) -> str:
        return self.texts[example["index"]]


@dataclass(frozen=True)
class ReportWritten:
    """Where the import's report went: the folder (None: not written, `note` says why) and
    whether it is on the import's run."""

    folder: ReportFolder | None
    logged: bool
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        path = str(self.folder.path / REPORT_FILE) if self.folder is not None else None
        return {"path": path, "logged": self.logged, "note": self.note}


def _sample_id(row: ImportedRow) -> str:
    """The source tool's id of the row's sample (with its epoch, when epochs are apart)."""
    return row.row_id if row.epoch is None else f"{row.row_id} (epoch {row.epoch})"


def _output(row: ImportedRow) -> str | None:
    """The model's text: the prediction, or each epoch's (inspect, reduced over epochs)."""
    if row.prediction is not None:
        return row.prediction
    per_epoch = row.extra.get("predictions")
    if isinstance(per_epoch, list) and per_epoch:
        return "\n\n".join(f"epoch {n}: {p}" for n, p in enumerate(per_epoch, 1))
    return None


def _arm_record(
    rec: TrialRecord, rows: Mapping[str, ImportedRow]
) -> tuple[TrialRecord, dict[str, str]]:
    """The compared record with the source's texts for the page (its correctness as the
    comparisons counted it: the source's 0/1, or, for a rescored arm, whose record keeps no
    per-row correctness, the official metric's on the row), and its recorded prompts by row
    index."""
    preds, prompts = [], {}
    for p in rec.rows:
        row = rows[p.index]
        # rescored rows were scored from these very texts: their parsed answer is the metric's
        rescored = p.generation == row.prediction and p.answer == row.answer
        scored = row.extra.get("scored_answer")
        parsed = str(scored) if scored is not None else (p.parsed if rescored else None)
        correct = p.correct
        metric = base_metric(rec.metric)
        if correct is None and p.generation is not None and metric in METRICS:  # rescored
            correct = row_correct(metric, p.generation, p.answer)
        preds.append(
            Prediction(
                index=p.index,
                prompt_hash=p.prompt_hash,
                answer=row.answer or "",
                generation=_output(row) or "",
                parsed=parsed,
                correct=correct,
            )
        )
        if row.prompt_text is not None:
            prompts[p.index] = row.prompt_text
    trial_id = f"{rec.task}|{rec.model}|{rec.variant}"  # the page's key for its prompts
    return dataclasses.replace(rec, rows=tuple(preds), trial_id=trial_id), prompts


def build_import_report(
    record: Mapping[str, Any],
    compared: Sequence[ImportedTrial],
    arms: Arms,
    doc: Mapping[str, Any],
    *,
    task_rows: TaskRows | None = None,
    ui_base: str | None = None,
    created: str | None = None,
) -> ReportDoc:
    """The import's `ReportDoc` (kind "import"): `compared` are the trials as compared
    (`run._arms`), `arms` their records, `doc` the verdict document."""
    by_arm = {(t.task or NO_TASK, t.model, t.variant): t for t in compared}
    records: list[TrialRecord] = []
    prompts: dict[str, RecordedPrompts] = {}
    data: dict[str, dict[str, dict[str, Any]]] = {}
    sample_ids: dict[str, dict[str, str]] = {}
    notes: list[str] = []
    for rec in sorted(arms.records, key=lambda r: (r.task, r.model, r.variant)):
        trial = by_arm[(rec.task, rec.model, rec.variant)]
        rows = {r.key: r for r in trial.rows}
        shown, texts = _arm_record(rec, rows)
        records.append(shown)
        if rec.rows and len(texts) == len(rec.rows):
            prompts[shown.trial_id] = RecordedPrompts(texts)
        legal = task_rows(rec.task) if task_rows is not None else None
        mine = data.setdefault(rec.task, {})
        ids = sample_ids.setdefault(rec.task, {})
        for p in rec.rows:
            row = rows[p.index]
            ids.setdefault(p.index, _sample_id(row))
            if p.index in mine:
                continue
            cells: dict[str, Any] = {"index": p.index}
            mine[p.index] = cells
            match = _same_example(row, (legal or {}).get(row.row_id))
            text = row.input_text if row.input_text is not None else _legal_input(match)
            # always the column: the page shows the input column its first row has
            cells[INPUT_COLUMN] = text or ""
            if match is not None and match.get("slice"):
                cells["slice"] = str(match["slice"])
    if any(not r.rows or all(not p.generation for p in r.rows) for r in records):
        notes.append("some arms' source files record no model outputs: those are shown empty")
    if not prompts:
        notes.append("the source files record no prompts for both arms: no prompt diffs")
    left = list(doc.get("left_out") or ())
    if left:
        notes.append(f"{len(left)} rows left out of the comparisons (not in every arm, or "
                     "no score in one): not shown")  # fmt: skip
    notes += [str(n) for n in doc.get("notes") or ()]
    return build_report(
        kind="import",
        title=f"Import {record['name']}",
        name=str(record["name"]),
        id=str(record["import_id"]),
        status=str(SweepStatus.COMPLETE),  # every compared row has a score in each arm
        records=records,
        comparisons=doc.get("comparisons") or (),
        sources=Sources(prompts, data, sample_ids),
        ui_base=ui_base,
        notes=notes,
        created=created,
        # the slice tables score what the comparisons scored, not the texts shown
        scored=arms.records,
    )


def _same_example(row: ImportedRow, match: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The LegalBench test row of the same index, when nothing says it is another example:
    its gold answer is the row's (where the source gives one) and its text is the row's input
    (where the source records one); else None (an id that is only a position)."""
    if match is None:
        return None
    if row.answer is not None and str(match.get("answer", "")).strip() != row.answer.strip():
        return None
    text = match.get(INPUT_COLUMN)
    if row.input_text is not None and (text is None or str(text) != row.input_text):
        return None
    return match


def _legal_input(row: Mapping[str, Any] | None) -> str | None:
    """A LegalBench row's input: its ``text``, else its other columns named."""
    if row is None:
        return None
    if row.get(INPUT_COLUMN):
        return str(row[INPUT_COLUMN])
    fields = [(k, v) for k, v in row.items() if k not in ("index", "answer", "slice") and v]
    return "\n\n".join(f"{k}: {v}" for k, v in fields) or None


def write_import_report(reports_dir: Path, name: str, import_id: str, html: str) -> ReportFolder:
    """reports/<import name>/<import id>/index.html, whole or not at all (`write_run`)."""
    return write_run(reports_dir, name, import_id, {REPORT_FILE: html})


def catalog_rows(catalog: Catalog) -> TaskRows:
    """The catalog's tasks' test rows by index (None for a task it lacks or cannot read),
    each task read once, when first asked for: the inputs of rows whose source has none."""
    cache: dict[str, Mapping[str, Mapping[str, Any]] | None] = {}

    def rows(task: str) -> Mapping[str, Mapping[str, Any]] | None:
        if task not in cache:
            cache[task] = None
            if task in catalog.names():
                try:
                    found = catalog.task(task).rows(TEXTS_SPLIT)
                except WorkbenchError:  # no test split, an unreadable file: no inputs
                    return None
                cache[task] = {str(r["index"]): r for r in found}
        return cache[task]

    return rows
