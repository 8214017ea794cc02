"""Imported trials as the `TrialRecord`s every comparison reads: one record per (task, model,
variant), the rows all arms of a (task, model) scored, paired by id. Rows present in some
arms only, or failed in one, are listed and left out, never scored as wrong."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from experiments import metrics
from experiments.analysis.align import row_order
from experiments.imports.identity import TaskTexts, Units, units
from experiments.imports.records import OK, ImportedRow, ImportedTrial, ImportInputError
from experiments.trials.record import TrialRecord, TrialStatus
from promptlib.data import is_empty_answer
from promptlib.errors import did_you_mean, first_few

CORRECTNESS = "accuracy"  # the metric of rows scored by their source: the share correct
NO_TASK = "(no task)"  # the task of trials whose files name none and no --task was given
AXIS = "variant"  # the one axis of imported arms: their variant names are the source's labels


@dataclass(frozen=True)
class LeftOut:
    """A row left out of its (task, model)'s comparisons, and why."""

    task: str
    model: str
    row: str
    reason: str


@dataclass(frozen=True)
class Arms:
    """The records to compare, the rows left out, notes on how they were scored, and how
    each (task, model)'s rows are clustered (their records' `prompt_hashes` are the keys)."""

    records: tuple[TrialRecord, ...]
    left_out: tuple[LeftOut, ...]
    notes: tuple[str, ...]
    units: Mapping[tuple[str, str], Units] = field(default_factory=dict)


def to_records(
    trials: Sequence[ImportedTrial],
    *,
    rescore: bool = False,
    known_tasks: Collection[str] = (),
    texts: TaskTexts | None = None,
) -> Arms:
    """The trials as records; every check that can refuse runs before any record is made.

    Each row's cluster key (`experiments.imports.identity`) is the source's prompt identity,
    else its text where the task is a LegalBench task (`texts`: its test rows by index) and the
    row ids are the task's indices, else none (rows tested as independent, said so)."""
    _check_arms(trials)
    groups: dict[tuple[str, str], list[ImportedTrial]] = {}
    for t in trials:
        groups.setdefault((t.task or NO_TASK, t.model), []).append(t)
    _check_tasks(groups)
    records: list[TrialRecord] = []
    left: list[LeftOut] = []
    notes: list[str] = []
    clustered: dict[tuple[str, str], Units] = {}
    for (task, model), arms in groups.items():
        keys, gone = _shared_keys(task, model, arms)
        _check_same_examples(arms, keys)
        left += gone
        how = clustered[(task, model)] = units(task, model, arms, keys, texts)
        official = rescore or any(r.correct is None for t in arms for r in t.rows if r.key in keys)
        for t, cluster_keys in zip(arms, how.keys, strict=True):
            rows = _rows_by_key(t, keys)
            hashes = [cluster_keys[r.key] for r in rows]
            if official:
                rec, note = _official(t, task, rows, hashes, known_tasks, rescore)
            else:
                rec, note = _by_correctness(t, task, rows, hashes)
            records.append(rec)
            notes += [note] if note else []
        if not official:  # after each arm's own checks (a fractional score is named first)
            _check_one_metric(task, model, arms)
        if not official and task in known_tasks and len(arms) > 1:
            notes.append(_not_official(task, model, arms, _declared_metric(task, known_tasks)))
        notes += [how.note] if how.note and len(arms) > 1 else []
    return Arms(tuple(records), tuple(left), tuple(notes), clustered)


def _declared_metric(task: str, known_tasks: Collection[str]) -> str | None:
    """The task's own metric where the caller names it (`known_tasks` as a mapping, name ->
    metric: a user task's comes from its task.json, not from LegalBench's table by name)."""
    return known_tasks.get(task) if isinstance(known_tasks, Mapping) else None


def _not_official(
    task: str, model: str, arms: Sequence[ImportedTrial], declared: str | None = None
) -> str:
    """Says that a task's arms are compared on the source's scoring, not the task's
    official metric, and whether --rescore could use the official one."""
    source = sorted({t.metric or "correct" for t in arms})
    official = declared or metrics.official_metric(task)
    have = all(r.prediction is not None and r.answer is not None for t in arms for r in t.rows)
    how = "--rescore scores the generations with it" if have else "no generations to rescore"
    return (
        f"{task} ({model}): compared on the source's scoring ({', '.join(source)}), not "
        f"LegalBench's official {official}; {how}"
    )


def _check_arms(trials: Sequence[ImportedTrial]) -> None:
    """One trial per (task, model, variant): two would be the same arm twice."""
    seen: dict[tuple[str | None, str, str], ImportedTrial] = {}
    for t in trials:
        key = (t.task, t.model, t.variant)
        if key in seen:
            first = seen[key]
            raise ImportInputError(
                f"{t.source_file}: variant {t.variant!r} of model {t.model!r} on task "
                f"{t.task or NO_TASK} is already in {first.source_file}; name the field that "
                "tells them apart with --variant-from FIELD, or import them separately"
            )
        seen[key] = t


def _check_tasks(groups: dict[tuple[str, str], list[ImportedTrial]]) -> None:
    """A model's variants must be on the same tasks: variant A on one task and B on another
    is a comparison across tasks, which pairs nothing."""
    by_model: dict[str, dict[str, list[ImportedTrial]]] = {}
    for (task, model), arms in groups.items():
        by_model.setdefault(model, {})[task] = arms
    for model, tasks in by_model.items():
        if len(tasks) < 2:
            continue
        shapes = {task: frozenset(t.variant for t in arms) for task, arms in tasks.items()}
        if len(set(shapes.values())) > 1:
            t1 = next(iter(shapes))
            t2 = next(t for t, shape in shapes.items() if shape != shapes[t1])
            a1, a2 = tasks[t1], tasks[t2]
            raise ImportInputError(
                f"{a2[0].source_file}: task {t2!r} but {a1[0].source_file} is task {t1!r} "
                f"(model {model}): one comparison needs one task; if they are the same task "
                "give --task NAME, else import each task's files together"
            )


def _shared_keys(
    task: str, model: str, arms: Sequence[ImportedTrial]
) -> tuple[set[str], list[LeftOut]]:
    """The row keys every arm holds and scored; the others, each with the reason."""
    every = sorted({r.key for t in arms for r in t.rows}, key=row_order)
    by_arm = [{r.key: r for r in t.rows} for t in arms]
    keys: set[str] = set()
    gone: list[LeftOut] = []
    for key in every:
        missing = [t.variant for t, rows in zip(arms, by_arm, strict=True) if key not in rows]
        failed = [
            f"{t.variant} ({rows[key].status})"
            for t, rows in zip(arms, by_arm, strict=True)
            if key in rows and rows[key].status != OK
        ]
        if missing:
            gone.append(LeftOut(task, model, key, "not in " + ", ".join(missing)))
        elif failed:
            gone.append(LeftOut(task, model, key, "no score in " + ", ".join(failed)))
        else:
            keys.add(key)
    if len(arms) > 1 and not keys:
        unscored = [x for x in gone if x.reason.startswith("no score")]
        if unscored:  # the ids are shared; no shared row has a score in every arm
            raise ImportInputError(
                f"{arms[0].source_file}: no row of {task} ({model}) has a score in every arm "
                f"(row {unscored[0].row}: {unscored[0].reason}); a status other than "
                f"{OK!r} marks a failure state: give status {OK!r} (or none) to scored rows"
            )
        raise ImportInputError(
            f"{arms[0].source_file}: its rows share no id with {arms[1].source_file} "
            f"({task}, {model}); paired tests need the same row ids in every arm"
        )
    return keys, gone


# what says which example a row is, where the source records it: paired rows must agree
_IDENTITY = ("answer", "target", "doc_hash", "vars")


def _identity(row: ImportedRow) -> dict[str, Any]:
    fields = {"answer": row.answer, **{k: row.extra.get(k) for k in _IDENTITY[1:]}}
    return {k: v for k, v in fields.items() if v not in (None, "", {}, [])}


def _check_same_examples(arms: Sequence[ImportedTrial], keys: set[str]) -> None:
    """Rows paired by id must be the same example: an id that is a position (lm-eval's
    doc_id, promptfoo's test index) pairs different examples when two runs read the data in
    another order, which no test can see; the gold answer (and lm-eval's doc hash, promptfoo's
    vars) must agree wherever two arms both record it."""
    first = arms[0]
    mine = {r.key: _identity(r) for r in first.rows if r.key in keys}
    for t in arms[1:]:
        for r in t.rows:
            if r.key not in mine:
                continue
            theirs = _identity(r)
            field = next(
                (k for k in mine[r.key] if k in theirs and theirs[k] != mine[r.key][k]), None
            )
            if field is not None:
                raise ImportInputError(
                    f"{t.source_file}: row {r.key!r} has {field} {theirs[field]!r} but "
                    f"{mine[r.key][field]!r} in {first.source_file}: the rows paired by id are "
                    "not the same examples (runs over the data in another order?); import "
                    "results of the same data, or give each row an id that names its example"
                )


def _check_one_metric(task: str, model: str, arms: Sequence[ImportedTrial]) -> None:
    """Arms compared on their source's scoring must be scored by one metric (lm-eval's acc
    in one and exact_match in the other, or two inspect scorers, is no paired comparison)."""
    metrics_ = {t.metric or "correct": t for t in arms}
    if len(metrics_) > 1:
        (m1, t1), (m2, t2) = list(metrics_.items())[:2]
        raise ImportInputError(
            f"{t2.source_file}: {t2.variant} is scored by {m2!r} but {t1.variant} "
            f"({t1.source_file}) by {m1!r} ({task}, {model}): arms must be scored by one "
            "metric; choose it with --scorer NAME (inspect logs of other epoch counts: "
            "--epochs separate), or --rescore with the official metric"
        )


def _rows_by_key(t: ImportedTrial, keys: set[str]) -> list[ImportedRow]:
    return sorted((r for r in t.rows if r.key in keys), key=lambda r: row_order(r.key))


def _by_correctness(
    t: ImportedTrial, task: str, rows: list[ImportedRow], hashes: list[str | None]
) -> tuple[TrialRecord, str | None]:
    """Rows scored by their source (0/1 each): the metric is the share correct."""
    bad = next((r for r in rows if r.correct not in (0.0, 1.0)), None)
    if bad is not None:
        raise ImportInputError(
            f"{t.source_file}: row {bad.key!r} has score {bad.correct}; the paired tests need "
            "1 or 0 per row: give 0/1 correctness, or predictions and answers with --rescore"
        )
    correct = [r.correct == 1.0 for r in rows]
    score = sum(correct) / len(correct) if correct else None
    return _record(t, task, CORRECTNESS, score, rows, ["1"] * len(rows),
                   ["1" if c else "0" for c in correct], correct, hashes), None  # fmt: skip


def _official(
    t: ImportedTrial,
    task: str,
    rows: list[ImportedRow],
    hashes: list[str | None],
    known_tasks: Collection[str],
    rescore: bool,
) -> tuple[TrialRecord, str | None]:
    """Rows scored from their predictions with the task's official LegalBench metric."""
    why = "--rescore" if rescore else f"rows without `correct` in {t.source_file}"
    if task not in known_tasks:
        raise ImportInputError(
            f"{t.source_file}: {why} needs a LegalBench task to score with, and {task!r} is "
            f"not one{did_you_mean(task, known_tasks)}; give --task NAME"
            + ("" if rescore else ", or a `correct` field")
        )
    lacking = next((r for r in rows if r.prediction is None or r.answer is None), None)
    if lacking is not None:
        raise ImportInputError(
            f"{t.source_file}: {why}: row {lacking.key!r} has no prediction or no answer; "
            "scoring needs both on every row (or drop --rescore to use the source's scores)"
        )
    empty = [repr(r.key) for r in rows if is_empty_answer(str(r.answer))]
    if empty:  # an empty gold answer is no label: an empty prediction would be right on it
        n = len(empty)
        raise ImportInputError(
            f"{t.source_file}: {why}: {n} row{'s' if n > 1 else ''} of {t.variant} / {t.model} "
            f"ha{'ve' if n > 1 else 's'} an empty answer (blank, or only spaces or punctuation: "
            f"{first_few(empty)}), which no prediction can be scored against; fill in each "
            "answer or drop those rows" + ("" if rescore else ", or give `correct`")
        )
    declared = _declared_metric(task, known_tasks)
    metric = metrics.scorable_metric(task) if declared is None else declared
    gens = [str(r.prediction) for r in rows]
    answers = [str(r.answer) for r in rows]
    score = metrics.score(task, gens, answers, metric=declared) if rows else None
    record = _record(t, task, metric, score, rows, answers, gens, None, hashes)
    return record, _differs(t, metric, rows)


def _differs(t: ImportedTrial, metric: str, rows: list[ImportedRow]) -> str | None:
    """A note when the source scored the trial with another metric than the official one."""
    source = t.metric
    scored = [r.correct for r in rows if r.correct is not None]
    if source is None and not scored:
        return None
    if source == metric:
        return None
    own = f" ({sum(scored) / len(scored):.3f} on these rows)" if scored else ""
    return (
        f"{t.task} · {t.variant} · {t.model}: the source's own metric "
        f"{source or 'correct'}{own} is not the official {metric}; the comparisons use {metric}"
    )


def _record(
    t: ImportedTrial,
    task: str,
    metric: str,
    score: float | None,
    rows: list[ImportedRow],
    answers: list[str],
    gens: list[str],
    correct: list[bool] | None,
    hashes: list[str | None],
) -> TrialRecord:
    """A trial's record; `hashes` are its rows' cluster keys (`identity.units`), kept as the
    prompt hashes the comparisons cluster by (none where no row has one)."""
    status = TrialStatus.COMPLETE if rows else TrialStatus.FAILED
    return TrialRecord.of(
        t.variant, metric, [r.key for r in rows], answers, gens, score=score, status=status,
        prompt_hashes=hashes if any(hashes) else [], task=task, model=t.model, correct=correct,
        axes={AXIS: t.variant},
    )  # fmt: skip
