"""`experiments.analysis.stats` is a package of one module per concept behind the names the
single module had (issue 32, part 3): callers keep `stats.X`, and the normal-approximation MDE
that only tests used is gone from the product (its name was the real one's in `power`)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from experiments.analysis import power, stats

# every public name of the old experiments/analysis/stats.py, minus the test-only MDE
OLD_NAMES = [
    "ACROSS_TESTS",
    "AcrossTasks",
    "AcrossTest",
    "Alternative",
    "Decomposition",
    "FloatArray",
    "Interval",
    "IntervalMethod",
    "Labels",
    "MIN_CLASS_ROWS",
    "Metric",
    "MetricCallable",
    "MetricName",
    "PAIRED_CLUSTER_TEST",
    "PAIRED_TEST",
    "POST_SELECTION_TEST",
    "PermutationResult",
    "PostSelectionResult",
    "RANGE_CLUSTER_TEST",
    "RANGE_TEST",
    "RangeResult",
    "STRATIFIED_METRICS",
    "across_tasks",
    "benjamini_hochberg",
    "bootstrap_ci",
    "check_inputs",
    "checked_decomposition",
    "class_index",
    "holm",
    "metric_fn",
    "metric_names",
    "name_of_metric",
    "normalized_labels",
    "paired_permutation_test",
    "paired_t_across_tasks",
    "permutation_across_tasks",
    "post_selection_pair_test",
    "range_permutation_test",
    "resample_counts",
    "resolve_metric",
    "wilcoxon_across_tasks",
]

MODULES = (
    "across",
    "bootstrap",
    "decomposition",
    "metrics",
    "multiplicity",
    "paired",
    "ppi",
    "range_test",
)


@pytest.mark.parametrize("name", OLD_NAMES)
def test_every_old_name_is_still_reachable(name: str) -> None:
    assert name in stats.__all__
    value = getattr(stats, name)
    exec(f"from experiments.analysis.stats import {name}", {})  # the other spelling
    owner = getattr(value, "__module__", "")
    if callable(value) and owner.startswith("experiments."):
        # defined in one of the package's modules, not copied
        assert owner.startswith("experiments.analysis.stats."), owner


def test_the_package_has_one_module_per_concept() -> None:
    found = {m.name for m in pkgutil.iter_modules(stats.__path__)}
    assert set(MODULES) == found
    for name in found:
        module = importlib.import_module(f"experiments.analysis.stats.{name}")
        assert module.__doc__, f"stats.{name} says what it holds"


def test_the_normal_approximation_mde_left_the_product() -> None:
    assert not hasattr(stats, "minimum_detectable_effect")
    assert callable(power.minimum_detectable_effect)  # the product's one, simulated
    from tests.support.normal_mde import normal_approximation_mde

    y = ["Yes", "No"] * 20
    a = ["Yes"] * 40
    assert normal_approximation_mde(y, a, y, metric="accuracy") > 0
