"""Statistics over trials: tests and intervals, comparisons, prompt sensitivity, clusters, power,
sequential (anytime-valid) comparisons.

The names are imported on first use (`promptlib.lazy`): a `workbench run` logging its trial
reads `records` alone, not the statistics (0.17 s of its start-up). `figures` (matplotlib) is
imported where a figure is drawn."""

from __future__ import annotations

from typing import TYPE_CHECKING

from promptlib.lazy import lazy_exports

if TYPE_CHECKING:
    from experiments.analysis.clusters import Clustering
    from experiments.analysis.compare import best_vs_worst, pair
    from experiments.analysis.intervals import metric_interval
    from experiments.analysis.power import MDE
    from experiments.analysis.records import AcrossTaskTest, Comparison, Recommendation
    from experiments.analysis.sensitivity import (
        format_sensitivity,
        pooled_effects,
        sensitivity_report,
        variance_shares_artifact,
    )
    from experiments.analysis.sequential import (
        SEQUENCE,
        Elimination,
        Look,
        NotSequential,
        PairedSequence,
        row_order,
    )
    from experiments.analysis.stats import (
        Interval,
        benjamini_hochberg,
        bootstrap_ci,
        holm,
        paired_permutation_test,
        range_permutation_test,
    )

_HOMES = {
    "AcrossTaskTest": "experiments.analysis.records",
    "Clustering": "experiments.analysis.clusters",
    "Comparison": "experiments.analysis.records",
    "Elimination": "experiments.analysis.sequential",
    "Interval": "experiments.analysis.stats",
    "Look": "experiments.analysis.sequential",
    "MDE": "experiments.analysis.power",
    "NotSequential": "experiments.analysis.sequential",
    "PairedSequence": "experiments.analysis.sequential",
    "Recommendation": "experiments.analysis.records",
    "SEQUENCE": "experiments.analysis.sequential",
    "benjamini_hochberg": "experiments.analysis.stats",
    "best_vs_worst": "experiments.analysis.compare",
    "bootstrap_ci": "experiments.analysis.stats",
    "format_sensitivity": "experiments.analysis.sensitivity",
    "holm": "experiments.analysis.stats",
    "metric_interval": "experiments.analysis.intervals",
    "pair": "experiments.analysis.compare",
    "paired_permutation_test": "experiments.analysis.stats",
    "pooled_effects": "experiments.analysis.sensitivity",
    "range_permutation_test": "experiments.analysis.stats",
    "row_order": "experiments.analysis.sequential",
    "sensitivity_report": "experiments.analysis.sensitivity",
    "variance_shares_artifact": "experiments.analysis.sensitivity",
}
"""Where each public name lives: imported from there on first use (`promptlib.lazy`)."""

__all__ = [
    "MDE",
    "SEQUENCE",
    "AcrossTaskTest",
    "Clustering",
    "Comparison",
    "Elimination",
    "Interval",
    "Look",
    "NotSequential",
    "PairedSequence",
    "Recommendation",
    "benjamini_hochberg",
    "best_vs_worst",
    "bootstrap_ci",
    "format_sensitivity",
    "holm",
    "metric_interval",
    "pair",
    "paired_permutation_test",
    "pooled_effects",
    "range_permutation_test",
    "row_order",
    "sensitivity_report",
    "variance_shares_artifact",
]

__getattr__, __dir__ = lazy_exports(globals(), _HOMES)
