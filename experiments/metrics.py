"""LegalBench's metrics, re-implemented to reproduce its official evaluation code exactly.

LegalBench's `evaluation.py` scores every task with exact-match balanced accuracy after a
light normalisation (punctuation removed, whitespace stripped, lower-cased), except:

- ``sara_numeric``: share of generations whose first number is within 10% of the answer;
- ``definition_extraction``: a stemmed match of any comma-separated generated term;
- ``citation_prediction_open``: the normalised answer appears inside the generation;
- ``ssla_*``: F1 over comma-separated names, counted the way the official code counts them;
- ``rule_qa``: graded by hand, so there is no automatic score.

A user's own task (``workbench task new``) declares its metric in its task.json: balanced
accuracy, ``macro_f1`` or ``exact_match`` (`task_metric`).

An application prompt's explanation (``instruction=application``) is scored for its
conclusion alone: `promptlib.conclusions.parse_conclusion` finds the label it concludes, and
the task's official metric scores those labels under the name ``rule_conclusion_<metric>``
(`rule_conclusion_metric`), so no output or MLflow run reads it as a classification score.
An explanation with no conclusion, or two that disagree, is unparsed: wrong, and invalid.

Where the paper and the code disagree the code is the default: the code scores
``successor_liability`` with balanced accuracy, the paper reports F1 over the exceptions;
``definition="paper"`` selects the latter.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

import numpy as np

from promptlib.errors import WorkbenchError
from promptlib.tasks import Task, metric_for

Definition = Literal["code", "paper"]
_PUNCT = str.maketrans("", "", string.punctuation)
SUCCESSOR_LIABILITY_EXCEPTIONS = (
    "express agreement",
    "fraudulent conveyance",
    "de facto merger",
    "mere continuation",
)


class ManualEvaluationRequired(WorkbenchError):
    """The task is graded by a person (rule_qa, application prompts)."""


@cache
def _stemmer() -> Callable[[str], str]:
    from nltk.stem.porter import PorterStemmer

    stem: Callable[[str], str] = PorterStemmer().stem
    return stem


def normalize(text: object, stem: bool = False) -> str:
    """LegalBench's normalisation: drop punctuation, strip, lower-case, optionally stem.

    The stemmer sees the whole string as one word, as in the official code.
    """
    out = str(text).translate(_PUNCT).strip().lower()
    return _stemmer()(out) if stem else out


def same_label(generation: object, answer: object) -> bool:
    """Whether a generation names the answer, as LegalBench compares them (normalised exact
    match). An empty generation never does, even against an empty answer: the workbench
    refuses those when it reads them, and nothing must ever count as a right answer."""
    g = normalize(generation)
    return bool(g) and g == normalize(answer)


def balanced_accuracy(generations: Sequence[str], answers: Sequence[str]) -> float:
    """Mean recall over the answer classes, on normalised exact matches.

    Equal to sklearn's `balanced_accuracy_score` on the normalised strings, which is what
    LegalBench calls, to the last bit: the recalls are averaged in sklearn's order (the
    classes sorted), as floating-point sums depend on their order (the tests check the two
    agree exactly). Computed here because importing sklearn costs more than a cached trial
    takes. A gold answer no local file documents is a class like any other, as in sklearn.
    """
    y_true = [normalize(a) for a in answers]
    y_pred = [normalize(g) for g in generations]
    if len(y_true) != len(y_pred):
        raise ValueError("generations and answers differ in length")
    hits: dict[str, list[bool]] = {}
    for t, p in zip(y_true, y_pred, strict=True):
        hits.setdefault(t, []).append(bool(p) and p == t)  # `same_label`
    return float(np.mean([np.mean(hits[c]) for c in sorted(hits)]))


def sara_numeric(generations: Sequence[str], answers: Sequence[str]) -> float:
    """Share of generations whose first integer is within 10% of the dollar answer.

    Commas and full stops are removed before looking for the number (so "$1,234.56" reads
    as 123456), a generation with no number counts as 0, and the answer gets +0.1 in the
    denominator, all as in the official code.
    """
    hits = []
    for gen, ans in zip(generations, answers, strict=True):
        digits = re.search(r"\d+", str(gen).replace(",", "").replace(".", ""))
        predicted = int(digits.group()) if digits else 0
        truth = int(str(ans).replace("$", ""))
        hits.append(abs(predicted / (truth + 0.1) - 1.0) < 0.1)
    return float(np.mean(hits))


def successor_liability_f1(generations: Sequence[str], answers: Sequence[str]) -> float:
    """The paper's F1 over exceptions named in the generation (substring match)."""
    return _f1_of_rows(successor_liability_counts, generations, answers)


def successor_liability_counts(gen: str, ans: str) -> tuple[int, int, int]:
    """One row's (tp, fp, fn) of `successor_liability_f1` (the stats' per-row statistics)."""
    tp = fp = 0
    remaining = str(ans).split(",")
    for exc in (e for e in SUCCESSOR_LIABILITY_EXCEPTIONS if e in str(gen)):
        if exc in remaining:
            remaining.remove(exc)
            tp += 1
        else:
            fp += 1
    return tp, fp, len(remaining)


def citation_open(generations: Sequence[str], answers: Sequence[str]) -> float:
    """Share of generations that contain the normalised case name (an empty one is in none)."""
    hits = [
        bool(a) and a in normalize(g)
        for g, a in zip(generations, (normalize(a) for a in answers), strict=True)
    ]
    return float(np.mean(hits))


def definition_extraction(generations: Sequence[str], answers: Sequence[str]) -> float:
    """Share of rows where any generated term matches any accepted term after stemming (an
    empty term, in the answer or the generation, matches nothing)."""
    correct = 0
    for gen, ans in zip(generations, answers, strict=True):
        accepted = {normalize(a, stem=True) for a in str(ans).split(",")} - {""}
        correct += any(normalize(g, stem=True) in accepted for g in str(gen).split(","))
    return correct / len(answers)


def ssla_f1(generations: Sequence[str], answers: Sequence[str]) -> float:
    """F1 over names, counted as the official code counts.

    Each answer name is a hit if it is a substring of a not-yet-used generated name (which is
    then used up), else a miss; after *each* answer name, every generated name still unused
    adds a false positive. That last rule over-counts false positives compared with a
    textbook F1; it is kept because it is what LegalBench reports. An empty answer name (in
    'A,') is in every string: it is a miss, never a hit.
    """
    return _f1_of_rows(ssla_counts, generations, answers)


def ssla_counts(gen: str, ans: str) -> tuple[int, int, int]:
    """One row's (tp, fp, fn) of `ssla_f1` (the stats' per-row statistics)."""
    tp = fp = fn = 0
    gens = [normalize(g) for g in str(gen).split(",")]
    for name in (normalize(a) for a in str(ans).split(",")):
        j = next((i for i, g in enumerate(gens) if name and name in g), None)
        if j is None:
            fn += 1
        else:
            tp += 1
            del gens[j]
        fp += len(gens)
    return tp, fp, fn


def _f1_of_rows(
    count: Callable[[str, str], tuple[int, int, int]],
    generations: Sequence[str],
    answers: Sequence[str],
) -> float:
    """F1 of the (tp, fp, fn) that `count` gives each row, summed over the rows."""
    tp = fp = fn = 0
    for gen, ans in zip(generations, answers, strict=True):
        t, p, n = count(gen, ans)
        tp, fp, fn = tp + t, fp + p, fn + n
    return _f1(tp, fp, fn)


def _f1(tp: int, fp: int, fn: int) -> float:
    denom = 2 * tp + fp + fn
    return 2 * tp / denom if denom else 0.0


def exact_match(generations: Sequence[str], answers: Sequence[str]) -> float:
    """Share of generations equal to their answer (LegalBench's normalisation, `same_label`):
    the metric of a user's extraction or generation task (`workbench task new`)."""
    if len(generations) != len(answers):
        raise ValueError("generations and answers differ in length")
    return float(np.mean([same_label(g, a) for g, a in zip(generations, answers, strict=True)]))


def macro_f1(generations: Sequence[str], answers: Sequence[str]) -> float:
    """F1 averaged over the answer classes (normalised exact match), a user task's choice.

    The classes are the answers present, as in `balanced_accuracy`: a reply that is no class
    (invalid) is a miss of its row's class and a false positive of none. Equal to sklearn's
    ``f1_score(y_true, y_pred, labels=sorted(set(y_true)), average="macro")`` on the
    normalised strings (the tests check it), a class with no true or predicted row counting 0.
    """
    y_true = [normalize(a) for a in answers]
    y_pred = [normalize(g) for g in generations]
    if len(y_true) != len(y_pred):
        raise ValueError("generations and answers differ in length")
    classes = sorted(set(y_true))
    return float(np.mean([_f1(*macro_f1_counts(y_true, y_pred, c)) for c in classes]))


def macro_f1_counts(y_true: Sequence[str], y_pred: Sequence[str], cls: str) -> tuple[int, int, int]:
    """(tp, fp, fn) of one class over normalised answers and replies (an empty reply is none)."""
    tp = sum(bool(p) and p == t == cls for t, p in zip(y_true, y_pred, strict=True))
    fp = sum(bool(p) and p == cls != t for t, p in zip(y_true, y_pred, strict=True))
    fn = sum(t == cls and not (bool(p) and p == t) for t, p in zip(y_true, y_pred, strict=True))
    return tp, fp, fn


METRICS: dict[str, Callable[[Sequence[str], Sequence[str]], float]] = {
    "balanced_accuracy": balanced_accuracy,
    "exact_match": exact_match,
    "macro_f1": macro_f1,
    "sara_numeric_within_10pct": sara_numeric,
    "citation_open_contains": citation_open,
    "definition_extraction_stemmed_match": definition_extraction,
    "ssla_f1": ssla_f1,
    "successor_liability_f1": successor_liability_f1,
}


RULE_CONCLUSION = "rule_conclusion_"
"""The prefix of a rule-conclusion metric: an official metric scored on the conclusions
parsed from explanations (an application trial's), never on raw generations."""


def rule_conclusion_metric(official: str) -> str:
    """The name of `official` scored on explanations' parsed conclusions."""
    if official not in METRICS:
        raise WorkbenchError(
            f"metric {official!r} has no rule-conclusion form (known: {', '.join(METRICS)})"
        )
    return RULE_CONCLUSION + official


def base_metric(name: str) -> str:
    """The official metric a metric name computes: a rule-conclusion metric's own, else itself
    (what the statistics key their methods on: balanced accuracy stays stratified)."""
    return name.removeprefix(RULE_CONCLUSION) if name.startswith(RULE_CONCLUSION) else name


def is_rule_conclusion(name: str) -> bool:
    return name.startswith(RULE_CONCLUSION)


for _name, _fn in list(METRICS.items()):  # the same functions, on parsed conclusions
    METRICS[RULE_CONCLUSION + _name] = _fn


def row_correct(metric: str, generation: str, answer: str) -> bool:
    """Whether one row is right under `metric` (its whole credit: an F1 row partly right is
    not): what a trial marks each row with, and what a page of rows recomputes where a record
    carries no per-row correctness (an import rescored from its predictions)."""
    if metric == "balanced_accuracy":
        return same_label(generation, answer)
    return METRICS[metric]([generation], [answer]) == 1.0


UNDOCUMENTED_GOLD: dict[str, str] = {
    "successor_liability_f1": "F1: each a false negative, which no prediction can match",
    "balanced_accuracy": "balanced accuracy: every answer holding one is a class of its own",
}
"""The metrics whose official function scores a multi-label gold answer holding a label no
local file documents, and how: `evaluate_successor_liability` counts every gold part no
predicted exception matches as a false negative, and `balanced_accuracy_score` makes every
distinct answer (the whole comma-joined list) a class. What `workbench score` says in its
note (`scores_undocumented_gold`)."""


def scores_undocumented_gold(metric: str, multi_label: bool) -> str | None:
    """How the official metric scores a gold label outside the task's documented labels, or
    None where `workbench score` must refuse it.

    LegalBench's full test splits hold labels no shipped file documents (successor_liability's
    'implied assumption of liability'), and `evaluation.py` scores them: the metric's domain is
    what it scores, not the label list. Only multi-label answers are opened: a single-label
    task's documented labels already number as many as its README's classes (binary, or
    "N-way": every shipped task), so an extra gold answer there is a file for another task or
    a typo, and stays refused. Other metrics (a user task's) have a declared label set.
    """
    return UNDOCUMENTED_GOLD.get(base_metric(metric)) if multi_label else None


def official_metric(task: str, definition: Definition = "code") -> str:
    """The metric name for a task; `definition="paper"` picks the paper's where they differ."""
    if definition == "paper" and task == "successor_liability":
        return "successor_liability_f1"
    return metric_for(task)


def task_metric(task: Task, definition: Definition = "code") -> str:
    """`official_metric` of a loaded task: a user task's is the one its task.json declares
    (`workbench task new`); LegalBench's comes from its name."""
    meta = task.files.meta
    return meta.metric if meta is not None else official_metric(task.name, definition)


def scorable_task_metric(task: Task, definition: Definition = "code") -> str:
    """`task_metric`; raises if LegalBench grades the task by hand."""
    return _scorable(task.name, task_metric(task, definition))


def scorable_metric(task: str, definition: Definition = "code") -> str:
    """The task's metric name; raises if LegalBench grades the task by hand."""
    return _scorable(task, official_metric(task, definition))


def _scorable(task: str, name: str) -> str:
    if name == "manual":
        raise ManualEvaluationRequired(
            f"task {task!r} is graded by hand in LegalBench (no automatic metric); "
            "export the generations and grade them with the LegalBench grading guide"
        )
    return name


def score(
    task: str,
    generations: Sequence[str],
    answers: Sequence[str],
    definition: Definition = "code",
    *,
    metric: str | None = None,
) -> float:
    """The task's official score for raw generations, exactly as LegalBench computes it.

    `metric`: the task's metric when known (a trial's, a user task's `task_metric`); else it
    is LegalBench's for the task's name."""
    name = _scorable(task, metric) if metric is not None else scorable_metric(task, definition)
    if len(generations) != len(answers):
        raise WorkbenchError(
            f"{len(generations)} generations but {len(answers)} answers; they must pair up"
        )
    if not answers:
        raise WorkbenchError(f"task {task!r}: nothing to score (no rows)")
    return METRICS[name](generations, answers)


@dataclass(frozen=True)
class ClassReport:
    """Accuracy and per-class recall besides the official metric (classification tasks)."""

    accuracy: float
    recall: dict[str, float]
    invalid_rate: float


def class_report(
    generations: Sequence[str], answers: Sequence[str], labels: Sequence[str]
) -> ClassReport:
    """Exact-match accuracy, recall per answer class, and the share of outputs off-label
    (an empty output is always off-label, and never right)."""
    norm_labels = {normalize(label) for label in labels} - {""}
    pred = [normalize(g) for g in generations]
    true = [normalize(a) for a in answers]
    recall: dict[str, float] = {}
    for label in labels:
        rows = [p for p, t in zip(pred, true, strict=True) if t == normalize(label)]
        if rows:
            recall[label] = sum(bool(p) and p == normalize(label) for p in rows) / len(rows)
    return ClassReport(
        accuracy=float(np.mean([bool(p) and p == t for p, t in zip(pred, true, strict=True)])),
        recall=recall,
        invalid_rate=float(np.mean([p not in norm_labels for p in pred])),
    )


def parse_label(generation: str, labels: Sequence[str]) -> str | None:
    """Map a generation to its label the LegalBench way (normalised exact match), or None
    (always for an empty generation)."""
    g = normalize(generation)
    return next((label for label in labels if g and normalize(label) == g), None)
