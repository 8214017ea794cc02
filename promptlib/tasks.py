"""The task catalog: one frozen `TaskSpec` per LegalBench task, and loaded `Task`s.

Facts come from the data (label sets, split sizes, prompt files) and from each task's
README (reasoning category, task type). A fact that cannot be derived is recorded as
`None` / "unknown" rather than guessed.

A classification task's label set is what LegalBench states for the task, not only what the
local rows happen to hold (the shipped data is often a sample): see `Task.spec`.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from promptlib.data import SPLITS, DataSource, Table, TaskFiles, read_tsv
from promptlib.errors import DataError, TemplateError, WorkbenchError, first_few
from promptlib.taskmeta import META_FILE, TaskMeta
from promptlib.templates import ParsedPrompt, parse_prompt, placeholders

if TYPE_CHECKING:
    import datasets
    import pandas as pd

# Official metric names, as LegalBench's evaluation code (evaluation.py) assigns them:
# every task uses exact-match balanced accuracy except these. successor_liability is in the
# code's balanced-accuracy list although the paper reports F1 for it; the code is the default.
SPECIAL_METRICS: dict[str, str] = {
    "sara_numeric": "sara_numeric_within_10pct",
    "citation_prediction_open": "citation_open_contains",
    "definition_extraction": "definition_extraction_stemmed_match",
    "ssla_company_defendants": "ssla_f1",
    "ssla_individual_defendants": "ssla_f1",
    "ssla_plaintiff": "ssla_f1",
    "rule_qa": "manual",
}
DEFAULT_METRIC = "balanced_accuracy"

# README "Legal reasoning type" -> the paper's six categories.
_CATEGORY = {
    "issue-spotting": "issue",
    "rule-recall": "rule",
    "rule-application/rule-conclusion": "conclusion",
    "application/conclusion": "conclusion",
    "interpretation": "interpretation",
    "rhetorical-analysis": "rhetoric",
}

CLASSIFICATION_TYPES = ("binary", "multi-class", "multi-label")
TASK_TYPES = (*CLASSIFICATION_TYPES, "extraction", "generation", "unknown")

# Where a README's task type contradicts the data, the data wins; each override says why.
_TYPE_OVERRIDES: dict[str, tuple[str, str]] = {
    "sara_numeric": ("generation", "answers are dollar amounts, scored numerically"),
    "successor_liability": ("multi-label", "answers list several exceptions, comma-joined"),
}


def metric_for(task: str) -> str:
    return SPECIAL_METRICS.get(task, DEFAULT_METRIC)


def _readme_field(readme: str | None, label: str) -> str | None:
    if readme is None:
        return None
    m = re.search(rf"\*\*{re.escape(label)}\*\*:\s*(.+)", readme)
    return m.group(1).strip() if m else None


def _task_type(name: str, readme: str | None) -> str:
    if name in _TYPE_OVERRIDES:
        return _TYPE_OVERRIDES[name][0]
    raw = (_readme_field(readme, "Task type") or "").lower()
    if not raw:
        return "unknown"
    if "binary" in raw or "yes/no" in raw:
        return "binary"
    if re.search(r"\d+-way classification", raw):
        return "multi-class"
    if "extraction" in raw:
        return "extraction"
    if "generation" in raw:
        return "generation"
    return "unknown"


def _category(readme: str | None) -> str | None:
    raw = _readme_field(readme, "Legal reasoning type")
    return _CATEGORY.get(raw.lower()) if raw else None


def _claude_label_order(files: TaskFiles) -> list[str]:
    """The label order LegalBench's Claude prompt gives ("Reply with either: a, b"), if any."""
    if "claude_prompt.txt" not in files.prompt_files():
        return []
    m = re.search(r"Reply with either:\s*(.+)", files.read_prompt("claude_prompt.txt"))
    return [x.strip() for x in m.group(1).split(",")] if m else []


# ---- label sets ------------------------------------------------------------------------------
_PUNCT = str.maketrans("", "", string.punctuation)
#: A Claude prompt's list of replies: "Reply with either: a, b" or "Reply with one or more of:".
_REPLY_LIST = re.compile(r"Reply with (?:either|one or more of):[ \t]*([^\n]+)")
#: A multiple-choice README's option block (MAUD): "Options:" then lines "A: <text>".
_OPTION_BLOCK = re.compile(r"^[ \t]*Options:[ \t]*\n((?:[ \t]*[A-Z][ \t]*:[^\n]*(?:\n|$))+)", re.M)
#: The README's line describing the answer column (the 2023 data called it `label`).
_ANSWER_COLUMN = re.compile(r"^[ \t]*-[ \t]*[`\"](?:answer|label)[`\"][ \t]*:[ \t]*([^\n]*)", re.M)
_STATED_LIST = re.compile(r"\b(?:options|choices)\b(?:[ \t]+are)?[ \t]*:?[ \t]*([^.]+)", re.I)
_SLASH_LIST = re.compile(r"\(([^()/]+(?:/[^()/]+)+)\)")
_QUOTED = re.compile(r"`([^`]+)`|\(\"([^\"]+)\"\)")
_LIST_SEP = re.compile(r"\s*,\s*(?:(?:and|or)\s+)?|\s+(?:and|or)\s+")


def normalize_label(text: str) -> str:
    """A label as LegalBench compares it (punctuation dropped, stripped, lower-cased).

    The same as `experiments.metrics.normalize` without stemming (the tests check they
    agree); repeated here because that module imports this one.
    """
    return text.translate(_PUNCT).strip().lower()


def _parts(answer: str, multi_label: bool) -> list[str]:
    """A multi-label answer ('de facto merger,mere continuation') is one label per part."""
    return [a.strip() for a in answer.split(",")] if multi_label else [answer]


def _clean(item: str) -> str:
    return item.strip().strip("`\"'").strip().rstrip(".").strip()


def _reply_list_labels(text: str) -> list[str]:
    """The replies a Claude prompt asks for ("Reply with either: Yes, No")."""
    items = [_clean(x) for m in _REPLY_LIST.finditer(text) for x in m.group(1).split(",")]
    return [x for x in items if normalize_label(x)]


def _readme_labels(readme: str) -> list[str]:
    """Labels a README states in a form that parses without guessing.

    Two forms: a multiple-choice option block ("Options:" then "A: ...", whose answers are
    the letters), and the answer column's description in "Data column names" when it lists
    its values ("Options: Yes, No", "There are three options: a, b, c", "(Yes/No)",
    "`Yes` if ... and `No` otherwise", '("Yes") or not ("No")'). Prose elsewhere is ignored.
    """
    found: list[str] = []
    for block in _OPTION_BLOCK.finditer(readme):
        found += [line.split(":", 1)[0].strip() for line in block.group(1).splitlines()]
    for line in _ANSWER_COLUMN.finditer(readme):
        desc = line.group(1)
        if m := _STATED_LIST.search(desc):
            found += _LIST_SEP.split(m.group(1).strip())
        elif m := _SLASH_LIST.search(desc):
            found += m.group(1).split("/")
        else:
            found += [a or b for a, b in _QUOTED.findall(desc)]
    items = [_clean(x) for x in found]
    return [x for x in items if normalize_label(x)]


def _shown(items: list[str], most: int = 6) -> str:
    return ", ".join(items[:most]) + (", …" if len(items) > most else "")


class _LabelSet:
    """Labels gathered from several sources, one surface form per normalised label.

    The first source to give a label fixes its surface form, so sources are added in order
    of preference: the splits' rows, then prompt demonstrations, the Claude prompt, README.
    """

    def __init__(self) -> None:
        self.form: dict[str, str] = {}
        self.sources: dict[str, list[str]] = {}

    def keys(self) -> set[str]:
        return set(self.form)

    def add(self, label: str, source: str) -> None:
        key = normalize_label(label)
        self.form.setdefault(key, label)
        where = self.sources.setdefault(key, [])
        if source not in where:
            where.append(source)


@dataclass(frozen=True)
class TaskSpec:
    """What is known about a task. Frozen: the same data always gives the same spec."""

    name: str
    category: str | None
    task_type: str
    labels: tuple[str, ...] | None
    metric: str
    prompt_files: tuple[str, ...]
    n_train: int | None
    n_test: int | None
    columns: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())
    #: Per label, in `labels` order, the files that give it (e.g. "train.tsv", "README.md").
    label_sources: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())
    #: made by `workbench task new` (its facts from task.json), not one of LegalBench's
    user_task: bool = False
    #: a user task's column that splits its rows into slices (reports by slice), if any
    slice_column: str | None = None
    #: a user task's longest answer in characters, when it has no label set: its replies
    #: need room for it (`experiments.trials.spec.decoding_for`)
    longest_answer: int | None = None

    @property
    def is_classification(self) -> bool:
        return self.task_type in CLASSIFICATION_TYPES

    def sources_of(self, label: str) -> tuple[str, ...]:
        """The files that state `label` (empty if it is not one of this task's labels)."""
        return dict(self.label_sources).get(label, ())

    @property
    def stated_only(self) -> tuple[str, ...]:
        """Labels no split holds, known only from the prompt files or README (a sample's
        rows lack them); earlier versions did not have them, see `ResolvedTrial.identity`."""
        return tuple(
            label
            for label, src in self.label_sources
            if not any(s in ("train.tsv", "test.tsv") for s in src)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "category": self.category,
            "task_type": self.task_type,
            "labels": list(self.labels) if self.labels is not None else None,
            "metric": self.metric,
            "prompt_files": list(self.prompt_files),
            "n_train": self.n_train,
            "n_test": self.n_test,
            "columns": list(self.columns),
            "notes": list(self.notes),
            "label_sources": (
                {label: list(src) for label, src in self.label_sources}
                if self.labels is not None
                else None
            ),
            # only a user task's JSON has these (LegalBench's stays as it was)
            **({"user_task": True, "slice_column": self.slice_column} if self.user_task else {}),
        }


@dataclass(frozen=True)
class TaskProblem:
    """A task whose spec cannot be built (unreadable TSV, prompt or README), and why."""

    name: str
    error: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "error": self.error}


class Task:
    """A task loaded from a data source: its spec, splits and parsed prompt files."""

    def __init__(self, files: TaskFiles) -> None:
        self.files = files
        self.name = files.name
        self._tables: dict[str, Table] = {}
        self._prompts: dict[str, ParsedPrompt] = {}

    def table(self, split: str) -> Table:
        """A split as read from its TSV (every column kept, values as strings)."""
        if split not in SPLITS:
            raise DataError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
        if split not in self._tables:
            path = self.files.split_path(split)
            if not path.is_file():
                raise DataError(
                    f"task {self.name!r} has no {split} split ({path} is absent); "
                    + (
                        "use --split train, or the full data from Hugging Face (--hf)"
                        if split == "test"
                        else "re-download the task's data"
                    )
                )
            self._tables[split] = read_tsv(path)
        return self._tables[split]

    def has_split(self, split: str) -> bool:
        return self.files.has_split(split)

    def rows(self, split: str) -> list[dict[str, str]]:
        """A split as a list of row dicts (a fresh list; the rows are shared, do not mutate)."""
        return list(self.table(split).rows)

    def dataset(self, split: str) -> datasets.Dataset:
        """A split as a `datasets.Dataset`, every column kept as a string."""
        import datasets

        t = self.table(split)
        return datasets.Dataset.from_dict({c: t.column(c) for c in t.columns})

    def frame(self, split: str) -> pd.DataFrame:
        """A split as a pandas DataFrame of strings, for analysis."""
        import pandas as pd

        t = self.table(split)
        return pd.DataFrame(list(t.rows), columns=list(t.columns), dtype=str)

    def prompt(self, filename: str) -> ParsedPrompt:
        if filename not in self._prompts:
            text = self.files.read_prompt(filename)
            self._prompts[filename] = parse_prompt(text, f"{self.name}/{filename}")
        return self._prompts[filename]

    def check_columns(self, template: str, split: str, where: str) -> None:
        """Fail early, naming the file, if a template needs a column the split lacks."""
        cols = set(self.table(split).columns)
        missing = [c for c in placeholders(template) if c not in cols]
        if missing:
            raise TemplateError(
                f"{where} of task {self.name!r} uses "
                + ", ".join(f"{{{{{c}}}}}" for c in missing)
                + f" but {self.files.split_path(split)} has no such column "
                f"(columns: {', '.join(sorted(cols))}); fix the template or the TSV header"
            )

    @cached_property
    def spec(self) -> TaskSpec:
        if self.files.meta is not None:
            return self._declared_spec(self.files.meta)
        readme = self.files.readme()
        notes: list[str] = []
        task_type = _task_type(self.name, readme)
        if self.name in _TYPE_OVERRIDES:
            notes.append(f"task type set to {task_type}: {_TYPE_OVERRIDES[self.name][1]}")
        train = self.table("train") if self.has_split("train") else None
        test = self.table("test") if self.has_split("test") else None
        frames = [f for f in (train, test) if f is not None]
        labels: tuple[str, ...] | None = None
        label_sources: tuple[tuple[str, tuple[str, ...]], ...] = ()
        if task_type in CLASSIFICATION_TYPES:
            splits = [(s, f) for s, f in (("train", train), ("test", test)) if f is not None]
            multi = task_type == "multi-label"
            labels, label_sources = self._labels(splits, readme, multi, notes)
        for empty in self.files.empty_prompt_files():
            notes.append(f"{empty} is empty in this data")
        for split, f in (("train", train), ("test", test)):
            if f is None:
                notes.append(f"no {split} split in this data")
        cols = list(dict.fromkeys(c for f in frames for c in f.columns))
        return TaskSpec(
            name=self.name,
            category=_category(readme),
            task_type=task_type,
            labels=labels,
            metric=metric_for(self.name),
            prompt_files=self.files.prompt_files(),
            n_train=len(train) if train is not None else None,
            n_test=len(test) if test is not None else None,
            columns=tuple(cols),
            notes=tuple(notes),
            label_sources=label_sources,
        )

    def _declared_spec(self, meta: TaskMeta) -> TaskSpec:
        """A user task's spec: its facts as task.json declares them, checked against its rows
        (an answer outside the label set, e.g. after a hand edit of a TSV, is refused)."""
        tables = {s: self.table(s) for s in SPLITS if self.has_split(s)}
        notes: list[str] = [f"your own task (rows from {meta.source or 'unknown'})"]
        label_sources: tuple[tuple[str, tuple[str, ...]], ...] = ()
        if meta.labels is not None:
            known = {normalize_label(x): x for x in meta.labels}
            found: dict[str, list[str]] = {x: [] for x in meta.labels}
            for split, table in tables.items():
                answers = dict.fromkeys(table.column("answer"))
                stray = [a for a in answers if normalize_label(a) not in known]
                if stray:
                    raise DataError(
                        f"{table.path}: answer(s) {first_few([repr(a) for a in stray])} are "
                        f"not in the label set ({', '.join(meta.labels)}) that "
                        f"{self.files.data_dir / META_FILE} declares; fix those rows or "
                        "recreate the task with workbench task new --force"
                    )
                for a in answers:
                    where = found[known[normalize_label(a)]]
                    if f"{split}.tsv" not in where:
                        where.append(f"{split}.tsv")
            label_sources = tuple((x, (*found[x], META_FILE)) for x in meta.labels)
        else:
            notes.append(
                "no label set: a reply that is no valid answer cannot be detected (no invalid rate)"
            )
        for split in SPLITS:
            if split not in tables:
                notes.append(f"no {split} split in this data")
        columns = list(dict.fromkeys(c for t in tables.values() for c in t.columns))
        train, test = tables.get("train"), tables.get("test")
        return TaskSpec(
            name=self.name,
            category=None,
            task_type=meta.task_type,
            labels=meta.labels,
            metric=meta.metric,
            prompt_files=self.files.prompt_files(),
            n_train=len(train) if train is not None else None,
            n_test=len(test) if test is not None else None,
            columns=tuple(columns),
            notes=tuple(notes),
            label_sources=label_sources,
            user_task=True,
            slice_column=meta.slice_column,
            longest_answer=None
            if meta.labels is not None
            else max((len(a) for t in tables.values() for a in t.column("answer")), default=0),
        )

    def _labels(
        self,
        splits: list[tuple[str, Table]],
        readme: str | None,
        multi_label: bool,
        notes: list[str],
    ) -> tuple[tuple[str, ...] | None, tuple[tuple[str, tuple[str, ...]], ...]]:
        """The union of the labels LegalBench states for this task, and where each came from.

        Sources, in order of preference for a label's surface form: (d) the answers of every
        split present; (a) the answers of the demonstrations in the prompt files (application
        prompts excepted: their answers are explanations); (b) the Claude prompts' reply lists;
        (c) the README's option block or answer-column description (`_readme_labels`). The
        local rows are often a sample, so (a)-(c) supply labels a full split holds. A stated
        source is used only if it shares a label with the answers (the rows', or without rows
        the demonstrations'): MAUD's Claude list "Option A, Option B" is not the answers' form
        ("A") and is left out, with a note. Compared as LegalBench normalises.

        Order: the labels of claude_prompt.txt's "Reply with either" list in its order, then
        the rest sorted: exactly the tuple of earlier versions when the set is unchanged, as
        trial ids (log-likelihood continuations, max_tokens) depend on it.

        Long because of this docstring: the code (under 80 lines) gathers the four sources
        in the order of preference above, which the pinned trial ids depend on.
        """
        found = _LabelSet()
        for split, table in splits:
            # each distinct answer once, in file order: adding one twice changes nothing
            for answer in dict.fromkeys(table.column("answer")):
                for part in _parts(answer, multi_label):
                    if normalize_label(part):  # 'a,' has no second label: '' is none
                        found.add(part, f"{split}.tsv")

        def stated(where: str, items: list[str], anchor: set[str]) -> None:
            """Add a stated source's labels if they share one with `anchor` (else a note)."""
            if not items:
                return
            keys = {normalize_label(x) for x in items}
            if not anchor:
                notes.append(
                    f"labels in {where} ({_shown(items)}) not used: there are no answers "
                    "to check their form against"
                )
            elif keys.isdisjoint(anchor):
                known = sorted(found.form[k] for k in anchor)
                notes.append(
                    f"labels in {where} ({_shown(items)}) not used: none is an answer of "
                    f"this task ({_shown(known)}), so they are not in the answers' form"
                )
            else:
                for item in items:
                    found.add(item, where)

        rows = found.keys()
        prompt_files = self.files.prompt_files()
        for filename in prompt_files:
            if "application" in filename:
                continue
            try:
                demos = self.prompt(filename).demos
            except (DataError, TemplateError) as e:
                notes.append(f"labels: demonstrations of {filename} not read ({e})")
                continue
            items = [p for d in demos for p in _parts(d.answer, multi_label)]
            items = [p for p in items if normalize_label(p)]
            if not splits:
                for item in items:
                    found.add(item, filename)
            else:
                stated(filename, items, rows)
        answers = found.keys()  # the rows' and the demonstrations' answers
        for filename in prompt_files:
            if filename.startswith("claude"):
                try:
                    text = self.files.read_prompt(filename)
                except DataError as e:
                    notes.append(f"labels: {filename} not read ({e})")
                    continue
                stated(filename, _reply_list_labels(text), answers)
        if readme is not None:
            stated(self._readme_name(), _readme_labels(readme), answers)

        if not found.form:
            return None, ()
        forms = set(found.form.values())
        order = [x for x in dict.fromkeys(_claude_label_order(self.files)) if x in forms]
        labels = tuple(order + sorted(forms - set(order)))
        sources = {found.form[k]: tuple(v) for k, v in found.sources.items()}
        row_files = [f"{split}.tsv" for split, _ in splits]
        extra = [x for x in labels if not set(row_files) & set(sources[x])]
        by_source: dict[tuple[str, ...], list[str]] = {}
        for x in extra:
            by_source.setdefault(sources[x], []).append(x)
        where_rows = (
            f"not in the local rows ({', '.join(row_files)})" if row_files else "no local rows"
        )
        for src, xs in by_source.items():
            notes.append(
                f"label{'s' if len(xs) > 1 else ''} {_shown(xs, 10)} from {', '.join(src)}, "
                + where_rows
            )
        return labels, tuple((x, sources[x]) for x in labels)

    def _readme_name(self) -> str:
        """The README's file name as `TaskFiles.readme` finds it (two tasks use README.MD)."""
        for d in (self.files.prompt_dir, self.files.data_dir):
            for name in ("README.md", "README.MD"):
                if d is not None and (d / name).is_file():
                    return name
        return "README.md"


class Catalog:
    """Every task of a data source, loaded lazily and kept once per process."""

    def __init__(self, source: DataSource) -> None:
        self.source = source
        self._tasks: dict[str, Task] = {}

    def names(self) -> tuple[str, ...]:
        return self.source.names()

    def task(self, name: str) -> Task:
        if name not in self._tasks:
            self._tasks[name] = Task(self.source.task(name))
        return self._tasks[name]

    def specs(self) -> list[TaskSpec]:
        """Every task's spec; a broken task raises its error (`survey` lists around it)."""
        return [self.task(n).spec for n in self.names()]

    def survey(self) -> list[TaskSpec | TaskProblem]:
        """Every task in name order: its spec, or a `TaskProblem` saying why it has none.

        One broken task (e.g. a malformed or non-UTF-8 TSV) does not hide the others;
        asking for it directly (`task(name).spec`) still raises its error.
        """
        out: list[TaskSpec | TaskProblem] = []
        for name in self.names():
            try:
                out.append(self.task(name).spec)
            except WorkbenchError as e:
                out.append(TaskProblem(name, str(e).replace("\n", " ")))
        return out
