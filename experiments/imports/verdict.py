"""The statistics of an import: its comparison plan (`experiments.analysis.plan`), run by the
code a sweep's runs (paired permutation tests or the range test for best-of-k, intervals,
Holm/BH, the across-task test), and the prompt-sensitivity report, on the imported arms. No
second statistics path."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from experiments.analysis.align import row_order
from experiments.analysis.plan import ComparisonPlan, plan_sensitivity, run_plan
from experiments.imports.arms import Arms
from experiments.imports.identity import Units
from experiments.imports.pairing import pairing_notes
from experiments.trials.record import TrialRecord

# the rows' cluster keys (`experiments.imports.identity`: the source's prompt identity, the task's
# texts, a sample's epochs) are their records' prompt hashes, clustered by the comparisons'
# "prompt" rule (rows linked under any arm are one unit); no key anywhere: every row a unit
BY_KEY, CLUSTER_BY = "prompt", "rows"
N_RESAMPLES = 10_000
# The sensitivity bootstrap holds (resamples x rows) counts at once (`stats.resample_counts`):
# 2.5 GB at 100,000 rows x 1,000; a 1M-line import at 10,000 resamples would need ~40 GB.
# Above this product it is left out, saying why (LegalBench's largest split: 2,400 x 10,000).
MAX_BOOTSTRAP_CELLS = 50_000_000


def plan_of(
    name: str,
    records: Sequence[TrialRecord],
    comparisons: str,
    correction: str,
    across: str,
    n_resamples: int,
    cluster_by: str = CLUSTER_BY,
) -> ComparisonPlan:
    """The import's comparison plan: its variants (names only; their prompts were made
    elsewhere), tasks, models and tests."""
    # in name order, not file order: each pair is oriented (A - B) and its interval drawn the
    # same way whatever the order of the lines or of the files on the command line
    variants = sorted({r.variant for r in records}, key=row_order)
    return ComparisonPlan(
        name=name,
        tasks=tuple(dict.fromkeys(r.task for r in records)),
        models=tuple(dict.fromkeys(r.model for r in records)),
        variants=tuple(variants),
        comparisons=comparisons,
        n_resamples=n_resamples,
        correction=correction,
        across_tasks=across,
        cluster_by=cluster_by,
    )


def verdict(
    name: str,
    arms: Arms,
    *,
    comparisons: str = "all_pairs",
    correction: str = "holm",
    across: str = "t",
    n_resamples: int = N_RESAMPLES,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, Any]:
    """The import's report document: comparisons, across-task tests, sensitivity, the rows
    left out and the scoring notes (JSON-able); `progress` is told after each comparison."""
    records = sorted(arms.records, key=lambda r: row_order(r.variant))  # see `plan_of`
    cluster_by = cluster_rule(records)
    plan = plan_of(name, records, comparisons, correction, across, n_resamples, cluster_by)
    table, across_rows = run_plan(plan, records, progress=progress)
    for row in table:
        _label(row, arms.units.get((row["task"], row["model"])))
    pairing = pairing_notes(table, records)
    # pooled effects oriented as the comparisons' pairs (`analysis.contrast`): name order
    sensitivity = _sensitivity(plan, records)
    for row in sensitivity.get("per_task", []):
        how = arms.units.get((row.get("task"), row.get("model")))
        if how is not None and "clustering" in row:
            row["clustering"] = how.label
    return {
        "import": name,
        "comparisons": table,
        "across_tasks": across_rows,
        "sensitivity": sensitivity,
        "left_out": [asdict(x) for x in arms.left_out],
        "notes": list(arms.notes),
        "clustering": [
            {"task": task, "model": model, "clustered_by": how.label, "note": how.note}
            for (task, model), how in arms.units.items()
        ],
        "pairing": pairing,
        "trials": [
            {"task": r.task, "model": r.model, "variant": r.variant, "metric": r.metric,
             "score": r.score, "n": r.n}
            for r in records
        ],
    }  # fmt: skip


def cluster_rule(records: Sequence[TrialRecord]) -> str:
    """The comparisons' `cluster_by` for imported records: by their cluster keys (the
    records' prompt hashes, `experiments.imports.identity`) when any row has one, else rows."""
    return BY_KEY if any(r.prompt_hashes for r in records) else CLUSTER_BY


def _label(row: dict[str, Any], how: Units | None) -> None:
    """A tested comparison says how its rows were clustered (`clustered_by`: the source's
    prompt identity, the task's texts, or rows tested as independent units) and, where rows
    are independent for want of a key, why (`cluster_note`)."""
    if how is None or row.get("clustered_by") is None:
        return
    row["clustered_by"], row["cluster_note"] = how.label, how.note


def _sensitivity(plan: ComparisonPlan, records: Sequence[TrialRecord]) -> dict[str, Any]:
    """The plan's prompt-sensitivity report (`analysis.plan.plan_sensitivity`: pooled effects
    with the comparisons' signs), or why there is none (never a number it cannot back)."""
    if len(plan.variants) < 2:
        return {"per_task": [], "notes": ["one variant: nothing to compare"]}
    rows = max((r.n for r in records), default=0)
    if rows * plan.n_resamples > MAX_BOOTSTRAP_CELLS:
        return {"per_task": [], "error": (
            f"no sensitivity analysis: {rows:,} rows x {plan.n_resamples:,} resamples is over the "
            f"{MAX_BOOTSTRAP_CELLS:,} its bootstrap holds in memory at once (~8 bytes each); "
            "the comparisons stand on their own: run `workbench compare NAME --n-resamples N` "
            f"with N <= {MAX_BOOTSTRAP_CELLS // max(rows, 1):,} for it"
        )}  # fmt: skip
    return plan_sensitivity(plan, records)
