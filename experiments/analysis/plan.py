"""A comparison plan: which trials are compared and how, whoever ran them.

Why: a sweep and an import compare their trials with the same tests, intervals, corrections
and across-task test. The plan is the one description both build (`sweeps.report.plan_of`
from a sweep spec, `imports.verdict` from the imported arms), and `run_plan` and
`plan_sensitivity` the one code that runs it, so the two can never drift apart and an import
never has to dress up as a sweep.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from experiments.analysis import compare as cmp
from experiments.analysis import decision
from experiments.analysis.records import AcrossTaskTest, Comparison
from experiments.analysis.sensitivity import sensitivity_report
from experiments.trials.record import TrialRecord

# `progress(done, total, what)`: told after each comparison
Progress = Callable[[int, int, str], None]
# task -> row index -> value of the data column a plan clusters by (`cluster_by: column:<name>`)
Columns = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class ComparisonPlan:
    """What to compare and how: the variants in the order the comparisons list them (each
    pair is A - B with A listed first: `analysis.contrast`), which pairs, and the tests.

    `comparisons` is "all_pairs", "best_vs_worst" (the range test over the k variants) or
    the declared (A, B) pairs; `correction` "holm" or "bh"; `across_tasks` "t", "wilcoxon"
    or "permutation"; `cluster_by` "prompt", "rows" or "column:<name>" (the units every test
    resamples: `analysis.clusters`). `name` is the sweep's or the import's, for messages."""

    name: str
    tasks: tuple[str, ...]
    models: tuple[str, ...]
    variants: tuple[str, ...]
    comparisons: str | tuple[tuple[str, str], ...]
    n_resamples: int
    correction: str
    across_tasks: str
    cluster_by: str = "prompt"

    @property
    def kind(self) -> str:
        """all_pairs, best_vs_worst, or pairs (declared ones)."""
        return self.comparisons if isinstance(self.comparisons, str) else "pairs"

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """The declared pairs (none for all_pairs and best_vs_worst)."""
        return () if isinstance(self.comparisons, str) else self.comparisons

    @property
    def by_column(self) -> str | None:
        """The data column the tests cluster by, or None when they do not."""
        if not self.cluster_by.startswith("column:"):
            return None
        return self.cluster_by[7:].strip()


def run_plan(
    plan: ComparisonPlan,
    outcomes: Sequence[TrialRecord],
    *,
    columns: Columns | None = None,
    skipped: Mapping[str, Mapping[str, str]] | None = None,
    progress: Progress | None = None,
    final: bool = True,
) -> tuple[list[Comparison], list[AcrossTaskTest]]:
    """The comparisons per (model, task), corrected across the plan, and the declared
    across-task test (see `experiments.analysis.compare`), each with its recommendation
    (`experiments.analysis.decision`; `final` False: some trials are incomplete).
    `progress(done, total, what)` is told after each comparison (100 variants' all_pairs
    are 4,950 of them). `columns` gives each task's cluster column when the plan clusters by
    one.

    `skipped` (task -> variant -> why) names the variants a task could not run: a comparison
    with such an arm is listed for that task as skipped, with the reason, never tested on the
    arms that did run; the across-task test takes only the tasks that tested it."""

    table: list[Comparison] = []
    groups: dict[tuple[str, str], dict[str, TrialRecord]] = {}
    for o in outcomes:
        groups.setdefault((o.model, o.task), {})[o.variant] = o
    names = list(plan.variants)
    gone_of = {task: dict((skipped or {}).get(task, {})) for _, task in groups}
    todo = {
        key: [] if plan.comparisons == "best_vs_worst"
        else cmp.pairs_of(plan.comparisons, [n for n in names if n in arms or n in gone_of[key[1]]])
        for key, arms in groups.items()
    }  # fmt: skip
    total, done = sum(len(pairs) or 1 for pairs in todo.values()), 0

    def tick(where: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total, f"comparisons, {where}")

    for (model, task), by_variant in groups.items():
        arms = dict(by_variant)
        where = f"{task} ({model})"
        column = columns.get(task) if columns is not None else None
        how: dict[str, Any] = {
            "n_resamples": plan.n_resamples,
            "where": where,
            "cluster_by": plan.cluster_by,
            "column": dict(column) if column is not None else None,
        }
        gone = gone_of[task]
        if plan.comparisons == "best_vs_worst":
            if len(arms) < 2 and gone:
                rows = [_skipped_row(where, "best", "worst", arms, gone, "range permutation test")]
            else:
                rows = [cmp.best_vs_worst(list(arms.values()), **how)]
            tick(where)
        else:
            peers = list(arms.values())
            memo: dict[tuple[str, ...], Any] = {}  # the peers' clusters (`cmp.pair`)
            rows = []
            for a, b in todo[(model, task)]:
                rows.append(
                    _skipped_row(where, a, b, arms, gone, "paired permutation test")
                    if a in gone or b in gone
                    else cmp.pair(arms[a], arms[b], peers=peers, memo=memo, **how)
                )
                tick(where)
        table += [replace(row, model=model, task=task) for row in rows]
    table = cmp.correct(table, plan.correction)
    tasks = list(dict.fromkeys(o.task for o in outcomes))
    across = cmp.across_tasks(table, kind=plan.kind, test=plan.across_tasks, all_tasks=tasks)  # type: ignore[arg-type]
    # what to do, in a line each (`final` False: some trials are incomplete, see `annotate`)
    return decision.annotate(table, across, plan.correction, final)


def _skipped_row(
    where: str,
    a: str,
    b: str,
    arms: Mapping[str, TrialRecord],
    gone: Mapping[str, str],
    test: str,
) -> Comparison:
    """A comparison not computed on a task because an arm could not run there: no score and
    no p-value, and a status saying which arm and why."""
    missing = [v for v in (a, b) if v in gone] or sorted(gone)
    status = f"{decision.SKIPPED}: " + "; ".join(f"{v}: {gone[v]}" for v in missing)
    if a == "best":  # best_vs_worst with fewer than two variants run
        status += f" (only {len(arms)} variant(s) ran: no draws to compare)"
    return replace(cmp.untested(where, a, b, list(arms.values()), test), status=status)


def plan_sensitivity(
    plan: ComparisonPlan, records: Sequence[TrialRecord], columns: Columns | None = None
) -> dict[str, Any]:
    """The plan's prompt-sensitivity report (`experiments.analysis.sensitivity`), on the
    comparisons' units, each pooled effect with the sign of the comparisons table
    (`analysis.contrast`); or why there is none (never a number it cannot back)."""
    if len(plan.variants) < 2:
        return {"per_task": [], "notes": ["one variant: nothing to compare"]}
    try:
        return sensitivity_report(
            list(records),
            n_resamples=plan.n_resamples,
            cluster_by=plan.cluster_by,
            columns={t: dict(c) for t, c in columns.items()} if columns is not None else None,
            order=list(plan.variants),
            pairs=plan.pairs,
        ).to_dict()  # the document's section: its notes and rows get added to
    except (ValueError, AssertionError) as e:
        return {"per_task": [], "error": f"no sensitivity analysis: {e}"}
