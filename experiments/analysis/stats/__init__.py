"""Statistics for comparing prompt variants, exact about what they test.

One module per concept; every name is re-exported here, so `stats.X` and
``from experiments.analysis.stats import X`` are the ways to use them:

- `metrics`: the metric a test runs on (a name or a callable) and the checked inputs;
- `decomposition`: official metrics as per-row sums, which make the tests vectorised;
- `paired`: `paired_permutation_test` of two variants;
- `range_test`: `range_permutation_test` of k variants (valid best-vs-worst) and the paper's
  anti-conservative `post_selection_pair_test`;
- `bootstrap`: `bootstrap_ci`, stratified paired bias-corrected intervals;
- `across`: `across_tasks` ("t", "wilcoxon", "permutation") on per-task scores;
- `multiplicity`: `holm` and `benjamini_hochberg` corrections;
- `ppi`: prediction-powered (PPI++) means and paired differences of hand grades with judge
  scores (`ppi_mean`, `ppi_paired_difference`, `hand_only_difference`,
  `judge_only_difference`, `hand_grades_needed`).

The simulated minimum detectable effect is `analysis.power.minimum_detectable_effect`.
"""

from experiments.analysis.stats.across import (
    ACROSS_TESTS,
    AcrossTasks,
    AcrossTest,
    across_tasks,
    paired_t_across_tasks,
    permutation_across_tasks,
    wilcoxon_across_tasks,
)
from experiments.analysis.stats.bootstrap import (
    MIN_CLASS_ROWS,
    STRATIFIED_METRICS,
    Interval,
    IntervalMethod,
    bootstrap_ci,
    resample_counts,
)
from experiments.analysis.stats.decomposition import (
    Decomposition,
    checked_decomposition,
    class_index,
    normalized_labels,
)
from experiments.analysis.stats.metrics import (
    Alternative,
    FloatArray,
    Labels,
    Metric,
    MetricCallable,
    MetricName,
    check_inputs,
    metric_fn,
    metric_names,
    name_of_metric,
    resolve_metric,
)
from experiments.analysis.stats.multiplicity import benjamini_hochberg, holm
from experiments.analysis.stats.paired import (
    PAIRED_CLUSTER_TEST,
    PAIRED_TEST,
    PermutationResult,
    paired_permutation_test,
)
from experiments.analysis.stats.ppi import (
    JudgeDifference,
    PPIDifference,
    PPIEstimate,
    hand_grades_needed,
    hand_only_difference,
    judge_only_difference,
    ppi_mean,
    ppi_paired_difference,
)
from experiments.analysis.stats.range_test import (
    POST_SELECTION_TEST,
    RANGE_CLUSTER_TEST,
    RANGE_TEST,
    PostSelectionResult,
    RangeResult,
    post_selection_pair_test,
    range_permutation_test,
)

__all__ = [
    "ACROSS_TESTS",
    "MIN_CLASS_ROWS",
    "PAIRED_CLUSTER_TEST",
    "PAIRED_TEST",
    "POST_SELECTION_TEST",
    "RANGE_CLUSTER_TEST",
    "RANGE_TEST",
    "STRATIFIED_METRICS",
    "AcrossTasks",
    "AcrossTest",
    "Alternative",
    "Decomposition",
    "FloatArray",
    "Interval",
    "IntervalMethod",
    "JudgeDifference",
    "Labels",
    "Metric",
    "MetricCallable",
    "MetricName",
    "PPIDifference",
    "PPIEstimate",
    "PermutationResult",
    "PostSelectionResult",
    "RangeResult",
    "across_tasks",
    "benjamini_hochberg",
    "bootstrap_ci",
    "check_inputs",
    "checked_decomposition",
    "class_index",
    "hand_grades_needed",
    "hand_only_difference",
    "holm",
    "judge_only_difference",
    "metric_fn",
    "metric_names",
    "name_of_metric",
    "normalized_labels",
    "paired_permutation_test",
    "paired_t_across_tasks",
    "permutation_across_tasks",
    "post_selection_pair_test",
    "ppi_mean",
    "ppi_paired_difference",
    "range_permutation_test",
    "resample_counts",
    "resolve_metric",
    "wilcoxon_across_tasks",
]
