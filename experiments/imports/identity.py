"""Which imported rows are one unit of the tests: the cluster key of each row.

A deterministic harness gives identical prompts identical answers, and LegalBench's test
splits repeat texts under several row indices (cuad_audit_rights: 1,215 rows, 775 distinct
texts; overruling: 2,385 rows, 1,499), so such rows counted one by one overstate the evidence:
under a true null, rows as units reject at p <= 0.05 in about 15% of runs on these tasks
(`benchmarks/import_null.py`). A row's key is, as a sweep's rows are clustered by their prompt
hash (`experiments.analysis.clusters.by_prompts`):

1. the source's own identity of its prompt (`ImportedRow.prompt`): lm-eval's `prompt_hash`,
   a hash of inspect's sample input, of promptfoo's test vars;
2. else, for a LegalBench task whose row ids are its test rows' `index` values: the row's
   text, the columns the task's prompts show (`promptlib.leakage.content_key`);
3. else none: the rows are tested as independent units, and the verdict says so.

With epochs kept apart, a sample's epochs are joined as well (one key for both links). The keys
of the arms compared are unioned by the comparisons themselves (rows linked under any arm are
one cluster), so a key needs to mean something within its own arm only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from experiments.analysis.align import row_order
from experiments.analysis.clusters import by_prompts
from experiments.imports.records import ImportedRow, ImportedTrial
from promptlib.errors import WorkbenchError
from promptlib.leakage import NON_CONTENT, content_key
from promptlib.tasks import Catalog
from promptlib.templates import placeholders

TEXTS_SPLIT = "test"  # the split whose `index` values row ids are matched against
NO_IDENTITY = "the source gives no prompt identity"
ROWS = f"rows (independent: {NO_IDENTITY})"  # the label of rows tested as independent units
SAMPLES = f"sample (its epochs together; samples independent: {NO_IDENTITY})"
EPOCHS = "a sample's epochs together"  # added to a label when epochs are kept apart
# the label of each tool's prompt identity (`ImportedTrial.tool`)
SOURCES = {
    "lm-evaluation-harness": "prompt hash (lm-eval)",
    "inspect_ai": "sample input (inspect)",
    "promptfoo": "test vars (promptfoo)",
}


def digest(value: Any) -> str:
    """A short, stable hash of a text or of plain data (canonical JSON: keys sorted)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class TaskText:
    """A LegalBench test row as a prompt shows it: its text's hash and its gold answer."""

    key: str
    answer: str


TaskTexts = Callable[[str], Mapping[str, TaskText] | None]  # task -> test index -> its text


def catalog_texts(catalog: Catalog) -> TaskTexts:
    """The test rows' texts of the catalog's tasks (None for a task it lacks), each task read
    once, when first asked for."""
    cache: dict[str, Mapping[str, TaskText] | None] = {}

    def texts(task: str) -> Mapping[str, TaskText] | None:
        if task not in cache:
            cache[task] = _task_texts(catalog, task)
        return cache[task]

    return texts


def _task_texts(catalog: Catalog, name: str) -> Mapping[str, TaskText] | None:
    if name not in catalog.names():
        return None
    try:
        task = catalog.task(name)
        rows = task.rows(TEXTS_SPLIT)
        columns = shown_columns(task.files.prompt_files(), task.prompt, rows)
    except WorkbenchError:  # no test split, an unreadable file: no texts to cluster by
        return None
    return {
        str(r["index"]): TaskText(digest(list(content_key(r, columns))), str(r.get("answer", "")))
        for r in rows
    }


def shown_columns(
    files: Sequence[str], prompt: Callable[[str], Any], rows: Sequence[Mapping[str, str]]
) -> list[str]:
    """The columns the task's prompt files show (their query templates' placeholders), or,
    without prompt files, every column but `index` and `answer`."""
    shown: dict[str, None] = {}
    for name in files:
        shown.update(dict.fromkeys(placeholders(prompt(name).query)))
    if shown:
        return list(shown)
    return sorted({c for r in rows for c in r if c not in NON_CONTENT})


@dataclass(frozen=True)
class Units:
    """How a (task, model)'s rows are clustered: the label the verdict shows (`clustered_by`),
    what a reader must know (rows tested as independent, and why), and each arm's key per row
    (`ImportedRow.key` -> cluster key, None: the row links to nothing)."""

    label: str
    note: str | None
    keys: tuple[Mapping[str, str | None], ...]


def units(
    task: str,
    model: str,
    arms: Sequence[ImportedTrial],
    compared: Collection[str],
    texts: TaskTexts | None,
) -> Units:
    """The cluster keys of the `compared` rows (keys every arm scored) of one (task, model)."""
    rows = [sorted((r for r in t.rows if r.key in compared), key=lambda r: row_order(r.key))
            for t in arms]  # fmt: skip
    epochs = any(r.epoch is not None for arm in rows for r in arm)
    base, label, note = _prompt_keys(task, model, arms, rows, texts)
    if epochs:
        label = SAMPLES if label == ROWS else f"{label}; {EPOCHS}"
    keys = tuple(_joined(arm, keyed, epochs) for arm, keyed in zip(rows, base, strict=True))
    return Units(label, note, keys)


def _prompt_keys(
    task: str,
    model: str,
    arms: Sequence[ImportedTrial],
    rows: Sequence[Sequence[ImportedRow]],
    texts: TaskTexts | None,
) -> tuple[list[list[str | None]], str, str | None]:
    """Each arm's prompt key per row, the label and the note: the source's prompt identity
    where it gives one for every row, else the task's texts, else what the source gives."""
    source: list[list[str | None]] = [[r.prompt for r in arm] for arm in rows]
    covered = {r.row_id for arm in rows for r in arm if r.prompt}
    ids = {r.row_id for arm in rows for r in arm}
    tools = ", ".join(sorted({
        SOURCES.get(t.tool, f"prompt ({t.tool})")
        for t, arm in zip(arms, rows, strict=True) if any(r.prompt for r in arm)
    }))  # fmt: skip
    if covered and covered == ids:
        return source, tools, None
    table = texts(task) if texts is not None else None
    mismatch = _not_task_rows(task, rows, table) if table is not None else None
    if table is not None and mismatch is None:
        by_text: list[list[str | None]] = [[table[r.row_id].key for r in arm] for arm in rows]
        return by_text, f"task texts ({task})", None
    where = f"{task} ({model})"
    if covered:
        note = (
            f"{where}: {len(ids - covered)} of {len(ids)} rows have no prompt identity in the "
            f"source{f' ({mismatch})' if mismatch else ''}: each is tested as an independent "
            "unit, which overstates the evidence if their texts repeat"
        )
        return source, tools, note
    if mismatch:
        why = f", and {mismatch}"
    elif texts is not None:  # a catalog to look the task up in, which lacks it
        why = (
            f", and {task} is not a LegalBench task with a {TEXTS_SPLIT} split (give --task "
            "NAME if it is one, to cluster its rows by their texts)"
        )
    else:
        why = ""
    note = (
        f"{where}: rows are tested as independent units: {NO_IDENTITY}{why}; if the rows "
        "repeat texts, the p-value overstates the evidence"
    )
    return [[None] * len(arm) for arm in rows], ROWS, note


def _not_task_rows(
    task: str, rows: Sequence[Sequence[ImportedRow]], table: Mapping[str, TaskText]
) -> str | None:
    """Why the rows are not the task's test rows by `index` (None: they are): an id that is
    no test index, or a gold answer other than the task's for that index."""
    for arm in rows:
        for r in arm:
            row = table.get(r.row_id)
            if row is None:
                return f"row {r.row_id!r} is not an index of {task}'s {TEXTS_SPLIT} rows"
            if r.answer is not None and _norm(r.answer) != _norm(row.answer):
                return (
                    f"row {r.row_id!r} has answer {r.answer!r}, but {task}'s {TEXTS_SPLIT} row "
                    f"of that index {row.answer!r}: its row ids are not the task's indices"
                )
    return None


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _joined(
    rows: Sequence[ImportedRow], prompts: Sequence[str | None], epochs: bool
) -> dict[str, str | None]:
    """One arm's cluster key per row key: rows with the same prompt key, and (with epochs kept
    apart) a sample's epochs, share one key; a row with neither links to nothing (None)."""
    if not epochs:
        return {r.key: p for r, p in zip(rows, prompts, strict=True)}
    samples = [r.row_id for r in rows]
    ids = by_prompts([list(prompts), samples]).ids
    return {r.key: f"unit:{c}" for r, c in zip(rows, ids.tolist(), strict=True)}
