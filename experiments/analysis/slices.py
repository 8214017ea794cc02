"""Per-slice and per-class comparisons of two arms: *where* one prompt beats another.

The LegalBench paper answers "where" with slices (hearsay's `slice` column, its Tables 6 and
7) and per-class recall (abercrombie). `slice_table` gives, for one comparison (task, model,
A vs B) and one grouping of its rows:

- each group's scores of A and B with the interval every comparison reports
  (`analysis.compare.interval`), its difference A - B with its interval, and the sweep's own
  test on the group's rows: `stats.paired_permutation_test`, same resamples, whole clusters
  swapped (the sweep's clustering of all the rows, restricted to the group's), exact over
  every swap pattern where the project's test is exact;
- by="slice": the task's official metric on the group's rows (a rule-conclusion metric as
  the one it computes, `metrics.base_metric`). A slice with one answer class (every hearsay
  slice) gets that class's recall, which is what LegalBench's sklearn
  ``balanced_accuracy_score`` returns there, and a note says so;
- by="class": the group is the gold answer and the score is recall on that class's rows
  (accuracy within the class, normalised exact match), tested the same way;
- multiplicity: Holm over the tested groups of this one comparison (`p_adjusted`);
- small groups (n < SMALL_BELOW) are marked, quoting the paper, with their simulated MDE at
  80% power (`power.minimum_detectable_effect`, as the comparisons compute it).

Deterministic: rows are paired and ordered by `align.same_rows` (canonical row order) and
groups sorted, so shuffled records or groups give the same table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

import numpy as np

from experiments.analysis import power, stats
from experiments.analysis.align import row_order, same_rows, stat_inputs
from experiments.analysis.clusters import Clustering, factorize
from experiments.analysis.compare import ClusterBy, clustering, interval
from experiments.metrics import base_metric, normalize
from experiments.trials.record import TrialRecord
from promptlib.errors import WorkbenchError

By = Literal["slice", "class"]
SMALL_BELOW = 30
ALPHA = 0.05
PAPER_QUOTE = "LegalBench's slices are not intended for rigorous statistical analysis"
CLASS_METRIC = "recall (accuracy on the class's rows)"
BLANK = "(blank)"
MANY_GROUPS = 20  # more slices than this: the note asks whether the column is a category
# metrics a class's recall makes sense for: the answer is one of a few labels
CLASS_METRICS = ("balanced_accuracy", "accuracy", "macro_f1")


class SliceError(WorkbenchError):
    """A grouping that cannot be computed (rows without a group value, a task with no
    classes): says which and what to do."""


@dataclass(frozen=True)
class SliceRow:
    """One group's scores, difference and test (None where undefined; `note` says why)."""

    group: str
    n: int
    score_a: float | None = None
    ci_a_low: float | None = None
    ci_a_high: float | None = None
    score_b: float | None = None
    ci_b_low: float | None = None
    ci_b_high: float | None = None
    diff: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    mde_80: float | None = None
    small: bool = False
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SliceRow:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass(frozen=True)
class SliceTable:
    """One comparison's groups (by slice or by class) and how they were tested."""

    task: str
    model: str
    a: str
    b: str
    by: str  # "slice" | "class"
    column: str
    metric: str
    test: str
    correction: str
    n_resamples: int
    alpha: float
    small_below: int
    rows: tuple[SliceRow, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rows"] = [r.to_dict() for r in self.rows]
        d["notes"] = list(self.notes)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SliceTable:
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw["rows"] = tuple(SliceRow.from_dict(r) for r in d.get("rows") or ())
        kw["notes"] = tuple(d.get("notes") or ())
        return cls(**kw)


def small_note(n: int, mde: float | None, simulated: bool = True) -> str:
    """What a small group says: the paper's warning and what it could have detected."""
    head = f"small ({n} rows < {SMALL_BELOW}): {PAPER_QUOTE} (the paper)"
    if not simulated:
        return head
    if mde is None:
        return f"{head}; no difference reaches 80% power on these rows"
    return f"{head}; MDE at 80% power {mde:.2f}"


def _order(group: str) -> tuple[int, tuple[int, int, str]]:
    """Numbers in numeric order (a user's --column of years or counts: 2 before 10), then
    the other values, then the blank group."""
    return (1, (0, 0, group)) if group == BLANK else (0, row_order(group))


def _groups_of(
    indices: Sequence[str], groups: Mapping[str, str], column: str, where: str
) -> list[str]:
    missing = [i for i in indices if i not in groups]
    if missing:
        raise SliceError(
            f"{where}: {len(missing)} row(s) (e.g. index {missing[0]}) have no {column!r} "
            "value in the task's data: the trials were run on other data; rerun the sweep "
            "on this data or point --data-dir at the data it ran on"
        )
    return [str(groups[i]).strip() or BLANK for i in indices]


def _classes(keys: Sequence[str], labels: Sequence[str] | None) -> list[str]:
    """Gold answers as LegalBench's classes: spellings that normalise alike ("Yes", "yes",
    "Yes.") are one class, as the metric scores them, named by the task's label when one
    matches, else by its commonest spelling (ties: the first in sorted order)."""
    named = {normalize(x): str(x) for x in labels or ()}
    counts: dict[str, dict[str, int]] = {}
    for k in keys:
        spellings = counts.setdefault(normalize(k), {})
        spellings[k] = spellings.get(k, 0) + 1
    name = {c: named.get(c) or min(sp, key=lambda x: (-sp[x], x)) for c, sp in counts.items()}
    return [name[normalize(k)] for k in keys]


def _metric(by: str, trial_metric: str, where: str) -> tuple[str, str]:
    """(what the statistics compute, what the table calls it)."""
    sm = base_metric(trial_metric)
    if by == "slice":
        return sm, trial_metric
    if by != "class":
        raise SliceError(f"{where}: by must be 'slice' or 'class', not {by!r}")
    if sm not in CLASS_METRICS:
        raise SliceError(
            f"{where}: per-class recall needs a task whose answer is a label; this one is "
            f"scored with {trial_metric}: use --by slice"
        )
    return "accuracy", CLASS_METRIC


def _finite(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def slice_table(
    a: TrialRecord,
    b: TrialRecord,
    groups: Mapping[str, str],
    *,
    by: str,
    column: str,
    n_resamples: int,
    seed: int = 0,
    labels: Sequence[str] | None = None,
    cluster_by: ClusterBy = "prompt",
    cluster_column: dict[str, str] | None = None,
    peers: Sequence[TrialRecord] = (),
    mde: bool = True,
    intervals: bool = True,
) -> SliceTable:
    """A vs B on each group of their rows (`groups`: row index -> slice value, or the gold
    answer for by="class"), tested as the sweep tests the pair (module docstring).

    `labels` (the task's labels) lists classes with no rows (by="class") in a note.
    `cluster_by`, `cluster_column` and `peers` are the sweep's (`compare.pair`): the
    clusters come from all the rows and all the peers, then each group keeps its own rows'.
    `mde` and `intervals` False skip those (simulations of the test alone)."""
    where = f"{a.task} · {a.model}: {a.variant} vs {b.variant}"
    sm, metric_name = _metric(by, a.metric, where)
    ids_test = stats.PAIRED_CLUSTER_TEST if cluster_by != "rows" else stats.PAIRED_TEST

    def table(rows: Sequence[SliceRow], notes: Sequence[str], test: str, k: int) -> SliceTable:
        return SliceTable(
            task=a.task, model=a.model, a=a.variant, b=b.variant, by=by, column=column,
            metric=metric_name, test=test,
            correction=f"Holm over the {k} slices of this comparison" if by == "slice"
            else f"Holm over the {k} classes of this comparison",
            n_resamples=n_resamples, alpha=ALPHA, small_below=SMALL_BELOW,
            rows=tuple(rows), notes=tuple(notes),
        )  # fmt: skip

    if not (a.complete and b.complete):
        why = "; ".join(x.why_not() for x in (a, b) if not x.complete)
        return table((), (f"not tested: {why}",), ids_test, 0)
    if a.metric != b.metric:
        raise SliceError(f"{where}: the arms are scored with different metrics")
    answers, gens, indices = same_rows((a, b), where)
    c = clustering((a, b, *[p for p in peers if p.variant not in (a.variant, b.variant)]),
                   indices, cluster_by, cluster_column)  # fmt: skip
    y_all, (pa_all, pb_all) = stat_inputs(
        "balanced_accuracy" if by == "class" else sm, answers, list(gens)
    )
    keys = _groups_of(indices, groups, column, where)
    if by == "class":
        keys = _classes(keys, labels)
    names = sorted(set(keys), key=_order)
    notes: list[str] = []
    if by == "class" and labels:
        absent = sorted({normalize(x) for x in labels} - {normalize(k) for k in names})
        if absent:
            notes.append(f"classes with no rows here: {', '.join(absent)}")
    out: list[SliceRow] = []
    runs: dict[str, stats.PermutationResult] = {}
    for g in names:
        row, res = _one(g, keys, y_all, pa_all, pb_all, c, sm, by, n_resamples, seed,
                        mde, intervals)  # fmt: skip
        out.append(row)
        if res is not None:
            runs[g] = res
    one_class = [g for g in names if len({normalize(y_all[i]) for i, k in enumerate(keys)
                                          if k == g}) == 1]  # fmt: skip
    if by == "slice" and sm == "balanced_accuracy" and one_class:
        notes.append(
            f"one answer class in {_listed(one_class, names)}: balanced accuracy there is that "
            "class's recall, as LegalBench's sklearn balanced_accuracy_score gives it"
        )
    if by == "slice" and len(names) > MANY_GROUPS:
        small = sum(r.small for r in out)
        notes.append(
            f"{len(names)} slices of {column!r} ({small} small): each is tested and counted in "
            "Holm's family, so few can reach significance; a column of a few categories gives "
            "larger slices (is this column an identifier or a number?)"
        )
    notes.extend(_exactness(runs, n_resamples))
    notes.append(_clusters_note(c))
    tested = [i for i, r in enumerate(out) if r.p_value is not None]
    adjusted = stats.holm([float(out[i].p_value or 0.0) for i in tested]) if tested else []
    for i, p in zip(tested, adjusted, strict=True):
        out[i] = _with(out[i], p_adjusted=p)
    test = " / ".join(sorted({r.test for r in runs.values()})) or ids_test
    return table(out, notes, test, len(tested))


def _with(row: SliceRow, **changes: Any) -> SliceRow:
    return SliceRow(**{**row.to_dict(), **changes})


def _one(
    g: str,
    keys: Sequence[str],
    y_all: Sequence[str],
    pa_all: Sequence[str],
    pb_all: Sequence[str],
    c: Clustering,
    sm: str,
    by: str,
    n_resamples: int,
    seed: int,
    mde: bool,
    intervals: bool,
) -> tuple[SliceRow, stats.PermutationResult | None]:
    """One group's row and the test run on it (None: not tested)."""
    pos = [i for i, k in enumerate(keys) if k == g]
    n = len(pos)
    y = [y_all[i] for i in pos]
    pa, pb = [pa_all[i] for i in pos], [pb_all[i] for i in pos]
    sub = Clustering(factorize([int(c.ids[i]) for i in pos]), c.how, 0)
    notes: list[str] = []
    score = stats.metric_fn(sm)
    try:
        sa, sb = _finite(score(y, pa)), _finite(score(y, pb))
    except (ValueError, ZeroDivisionError) as e:
        sa = sb = None
        notes.append(f"{sm} is undefined on this group's rows ({e})")
    if sa is None or sb is None:
        if not any("undefined" in x for x in notes):
            notes.append(f"{sm} is undefined on this group's rows")
        return SliceRow(g, n, small=n < SMALL_BELOW, note="; ".join(notes)), None
    res = stats.paired_permutation_test(
        y, pa, pb, metric=sm, n_resamples=n_resamples, seed=seed, clusters=sub.ids
    )
    if abs(res.statistic - (sa - sb)) > 1e-9:  # the test is of the reported difference
        raise AssertionError(f"slice {g}: tested {res.statistic} is not {sa - sb}")
    row = SliceRow(g, n, score_a=sa, score_b=sb, diff=sa - sb, p_value=res.p_value,
                   small=n < SMALL_BELOW)  # fmt: skip
    if intervals:
        ci, ca = interval(y, pa, pb, sm, sub, seed), interval(y, pa, None, sm, sub, seed)
        cb = interval(y, pb, None, sm, sub, seed)
        row = _with(row, ci_low=ci.low, ci_high=ci.high, ci_a_low=ca.low, ci_a_high=ca.high,
                    ci_b_low=cb.low, ci_b_high=cb.high)  # fmt: skip
        flagged = [name for name, x in (("A", ca), ("B", cb), ("A - B", ci)) if x.unreliable]
        if flagged:
            notes.append(f"intervals flagged ({', '.join(flagged)}): measured coverage below 93% "
                         "for data like these")  # fmt: skip
    m = None
    if mde:
        found = power.minimum_detectable_effect(
            y, pa, pb, metric=sm, clusters=sub.ids, n_resamples=n_resamples, seed=seed,
            by_class=False,
        )  # fmt: skip
        m = found.value
        row = _with(row, mde_80=m)
    if row.small:
        notes.insert(0, small_note(n, m, simulated=mde))
    return _with(row, note="; ".join(notes) or None), res


def _listed(some: Sequence[str], every: Sequence[str]) -> str:
    return "every group" if len(some) == len(every) else ", ".join(some)


def _clusters_note(c: Clustering) -> str:
    """Which units the tests swapped and the intervals counted."""
    how = {
        "prompt": "rows any variant gave the same prompt",
        "rows": "every row its own",
    }.get(c.how, f"rows with the same {c.how.split('+')[0][7:]!r} value or the same prompt")
    return (
        f"clusters: {how} (the sweep's clustering, cluster_by {c.how.split('+')[0]}, "
        f"restricted to each group's rows): {c.n_rows} rows in {c.n_clusters} clusters"
    )


def _exactness(runs: Mapping[str, stats.PermutationResult], n_resamples: int) -> list[str]:
    """How each group's test ran: exact over every swap pattern of its discordant units
    (few of them), or Monte Carlo with the sweep's resamples, p = (b + 1) / (R + 1)."""
    same = [g for g, r in runs.items() if r.n_discordant == 0]
    exact = [f"{g} ({r.n_resamples})" for g, r in runs.items() if r.exact and r.n_discordant]
    sampled = [g for g, r in runs.items() if not r.exact]
    out = []
    if exact:
        out.append("p exact over every swap pattern (how many) in: " + ", ".join(exact))
    if same:
        out.append("A and B score alike on every row (p = 1) in: " + ", ".join(same))
    if sampled:
        out.append(
            f"p Monte Carlo ({n_resamples} resamples, p = (b + 1) / (R + 1)) in: "
            + ", ".join(sampled)
        )
    return out
