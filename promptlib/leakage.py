"""Leakage in one room: row identity by content, and every check built on it.

A row is identified by what a prompt shows of it, not by its `index`: LegalBench splits repeat
some texts under other indices (the same clause in several contracts), and a demonstration
parsed from a prompt file has no index at all. `content_key` is that identity, the only
definition in the workbench; the rest of this module uses it:

- `evaluation_rows`: the rows of a split a variant may be evaluated on (its demonstrations,
  by row or by content, are left out);
- `check_no_leak`: raises `LeakageError` if an example is one of the prompt's demonstrations;
- `heldout_guard`: while active, rendering any of the given rows for a task raises
  `LeakageError` (an optimiser's search runs inside it). Guards nest and overlap: each holds
  its own claim on its rows (reference counts), so an inner guard's exit never releases a
  row an outer guard still protects. Process-wide and thread-safe;
- `check_heldout`: the guard's check, called by every render.

Dependencies run one way: `variants` <- `demos` <- `leakage` <- `render`.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from weakref import WeakKeyDictionary

from promptlib.demos import Row, bind, demonstrations
from promptlib.errors import LeakageError
from promptlib.tasks import Task
from promptlib.templates import Demo, placeholders
from promptlib.variants import APPLICATION, PromptVariant, frame_file

#: Columns that are not content: they identify a row in a file, not what a model sees.
NON_CONTENT = ("index", "answer")

#: A row's identity by content: (column, whitespace-normalised value) pairs.
ContentKey = tuple[tuple[str, str], ...]


def content_key(row: Mapping[str, object], columns: Sequence[str] | None = None) -> ContentKey:
    """A row's identity by content: the given columns' values, whitespace-normalised.

    With `columns=None`, every column except `index` and `answer`, sorted by name. A missing
    column (or a null value) counts as empty text. `row` may be any mapping, or anything with
    `get` and `keys` (a `dspy.Example`, say).
    """
    cols = sorted(c for c in row if c not in NON_CONTENT) if columns is None else columns
    return tuple((c, _norm(row.get(c))) for c in cols)


def _norm(value: object) -> str:
    return "" if value is None else " ".join(str(value).split())


def query_columns(variant: PromptVariant, task: Task) -> tuple[str, ...]:
    """The columns a variant's query template shows (what identifies an example to a model)."""
    if variant.register_text is not None:
        return placeholders(variant.register_text)
    name = frame_file(variant)
    if name in task.spec.prompt_files:
        return placeholders(task.prompt(name).query)
    return tuple(c for c in task.spec.columns if c not in NON_CONTENT)


def evaluation_rows(variant: PromptVariant, task: Task, split: str) -> tuple[list[Row], list[str]]:
    """Rows of `split` the variant may be evaluated on, and the indices left out as demos.

    A row is left out if it is one of the drawn demonstration rows, or if what the prompt
    shows of it (the query template's columns) equals a demonstration's: file demos are text,
    and LegalBench splits repeat some texts under other indices, so identity by index alone
    would leak.
    """
    rows = task.rows(split)
    bound = bind(variant, task)
    taken = {r.index for r in (bound.demo_rows or ()) if r.split == split}
    cols = query_columns(bound, task)
    if bound.instruction == APPLICATION:
        return _not_in_text(rows, cols, task.prompt(frame_file(bound)).instruction)
    keys = {content_key(d.values, cols) for d in demonstrations(bound, task)}
    if not taken and not keys:  # zero-shot: every row is kept
        return rows, []
    row_keys = _content_keys(task, split, cols) if keys else None
    kept: list[Row] = []
    excluded: list[str] = []
    for n, row in enumerate(rows):
        if row["index"] in taken or (row_keys is not None and row_keys[n] in keys):
            excluded.append(row["index"])
        else:
            kept.append(row)
    return kept, excluded


# Per task: (the split's rows, their content keys) by (split, columns). Variants that show the
# same columns share them: computed once per split instead of once per variant (issue 19).
_KEYS: WeakKeyDictionary[
    Task, dict[tuple[str, tuple[str, ...]], tuple[tuple[Row, ...], list[ContentKey]]]
] = WeakKeyDictionary()


def _not_in_text(rows: list[Row], cols: Sequence[str], text: str) -> tuple[list[Row], list[str]]:
    """The rows none of whose shown values is written in `text`, and the indices of the rest.

    An application prompt file's demonstrations are part of its text (they do not parse
    apart from it), so a row is left out when its shown content (each query column's value,
    whitespace-normalised) appears in that text: a demonstration, whatever its row."""
    shown = _norm(text)
    kept: list[Row] = []
    excluded: list[str] = []
    for row in rows:
        values = [_norm(row.get(c)) for c in cols]
        if values and all(v and v in shown for v in values):
            excluded.append(row["index"])
        else:
            kept.append(row)
    return kept, excluded


def _content_keys(task: Task, split: str, cols: Sequence[str]) -> list[ContentKey]:
    """`content_key(row, cols)` for every row of the split, in file order (memoised)."""
    table_rows = task.table(split).rows
    cached = _KEYS.setdefault(task, {})
    hit = cached.get((split, tuple(cols)))
    if hit is not None and hit[0] is table_rows:
        return hit[1]
    keys = [content_key(r, cols) for r in table_rows]
    cached[(split, tuple(cols))] = (table_rows, keys)
    return keys


def check_no_leak(
    demos: Sequence[Demo],
    example: Mapping[str, str],
    task: str,
    columns: Sequence[str] | None = None,
) -> None:
    """Raise if the example to render is one of its own demonstrations (by shown content)."""
    for d in demos:
        cols = list(columns) if columns is not None else sorted(d.values)
        if content_key(d.values, cols) == content_key(example, cols):
            raise LeakageError(
                f"task {task!r}: example index={example.get('index')} is one of the prompt's "
                "demonstrations; evaluate on promptlib.evaluation_rows(...) instead"
            )


# ---- the held-out guard -------------------------------------------------------------------
# task -> column names of a key -> guarded keys with those columns -> number of active guards
# claiming that key. A key is guarded while its count is > 0.
_GUARD_LOCK = threading.Lock()
_GUARDED: dict[str, dict[tuple[str, ...], Counter[ContentKey]]] = {}


def _columns_of(key: ContentKey) -> tuple[str, ...]:
    return tuple(c for c, _ in key)


@contextmanager
def heldout_guard(task: str, rows: Iterable[Mapping[str, object]]) -> Iterator[None]:
    """While active, rendering any of `rows` for `task` raises `LeakageError`.

    An optimiser runs its search inside this guard, so no model call during the search can
    ever see a held-out row. Process-wide (threads included), matched by content. Guards
    nest and overlap: each claims its rows once, and its exit releases only its own claims.
    """
    keys = {content_key(r) for r in rows}
    _claim(task, keys, +1)
    try:
        yield
    finally:
        _claim(task, keys, -1)


def _claim(task: str, keys: set[ContentKey], step: int) -> None:
    with _GUARD_LOCK:
        groups = _GUARDED.setdefault(task, {})
        for key in keys:
            cols = _columns_of(key)
            counts = groups.setdefault(cols, Counter())
            counts[key] += step
            if counts[key] <= 0:
                del counts[key]
                if not counts:
                    del groups[cols]
        if not groups:
            del _GUARDED[task]


def is_guarded(task: str, example: Mapping[str, object]) -> bool:
    """Whether an active `heldout_guard` protects `example` for `task`.

    The example may carry only some columns (a query template's, say): it matches a guarded
    row whose values on those columns are the same.
    """
    if task not in _GUARDED:
        return False  # the common case, without a lock: nothing is guarded for this task
    key = content_key(example)
    if not key:
        return False  # no content to identify (rendering it fails on its own)
    cols = _columns_of(key)
    wanted = set(cols)
    with _GUARD_LOCK:
        groups = _GUARDED.get(task)
        if not groups:
            return False
        for gcols, counts in groups.items():
            if gcols == cols:
                if key in counts:
                    return True
            elif wanted < set(gcols):
                pick = [i for i, c in enumerate(gcols) if c in wanted]
                if any(tuple(g[i] for i in pick) == key for g in counts):
                    return True
    return False


def check_heldout(task: str, example: Mapping[str, object]) -> None:
    """Raise `LeakageError` if an active `heldout_guard` protects `example` for `task`."""
    if is_guarded(task, example):
        raise LeakageError(
            f"task {task!r}: a held-out row was rendered during the search "
            f"(index {example.get('index', '?')}); the search may only see dev rows"
        )
