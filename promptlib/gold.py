"""No gold answer reaches a prompt: the two checks that keep a row's answer out of it.

A prompt that shows the answer it is scored against measures copying, not reasoning: a
model that copies it scores a complete 1.0. Both checks run before any model call.

- **Templates** (prompt files, instruction and register files, variant files, generated
  texts) may not name the answer column, `{{answer}}`: `refuse_gold_placeholder`, called
  where each kind of template is read, raises naming the file and field.
- **In depth**, a trial whose query template fills a slot with the evaluated row's own gold
  answer (a column holding it under another name: `label`, `gold`, a copy made while
  preparing the data) is refused, naming the column, the file and the first rows:
  `check_gold_not_shown`. The rule, chosen so that real LegalBench data never trips it:

  * a slot counts when its whole value is the row's answer as LegalBench's metric compares
    them (punctuation dropped, case and whitespace ignored): a copy, not input. A passage
    that merely contains the answer is input: an extraction task's answer is a span of its
    text by definition, and a decision may say "the appeal is allowed" in a task labelled
    "allowed" (on the shipped data, containment would flag 4-12 such rows, equality none);
  * answers shorter than `MIN_GOLD_CHARS` once normalised (Yes, No, A-E, numbers) are not
    checked row by row: such a value is too common to mean a copy. A column counts when it
    equals the short answer on every evaluated row with one, across two labels or more (a
    `label` column copying hearsay's Yes/No); a constant column, or one equal on some rows
    only, does not. `{{answer}}` itself is refused whatever its labels;
  * only the evaluated row's answer counts. Demonstrations show their own answers, and
    the instruction names the labels, in every prompt alike: that is the prompt, not a leak.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from promptlib.errors import LeakageError, TemplateError, WorkbenchError, first_few
from promptlib.tasks import normalize_label
from promptlib.templates import placeholders

#: The column holding a row's gold answer (`promptlib.data.read_tsv` requires it).
GOLD_COLUMN = "answer"
#: Answers shorter than this once normalised are not looked for in slots (see the module).
MIN_GOLD_CHARS = 4
#: How many rows a message names before "and N more".
SHOWN_ROWS = 3

_GOLD = "{{" + GOLD_COLUMN + "}}"
_DROP = str.maketrans("", "", string.punctuation + string.whitespace)


def names_gold(template: str) -> bool:
    """Whether a template has the answer column as a placeholder (`{{answer}}`)."""
    return GOLD_COLUMN in placeholders(template)


def refuse_gold_placeholder(
    template: str, where: str, error: type[WorkbenchError] = TemplateError
) -> None:
    """Raise `error` if `template` names the answer column; `where` names the file and field."""
    if names_gold(template):
        raise error(
            f"{where} names {_GOLD}, the column holding each row's gold answer: every prompt "
            "would show the answer it is scored against (a model copying it scores 1.0); "
            f"remove {_GOLD} from it"
        )


def gold_norm(text: str) -> str:
    """An answer or a slot's value as LegalBench's metric compares them, spaces collapsed."""
    return " ".join(normalize_label(text).split())


@dataclass(frozen=True)
class GoldShown:
    """A query-template column whose value is the evaluated row's own gold answer."""

    column: str
    rows: tuple[str, ...]  # the `index` of each row whose slot shows its answer
    checked: int  # the rows whose answer is long enough to look for

    def shown(self) -> str:
        """'index 3, 7, 9 and 12 more' (the first few rows, and how many)."""
        return "index " + first_few(self.rows, SHOWN_ROWS)


def gold_shown(columns: Sequence[str], rows: Sequence[Mapping[str, str]]) -> GoldShown | None:
    """The first column (in template order) whose value is its row's gold answer on some
    row, with every such row; None when no slot shows one.

    Linear in the rows' text: a value is normalised only when, stripped of punctuation and
    spaces, it is no longer than twice the answer (lower-casing at most doubles a length),
    so a long passage costs one `str.translate`.
    """
    hits: dict[str, list[str]] = {c: [] for c in columns}
    short: dict[str, list[str]] = {c: [] for c in columns}  # equal on a short answer's row
    checked = 0
    short_rows: list[str] = []
    labels: set[str] = set()
    for row in rows:
        answer = gold_norm(str(row.get(GOLD_COLUMN) or ""))
        index = str(row.get("index", "?"))
        is_short = len(answer) < MIN_GOLD_CHARS
        if is_short:
            short_rows.append(index)
            labels.add(answer)
        else:
            checked += 1
        bound = 2 * len(answer.translate(_DROP))
        for column in columns:
            value = str(row.get(column) or "")
            if len(value.translate(_DROP)) <= bound and gold_norm(value) == answer:
                (short if is_short else hits)[column].append(index)
    # short answers count by column: equal on every such row, across two labels or more
    if len(short_rows) >= 2 and len(labels) >= 2:
        copies = [c for c in columns if len(short[c]) == len(short_rows)]
        for column in copies:
            hits[column] += short[column]
        checked += len(short_rows) if copies else 0
    found = next((c for c in columns if hits[c]), None)
    return GoldShown(found, tuple(hits[found]), checked) if found is not None else None


def check_gold_not_shown(
    task: str,
    template: str,
    source: str,
    rows: Sequence[Mapping[str, str]],
    data: str,
) -> None:
    """Raise `LeakageError` if `template`'s slots show an evaluated row's gold answer.

    `source` names the template (a prompt file, ``register_text``), `data` the split's file.
    """
    hit = gold_shown(placeholders(template), rows)
    if hit is None:
        return
    slot = "{{" + hit.column + "}}"
    raise LeakageError(
        f"task {task!r}: the query template ({source}) shows {slot}, whose value is the row's "
        f"own gold answer in {data} ({hit.shown()}: {len(hit.rows)} of {hit.checked} rows "
        f"checked): a model copying it would score 1.0; remove {slot} from the "
        f"template, or the column {hit.column!r} from the data, then rerun"
    )
