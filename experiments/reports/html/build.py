"""A sweep's (or an import's) trials and comparisons -> the HTML report's `ReportDoc`.

Why: a verdict says whether B beats A; the reader's next question is where. For each
comparison this finds the rows where the two arms disagree, keeps each row's input once per
task, and diffs the two rendered prompts with the row's input masked (`diff.prompt_diff`), so
what is shown is what the variant changed. Rows per comparison are capped (`ROWS_CAP`); the
counts are over every disagreeing row. The result is deterministic: trials and rows in any
order give the same document (except `created`).
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from experiments.analysis.slices import slice_table
from experiments.metrics import base_metric, normalize
from experiments.reports.html.diff import prompt_diff
from experiments.reports.html.model import (
    INPUT_CHARS,
    OUTPUT_CHARS,
    ROWS_CAP,
    Counts,
    DiffOp,
    Figure,
    Outcome,
    ReportDoc,
    SampleComparison,
    SampleRow,
    SampleSide,
    cut,
)
from experiments.trials.record import Prediction, SweepStatus, TrialRecord
from promptlib.templates import placeholders

PARTIAL_CREDIT = ("ssla_f1", "successor_liability_f1")  # a row's credit can be between 0 and 1
TABLES_CAP = 40  # comparisons given per-slice/per-class tables (each costs ~1-2 s: MDEs)
SLICE_COLUMN = "slice"  # the LegalBench column naming a row's slice (hearsay, ...)
INPUT_COLUMN = "text"  # the input column of most tasks, when no template names the columns


class Prompt(Protocol):
    """What the report needs of a compiled prompt (`promptlib.render.CompiledPrompt`)."""

    @property
    def query(self) -> str: ...

    @property
    def labels(self) -> tuple[str, ...] | None: ...

    def render(self, example: Mapping[str, str]) -> str: ...


SliceTables = Callable[..., Any]


@dataclass(frozen=True)
class Sources:
    """What the rows are read from beside the trial records: each trial's prompt (by trial
    id), each task's data rows (by task; dicts with "index" and the columns), and an
    import's sample ids (task -> row index -> the source tool's id)."""

    prompts: Mapping[str, Prompt]
    task_rows: Mapping[str, Mapping[str, Mapping[str, Any]]]
    sample_ids: Mapping[str, Mapping[str, str]]

    @classmethod
    def of_resolved(cls, resolved: Sequence[Any]) -> Sources:
        """From a sweep's resolved trials (`trials.spec.ResolvedTrial`: id, spec.task,
        compiled, rows)."""
        prompts: dict[str, Prompt] = {}
        rows: dict[str, dict[str, Mapping[str, Any]]] = {}
        for rt in sorted(resolved, key=lambda r: str(r.id)):
            prompts[str(rt.id)] = rt.compiled
            mine = rows.setdefault(str(rt.spec.task), {})
            for row in rt.rows:
                mine.setdefault(str(row["index"]), row)
        return cls(prompts, rows, {})


def row_key(index: str) -> tuple[int, int, str]:
    """Rows in order: numeric indices as numbers, then the others as text."""
    return (0, int(index), "") if index.lstrip("-").isdigit() else (1, 0, index)


def build_report(
    *,
    kind: str,
    title: str,
    name: str,
    id: str,
    status: str,
    records: Sequence[TrialRecord],
    comparisons: Sequence[Mapping[str, Any]],
    sequential: Sequence[Mapping[str, Any]] = (),
    sequential_entries: Sequence[Mapping[str, Any]] | None = None,
    sequential_rows: Mapping[tuple[str, str, str, str], Sequence[str]] | None = None,
    figures: Mapping[str, bytes] | None = None,
    sources: Sources | None = None,
    ui_base: str | None = None,
    experiment_id: str | None = None,
    notes: Sequence[str] = (),
    n_resamples: int = 1000,
    slice_tables: SliceTables | None = slice_table,
    cluster_by: str = "prompt",
    cluster_columns: Mapping[str, dict[str, str]] | None = None,
    created: str | None = None,
    cap: int = ROWS_CAP,
    tables_cap: int = TABLES_CAP,
    scored: Sequence[TrialRecord] | None = None,
) -> ReportDoc:
    """The report of these trials and comparisons (see the module doc).

    `comparisons`: the comparisons document's rows as they are (each with task, model, a,
    b; a best_vs_worst row names its best and worst variants); `sequential` its sequential
    rows; `sequential_entries` the page's sequential section when the caller has it
    (`sweeps.looks.sequential_section`: each row with its looks), else the rows, no looks;
    `sequential_rows` the row indices each sequential comparison's decision is over, by
    (task, model, a, b): a pair stops on its own while its arms may run on for other pairs,
    so only those rows are its rows (without them, a row whose arms share more rows than its
    ``n`` gets a note).
    `slice_tables`: `analysis.slices.slice_table` (None: no per-slice or per-class tables),
    called with the sweep's clustering (`cluster_by`, `cluster_columns`: task -> row index ->
    value) and the comparison's peers (every arm of its task and model), for the first
    `tables_cap` comparisons (a note says so when there are more: the page of a 20-variant
    all-pairs sweep would otherwise cost minutes of tests). `scored`: the records as the
    comparisons scored them, when `records` show other texts (an import scored on its
    source's correctness shows the raw outputs, which the metric would score otherwise);
    the tables are computed from these, grouped by the shown gold answers.
    """
    src = sources or Sources({}, {}, {})
    by_arm = _arms(records)
    tables = None
    if slice_tables is not None:
        by_scored = _arms(scored) if scored is not None else by_arm
        arms = [by_scored[k] for k in sorted(by_scored)]  # one record per variant, as compared
        tables = _Tables(
            slice_tables, n_resamples, cluster_by, cluster_columns or {}, arms, by_scored
        )
    notes_out = list(notes)
    pairs = [(c, "") for c in comparisons] + [(s, "sequential ") for s in sequential]
    samples: list[SampleComparison] = []
    shown: dict[str, set[str]] = {}
    seq_said = False  # the note on a sequential comparison's tables, once
    columns = {t: _input_columns(t, records, src) for t in sorted({r.task for r in records})}
    for row, what in pairs:
        task, model = str(row.get("task") or ""), str(row.get("model") or "")
        a, b = row.get("a"), row.get("b")
        ra, rb = by_arm.get((task, model, str(a))), by_arm.get((task, model, str(b)))
        if a is None or b is None or ra is None or rb is None:
            continue  # an untested best/worst row, or an arm that did not run: no rows
        key = f"c{len(samples) + 1}"
        mine = tables if len(samples) < tables_cap else None
        if mine is not None and row.get("k") is not None:
            mine = None  # as `sweeps.by_slice`: a per-group test of a post-selected pair
            notes_out.append(
                f"{what}{task} · {model} · {a} vs {b}: best and worst are chosen after seeing "
                "the scores; a per-slice or per-class test of that pair would be "
                "post-selection, so none is given"
            )
        elif mine is not None and what and not seq_said:
            seq_said = True
            notes_out.append(
                "per-slice and per-class tests of a sequential comparison are fixed-sample "
                "tests on the rows it ran before it stopped: they do not account for its looks "
                "(a stop decided by the whole comparison), so read them as descriptive"
            )
        within = (sequential_rows or {}).get((task, model, str(a), str(b))) if what else None
        sample = _comparison(
            key, ra, rb, src, columns.get(task, ()), cap, experiment_id, mine, notes_out,
            None if within is None else frozenset(within),
        )  # fmt: skip
        why = _untested(row, bool(what))
        if why is not None:
            sample = replace(sample, untested=why)
            notes_out.append(
                f"{what}{task} · {model} · {a} vs {b} has no result ({why}): its rows are "
                "those both arms answered before it stopped, not a verdict"
            )
        n = row.get("n")
        if what and within is None and isinstance(n, int) and sample.n_rows != n:
            notes_out.append(
                f"{what}{task} · {model} · {a} vs {b}: its rows below are the {sample.n_rows} "
                f"rows both arms answered, not the {n} its decision is over (which ones is "
                "not at hand): its counts are not the comparison's"
            )
        if sample.n_shown < sample.n_disagree:
            notes_out.append(
                f"{what}{task} · {model} · {a} vs {b}: {sample.n_shown} of its "
                f"{sample.n_disagree} disagreeing rows shown (the first {cap} by row index)"
            )
        samples.append(sample)
        shown.setdefault(task, set()).update(r.index for r in sample.rows)
    if tables is not None and len(samples) > tables_cap:
        notes_out.append(
            f"per-slice and per-class tables are given for the first {tables_cap} of the "
            f"{len(samples)} comparisons; `workbench report {name} --by slice` (or --by class) "
            "gives every tested pair's"
        )
    if any(s.n_shown < s.n_disagree for s in samples):
        notes_out.insert(
            0, f"rows per comparison are capped at {cap}; the counts cover every disagreeing row"
        )
    inputs = {
        task: {
            i: _input_text(src.task_rows.get(task, {}).get(i), columns.get(task, ()))
            for i in sorted(idx, key=row_key)
        }
        for task, idx in sorted(shown.items())
    }
    seq_rows = (
        [dict(e) for e in sequential_entries]
        if sequential_entries is not None
        else [{"row": dict(s), "looks": []} for s in sequential]
    )
    return ReportDoc(
        kind="import" if kind == "import" else "sweep",
        title=title,
        name=name,
        id=id,
        created=created or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        status=status,
        ui_base=ui_base,
        notes=tuple(notes_out),
        comparisons=tuple(dict(c) for c in comparisons),
        figures=tuple(
            Figure(n, base64.b64encode(png).decode("ascii"))
            for n, png in sorted((figures or {}).items())
        ),
        inputs={t: rows for t, rows in inputs.items() if rows},
        samples=tuple(samples),
        sequential=tuple(seq_rows),
    )


def build_sweep_report(
    *,
    name: str,
    sweep_id: str,
    records: Sequence[TrialRecord],
    doc: Mapping[str, Any],
    figures: Mapping[str, bytes],
    resolved: Sequence[Any],
    ui_base: str | None,
    experiment_id: str | None,
    n_resamples: int,
    sequential_entries: Sequence[Mapping[str, Any]] | None = None,
    sequential_rows: Mapping[tuple[str, str, str, str], Sequence[str]] | None = None,
    slice_tables: SliceTables | None = slice_table,
    cluster_by: str = "prompt",
    cluster_columns: Mapping[str, dict[str, str]] | None = None,
    created: str | None = None,
    cap: int = ROWS_CAP,
    tables_cap: int = TABLES_CAP,
) -> ReportDoc:
    """A sweep's report: its comparisons document `doc` (as comparisons.json holds it), its
    trial records (`ordered`), its figures' PNG bytes and its resolved trials (prompts and
    data rows)."""
    notes = [f"skipped {s['task']}: {s['reason']}" for s in doc.get("skipped") or ()]
    notes += [
        f"incomplete: {t['task']} · {t['variant']} · {t['model']} ({t['n_errors']} of "
        f"{t['n']} rows failed): its failed rows are not compared"
        for t in doc.get("incomplete") or ()
    ]
    return build_report(
        kind="sweep",
        title=f"Sweep {name}",
        name=name,
        id=sweep_id,
        status=str(SweepStatus.of(not doc.get("incomplete"))),
        records=records,
        comparisons=doc.get("comparisons") or (),
        sequential=doc.get("sequential") or (),
        sequential_entries=sequential_entries,
        sequential_rows=sequential_rows,
        figures=figures,
        sources=Sources.of_resolved(resolved),
        ui_base=ui_base,
        experiment_id=experiment_id,
        notes=notes,
        n_resamples=n_resamples,
        slice_tables=slice_tables,
        cluster_by=cluster_by,
        cluster_columns=cluster_columns,
        created=created,
        cap=cap,
        tables_cap=tables_cap,
    )


def _untested(row: Mapping[str, Any], sequential: bool) -> str | None:
    """Why a comparison row has no result (None: it has one): a fixed pair not tested (an
    arm incomplete: its status says why), a sequential one a failed row stopped."""
    status = row.get("status")
    if sequential:
        return None if row.get("decision") is not None else str(status or "stopped")
    return None if status == "tested" else str(status or "not tested")


def _arms(records: Sequence[TrialRecord]) -> dict[tuple[str, str, str], TrialRecord]:
    """(task, model, variant) -> its record; of two (a rerun), the complete one, then the
    one with the smaller trial id, whatever the order given."""
    out: dict[tuple[str, str, str], TrialRecord] = {}
    for r in sorted(records, key=lambda r: (not r.status.ok, r.trial_id, r.run_id)):
        out.setdefault((r.task, r.model, r.variant), r)
    return out


def _input_columns(task: str, records: Sequence[TrialRecord], src: Sources) -> tuple[str, ...]:
    """The columns a task's prompts fill in (every template of its trials, in order of first
    use), else "text" when its rows have it, else none (nothing is masked)."""
    seen: dict[str, None] = {}
    for r in sorted(records, key=lambda r: r.trial_id):
        p = src.prompts.get(r.trial_id) if r.task == task else None
        if p is not None:
            seen.update(dict.fromkeys(placeholders(p.query)))
    if seen:
        return tuple(seen)
    rows = src.task_rows.get(task) or {}
    first = next(iter(rows.values()), None)
    return (INPUT_COLUMN,) if first is not None and INPUT_COLUMN in first else ()


def _input_text(row: Mapping[str, Any] | None, columns: Sequence[str]) -> str:
    """A row's input as shown: its one input column's text, or each column named."""
    if row is None:
        return ""
    values = [(c, str(row[c])) for c in columns if c in row]
    text = values[0][1] if len(values) == 1 else "\n\n".join(f"{c}: {v}" for c, v in values)
    return cut(text, INPUT_CHARS) or ""


def _answered(p: Prediction) -> bool:
    return p.error is None and p.generation is not None


def _disagree(pa: Prediction, pb: Prediction, texts: bool = False) -> bool:
    """Correctness differs, or the answers differ while not both right: the parsed answers,
    or (`texts`: a task whose rows have no parsed answer, e.g. a number or a list) the texts
    the metric scored, normalised, so two different wrong numbers are a disagreement."""
    if bool(pa.correct) != bool(pb.correct):
        return True
    if pa.correct and pb.correct:
        return False
    if texts:
        return normalize(pa.scored_text) != normalize(pb.scored_text)
    return pa.parsed != pb.parsed


def _outcome(pa: Prediction, pb: Prediction) -> Outcome:
    if pa.correct and not pb.correct:
        return "a_right"
    if pb.correct and not pa.correct:
        return "b_right"
    return "both_wrong"


def _side(p: Prediction) -> SampleSide:
    return SampleSide(cut(p.generation, OUTPUT_CHARS), cut(p.parsed, OUTPUT_CHARS), p.correct)


def _comparison(
    key: str,
    ra: TrialRecord,
    rb: TrialRecord,
    src: Sources,
    columns: Sequence[str],
    cap: int,
    experiment_id: str | None,
    tables: _Tables | None,
    notes: list[str],
    within: frozenset[str] | None = None,
) -> SampleComparison:
    """One comparison's disagreeing rows (the first `cap` shown), counts and diffs; `within`:
    only these rows (a sequential comparison's, up to its stop)."""
    a_rows = {p.index: p for p in ra.rows}
    b_rows = {p.index: p for p in rb.rows}
    common = a_rows.keys() & b_rows.keys()
    if within is not None:
        common &= within
    both = sorted((i for i in common if _answered(a_rows[i]) and _answered(b_rows[i])), key=row_key)
    # no parsed answer in either arm (no labels to parse to): compare the scored texts
    texts = all(p.parsed is None for p in (*ra.rows, *rb.rows))
    disagree = [i for i in both if _disagree(a_rows[i], b_rows[i], texts)]
    outcomes = {i: _outcome(a_rows[i], b_rows[i]) for i in disagree}
    counts = Counts(*(sum(o == k for o in outcomes.values()) for k in Counts().to_dict()))
    data = src.task_rows.get(ra.task) or {}
    pa, pb = src.prompts.get(ra.trial_id), src.prompts.get(rb.trial_id)
    diffs: dict[tuple[DiffOp, ...], int] = {}
    done: dict[tuple[str, str], int] = {}  # masked prompts already diffed
    rows: list[SampleRow] = []
    failed: str | None = None
    for i in disagree[:cap]:
        row = data.get(i)
        diff: int | None = None
        if row is not None and pa is not None and pb is not None and failed is None:
            try:
                diff = _diff_of(pa, pb, row, columns, diffs, done)
            except Exception as e:  # a row the prompt cannot render: the rows still show
                failed = f"{type(e).__name__}: {e}"
        x, y = a_rows[i], b_rows[i]
        slice_ = row.get(SLICE_COLUMN) if row is not None else None
        rows.append(
            SampleRow(
                index=i,
                label=x.answer,
                slice=None if slice_ is None else str(slice_),
                sample_id=(src.sample_ids.get(ra.task) or {}).get(i),
                outcome=outcomes[i],
                a=_side(x),
                b=_side(y),
                diff=diff,
            )
        )
    where = f"{ra.task} · {ra.model} · {ra.variant} vs {rb.variant}"
    if base_metric(ra.metric) in PARTIAL_CREDIT:
        notes.append(
            f"{where}: {ra.metric} gives a row partial credit; 'right' is a row with full "
            "credit, so a row both arms got partly right (with different answers) is 'both wrong'"
        )
    if failed is not None:
        notes.append(f"{where}: prompts not diffed from the first row that failed ({failed})")
    slices, classes = tables.of(ra, rb, data, pa, where, notes) if tables else ((), ())
    return SampleComparison(
        key=key,
        task=ra.task,
        model=ra.model,
        a=ra.variant,
        b=rb.variant,
        metric=ra.metric,
        a_run=ra.run_id or None,
        b_run=rb.run_id or None,
        experiment_id=experiment_id,
        n_rows=len(both),
        n_disagree=len(disagree),
        n_shown=len(rows),
        cap=cap,
        counts=counts,
        diffs=tuple(diffs),
        rows=tuple(rows),
        slices=slices,
        classes=classes,
    )


def _diff_of(
    pa: Prompt,
    pb: Prompt,
    row: Mapping[str, Any],
    columns: Sequence[str],
    diffs: dict[tuple[DiffOp, ...], int],
    done: dict[tuple[str, str], int],
) -> int:
    """The index in `diffs` of this row's prompt diff (added when new)."""
    example = {k: str(v) for k, v in row.items()}
    masks = [example[c] for c in columns if c in example]
    a, b = pa.render(example), pb.render(example)
    seen = (_masked(a, masks), _masked(b, masks))
    if seen not in done:
        d = prompt_diff(a, b, mask=masks)
        done[seen] = diffs.setdefault(d, len(diffs))
    return done[seen]


def _masked(text: str, masks: Sequence[str]) -> str:
    for m in sorted({m for m in masks if m.strip()}, key=lambda m: (-len(m), m)):
        text = text.replace(m, "\0")
    return text


@dataclass(frozen=True)
class _Tables:
    """Per-slice and per-class tables (`analysis.slices.slice_table`), tested as the sweep
    tests its pairs: its resamples, its clustering, the comparison's peers."""

    slice_table: SliceTables
    n_resamples: int
    cluster_by: str
    cluster_columns: Mapping[str, dict[str, str]]
    records: Sequence[TrialRecord]
    # (task, model, variant) -> the record as the comparison scored it, where the shown one
    # differs (an import's: the source's raw outputs shown, its correctness scored)
    scored: Mapping[tuple[str, str, str], TrialRecord]

    def of(
        self,
        ra: TrialRecord,
        rb: TrialRecord,
        data: Mapping[str, Mapping[str, Any]],
        prompt: Prompt | None,
        where: str,
        notes: list[str],
    ) -> tuple[tuple[Mapping[str, Any], ...], tuple[Mapping[str, Any], ...]]:
        """The comparison's per-slice table (when the task has a slice column) and per-class
        table (a task with labels), as `SliceTable.to_dict()`; none for an incomplete arm."""
        gold = {p.index: p.answer for p in ra.rows}  # the classes as shown
        ra = self.scored.get((ra.task, ra.model, ra.variant), ra)
        rb = self.scored.get((rb.task, rb.model, rb.variant), rb)
        if not (ra.complete and rb.complete):
            return (), ()
        peers = [r for r in self.records if (r.task, r.model) == (ra.task, ra.model)]
        how = {
            "n_resamples": self.n_resamples,
            "cluster_by": self.cluster_by,
            "cluster_column": self.cluster_columns.get(ra.task),
            "peers": peers,
        }
        slices: tuple[Mapping[str, Any], ...] = ()
        classes: tuple[Mapping[str, Any], ...] = ()
        # a blank value is the "(blank)" group (`analysis.slices`), as `report --by slice` has it
        has = any(r.get(SLICE_COLUMN) for r in data.values())
        groups = {i: str(r.get(SLICE_COLUMN) or "") for i, r in data.items()} if has else {}
        try:
            if groups:
                t = self.slice_table(ra, rb, groups, by="slice", column=SLICE_COLUMN, **how)
                slices = (t.to_dict(),)
            labels = prompt.labels if prompt is not None else None
            if labels:
                t = self.slice_table(
                    ra, rb, gold, by="class", column="answer", labels=list(labels), **how
                )
                classes = (t.to_dict(),)
        except Exception as e:  # the rows stand without the tables: say why they are missing
            notes.append(f"{where}: no per-slice/per-class table ({type(e).__name__}: {e})")
        return slices, classes
