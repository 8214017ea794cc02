"""The statistics of an import: the sweep's own comparisons (`experiments.sweeps.report.compare`:
paired permutation tests or the range test for best-of-k, intervals, Holm/BH, the across-task
test) and the prompt-sensitivity report, on the imported arms. No second statistics path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from experiments.analysis import sensitivity_report
from experiments.analysis.align import row_order
from experiments.imports.arms import Arms
from experiments.imports.pairing import pairing_notes
from experiments.sweeps.report import compare
from experiments.sweeps.spec import NamedVariant, SweepSpec
from experiments.trials.record import TrialRecord
from promptlib.variants import PromptVariant

CLUSTER_BY = "rows"  # imported rows carry no prompt hash: each row is its own unit
# epochs kept apart: the rows' cluster keys are their sample ids (`arms.sample_clusters`),
# clustered by the comparisons' "prompt" rule, so a sample's epochs move as one unit
BY_SAMPLE, SAMPLE_LABEL = "prompt", "sample (its epochs together)"
N_RESAMPLES = 10_000


def _spec(
    name: str,
    records: Sequence[TrialRecord],
    comparisons: str,
    correction: str,
    across: str,
    n_resamples: int,
    cluster_by: str = CLUSTER_BY,
) -> SweepSpec:
    """The sweep-shaped description of an import the comparison code reads: its variants
    (names only; their prompts were made elsewhere), tasks, models and tests."""
    # in name order, not file order: each pair is oriented (A - B) and its interval drawn the
    # same way whatever the order of the lines or of the files on the command line
    variants = sorted({r.variant for r in records}, key=row_order)
    return SweepSpec(
        path=f"import {name}", name=name, description="imported results",
        tasks=tuple(dict.fromkeys(r.task for r in records)), requires=(),
        models=tuple(dict.fromkeys(r.model for r in records)), split="test", limit=None,
        sample_seed=0, variants=tuple(NamedVariant(v, PromptVariant()) for v in variants),
        comparisons=comparisons, n_resamples=n_resamples, correction=correction,
        scoring=None, across_tasks=across, cluster_by=cluster_by,
    )  # fmt: skip


def verdict(
    name: str,
    arms: Arms,
    *,
    comparisons: str = "all_pairs",
    correction: str = "holm",
    across: str = "t",
    n_resamples: int = N_RESAMPLES,
) -> dict[str, Any]:
    """The import's report document: comparisons, across-task tests, sensitivity, the rows
    left out and the scoring notes (JSON-able)."""
    records = sorted(arms.records, key=lambda r: row_order(r.variant))  # see `_spec`
    by_sample = any(r.prompt_hashes for r in records)
    cluster_by = BY_SAMPLE if by_sample else CLUSTER_BY
    spec = _spec(name, records, comparisons, correction, across, n_resamples, cluster_by)
    table, across_rows = compare(spec, records, catalog=None)  # type: ignore[arg-type]
    for row in table:
        if by_sample and row.get("clustered_by") == BY_SAMPLE:
            row["clustered_by"] = SAMPLE_LABEL
    pairing = pairing_notes(table, records)
    return {
        "import": name,
        "comparisons": table,
        "across_tasks": across_rows,
        "sensitivity": _sensitivity(records, n_resamples, cluster_by),
        "left_out": [asdict(x) for x in arms.left_out],
        "notes": list(arms.notes),
        "pairing": pairing,
        "trials": [
            {"task": r.task, "model": r.model, "variant": r.variant, "metric": r.metric,
             "score": r.score, "n": r.n}
            for r in records
        ],
    }  # fmt: skip


def _sensitivity(records: list[TrialRecord], n_resamples: int, cluster_by: str) -> dict[str, Any]:
    """The prompt-sensitivity report, or why there is none (never a number it cannot back)."""
    if len({r.variant for r in records}) < 2:
        return {"per_task": [], "notes": ["one variant: nothing to compare"]}
    try:
        return sensitivity_report(records, n_resamples=n_resamples, cluster_by=cluster_by)
    except (ValueError, AssertionError) as e:
        return {"per_task": [], "error": f"no sensitivity analysis: {e}"}
