"""A user's rows checked and turned into the files of a task folder (nothing written here).

The folder is LegalBench's layout, which every command reads: ``train.tsv`` and ``test.tsv``
(``index``, the input columns, ``answer``, the slice column), ``base_prompt.txt`` (the
instruction, demonstrations drawn from train, and the query template with a ``{{column}}``
per input), ``README.md`` (with ``**Task type**``), plus ``task.json``, the facts the
catalog reads (`promptlib.taskmeta`).

Each refusal is a `DataError` naming the file and the column and saying what to do: an
unknown column, an empty or constant answer column, a missing answer, a row in both train
and test, too few rows for the demonstrations asked, a name LegalBench already uses.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from promptlib.data import is_empty_answer
from promptlib.demos import sample_demos
from promptlib.errors import DataError, VariantError, did_you_mean, first_few
from promptlib.gold import GOLD_COLUMN, gold_shown, names_gold
from promptlib.taskmeta import META_FILE, TaskMeta
from promptlib.templates import PLACEHOLDER, fill, parse_prompt
from promptlib.usertasks.infer import Inferred, infer, label_key
from promptlib.usertasks.read import HubLoader, RawRows, read_rows
from promptlib.variants import BASE_FILE, DemoRef

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
#: columns the task folder's TSVs use for themselves
RESERVED = ("index", GOLD_COLUMN)
ANSWER_PREFIX = "A:"
DEFAULT_DEMOS = 4
#: how many rows a message lists before "and N more"
SHOWN = 3

Row = dict[str, str]


@dataclass(frozen=True)
class TaskRequest:
    """What ``workbench task new`` was asked for (the CLI's options, as values)."""

    name: str
    source: str
    inputs: tuple[str, ...]
    answer: str
    instruction: str
    labels: tuple[str, ...] | None = None
    task_type: str | None = None
    metric: str | None = None
    train_source: str | None = None
    train_fraction: float | None = None
    demos: int = DEFAULT_DEMOS
    seed: int = 0
    slice_column: str | None = None
    hf_split: str = "train"


@dataclass(frozen=True)
class TaskDraft:
    """A checked task: its files' text (name -> text) and what the command says about it."""

    name: str
    files: tuple[tuple[str, str], ...]
    inferred: Inferred
    meta: TaskMeta
    n_rows: int
    n_train: int
    n_test: int
    n_demos: int
    slices: tuple[str, ...] | None

    def text(self, filename: str) -> str:
        return dict(self.files)[filename]

    def lines(self, folder: str) -> list[str]:
        """What ``workbench task new`` says about the task it wrote into `folder`."""
        out = [f"task {self.name}: {self.inferred.line(self.n_rows)}"]
        out.append(
            f"  rows: {self.n_train} train ({self.n_demos} shown as demonstrations in "
            f"{BASE_FILE}), {self.n_test} test"
        )
        if self.meta.slice_column is not None:
            values = first_few(list(self.slices or ()), 6)
            out.append(
                f"  slices: column {self.meta.slice_column}, {len(self.slices or ())} values "
                f"({values})"
            )
        out.append(f"  written: {folder} ({', '.join(name for name, _ in self.files)})")
        out.append(f"  next: workbench render {self.name} --limit 1")
        out.append(f"        workbench run {self.name} --model local/smollm2 --limit 10")
        return out


def check_name(name: str, taken: Collection[str]) -> None:
    """A task name a folder can carry, and not one of LegalBench's (it would shadow it)."""
    if not NAME.fullmatch(name):
        raise DataError(
            f"task name {name!r}: use letters, digits, _ and - (at most 64, not starting with "
            "_ or -), e.g. nda_disclosure"
        )
    if name in taken:
        raise DataError(
            f"task name {name!r} is a LegalBench task already; a task of yours would shadow it "
            "in every command: choose another name (e.g. my_" + name + ")"
        )


def draft_task(
    request: TaskRequest, taken: Collection[str], *, hub: HubLoader | None = None
) -> TaskDraft:
    """Read and check the rows, infer the labels, split, draw demonstrations, make the files.

    `taken`: the names already in the catalog (LegalBench's), refused as this task's name.
    """
    check_name(request.name, taken)
    _check_request(request)
    main = read_rows(request.source, hf_split=request.hf_split, hub=hub)
    train_raw = read_rows(request.train_source, hub=hub) if request.train_source else None
    for raw in (main, train_raw):
        if raw is not None:
            _check_columns(raw, request)
    rows = _clean_rows(main, request)
    train_given = _clean_rows(train_raw, request) if train_raw is not None else None
    every = rows + (train_given or [])
    answers = [r[GOLD_COLUMN] for r in every]
    _refuse_constant(answers, main if train_raw is None else None, request)
    inputs_text = [" ".join(r[c] for c in request.inputs) for r in every]
    where = f"column {request.answer!r} of {main.where}"
    inferred = infer(
        answers,
        inputs_text,
        task_type=request.task_type,
        labels=request.labels,
        metric=request.metric,
        where=where,
    )
    if inferred.labels is not None:
        # each row's answer as its label is spelled ('yes.' -> 'Yes'): the demonstrations
        # show one spelling and a class-balanced draw sees one class per label
        spelled = {label_key(x): x for x in inferred.labels}
        for r in every:
            r[GOLD_COLUMN] = spelled[label_key(r[GOLD_COLUMN])]
    train_where = train_raw.where if train_raw is not None else main.where
    if train_given is not None or request.train_fraction is not None:
        if train_given is not None:
            train, test = train_given, rows
        else:
            _refuse_repeats(rows, request, main.where)
            train, test = _split(rows, request, inferred, main.where)
        _refuse_crossing(train, test, request, main.where, train_where)
        demos = _demos(train, request, inferred, train_where)
    else:
        # one file, no fraction: the demonstrations are the train split (as in LegalBench's
        # data), every other row is test
        _refuse_repeats(rows, request, main.where)
        demos = _demos(rows, request, inferred, main.where)
        chosen = {r["index"] for r in demos}
        train = [r for r in rows if r["index"] in chosen]
        test = [r for r in rows if r["index"] not in chosen]
    if not test:
        raise DataError(
            f"{main.where}: no rows are left for test after the {len(train)} train rows; "
            "give more rows, fewer --demos or a smaller --train-fraction"
        )
    query = _query(request.inputs)
    found = gold_shown([c for c in request.inputs], test)
    if found is not None:
        raise DataError(
            f"{main.where}: input column {found.column!r} equals the answer column "
            f"{request.answer!r} on {found.shown()}: every prompt would show its own answer; "
            "choose other --input columns"
        )
    columns = ("index", *request.inputs, GOLD_COLUMN) + (
        (request.slice_column,) if request.slice_column else ()
    )
    meta = TaskMeta(
        task_type=inferred.task_type,
        labels=inferred.labels,
        metric=inferred.metric,
        input_columns=request.inputs,
        slice_column=request.slice_column,
        source=_shown_source(request),
    )
    base = _base_prompt(request.instruction, demos, query, request.inputs, main.where)
    slices = (
        tuple(sorted({r[request.slice_column] for r in every})) if request.slice_column else None
    )
    files = (
        ("train.tsv", _tsv(columns, train)),
        ("test.tsv", _tsv(columns, test)),
        (BASE_FILE, base),
        ("README.md", _readme(request, inferred, len(train), len(test), slices)),
        (META_FILE, meta.dumps()),
    )
    return TaskDraft(
        request.name, files, inferred, meta, len(every), len(train), len(test), len(demos), slices
    )


# ---- the request and the columns -----------------------------------------------------------
def _check_request(request: TaskRequest) -> None:
    if not request.inputs:
        raise DataError("give the input column(s) the prompt shows: --input COLUMN")
    if not request.instruction.strip():
        raise DataError(
            "give the instruction the prompt starts with: --instruction TEXT or "
            "--instruction-file FILE"
        )
    if PLACEHOLDER.search(request.instruction) or names_gold(request.instruction):
        raise DataError(
            "the instruction holds a {{...}} placeholder; the instruction is the same for "
            "every row: write it without placeholders (the query shows the input columns)"
        )
    if request.demos < 0:
        raise DataError(f"--demos must be 0 or more, not {request.demos}")
    if request.train_source is not None and request.train_fraction is not None:
        raise DataError("give --train FILE or --train-fraction, not both")
    fraction = request.train_fraction
    if fraction is not None and not 0 < fraction < 1:
        raise DataError(f"--train-fraction must be between 0 and 1 (e.g. 0.2), not {fraction}")


def _check_columns(raw: RawRows, request: TaskRequest) -> None:
    """Every named column exists (did you mean), and no column has two roles."""
    named = [*request.inputs, request.answer] + (
        [request.slice_column] if request.slice_column else []
    )
    for column in named:
        if column not in raw.columns:
            raise DataError(
                f"{raw.where} has no column {column!r}{did_you_mean(column, raw.columns)} "
                f"(columns: {', '.join(raw.columns)}); name one of them"
            )
    twice = sorted({c for c in named if named.count(c) > 1})
    if twice:
        raise DataError(
            f"column {twice[0]!r} is given two roles (input, answer, slice); give each column "
            "one role"
        )
    for column in request.inputs:  # each is a {{column}} of the query template
        m = PLACEHOLDER.fullmatch("{{" + column + "}}")
        if m is None or m.group(1) != column or any(ch in column for ch in "\r\n\t"):
            raise DataError(
                f"{raw.where}: input column {column!r} cannot be a {{{{column}}}} of the prompt "
                "(braces, line breaks, tabs or spaces at its ends); rename it in the file"
            )
    for column in [*request.inputs] + ([request.slice_column] if request.slice_column else []):
        if column in RESERVED:
            raise DataError(
                f"{raw.where}: column {column!r} cannot be an input or slice column (the task's "
                f"files use {' and '.join(RESERVED)} themselves); rename it in the file"
            )


def _clean_rows(raw: RawRows, request: TaskRequest) -> list[Row]:
    """The used columns as strings; a missing answer or input value is refused, by row."""
    if all(r[request.answer] is None or not str(r[request.answer]).strip() for r in raw.rows):
        raise DataError(
            f"{raw.where}: column {request.answer!r} is empty (no row has an answer); name the "
            "column that holds the labels (--answer)"
        )
    blank = [n for n, r in enumerate(raw.rows, 1) if is_empty_answer(r[request.answer] or "")]
    if blank:
        raise DataError(
            f"{raw.where}: {len(blank)} row(s) of {len(raw)} have no answer in column "
            f"{request.answer!r} (blank, or only spaces or punctuation): rows "
            f"{first_few([str(n) for n in blank], SHOWN)} (counted from 1, header excluded); "
            "fill in each answer or remove those rows"
        )
    multi = [n for n, r in enumerate(raw.rows, 1) if "\n" in (r[request.answer] or "").strip()]
    if multi:
        raise DataError(
            f"{raw.where}: {len(multi)} answer(s) in column {request.answer!r} span several "
            f"lines (rows {first_few([str(n) for n in multi], SHOWN)}); a reply is read up to "
            "its first line: put each answer on one line"
        )
    for column in [*request.inputs] + ([request.slice_column] if request.slice_column else []):
        missing = [n for n, r in enumerate(raw.rows, 1) if r[column] is None]
        if missing:
            raise DataError(
                f"{raw.where}: {len(missing)} row(s) have no value in column {column!r}: rows "
                f"{first_few([str(n) for n in missing], SHOWN)} (counted from 1, header "
                "excluded); fill them in or remove those rows"
            )
    out: list[Row] = []
    for n, r in enumerate(raw.rows):
        row = {"index": str(n)}
        row.update({c: str(r[c]) for c in request.inputs})
        row[GOLD_COLUMN] = str(r[request.answer]).strip()
        if request.slice_column:
            row[request.slice_column] = str(r[request.slice_column])
        out.append(row)
    return out


def _refuse_constant(answers: Sequence[str], raw: RawRows | None, request: TaskRequest) -> None:
    different = {label_key(a) for a in answers}
    if len(different) < 2:
        where = raw.where if raw is not None else "the rows (test and --train together)"
        raise DataError(
            f"{where}: every answer in column {request.answer!r} is {answers[0]!r}: a task "
            "needs at least two different answers (a constant one tells no prompt from "
            "another); check --answer, or add rows with other answers"
        )


# ---- the split and the demonstrations --------------------------------------------------------
def _split(
    rows: list[Row], request: TaskRequest, inferred: Inferred, where: str
) -> tuple[list[Row], list[Row]]:
    """(train, test) of one file: `train_fraction` of the rows (of each label, for a label
    set) drawn with the seed from the rows in content order, so the same rows in another
    order give the same split; both in file order."""
    assert request.train_fraction is not None
    rng = np.random.default_rng(request.seed)
    groups: dict[str, list[int]] = {}
    for n in _content_order(rows, request.inputs):
        key = label_key(rows[n][GOLD_COLUMN]) if inferred.labels is not None else ""
        groups.setdefault(key, []).append(n)
    picked: set[int] = set()
    for key in sorted(groups):
        members = groups[key]
        k = round(len(members) * request.train_fraction)
        picked |= {members[int(i)] for i in rng.choice(len(members), size=k, replace=False)}
    if not picked:
        raise DataError(
            f"{where}: --train-fraction {request.train_fraction} of {len(rows)} rows is no row; "
            "give a larger fraction or more rows"
        )
    train = [r for n, r in enumerate(rows) if n in picked]
    test = [r for n, r in enumerate(rows) if n not in picked]
    return train, test


def _demos(train: list[Row], request: TaskRequest, inferred: Inferred, where: str) -> list[Row]:
    """The base prompt's demonstrations: `demos` rows of train, one per label in turn (a
    class-balanced draw with the seed) when there is a label set."""
    k = request.demos
    if k == 0:
        return []
    if k > len(train):
        raise DataError(
            f"{where}: --demos {k} asks for {k} demonstrations but only {len(train)} train "
            f"row(s) can give them; lower --demos, or give more train rows"
            + (" (--train-fraction)" if request.train_fraction else "")
        )
    # drawn from the rows in content order: the same rows in another order give the same
    # demonstrations
    ordered = [train[n] for n in _content_order(train, request.inputs)]
    candidates = [(DemoRef("train", r["index"]), r) for r in ordered]
    try:
        picks = sample_demos(
            candidates, k, request.seed, balanced=inferred.labels is not None, what=where
        )
    except VariantError:
        counts: dict[str, int] = {}
        for r in train:
            counts[r[GOLD_COLUMN]] = counts.get(r[GOLD_COLUMN], 0) + 1
        held = ", ".join(f"{label}: {n}" for label, n in sorted(counts.items()))
        raise DataError(
            f"{where}: too few rows for the demonstrations asked: --demos {k} are drawn evenly "
            f"over the {len(counts)} labels, and the train rows hold too few of one ({held}); "
            "lower --demos, or give more train rows of that label"
        ) from None
    by_index = {r["index"]: r for r in train}
    return [by_index[p.index] for p in picks]


def _content_order(rows: Sequence[Row], inputs: Sequence[str]) -> list[int]:
    """The rows' positions sorted by their content (inputs, then answer), file order on a
    tie: what a seeded draw walks, so it does not depend on how the file was sorted."""
    return sorted(
        range(len(rows)), key=lambda n: (*(rows[n][c] for c in inputs), rows[n][GOLD_COLUMN])
    )


def _input_key(row: Row, inputs: Sequence[str]) -> tuple[str, ...]:
    """A row's inputs as a reader compares them: spaces collapsed and case set aside (a
    demonstration 'THE RECIPIENT SHALL...' gives away the answer to 'The Recipient shall...')."""
    return tuple(" ".join(row[c].split()).casefold() for c in inputs)


def _refuse_repeats(rows: list[Row], request: TaskRequest, where: str) -> None:
    """One file split by the command: two rows with the same input could land in train and
    test alike (a demonstration the model is then asked about), so repeats are refused."""
    seen: dict[tuple[str, ...], str] = {}
    pairs = []
    for r in rows:
        key = _input_key(r, request.inputs)
        if key in seen:
            pairs.append((seen[key], r["index"]))
        else:
            seen[key] = r["index"]
    if pairs:
        shown = [f"rows {int(a) + 1} and {int(b) + 1}" for a, b in pairs]
        raise DataError(
            f"{where}: {len(pairs)} row(s) repeat another row's input ({first_few(shown, SHOWN)}"
            ", counted from 1, case and spaces ignored); one could land in train and the other in "
            "test, a demonstration the model is then asked about: remove the repeated rows"
        )


def _refuse_crossing(
    train: list[Row], test: list[Row], request: TaskRequest, test_where: str, train_where: str
) -> None:
    """A test row whose inputs equal a train row's (case and spaces ignored) could be shown
    as its own demonstration: refused, naming both rows."""
    keys = {_input_key(r, request.inputs): r["index"] for r in train}
    crossing = [(keys[k], r["index"]) for r in test if (k := _input_key(r, request.inputs)) in keys]
    if crossing:
        shown = [f"test row {int(b) + 1} = train row {int(a) + 1}" for a, b in crossing]
        raise DataError(
            f"{len(crossing)} row(s) are in both train ({train_where}) and test ({test_where}) "
            f"with the same input ({first_few(shown, SHOWN)}, counted from 1, case and spaces "
            "ignored): a model would be shown the answer it is asked for; remove them from one "
            "of the files"
        )


# ---- the files ---------------------------------------------------------------------------------
def _title(column: str) -> str:
    words = column.replace("_", " ").replace("-", " ").strip()
    return words[:1].upper() + words[1:]


def _query(inputs: Sequence[str]) -> str:
    return "\n".join(f"{_title(c)}: {{{{{c}}}}}" for c in inputs) + f"\n{ANSWER_PREFIX}"


def _base_prompt(
    instruction: str, demos: list[Row], query: str, inputs: Sequence[str], where: str
) -> str:
    """instruction, blank line, each demonstration (its query filled in, then its answer),
    blank line, the query template: LegalBench's base_prompt.txt. Checked by parsing it
    back, so the catalog reads exactly these demonstrations."""
    blocks = [instruction.strip()]
    for r in demos:
        blocks.append(f"{fill(query, r, where=BASE_FILE)} {r[GOLD_COLUMN]}")
    blocks.append(query)
    text = "\n\n".join(blocks) + "\n"
    parsed = parse_prompt(text, BASE_FILE)
    got = [(d.values, d.answer) for d in parsed.demos]
    want = [({c: r[c] for c in inputs}, r[GOLD_COLUMN]) for r in demos]
    if got != want or parsed.instruction != instruction.strip():
        bad = next(
            (
                r["index"]
                for r, g in zip(demos, got, strict=False)
                if ({c: r[c] for c in inputs}, r[GOLD_COLUMN]) != g
            ),
            demos[0]["index"] if demos else "?",
        )
        raise DataError(
            f"{where}: row {int(bad) + 1 if bad.isdigit() else bad} cannot be shown as a "
            "demonstration in base_prompt.txt (its text has blank lines, '{{' or a line "
            f"like '{ANSWER_PREFIX}' that reads as the prompt's own layout); use --demos 0, "
            "another --seed, or clean that row's text"
        )
    return text


def _tsv(columns: Sequence[str], rows: list[Row]) -> str:
    """A split in LegalBench's TSV dialect (tabs, double quotes), read back by `read_tsv`.

    Every field is quoted when one holds a carriage return: the writer leaves a lone
    carriage return unquoted (its line ends are newlines), and the reader ends a line there."""
    out = io.StringIO()
    if any("\r" in r[c] for r in rows for c in columns):
        writer = csv.writer(
            out, delimiter="\t", quotechar='"', lineterminator="\n", quoting=csv.QUOTE_ALL
        )
    else:
        writer = csv.writer(out, delimiter="\t", quotechar='"', lineterminator="\n")
    writer.writerow(columns)
    for r in rows:
        writer.writerow([r[c] for c in columns])
    return out.getvalue()


_TYPE_LINE = {
    "binary": "Binary classification",
    "extraction": "Extraction",
    "generation": "Generation",
}


def _readme(
    request: TaskRequest,
    inferred: Inferred,
    n_train: int,
    n_test: int,
    slices: tuple[str, ...] | None,
) -> str:
    labels = inferred.labels
    kind = _TYPE_LINE.get(inferred.task_type) or f"{len(labels or ())}-way classification"
    answer = f"Options: {', '.join(labels)}" if labels is not None else "free text (no label set)"
    lines = [
        f"# {request.name}",
        "",
        f"**Task type**: {kind}",
        "",
        f"**Metric**: {inferred.metric}",
        "",
        f"Made with `workbench task new` from {_shown_source(request)} ({n_train} train rows, "
        f"{n_test} test rows). Edit the prompt files freely; `task.json` holds the facts the "
        "workbench reads (task type, labels, metric, columns).",
        "",
        "## Instruction",
        "",
        request.instruction.strip(),
        "",
        "## Data column names",
        "",
        "- `index`: the row's number in its source file (from 0)",
    ]
    for c in request.inputs:
        lines.append(f"- `{c}`: an input the prompt shows (column {c!r} of the source)")
    lines.append(f"- `answer`: {answer} (column {request.answer!r} of the source)")
    if request.slice_column:
        shown = first_few(list(slices or ()), 6)
        lines.append(
            f"- `{request.slice_column}`: the slice each row belongs to ({shown}); not shown "
            "in the prompt"
        )
    return "\n".join(lines) + "\n"


def _shown_source(request: TaskRequest) -> str:
    if request.train_source:
        return f"{request.source} (test) and {request.train_source} (train)"
    return request.source
