"""The task type, label set and metric of a user's rows: inferred from the answers, or as the
user states them (checked against the answers).

Inference, on the answers as LegalBench compares them (`label_key`: `normalize_label`, with
spaces inside an answer collapsed, so a doubled or non-breaking space is no other label):

- two different answers: *binary*, those two are the labels;
- up to `MAX_CLASSES` different answers, each seen twice on average: *multi-class*;
- otherwise no label set: *extraction* when most answers are words of the input (a span to
  copy out), else *generation*.

Each label is written as the rows most often write it. Labels come in a fixed order (Yes
before No, True before False, else alphabetical), so the same data gives the same task.

Two answers that LegalBench's comparison makes one ('-1' and '1', 'A+' and 'A', '1.5' and
'15': punctuation is dropped) are refused as labels unless they differ only in case,
spacing, surrounding quotes or a closing full stop ('Yes', 'yes.'): merged, a three-way
task would be scored as two-way and a reply '1' counted right for a '-1' row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from promptlib.errors import DataError, first_few
from promptlib.taskmeta import USER_METRICS, USER_TASK_TYPES
from promptlib.tasks import normalize_label

#: the most different answers a task is inferred as classification with (more: state --labels)
MAX_CLASSES = 20
#: answers found in the input for at least this share of rows make an extraction task
EXTRACTION_SHARE = 0.5
#: pairs written positive first, as people say them ("Yes, No")
_POSITIVE_FIRST = (("yes", "no"), ("true", "false"))
#: what a user may call a metric -> its name in `experiments.metrics.METRICS`
METRIC_NAMES = {
    "balanced_accuracy": "balanced_accuracy",
    "balanced-accuracy": "balanced_accuracy",
    "f1": "macro_f1",
    "macro_f1": "macro_f1",
    "macro-f1": "macro_f1",
    "exact_match": "exact_match",
    "exact-match": "exact_match",
}
_CLASSIFICATION = ("binary", "multi-class")
_METRIC_WORDS = {
    "balanced_accuracy": "balanced accuracy",
    "macro_f1": "F1 (macro, over the labels)",
    "exact_match": "exact match",
}


@dataclass(frozen=True)
class Inferred:
    """The task's type, labels (None: no label set) and metric, and how they were found."""

    task_type: str
    labels: tuple[str, ...] | None
    metric: str
    how: str

    def line(self, n_rows: int) -> str:
        """One line for the command's output, e.g. 'binary: labels Yes, No (from 60 rows)'."""
        if self.labels is None:
            what = f"{self.task_type}: no label set ({self.how}, from {n_rows} rows)"
        else:
            shown = ", ".join(self.labels)
            what = f"{self.task_type}: labels {shown} ({self.how}, from {n_rows} rows)"
        return f"{what}; metric {_METRIC_WORDS[self.metric]}"


def label_key(answer: str) -> str:
    """An answer as labels are told apart: LegalBench's comparison (`normalize_label`) with
    the spaces inside it collapsed. 'Not applicable' written with a non-breaking or a doubled
    space (a copy from a web page, a typo) was another label, a binary task a 3-way one, and
    a reply 'Not applicable' wrong on those rows; the rows are then spelled as the label."""
    return " ".join(normalize_label(answer).split())


def metric_name(raw: str) -> str:
    """A metric as the user wrote it (f1, balanced-accuracy, ...) -> its canonical name."""
    key = raw.strip().lower()
    if key not in METRIC_NAMES:
        raise DataError(
            f"--metric {raw!r} is not a metric of user tasks; use balanced_accuracy, f1 "
            "(macro over the labels) or exact_match"
        )
    return METRIC_NAMES[key]


def parse_labels(raw: str) -> tuple[str, ...]:
    """``--labels "Yes,No"`` -> ('Yes', 'No'), checked (no empty or repeated label)."""
    items = tuple(x.strip() for x in raw.split(","))
    empty = [x for x in items if not label_key(x)]
    if empty or len(items) < 2:
        raise DataError(
            f"--labels {raw!r}: give at least two labels, comma-separated, none empty or only "
            'punctuation (e.g. --labels "Yes,No")'
        )
    seen: dict[str, str] = {}
    for x in items:
        if label_key(x) in seen:
            raise DataError(
                f"--labels {raw!r}: {seen[label_key(x)]!r} and {x!r} are one label once "
                "case and punctuation are dropped (as replies are compared); give each once"
            )
        seen[label_key(x)] = x
    return items


def _surface_forms(answers: Sequence[str]) -> dict[str, str]:
    """Normalised answer -> the way the rows most often write it (first seen on a tie)."""
    counts = Counter(answers)
    forms: dict[str, str] = {}
    for a in dict.fromkeys(answers):
        key = label_key(a)
        if key not in forms or counts[a] > counts[forms[key]]:
            forms[key] = a
    return forms


def _spelling(answer: str) -> str:
    """An answer as a person reads it, case, spacing, surrounding quotes and a closing full
    stop (or ! ?) set aside: two answers equal here are one label written two ways."""
    return " ".join(answer.split()).casefold().strip("\"'`").rstrip(".!?").strip()


def _refuse_merged(answers: Sequence[str], labels: Sequence[str], where: str) -> None:
    """Refuse an answer that the comparison (`label_key`) makes one with a label it
    does not merely respell: the metric could not tell the two apart."""
    by_key = {label_key(x): x for x in labels}
    for a in dict.fromkeys(answers):
        label = by_key.get(label_key(a))
        if label is not None and _spelling(a) != _spelling(label):
            raise DataError(
                f"{where}: answers {label!r} and {a!r} are one label once punctuation and "
                "case are dropped, as replies are compared (LegalBench's normalisation), so "
                "no score could tell them apart; write them one way, or rename one of them "
                "(e.g. 'minus 1', 'A plus')"
            )


def label_order(labels: Sequence[str]) -> tuple[str, ...]:
    """Yes before No and True before False; any other set alphabetically (case-blind)."""
    keys = sorted(label_key(x) for x in labels)
    for pos, neg in _POSITIVE_FIRST:
        if keys == sorted([pos, neg]):
            by = {label_key(x): x for x in labels}
            return (by[pos], by[neg])
    return tuple(sorted(labels, key=lambda x: (x.casefold(), x)))


def infer(
    answers: Sequence[str],
    inputs: Sequence[str],
    *,
    task_type: str | None = None,
    labels: tuple[str, ...] | None = None,
    metric: str | None = None,
    where: str = "the answer column",
) -> Inferred:
    """The task's type, labels and metric from its answers (and the inputs, for extraction).

    `task_type`, `labels` and `metric` are the user's, when given: checked, never overridden.
    Every refusal is a `DataError` naming `where` and what to do.
    """
    if task_type is not None and task_type not in USER_TASK_TYPES:
        raise DataError(f"--type {task_type!r} is none of {', '.join(USER_TASK_TYPES)}")
    forms = _surface_forms(answers)
    if labels is not None:
        kind = task_type or ("binary" if len(labels) == 2 else "multi-class")
        if kind not in _CLASSIFICATION:
            raise DataError(
                f"--labels gives a label set, but --type {kind} has none; drop one of them"
            )
        if kind == "binary" and len(labels) != 2:
            raise DataError(f"--type binary needs two labels, but --labels gives {len(labels)}")
        given = {label_key(x) for x in labels}
        stray = [forms[k] for k in forms if k not in given]
        if stray:
            raise DataError(
                f"{where} holds {len(stray)} answer(s) not in --labels ({', '.join(labels)}): "
                f"{first_few([repr(x) for x in stray])}; add them to --labels or fix those rows"
            )
        _refuse_merged(answers, labels, where)
        return Inferred(kind, tuple(labels), _metric(metric, kind), "as --labels gives")
    n_labels = len(forms)
    few = n_labels == 2 or (n_labels <= MAX_CLASSES and len(answers) >= 2 * n_labels)
    if task_type in _CLASSIFICATION or (task_type is None and few):  # a label set
        _refuse_merged(answers, list(forms.values()), where)
    if task_type in _CLASSIFICATION:
        if task_type == "binary" and n_labels != 2:
            raise DataError(
                f"--type binary needs two different answers, but {where} holds {n_labels} "
                f"({first_few([repr(x) for x in forms.values()])}); use --type multi-class, "
                "or fix the answers"
            )
        return Inferred(
            task_type,
            label_order(list(forms.values())),
            _metric(metric, task_type),
            "as --type says",
        )
    if task_type is not None:  # extraction or generation, as the user says
        return Inferred(task_type, None, _metric(metric, task_type), "as --type says")
    if n_labels == 2:
        kind = "binary"
    elif few:
        kind = "multi-class"
    else:
        found = sum(_inside(a, text) for a, text in zip(answers, inputs, strict=True))
        kind = "extraction" if found >= EXTRACTION_SHARE * len(answers) else "generation"
        how = (
            f"{n_labels} different answers, "
            + ("most of them words of the input" if kind == "extraction" else "free text")
            + "; to classify instead, give --labels"
        )
        return Inferred(kind, None, _metric(metric, kind), how)
    how = "inferred from the answers; --labels to set them"
    return Inferred(kind, label_order(list(forms.values())), _metric(metric, kind), how)


def _inside(answer: str, text: str) -> bool:
    a = " ".join(answer.split()).casefold()
    return bool(a) and a in " ".join(text.split()).casefold()


def _metric(metric: str | None, task_type: str) -> str:
    """The metric asked for (checked against the type), else the type's default."""
    classification = task_type in _CLASSIFICATION
    if metric is None:
        return "balanced_accuracy" if classification else "exact_match"
    name = metric_name(metric) if metric not in USER_METRICS else metric
    if not classification and name != "exact_match":
        raise DataError(
            f"--metric {metric} needs a label set, and a {task_type} task has none; use "
            "--metric exact_match, or give --labels"
        )
    return name
