"""Prompt sensitivity of a sweep: how much each prompt factor moves a legal task.

Pure functions over the sweep's trials (one per task, model and variant; a variant's name
``instruction=reference,seed=0`` carries its axis values). `sensitivity_report` returns a
`SensitivityReport` (`to_dict`: the JSON-able section of the sweep's document) with, for a
sweep that has at least two variants of a (task, model):

- per (task, model): spread (max - min of the task's official metric over the variants, with
  the range permutation test's p-value: the very test `experiments.analysis.compare.best_vs_worst`
  runs, same variant order, inputs, seed and clusters, so one report has one p-value for
  it), MaxP, AvgP (Mizrahi et al.), PromptSensiScore (ProSA: per row, the mean over variant
  pairs of |correct_i - correct_j|, averaged over rows) and the share of rows whose
  correctness depends on the prompt; rows and clusters of identical prompts; each with a 95%
  interval from a cluster bootstrap (clusters of rows some variant gave the same prompt,
  `experiments.analysis.clusters.by_prompts`, resampled whole, all variants together, stratified by
  answer class for balanced accuracy), by the method `CI_METHODS` names, flagged
  ``ci_unreliable`` where its coverage measured by benchmarks/sensitivity_coverage.py
  (`CI_COVERAGE`) is below 0.93 or the design lies outside the measured grid;
- per model, the variance of per-row correctness split into task, row (within task), each
  axis, axis x task, axis x axis, and residual (row x prompt) variance components, each
  factor's sum of squares less the row x prompt noise it carries (`variance_shares`),
  shares summing to 1, each with a cluster-bootstrap interval flagged from the same table;
- per model and axis contrast, a random-effects meta-analysis across tasks of the per-task
  paired effect, with the paper's paired t-test beside it (a task whose effect has zero
  bootstrap variance is kept, its variance floored, with a note);
- with two or more models, rank stability (Kendall tau between model rankings under each pair
  of variants, and how often the best model changes with the prompt).

An incomplete trial is excluded (listed in ``notes`` and ``excluded``), never scored as wrong.

Modules: `groups` (the trials' groups and shared names), `measures` (per task and model),
`variance` (variance components), `across` (meta-analysis, rank stability), `coverage` (the
measured coverage table), `report` (the whole report, its MLflow metrics), `text` (as text).
"""

from experiments.analysis.sensitivity.across import meta_analysis, rank_stability
from experiments.analysis.sensitivity.coverage import CI_COVERAGE, COVERAGE_FLOOR, share_kind
from experiments.analysis.sensitivity.groups import (
    AXIS_X_AXIS,
    CI_MEASURES,
    N_RESAMPLES,
    RESIDUAL,
    ROW,
    TASK,
    UNATTRIBUTED,
    Group,
    draw_factor,
    with_axes,
)
from experiments.analysis.sensitivity.measures import CI_METHODS, task_measures
from experiments.analysis.sensitivity.report import (
    pooled_effects,
    sensitivity_metrics,
    sensitivity_report,
    variance_shares_artifact,
)
from experiments.analysis.sensitivity.result import SensitivityReport
from experiments.analysis.sensitivity.text import format_sensitivity
from experiments.analysis.sensitivity.variance import (
    SHARE_CI_METHOD,
    SHARE_CI_METHODS,
    variance_shares,
)
from experiments.names import metric_name  # the face names its metrics (rule: experiments.names)

__all__ = [
    "AXIS_X_AXIS",
    "CI_COVERAGE",
    "CI_MEASURES",
    "CI_METHODS",
    "COVERAGE_FLOOR",
    "N_RESAMPLES",
    "RESIDUAL",
    "ROW",
    "SHARE_CI_METHOD",
    "SHARE_CI_METHODS",
    "TASK",
    "UNATTRIBUTED",
    "Group",
    "SensitivityReport",
    "draw_factor",
    "format_sensitivity",
    "meta_analysis",
    "metric_name",
    "pooled_effects",
    "rank_stability",
    "sensitivity_metrics",
    "sensitivity_report",
    "share_kind",
    "task_measures",
    "variance_shares",
    "variance_shares_artifact",
    "with_axes",
]
