"""Statistics over trials: tests and intervals, comparisons, prompt sensitivity, clusters, power,
sequential (anytime-valid) comparisons.

`figures` (matplotlib) is not imported here: import `experiments.analysis.figures` where a
figure is drawn (start-up time)."""

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
