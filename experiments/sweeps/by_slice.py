"""`workbench report NAME --by slice|class`: a sweep's fixed-pair comparisons split by a data
column (hearsay's `slice`) or by gold answer, from what MLflow holds.

Why here: it reads the sweep's trial runs and predictions (tracking), the task's data rows
(the catalog) and computes with `analysis.slices`; nothing is stored. Every pair the sweep
tested is split the way the sweep tested it: its resamples, its clustering (read from the
comparison's `clustered_by`), the same peers (every variant of the task and model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from experiments.analysis.slices import SliceError, SliceTable, slice_table
from experiments.trials.record import Prediction, TrialRecord, TrialStatus

DEFAULT_COLUMN = "slice"
DEFAULT_RESAMPLES = 1000  # a sweep spec's default n_resamples (`sweeps.spec`)


class _Tracker(Protocol):
    def sweep_trial_runs(self, parent_id: str) -> list[dict[str, Any]]: ...
    def load_predictions(self, run_id: str) -> list[Prediction]: ...


class _Catalog(Protocol):
    def task(self, name: str) -> Any: ...


@dataclass(frozen=True)
class SliceReport:
    """The slice tables of a sweep run's comparisons and what was left out, and why."""

    by: str
    column: str
    tables: tuple[SliceTable, ...]
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "by": self.by,
            "column": self.column,
            "tables": [t.to_dict() for t in self.tables],
            "notes": list(self.notes),
        }


def cluster_rule(clustered_by: str | None) -> str:
    """The sweep's `cluster_by` from a comparison's `clustered_by` ("prompt", "rows", or
    "column:<name>+prompt" as `clusters.union` names it)."""
    how = clustered_by or "prompt"
    return how.split("+", 1)[0] if how.startswith("column:") else how


def _sweep_resamples(rows: Sequence[Mapping[str, Any]]) -> int:
    """The sweep's resamples without its parent's param: a Monte Carlo comparison's count
    (an exact one's is its 2^d swap patterns, e.g. 4, never the sweep's), else the default."""
    sampled = [int(r["n_resamples"]) for r in rows if r.get("exact") is False
               and r.get("n_resamples") and r.get("k") is None]  # fmt: skip
    return max(sampled, default=DEFAULT_RESAMPLES)


def _data_rows(catalog: _Catalog, task: str, split: str) -> list[dict[str, str]]:
    return list(catalog.task(task).rows(split))


def _column_values(
    rows: Sequence[Mapping[str, str]], task: str, split: str, column: str
) -> dict[str, str]:
    """Row index -> the column's value; a task without the column is refused, naming its
    columns (exit 2)."""
    names = list(rows[0]) if rows else []
    if column not in names:
        offer = [c for c in names if c not in ("index", "answer")]
        raise SliceError(
            f"task {task} ({split} split) has no column {column!r}; its columns: "
            f"{', '.join(names) or '(none)'}. Name one with --column"
            + (f" (e.g. --column {offer[-1]})" if offer else "")
            + ", or use --by class"
        )
    return {str(r["index"]): str(r.get(column) or "") for r in rows}


def _record(run: Mapping[str, Any], preds: Sequence[Prediction]) -> TrialRecord:
    return TrialRecord.from_stored(
        task=str(run["task"]),
        model=str(run["model"]),
        variant=str(run["variant"]),
        trial_id=str(run["trial_id"]),
        run_id=str(run["run_id"]),
        status=TrialStatus(run.get("status") or TrialStatus.COMPLETE),
        metric=str(run["metric"]),
        score=run.get("score"),
        rows=preds,
        rendered={},
        resumed=False,
    )


def sweep_slices(
    tracker: _Tracker,
    parent_run_id: str,
    doc: Mapping[str, Any],
    catalog: _Catalog,
    *,
    by: str,
    column: str | None = None,
    model: str | None = None,
    n_resamples: int | None = None,
) -> SliceReport:
    """Every tested fixed pair of the sweep run (one model's with `model`), by slice of
    `column` (default "slice") or by class (gold answer), with the sweep's `n_resamples`
    (its parent's param; without it, `_sweep_resamples`)."""
    if by not in ("slice", "class"):
        raise SliceError(f"--by must be slice or class, not {by!r}")
    col = (column or DEFAULT_COLUMN) if by == "slice" else "answer"
    notes: list[str] = []
    rows = [r for r in doc.get("comparisons") or () if model is None or r.get("model") == model]
    pairs = []
    for r in rows:
        where = f"{r.get('task')} · {r.get('model')}: {r.get('a')} vs {r.get('b')}"
        if r.get("k") is not None:
            notes.append(
                f"{where}: best and worst are chosen after seeing the scores; a per-{by} "
                "test of that pair would be post-selection, so none is given"
            )
        elif r.get("p_value") is None:
            notes.append(f"{where}: not tested ({r.get('status')}), so not split")
        else:
            pairs.append(r)
    for r in doc.get("sequential") or ():
        if model is None or r.get("model") == model:
            notes.append(
                f"{r.get('task')} · {r.get('model')}: {r.get('a')} vs {r.get('b')}: a "
                f"sequential comparison, not split: a per-{by} fixed-sample test would ignore "
                "its looks (the report page gives its tables, marked descriptive)"
            )
    resamples = n_resamples or _sweep_resamples(rows)
    runs = tracker.sweep_trial_runs(parent_run_id)
    by_arm = {(str(x["task"]), str(x["model"]), str(x["variant"])): x for x in runs}
    records: dict[tuple[str, str, str], TrialRecord] = {}

    def record(key: tuple[str, str, str]) -> TrialRecord | None:
        if key not in records and key in by_arm:
            records[key] = _record(by_arm[key], tracker.load_predictions(by_arm[key]["run_id"]))
        return records.get(key)

    data: dict[tuple[str, str], list[dict[str, str]]] = {}
    tables = []
    missing: dict[str, SliceError] = {}
    for r in pairs:
        task, mod = str(r["task"]), str(r["model"])
        a, b = record((task, mod, str(r["a"]))), record((task, mod, str(r["b"])))
        if a is None or b is None:
            notes.append(f"{task} · {mod}: {r['a']} vs {r['b']}: a trial run is missing")
            continue
        split = str(by_arm[(task, mod, a.variant)].get("split") or "test")
        if (task, split) not in data:
            data[(task, split)] = _data_rows(catalog, task, split)
        found = data[(task, split)]
        if by == "slice":
            try:
                groups = _column_values(found, task, split, col)
            except SliceError as e:  # another task of the sweep may have it: said, not split
                missing.setdefault(task, e)
                continue
        else:
            groups = {p.index: p.answer for p in a.rows}
        rule = cluster_rule(r.get("clustered_by"))
        cluster_column = (
            _column_values(found, task, split, rule[7:]) if rule.startswith("column:") else None
        )
        peers = [record(k) for k in sorted(by_arm) if k[:2] == (task, mod)]
        spec = catalog.task(task).spec
        labels = list(spec.labels) if by == "class" and spec.is_classification else None
        tables.append(
            slice_table(
                a,
                b,
                groups,
                by=by,
                column=col,
                n_resamples=resamples,
                labels=labels,
                cluster_by=rule,
                cluster_column=cluster_column,
                peers=[p for p in peers if p is not None],
            )
        )
    if missing and not tables:  # no task of the sweep has the column: the error names it
        raise next(iter(missing.values()))
    notes += [f"{task}: not split: {str(e).split('. ')[0]}" for task, e in missing.items()]
    return SliceReport(by, col, tuple(tables), tuple(notes))
