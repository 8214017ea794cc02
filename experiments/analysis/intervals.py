"""Intervals for the official metrics whose coverage was measured, and flagged where it fails.

Why not the bootstrap: percentile-type bootstraps of balanced accuracy under-cover near the
ceiling (a review measured 0.75 for a nominal 95% at n = 100 with 10 minority rows, recall
0.9): a class whose rows are all right resamples to "all right" every time. A posterior
interval keeps the uncertainty of a perfect class.

Method (`metric_interval`), for the accuracy-type metrics (``accuracy``,
``balanced_accuracy`` and the 0/1-per-row metrics ``sara_numeric_within_10pct``,
``citation_open_contains``, ``definition_extraction_stemmed_match``):

- One variant: every group's hit rate gets a Jeffreys Beta(hits + 1/2, misses + 1/2)
  posterior. The groups are the answer classes for balanced accuracy (the metric is the mean
  of the per-class recalls) and all rows for the others. Next to a bound (a group with at
  most one miss or at most one hit) the group's lower tail is drawn from Beta(hits, misses +
  1) and its upper tail from Beta(hits + 1, misses), the Clopper-Pearson bounds (as in the
  modified Jeffreys interval of Brown, Cai & DasGupta 2001): near the ceiling the Jeffreys
  bounds covered 0.80-0.88.
- Paired difference metric(A) - metric(B): every group's rows fall into four cells (both
  right, A only, B only, both wrong), with a Jeffreys Dirichlet(1/2, 1/2, 1/2, 1/2) prior;
  the difference of the group's hit rates is p(A only) - p(B only), and the metric's
  difference is their (class-)mean. When the "B only" rows of all groups together number
  at most one, every group's lower tail draws with shapes (A only, B only + w_g) instead of
  (+ 1/2, + 1/2), w_g the group's metric weight (1/G for balanced accuracy), i.e. ONE
  imaginary "B only" row in total (`pooled_extra`); likewise the upper tail for "A only":
  the Clopper-Pearson-type analogue, exact in shape for one group. (One imaginary row per
  nearly empty group put G of them into a G-class interval: 5 classes x 40 rows covered
  1.000 and missed effects an exact permutation test found.)
- The interval is the equal-tailed one of `n_draws` draws of the weighted sum over groups.
  From three groups on (`CENTRE_FROM`) every group's draws are first centred on its observed
  rate: the prior pulls each posterior mean towards 1/2, and over 5-10 classes those pulls
  add up while the spread shrinks (the uncentred interval covered 0.86-0.89 there); with
  one or two groups the pull helps, so it stays.
- Clusters (rows that cannot vary apart, e.g. identical prompts): a group's counts are the
  row shares of each cell times the group's effective size n_eff = (sum m)^2 / sum m^2 over
  its clusters' row counts m (Kish). That is exact when a cluster's rows share one outcome
  (identical prompts get identical answers) and conservative when they merely correlate;
  with no clusters n_eff is the row count and the counts are the row counts. Clusters that
  hold rows of several classes (a document's rows, `by_column`) also tie the classes
  together: every n_eff is then divided by the metric's design effect under shared
  outcomes (`_design_effect`; per-class Kish alone covered about 0.85 there), and the flag
  also reads the measured spanning design nearest to the data's (`spanning_cell`).
- The point estimate is the official metric (``stats.metric_fn``) over all rows; the
  interval is clipped to the metric's range and widened, if needed, to contain it.

The F1 metrics (``ssla_f1``, ``successor_liability_f1``) fall back to
`experiments.analysis.stats.bootstrap_ci` (its default bias-corrected percentile interval, 2,000
resamples; clusters are passed on when that function takes them, else the interval is
flagged); their coverage was measured the same way (`benchmarks/coverage.py`, part f1),
true F1 0.52-0.66 (the interior table) and 0.88-0.975 (read, as "+ceiling", when an arm's
F1 exceeds F1_NEAR); an F1 above F1_MEASURED_MAX is flagged as off the measured grid.

Every interval is flagged from measured coverage, not from a rule: `COVERAGE` holds the
minimum and median coverage that `benchmarks/coverage.py` measured for each grid cell, the
minimum taken over the generating recall scenarios (and, paired, arm correlations 0 / 0.7)
of that cell. Two answer classes and classless metrics: cells (n, minority share); 3, 5 and
10 equal classes: cells ("classes", (classes, rows per class)); clusters spanning classes:
("spanning", (documents, rows per document)). Each family has an interior table (true
recalls 0.5-0.95) and a "+ceiling" table (recalls 0.97, 0.99, 1.0 added), read when an
observed group rate lies beyond 0.95 (or below 0.05: the method is symmetric). The lookup
takes the largest grid cell the data dominate (effective sizes, not row counts) and marks
the interval `unreliable` when that cell's minimum coverage is below `MIN_COVERAGE`; the
note says what was measured, and calls the interval conservative only when that minimum
lies above `MAX_COVERAGE` (every measured scenario over-covered). Data smaller than every
grid cell, or with more answer classes than were measured, are flagged and said to be off
the measured grid.
"""

from __future__ import annotations

import inspect
from collections.abc import Hashable, Sequence
from dataclasses import fields
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from experiments.analysis import clusters as clustering
from experiments.analysis import stats
from experiments.analysis.stats import Interval, Labels

FloatArray = NDArray[np.float64]
Kind = Literal["single", "paired"]
Family = Literal["balanced", "rows", "f1"]

ROW_HIT_METRICS = (
    "sara_numeric_within_10pct",
    "citation_open_contains",
    "definition_extraction_stemmed_match",
)
ACCURACY_TYPE = ("accuracy", "balanced_accuracy", *ROW_HIT_METRICS)
F1_METRICS = ("ssla_f1", "successor_liability_f1")
PRIOR = 0.5  # Jeffreys; chosen over the uniform prior by benchmarks/coverage.py
N_DRAWS = 4000
F1_RESAMPLES = 2000  # bootstrap resamples of the F1 fallback (the coverage was measured so)
MIN_COVERAGE = 0.93  # a 95% interval whose measured coverage falls below this is flagged
MAX_COVERAGE = 0.97  # a minimum coverage above this is noted as conservative (not flagged)
COVERAGE_SOURCE = "benchmarks/coverage.py"
NEAR_BOUND = 0.95  # an observed rate beyond this looks the table up with the ceiling rows
F1_NEAR = 0.75  # an observed F1 above this reads the F1 table with its high-F1 scenarios
F1_MEASURED_MAX = 0.975  # the highest true F1 of the measured scenarios (coverage.F1_SINGLE)
CENTRE_FROM = 3  # groups (answer classes) from which the draws are centred on the estimate
CENTRED_NOTE = ", each group's draws centred on its observed rate and scaled to its sampling sd"

# ---- measured coverage (pasted from `benchmarks/coverage.py --emit`) ----------------------------
# COVERAGE[(family, kind)][cell] = (min, median, worst scenario) of the 95% interval's
# coverage over the generating scenarios of that cell (true recalls 0.5-0.95; the
# "+ceiling" families add 0.97, 0.99, 1.0). Cells: (n, minority share) for "balanced"
# (two classes) and "rows"; (classes, rows per class) for "classes"; (documents, rows per
# document and class) for "spanning" (clusters holding rows of both classes).
# Simulations per scenario: one variant, two classes: exact (every outcome); paired 1000;
# classes 600 (10 classes: 250); spanning through metric_interval: one variant 600, paired
# 300; F1 300 (n = 200: 200). F1 cells: "f1" true F1 0.52-0.66, "f1+ceiling" 0.52-0.975.
COVERAGE_SIMS = 1000
COVERAGE: dict[tuple[str, str], dict[tuple[int, float], tuple[float, float, str]]] = {
    ("balanced", "paired"): {
        (20, 0.1): (0.977, 1.0, "A 0.7/0.7 vs B 0.5/0.5, rho 0.0"),
        (20, 0.2): (0.951, 0.994, "A 0.7/0.7 vs B 0.5/0.5, rho 0.0"),
        (20, 0.5): (0.939, 0.985, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (40, 0.1): (0.947, 0.99, "A 0.7/0.7 vs B 0.5/0.5, rho 0.0"),
        (40, 0.2): (0.944, 0.97, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (40, 0.5): (0.946, 0.964, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (50, 0.1): (0.928, 0.983, "A 0.9/0.95 vs B 0.5/0.95, rho 0.7"),
        (50, 0.2): (0.937, 0.964, "A 0.9/0.9 vs B 0.7/0.7, rho 0.7"),
        (50, 0.5): (0.943, 0.966, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (100, 0.1): (0.938, 0.962, "A 0.7/0.7 vs B 0.7/0.7, rho 0.0"),
        (100, 0.2): (0.94, 0.957, "A 0.7/0.7 vs B 0.7/0.7, rho 0.0"),
        (100, 0.5): (0.94, 0.96, "A 0.7/0.7 vs B 0.5/0.5, rho 0.0"),
        (200, 0.1): (0.938, 0.952, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (200, 0.2): (0.936, 0.953, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (200, 0.5): (0.945, 0.952, "A 0.95/0.95 vs B 0.9/0.9, rho 0.0"),
    },
    ("balanced", "single"): {
        (20, 0.1): (0.973, 0.993, "recall 0.95/0.5"),
        (20, 0.2): (0.965, 0.977, "recall 0.95/0.5"),
        (20, 0.5): (0.955, 0.965, "recall 0.7/0.7"),
        (40, 0.1): (0.96, 0.984, "recall 0.9/0.9"),
        (40, 0.2): (0.957, 0.965, "recall 0.7/0.7"),
        (40, 0.5): (0.937, 0.958, "recall 0.5/0.7"),
        (50, 0.1): (0.963, 0.979, "recall 0.9/0.95"),
        (50, 0.2): (0.947, 0.96, "recall 0.5/0.5"),
        (50, 0.5): (0.939, 0.955, "recall 0.5/0.5"),
        (100, 0.1): (0.93, 0.965, "recall 0.5/0.9"),
        (100, 0.2): (0.944, 0.957, "recall 0.5/0.9"),
        (100, 0.5): (0.944, 0.952, "recall 0.5/0.5"),
        (200, 0.1): (0.938, 0.957, "recall 0.7/0.95"),
        (200, 0.2): (0.945, 0.954, "recall 0.5/0.9"),
        (200, 0.5): (0.946, 0.949, "recall 0.5/0.5"),
    },
    ("balanced+ceiling", "paired"): {
        (20, 0.1): (0.977, 1.0, "A 0.7/0.7 vs B 0.5/0.5, rho 0.0"),
        (20, 0.2): (0.951, 1.0, "A 0.7/0.7 vs B 0.5/0.5, rho 0.0"),
        (20, 0.5): (0.939, 0.991, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (40, 0.1): (0.947, 1.0, "A 0.7/0.7 vs B 0.5/0.5, rho 0.0"),
        (40, 0.2): (0.944, 0.99, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (40, 0.5): (0.946, 0.976, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (50, 0.1): (0.928, 0.998, "A 0.9/0.95 vs B 0.5/0.95, rho 0.7"),
        (50, 0.2): (0.937, 0.982, "A 0.9/0.9 vs B 0.7/0.7, rho 0.7"),
        (50, 0.5): (0.943, 0.969, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (100, 0.1): (0.938, 0.979, "A 0.7/0.7 vs B 0.7/0.7, rho 0.0"),
        (100, 0.2): (0.94, 0.964, "A 0.7/0.7 vs B 0.7/0.7, rho 0.0"),
        (100, 0.5): (0.94, 0.964, "A 0.7/0.7 vs B 0.5/0.5, rho 0.0"),
        (200, 0.1): (0.938, 0.962, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (200, 0.2): (0.936, 0.956, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (200, 0.5): (0.945, 0.954, "A 0.95/0.95 vs B 0.9/0.9, rho 0.0"),
    },
    ("balanced+ceiling", "single"): {
        (20, 0.1): (0.967, 0.988, "recall 0.99/0.9"),
        (20, 0.2): (0.947, 0.984, "recall 0.9/0.97"),
        (20, 0.5): (0.944, 0.971, "recall 0.99/0.5"),
        (40, 0.1): (0.948, 0.982, "recall 0.9/0.99"),
        (40, 0.2): (0.942, 0.972, "recall 0.7/1.0"),
        (40, 0.5): (0.937, 0.967, "recall 0.5/0.7"),
        (50, 0.1): (0.954, 0.981, "recall 1.0/0.97"),
        (50, 0.2): (0.939, 0.967, "recall 1.0/0.99"),
        (50, 0.5): (0.939, 0.965, "recall 0.5/0.5"),
        (100, 0.1): (0.925, 0.969, "recall 0.5/0.97"),
        (100, 0.2): (0.944, 0.966, "recall 0.5/0.9"),
        (100, 0.5): (0.944, 0.962, "recall 0.5/0.5"),
        (200, 0.1): (0.917, 0.965, "recall 0.7/1.0"),
        (200, 0.2): (0.939, 0.962, "recall 0.99/1.0"),
        (200, 0.5): (0.946, 0.956, "recall 0.5/0.5"),
    },
    ("classes", "paired"): {
        (3, 10.0): (0.952, 0.97, "A 0.7 x 3 vs B 0.5 x 3, rho 0.0"),
        (3, 20.0): (0.935, 0.963, "A 0.9 x 3 vs B 0.7 x 3, rho 0.0"),
        (3, 40.0): (0.935, 0.955, "A 0.9 x 3 vs B 0.9 x 3, rho 0.0"),
        (5, 10.0): (0.94, 0.959, "A 0.7 x 5 vs B 0.5 x 5, rho 0.0"),
        (5, 20.0): (0.925, 0.963, "A 0.7 x 5 vs B 0.5 x 5, rho 0.0"),
        (5, 40.0): (0.935, 0.96, "A 0.9 x 5 vs B 0.9 x 5, rho 0.0"),
        (10, 10.0): (0.932, 0.968, "A 0.9 x 10 vs B 0.7 x 10, rho 0.7"),
        (10, 20.0): (
            0.94,
            0.966,
            "A 0.5..0.95 over 10 vs B 0.95..0.5 over 10, rho 0.0",
        ),
        (10, 40.0): (0.936, 0.948, "A 0.9 x 10 vs B 0.7 x 10, rho 0.0"),
    },
    ("classes", "single"): {
        (3, 10.0): (0.958, 0.987, "recall 0.5 x 3"),
        (3, 20.0): (0.948, 0.97, "recall 0.5 x 3"),
        (3, 40.0): (0.95, 0.961, "recall 0.5/0.95/0.95"),
        (5, 10.0): (0.943, 0.987, "recall 0.5 x 5"),
        (5, 20.0): (0.938, 0.975, "recall 0.5 x 5"),
        (5, 40.0): (0.945, 0.968, "recall 0.5 x 5"),
        (10, 10.0): (0.948, 0.998, "recall 0.5 x 10"),
        (10, 20.0): (0.92, 0.978, "recall 0.5 x 10"),
        (10, 40.0): (0.944, 0.966, "recall 0.7 x 10"),
    },
    ("classes+ceiling", "paired"): {
        (3, 10.0): (0.952, 0.975, "A 0.7 x 3 vs B 0.5 x 3, rho 0.0"),
        (3, 20.0): (0.935, 0.967, "A 0.9 x 3 vs B 0.7 x 3, rho 0.0"),
        (3, 40.0): (0.935, 0.958, "A 0.9 x 3 vs B 0.9 x 3, rho 0.0"),
        (5, 10.0): (0.94, 0.96, "A 0.7 x 5 vs B 0.5 x 5, rho 0.0"),
        (5, 20.0): (0.925, 0.968, "A 0.7 x 5 vs B 0.5 x 5, rho 0.0"),
        (5, 40.0): (0.935, 0.963, "A 0.9 x 5 vs B 0.9 x 5, rho 0.0"),
        (10, 10.0): (0.932, 0.968, "A 0.9 x 10 vs B 0.7 x 10, rho 0.7"),
        (10, 20.0): (
            0.94,
            0.968,
            "A 0.5..0.95 over 10 vs B 0.95..0.5 over 10, rho 0.0",
        ),
        (10, 40.0): (0.936, 0.948, "A 0.9 x 10 vs B 0.7 x 10, rho 0.0"),
    },
    ("classes+ceiling", "single"): {
        (3, 10.0): (0.958, 0.992, "recall 0.5 x 3"),
        (3, 20.0): (0.948, 0.976, "recall 0.5 x 3"),
        (3, 40.0): (0.95, 0.968, "recall 0.5/0.95/0.95"),
        (5, 10.0): (0.943, 0.993, "recall 0.5 x 5"),
        (5, 20.0): (0.938, 0.987, "recall 0.5 x 5"),
        (5, 40.0): (0.945, 0.981, "recall 0.5 x 5"),
        (10, 10.0): (0.948, 1.0, "recall 0.5 x 10"),
        (10, 20.0): (0.92, 0.998, "recall 0.5 x 10"),
        (10, 40.0): (0.944, 0.968, "recall 0.7 x 10"),
    },
    ("f1", "paired"): {
        (20, 0.0): (0.92, 0.93, "q 0.9 vs 0.9, wrong 0.2, 1-3 names (F1 0.663 vs 0.663)"),
        (40, 0.0): (0.943, 0.952, "q 0.9 vs 0.6, wrong 0.2, 1-3 names (F1 0.663 vs 0.517)"),
        (50, 0.0): (0.947, 0.955, "q 0.9 vs 0.9, wrong 0.2, 1-3 names (F1 0.663 vs 0.663)"),
        (100, 0.0): (0.947, 0.962, "q 0.9 vs 0.9, wrong 0.2, 1-3 names (F1 0.663 vs 0.663)"),
        (200, 0.0): (0.95, 0.955, "q 0.9 vs 0.9, wrong 0.2, 1-3 names (F1 0.663 vs 0.663)"),
    },
    ("f1", "single"): {
        (20, 0.0): (0.947, 0.952, "q 0.9, wrong 0.2, 1-3 names (F1 0.663)"),
        (40, 0.0): (0.937, 0.94, "q 0.9, wrong 0.2, 1-3 names (F1 0.663)"),
        (50, 0.0): (0.933, 0.935, "q 0.6, wrong 0.2, 1-3 names (F1 0.517)"),
        (100, 0.0): (0.947, 0.948, "q 0.9, wrong 0.2, 1-3 names (F1 0.663)"),
        (200, 0.0): (0.93, 0.948, "q 0.9, wrong 0.2, 1-3 names (F1 0.663)"),
    },
    ("f1+ceiling", "paired"): {
        (20, 0.0): (0.92, 0.933, "q 0.9 vs 0.9, wrong 0.2, 1-3 names (F1 0.663 vs 0.663)"),
        (40, 0.0): (0.943, 0.955, "q 0.9 vs 0.6, wrong 0.2, 1-3 names (F1 0.663 vs 0.517)"),
        (50, 0.0): (0.93, 0.948, "q 0.95 vs 0.9, wrong 0.03, 1-1 names (F1 0.937 vs 0.888)"),
        (100, 0.0): (0.94, 0.947, "q 0.97 vs 0.97, wrong 0.02, 1-1 names (F1 0.961 vs 0.961)"),
        (200, 0.0): (0.95, 0.95, "q 0.9 vs 0.9, wrong 0.2, 1-3 names (F1 0.663 vs 0.663)"),
    },
    ("f1+ceiling", "single"): {
        (20, 0.0): (0.483, 0.858, "q 0.98, wrong 0.01, 1-1 names (F1 0.975)"),
        (40, 0.0): (0.663, 0.92, "q 0.98, wrong 0.01, 1-1 names (F1 0.975)"),
        (50, 0.0): (0.77, 0.923, "q 0.98, wrong 0.01, 1-1 names (F1 0.975)"),
        (100, 0.0): (0.877, 0.947, "q 0.98, wrong 0.01, 1-1 names (F1 0.975)"),
        (200, 0.0): (0.93, 0.948, "q 0.9, wrong 0.2, 1-3 names (F1 0.663)"),
    },
    ("rows", "paired"): {
        (20, 0.1): (0.942, 0.99, "A 0.7/0.7 vs B 0.5/0.5, rho 0.0"),
        (20, 0.2): (0.958, 0.99, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (20, 0.5): (0.943, 0.993, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (40, 0.1): (0.951, 0.972, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (40, 0.2): (0.937, 0.974, "A 0.7/0.7 vs B 0.5/0.5, rho 0.0"),
        (40, 0.5): (0.945, 0.98, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (50, 0.1): (0.945, 0.969, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (50, 0.2): (0.938, 0.966, "A 0.7/0.7 vs B 0.5/0.5, rho 0.0"),
        (50, 0.5): (0.937, 0.972, "A 0.5/0.5 vs B 0.5/0.5, rho 0.7"),
        (100, 0.1): (0.936, 0.958, "A 0.9/0.9 vs B 0.7/0.7, rho 0.0"),
        (100, 0.2): (0.936, 0.958, "A 0.5/0.5 vs B 0.5/0.5, rho 0.7"),
        (100, 0.5): (0.944, 0.961, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (200, 0.1): (0.938, 0.95, "A 0.7/0.7 vs B 0.5/0.5, rho 0.0"),
        (200, 0.2): (0.937, 0.951, "A 0.9/0.9 vs B 0.7/0.7, rho 0.7"),
        (200, 0.5): (0.944, 0.952, "A 0.95/0.95 vs B 0.95/0.95, rho 0.0"),
    },
    ("rows", "single"): {
        (20, 0.1): (0.931, 0.965, "recall 0.7/0.5"),
        (20, 0.2): (0.947, 0.971, "recall 0.7/0.7"),
        (20, 0.5): (0.947, 0.971, "recall 0.7/0.7"),
        (40, 0.1): (0.941, 0.958, "recall 0.5/0.7"),
        (40, 0.2): (0.936, 0.96, "recall 0.9/0.7"),
        (40, 0.5): (0.943, 0.969, "recall 0.9/0.9"),
        (50, 0.1): (0.943, 0.958, "recall 0.9/0.7"),
        (50, 0.2): (0.935, 0.958, "recall 0.5/0.5"),
        (50, 0.5): (0.946, 0.96, "recall 0.5/0.7"),
        (100, 0.1): (0.936, 0.949, "recall 0.9/0.9"),
        (100, 0.2): (0.947, 0.961, "recall 0.7/0.5"),
        (100, 0.5): (0.943, 0.954, "recall 0.5/0.5"),
        (200, 0.1): (0.938, 0.954, "recall 0.9/0.95"),
        (200, 0.2): (0.941, 0.954, "recall 0.9/0.9"),
        (200, 0.5): (0.941, 0.955, "recall 0.9/0.9"),
    },
    ("rows+ceiling", "paired"): {
        (20, 0.1): (0.942, 0.996, "A 0.7/0.7 vs B 0.5/0.5, rho 0.0"),
        (20, 0.2): (0.958, 0.996, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (20, 0.5): (0.943, 0.996, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (40, 0.1): (0.951, 0.982, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (40, 0.2): (0.937, 0.986, "A 0.7/0.7 vs B 0.5/0.5, rho 0.0"),
        (40, 0.5): (0.945, 0.986, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (50, 0.1): (0.945, 0.974, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (50, 0.2): (0.938, 0.975, "A 0.7/0.7 vs B 0.5/0.5, rho 0.0"),
        (50, 0.5): (0.937, 0.978, "A 0.5/0.5 vs B 0.5/0.5, rho 0.7"),
        (100, 0.1): (0.936, 0.968, "A 0.9/0.9 vs B 0.7/0.7, rho 0.0"),
        (100, 0.2): (0.936, 0.962, "A 0.5/0.5 vs B 0.5/0.5, rho 0.7"),
        (100, 0.5): (0.944, 0.965, "A 0.5/0.5 vs B 0.5/0.5, rho 0.0"),
        (200, 0.1): (0.934, 0.95, "A 1.0/1.0 vs B 0.97/0.97, rho 0.0"),
        (200, 0.2): (0.937, 0.952, "A 0.9/0.9 vs B 0.7/0.7, rho 0.7"),
        (200, 0.5): (0.932, 0.954, "A 1.0/1.0 vs B 0.97/0.97, rho 0.0"),
    },
    ("rows+ceiling", "single"): {
        (20, 0.1): (0.931, 0.977, "recall 0.7/0.5"),
        (20, 0.2): (0.946, 0.978, "recall 0.9/0.97"),
        (20, 0.5): (0.941, 0.98, "recall 0.97/0.99"),
        (40, 0.1): (0.939, 0.97, "recall 0.99/0.99"),
        (40, 0.2): (0.936, 0.967, "recall 0.9/0.7"),
        (40, 0.5): (0.939, 0.973, "recall 0.99/0.99"),
        (50, 0.1): (0.943, 0.972, "recall 0.9/0.7"),
        (50, 0.2): (0.935, 0.971, "recall 0.5/0.5"),
        (50, 0.5): (0.946, 0.974, "recall 0.5/0.7"),
        (100, 0.1): (0.936, 0.964, "recall 0.9/0.9"),
        (100, 0.2): (0.938, 0.966, "recall 1.0/0.9"),
        (100, 0.5): (0.935, 0.97, "recall 0.9/0.97"),
        (200, 0.1): (0.928, 0.96, "recall 0.95/0.97"),
        (200, 0.2): (0.931, 0.963, "recall 1.0/0.95"),
        (200, 0.5): (0.93, 0.963, "recall 0.95/0.97"),
    },
    ("spanning", "paired"): {
        (20, 5.0): (0.99, 1.0, "A 0.9 x 2 vs B 0.7 x 2, ICC 1.0"),
        (40, 3.0): (0.967, 0.997, "A 0.8 x 2 vs B 0.8 x 2, ICC 1.0"),
        (100, 2.0): (0.96, 0.983, "A 0.9 x 2 vs B 0.7 x 2, ICC 1.0"),
    },
    ("spanning", "single"): {
        (20, 5.0): (0.922, 0.99, "recall 0.95 x 2, ICC 1.0"),
        (40, 3.0): (0.928, 0.986, "recall 0.8 x 2, ICC 1.0"),
        (100, 2.0): (0.952, 0.985, "recall 0.8 x 2, ICC 1.0"),
    },
}


# ---- interval draws (vectorised over leading axes; the benchmark calls these) ----------------
def single_tails(
    hits: FloatArray,
    misses: FloatArray,
    rng: np.random.Generator,
    n_draws: int = N_DRAWS,
    prior: float = PRIOR,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(lower-tail draws, upper-tail draws, centre, scale) of every group's hit rate.

    Both tails are Jeffreys Beta(hits + a, misses + a) draws, except next to a bound: a group
    with at most one miss or at most one hit draws its lower tail from Beta(hits, misses + 1)
    and its upper tail from Beta(hits + 1, misses) (0 or 1 when a count is 0), whose
    quantiles are the exact Clopper-Pearson bounds (as in the modified Jeffreys interval,
    Brown, Cai & DasGupta 2001: the Jeffreys bounds there are too tight; near the ceiling
    the unmodified interval covered 0.80-0.88). `centre` is the Jeffreys posterior mean and
    `scale` sqrt((n + 2a + 1) / n), the ratio of the sampling sd of hits / n to the
    posterior sd, which `combine` uses from CENTRE_FROM groups on.
    """
    shape = (*hits.shape, n_draws)
    jeff = rng.beta((hits + prior)[..., None], (misses + prior)[..., None], size=shape)
    low, high = jeff, jeff
    near = (misses <= 1) | (hits <= 1)
    if np.any(near):
        h, m, k = hits[near][:, None], misses[near][:, None], int(np.sum(near))
        low, high = low.copy(), high.copy()
        cp_low = rng.beta(np.maximum(h, 1e-9), m + 1, (k, n_draws))
        cp_high = rng.beta(h + 1, np.maximum(m, 1e-9), (k, n_draws))
        low[near] = np.where(h > 0, cp_low, 0.0)
        high[near] = np.where(m > 0, cp_high, 1.0)
    n = hits + misses
    centre = (hits + prior) / (n + 2 * prior)
    scale = np.sqrt((n + 2 * prior + 1) / np.maximum(n, 1e-9))
    return np.asarray(low), np.asarray(high), np.asarray(centre), np.asarray(scale)


def pooled_extra(counts: FloatArray, weights: FloatArray) -> FloatArray:
    """Imaginary discordant rows per group for the Clopper-Pearson-type tail, pooled.

    `counts` (..., G) are the effective "B only" (or "A only") counts of every group. When
    their total over the groups is at most one row, the metric sits next to its bound and
    the tail gets ONE imaginary row in total, shared over the groups by the metric's weights
    (1/G each for balanced accuracy): with one group that is the Clopper-Pearson shape
    (count + 1). Otherwise 0 (plain Jeffreys). Giving every nearly empty group its own
    imaginary row (as before) put G imaginary rows into a G-class interval: with 5 classes x
    40 rows it covered 1.000 and missed effects an exact permutation test found in 71% of
    runs.
    """
    near = np.sum(counts, axis=-1, keepdims=True) <= 1 + 1e-9
    return np.asarray(np.where(near, np.broadcast_to(weights, counts.shape), 0.0))


def paired_tails(
    a_only: FloatArray,
    b_only: FloatArray,
    rest: FloatArray,
    rng: np.random.Generator,
    n_draws: int = N_DRAWS,
    prior: float = PRIOR,
    extra_low: FloatArray | None = None,
    extra_high: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(lower-tail draws, upper-tail draws, centre, scale) of every group's p(A only) - p(B only).

    Per group a Dirichlet(a_only + a, b_only + a, both right + a, both wrong + a) posterior;
    the two concordant cells enter only through their sum, so `rest` is their count and its
    gamma shape is rest + 2a (a Dirichlet aggregates that way). Next to a bound, as for one
    variant: a group with `extra_low` > 0 draws its lower tail with shapes
    (a_only, b_only + extra_low), one with `extra_high` > 0 its upper tail with
    (a_only + extra_high, b_only) (the Clopper-Pearson-type shapes; a posterior concentrated
    at an empty discordant cell made the interval too short there). The extras come from
    `pooled_extra` over all groups (one imaginary row in total); None treats every element
    as a group of its own (extra 1 where its count is at most 1). `centre` is the posterior
    mean, `scale` sqrt((n + 4a + 1) / n) (sampling over posterior sd, as for one variant).
    """

    def gamma(k: FloatArray) -> FloatArray:
        k = np.maximum(k, 1e-9)[..., None]
        return np.asarray(rng.standard_gamma(np.broadcast_to(k, (*k.shape[:-1], n_draws))))

    if extra_low is None:
        extra_low = np.where(b_only <= 1 + 1e-9, 1.0, 0.0)
    if extra_high is None:
        extra_high = np.where(a_only <= 1 + 1e-9, 1.0, 0.0)
    g1 = gamma(a_only + prior)
    g2 = gamma(b_only + prior)
    g3 = gamma(rest + 2 * prior)
    d = np.asarray((g1 - g2) / (g1 + g2 + g3), dtype=np.float64)
    low, high = d, d.copy()
    for extra, up in ((extra_low, False), (extra_high, True)):
        near = np.asarray(extra) > 0
        if not np.any(near):
            continue
        add = np.asarray(extra)[near]
        h1 = gamma(a_only[near] + (add if up else 0.0))
        h2 = gamma(b_only[near] + (0.0 if up else add))
        h3 = gamma(rest[near] + 2 * prior)
        h1 = np.where((a_only[near] > 0)[:, None] | up, h1, 0.0)
        h2 = np.where((b_only[near] > 0)[:, None] | (not up), h2, 0.0)
        part = (h1 - h2) / (h1 + h2 + h3)
        if up:
            high[near] = part
        else:
            low[near] = part
    n = a_only + b_only + rest
    centre = (a_only - b_only) / (n + 4 * prior)
    scale = np.sqrt((n + 4 * prior + 1) / np.maximum(n, 1e-9))
    return low, high, np.asarray(centre), np.asarray(scale)


def combine(
    low_draws: FloatArray,
    high_draws: FloatArray,
    centre: FloatArray,
    scale: FloatArray,
    weights: FloatArray,
    estimate: FloatArray | float,
    level: float,
    bounds: tuple[float, float],
    centred: bool,
) -> tuple[FloatArray, FloatArray]:
    """The interval of sum_g w_g p_g from per-group draws (..., G, D).

    Without `centred` the equal-tailed quantiles of sum_g w_g draw_g. With it (from
    CENTRE_FROM groups on) of estimate + sum_g w_g scale_g (draw_g - centre_g): the prior
    pulls every group's posterior mean towards 1/2 and its spread below the sampling spread
    (variance over n + 2a + 1, not n), and over many classes those small biases add up
    while the total spread shrinks (with 5-10 classes the uncentred interval covered
    0.86-0.89). With one or two groups the pull helps (centred, 10 + 10 rows at recall 0.5
    covered 0.90), so it stays. Clipped to the metric's range, widened to hold the estimate.
    """
    alpha = (1 - level) / 2
    if centred:
        k = scale[..., None]
        lo = np.einsum("...gd,g->...d", k * (low_draws - centre[..., None]), weights)
        hi = np.einsum("...gd,g->...d", k * (high_draws - centre[..., None]), weights)
        lo = lo + np.asarray(estimate)[..., None]
        hi = hi + np.asarray(estimate)[..., None]
    else:
        lo = np.einsum("...gd,g->...d", low_draws, weights)
        hi = np.einsum("...gd,g->...d", high_draws, weights)
    low = np.clip(np.minimum(np.quantile(lo, alpha, axis=-1), estimate), *bounds)
    high = np.clip(np.maximum(np.quantile(hi, 1 - alpha, axis=-1), estimate), *bounds)
    return np.asarray(low), np.asarray(high)


# ---- effective counts -----------------------------------------------------------------------
def effective_sizes(groups: NDArray[np.intp], ids: NDArray[np.intp]) -> FloatArray:
    """Kish effective size (sum m)^2 / sum m^2 of every group over its clusters' row counts."""
    n_groups = int(groups.max()) + 1
    out = np.empty(n_groups)
    for g in range(n_groups):
        _, m = np.unique(ids[groups == g], return_counts=True)
        out[g] = float(m.sum()) ** 2 / float(np.sum(m.astype(np.float64) ** 2))
    return out


def _shares(groups: NDArray[np.intp], indicator: NDArray[np.bool_], n_groups: int) -> FloatArray:
    rows = np.bincount(groups, minlength=n_groups).astype(np.float64)
    return np.bincount(groups, weights=indicator.astype(np.float64), minlength=n_groups) / rows


# ---- the measured-coverage lookup -----------------------------------------------------------
def coverage_cell(
    family: Family, kind: Kind, n_eff: FloatArray, near: bool = False
) -> tuple[tuple[int, float], tuple[float, float, str]] | None:
    """The largest measured grid cell the data dominate, with its coverage; None if none.

    Balanced accuracy: cells whose minority class and rest are no larger than the data's
    smallest class and the rest (effective sizes), the one with the largest minority class,
    then the largest n. Other metrics: the largest measured n no larger than the effective
    size, worst over the minority shares at that n (their interval ignores classes).
    """
    table = COVERAGE.get((family + ("+ceiling" if near else ""), kind), {})
    if not table:
        return None
    tol = 1e-6
    total = float(np.sum(n_eff))
    if family == "balanced":
        smallest = float(np.min(n_eff))
        fits = [
            (round(n * s), n, key)
            for key in table
            for n, s in [key]
            if round(n * s) <= smallest + tol and n - round(n * s) <= total - smallest + tol
        ]
        if not fits:
            return None
        _, _, key = max(fits)
        return key, table[key]
    ns = [n for n, _ in table if n <= total + tol]
    if not ns:
        return None
    n_best = max(ns)
    cells = [(table[k], k) for k in table if k[0] == n_best]
    worst, key = min(cells, key=lambda c: c[0][0])
    medians = sorted(c[0][1] for c in cells)
    return key, (worst[0], medians[len(medians) // 2], worst[2])


def classes_cell(
    kind: Kind, n_eff: FloatArray, near: bool = False
) -> tuple[str, tuple[float, float, str]] | str:
    """Measured coverage for 3 or more answer classes, or why there is none (off the grid).

    Measured with G equal classes of m rows (`COVERAGE[("classes", kind)]`, key (G, m)):
    the data's class count is bracketed by the measured counts (worst of the two), and its
    smallest class by the largest measured m no larger than it.
    """
    table = COVERAGE.get(("classes+ceiling" if near else "classes", kind), {})
    n_classes = len(n_eff)
    counts = sorted({g for g, _ in table})
    if not counts or n_classes > counts[-1]:
        top = counts[-1] if counts else 0
        return f"{n_classes} answer classes: off the measured grid (measured up to {top})"
    below = max([g for g in counts if g <= n_classes], default=counts[0])
    above = min(g for g in counts if g >= n_classes)
    smallest = float(np.min(n_eff)) + 1e-6
    found = []
    for g in sorted({below, above}):
        sizes = [m for gg, m in table if gg == g and m <= smallest]
        if not sizes:
            return (
                f"smallest class ({smallest:.1f} effective rows) lies below every cell where "
                f"coverage was measured for {g} classes (off the measured grid); its coverage is "
                "unknown"
            )
        found.append(((g, max(sizes)), table[(g, max(sizes))]))
    (g, m), (low, median, worst) = min(found, key=lambda f: f[1][0])
    return f"{g} classes x {m:g} rows", (low, median, worst)


def spanning_cell(
    kind: Kind, documents: int, per: float
) -> tuple[tuple[int, float], tuple[float, float, str]] | None:
    """The measured spanning design nearest to the data's, with its coverage; None if none.

    Measured designs are (documents, rows of each class per document); nearest on the log
    scale of both (e.g. 30 documents of 2 + 2 rows reads 40 x (3 + 3), not the worst of all
    designs, which flagged every interval with a spanning cluster).
    """
    table = COVERAGE.get(("spanning", kind), {})
    if not table or documents < 1 or per <= 0:
        return None

    def distance(key: tuple[int, float]) -> float:
        return float(abs(np.log(key[0] / documents)) + abs(np.log(key[1] / per)))

    key = min(table, key=distance)
    return key, table[key]


def coverage_flag(
    family: Family,
    kind: Kind,
    n_eff: FloatArray,
    level: float = 0.95,
    spanning: int = 0,
    near: bool = False,
    span_rows: float = 0.0,
) -> tuple[bool, str]:
    """(unreliable, note) for an interval on data of these effective group sizes.

    `near`: some observed group rate lies beyond NEAR_BOUND (or below 1 - NEAR_BOUND); the
    worst coverage is then taken over every measured scenario, recalls 0.97-1.0 included,
    else over the scenarios with recalls in [0.5, NEAR_BOUND]. (Rates near 0 mirror rates
    near 1: the interval is symmetric under swapping hits and misses.)

    `spanning` clusters holding rows of several answer classes, `span_rows` rows of each
    class in such a cluster (median), add the coverage measured on the nearest spanning
    design (`spanning_cell`). "Conservative" is said only when the lowest measured coverage
    of every cell read lies above MAX_COVERAGE (every measured scenario over-covered).
    """
    sizes = ", ".join(f"{v:.1f}" for v in n_eff)
    if abs(level - 0.95) > 1e-9:
        return True, f"unreliable: coverage was measured for 95% intervals only, not {level:.1%}"
    if not COVERAGE.get((family, kind)):
        return True, f"unreliable: no coverage was measured for this interval ({family}, {kind})"
    if family == "balanced" and len(n_eff) > 2:
        got = classes_cell(kind, n_eff, near)
        if isinstance(got, str):
            return True, f"unreliable: {got} ({COVERAGE_SOURCE}; effective sizes {sizes})"
        where, (low, median, worst) = got
    else:
        found = coverage_cell(family, kind, n_eff, near)
        if found is None:
            return True, (
                f"unreliable: effective sizes ({sizes}) lie below every cell where coverage "
                f"was measured, off the measured grid ({COVERAGE_SOURCE}); its coverage is unknown"
            )
        (n, share), (low, median, worst) = found
        where = f"n = {n}" if family != "balanced" else f"n = {n}, minority share {share}"
    if family == "f1":
        band = (
            f"an F1 above {F1_NEAR}: worst over true F1 0.52-{F1_MEASURED_MAX}"
            if near
            else f"F1 at most {F1_NEAR}: worst over true F1 0.52-0.66"
        )
    else:
        band = (
            f"a hit rate beyond {NEAR_BOUND}: worst over recalls 0.5-1.0"
            if near
            else f"hit rates within [{1 - NEAR_BOUND:.2g}, {NEAR_BOUND}]: worst over recalls "
            f"0.5-{NEAR_BOUND}"
        )
    measured = (
        f"measured 95% coverage {low:.3f} (worst: {worst}), median {median:.3f}, at {where} "
        f"({COVERAGE_SOURCE}, {band}; effective sizes {sizes})"
    )
    if spanning and family == "balanced":
        span = spanning_cell(kind, spanning, span_rows)
        if span is None:
            return True, f"unreliable: {spanning} clusters span classes, off the measured grid"
        (docs, per), (s_low, s_median, s_worst) = span
        measured += (
            f"; {spanning} clusters span answer classes ({span_rows:g} rows of each class): "
            f"measured {s_low:.3f} (worst: {s_worst}), median {s_median:.3f}, on the nearest "
            f"spanning design, {docs} documents x ({per:g} + {per:g}) rows"
        )
        low = min(low, s_low)
    if low < MIN_COVERAGE:
        return True, f"unreliable: {measured}, below {MIN_COVERAGE}"
    if low > MAX_COVERAGE:
        return False, f"conservative (wider than needed): {measured}"
    return False, measured


# ---- the public interval --------------------------------------------------------------------
def _interval(**kw: Any) -> Interval:
    names = {f.name for f in fields(Interval)}
    return Interval(**{k: v for k, v in kw.items() if k in names})


def metric_interval(
    y_true: Labels,
    pred_a: Labels,
    pred_b: Labels | None = None,
    metric: str = "balanced_accuracy",
    level: float = 0.95,
    clusters: Sequence[Hashable] | NDArray[Any] | None = None,
    seed: int | None = 0,
    n_draws: int = N_DRAWS,
) -> Interval:
    """Interval of metric(A), or of metric(A) - metric(B) when B is given (paired rows).

    Accuracy-type metrics: Bayesian (Jeffreys Beta per group for one variant, Jeffreys
    Dirichlet over the four paired cells per group for a difference; groups are answer
    classes for balanced accuracy), on effective counts when `clusters` (one key per row)
    ties rows together. F1 metrics: `stats.bootstrap_ci`. Either way `unreliable` and the
    note come from the measured coverage table; the estimate is the official metric.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, not {level}")
    if n_draws < 100:
        raise ValueError(f"n_draws must be at least 100, not {n_draws}")
    inputs = [pred_a] if pred_b is None else [pred_a, pred_b]
    y, *preds = stats.check_inputs(y_true, inputs)
    n = len(y)
    ids = clustering.checked(clusters, n)
    n_clusters = int(ids.max()) + 1
    score = stats.metric_fn(metric)
    scores = [float(score(y, p)) for p in preds]
    estimate = scores[0] - (scores[1] if len(scores) == 2 else 0.0)
    kind: Kind = "paired" if len(preds) == 2 else "single"
    if metric not in ACCURACY_TYPE:
        return _fallback(y, preds, metric, level, ids, seed, kind, scores)
    hits = _row_hits(metric, y, preds, scores)
    if hits is None:
        return _fallback(y, preds, metric, level, ids, seed, kind, scores)

    family: Family = "balanced" if metric == "balanced_accuracy" else "rows"
    groups = stats.class_index(y, metric) if family == "balanced" else np.zeros(n, dtype=np.intp)
    n_groups = int(groups.max()) + 1
    weights = np.full(n_groups, 1.0 / n_groups)
    n_eff = effective_sizes(groups, ids * n_groups + groups)  # a cluster split by class
    spanning, span_rows = _spanning(groups, ids)
    rng = np.random.default_rng(seed)
    if kind == "single":
        share = _shares(groups, hits[:, 0], n_groups)
        deff = _design_effect(groups, ids, n_groups, _single_sd(share, n_eff), spanning)
        n_eff = n_eff / deff
        tails = single_tails(share * n_eff, (1 - share) * n_eff, rng, n_draws)
        bounds = (0.0, 1.0)
        cells = (
            "per-group Jeffreys Beta(hits + 1/2, misses + 1/2) posteriors, Clopper-Pearson "
            "tails for a group with at most one miss (lower) or one hit (upper)"
        )
    else:
        a_only = _shares(groups, hits[:, 0] & ~hits[:, 1], n_groups)
        b_only = _shares(groups, hits[:, 1] & ~hits[:, 0], n_groups)
        deff = _design_effect(groups, ids, n_groups, _paired_sd(a_only, b_only, n_eff), spanning)
        n_eff = n_eff / deff
        rest = 1 - a_only - b_only
        a_n, b_n = a_only * n_eff, b_only * n_eff
        tails = paired_tails(
            a_n, b_n, rest * n_eff, rng, n_draws,
            extra_low=pooled_extra(b_n, weights), extra_high=pooled_extra(a_n, weights),
        )  # fmt: skip
        bounds = (-1.0, 1.0)
        cells = (
            "per-group Jeffreys Dirichlet(1/2 each) posteriors over both right / A only / "
            "B only / both wrong, difference = p(A only) - p(B only)"
        )
    centred = n_groups >= CENTRE_FROM
    low, high = combine(*tails, weights, estimate, level, bounds, centred)
    grouping = (
        "answer classes, metric = mean of class recalls"
        if family == "balanced"
        else ("all rows one group")
    )
    counted = (
        f"{n} rows"
        if n_clusters == n
        else f"{n} rows in {n_clusters} clusters, Kish effective sizes"
    )
    if deff > 1:
        counted += (
            f"; {spanning} clusters span answer classes, so every class's effective size is "
            f"divided by their design effect {deff:.2f} (outcomes shared across a cluster)"
        )
    method = (
        f"Bayesian: {cells} ({grouping}; {counted}), equal-tailed {level:.0%} interval "
        f"of {n_draws} draws{CENTRED_NOTE if centred else ''}, "
        "widened to contain the estimate"
    )
    # one answer class: balanced accuracy is that class's hit rate, a single proportion
    lookup: Family = "rows" if n_groups == 1 else family
    rates = np.stack([_shares(groups, hits[:, j], n_groups) for j in range(hits.shape[1])])
    near = bool(np.any(rates > NEAR_BOUND) or np.any(rates < 1 - NEAR_BOUND))
    unreliable, note = coverage_flag(lookup, kind, n_eff, level, spanning, near, span_rows)
    return _interval(
        estimate=estimate,
        low=float(low),
        high=float(high),
        level=level,
        n_resamples=n_draws,
        method=method,
        unreliable=unreliable,
        degenerate=bool(high - low <= 1e-12),
        note=note,
        n_clusters=n_clusters,
    )


def _spanning(groups: NDArray[np.intp], ids: NDArray[np.intp]) -> tuple[int, float]:
    """(clusters holding rows of more than one group, median rows per group in them)."""
    pairs, rows = np.unique(np.stack([ids, groups]), axis=1, return_counts=True)
    _, first, per_cluster = np.unique(pairs[0], return_index=True, return_counts=True)
    span = per_cluster > 1
    if not np.any(span):
        return 0, 0.0
    totals = np.add.reduceat(rows, first)  # pairs are sorted by cluster id
    return int(np.sum(span)), float(np.median(totals[span] / per_cluster[span]))


def _single_sd(share: FloatArray, n_eff: FloatArray) -> FloatArray:
    """Per-row sd of a group's hit, from the Jeffreys-smoothed rate (never 0)."""
    p = (share * n_eff + PRIOR) / (n_eff + 2 * PRIOR)
    return np.asarray(np.sqrt(p * (1 - p)))


def _paired_sd(a_only: FloatArray, b_only: FloatArray, n_eff: FloatArray) -> FloatArray:
    """Per-row sd of a group's hit(A) - hit(B), from Jeffreys-smoothed cell shares."""
    pa = (a_only * n_eff + PRIOR) / (n_eff + 4 * PRIOR)
    pb = (b_only * n_eff + PRIOR) / (n_eff + 4 * PRIOR)
    return np.asarray(np.sqrt(pa + pb - (pa - pb) ** 2))


def _design_effect(
    groups: NDArray[np.intp], ids: NDArray[np.intp], n_groups: int, sd: FloatArray, spanning: int
) -> float:
    """Variance inflation of the class-mean metric when clusters span classes.

    Per-class Kish sizes treat classes as independent. If a cluster's rows share their
    outcome (as identical prompts, or one document's rows under shared difficulty, do),
    the metric's variance is sum_c (sum_g a_cg sd_g)^2, a_cg = rows of cluster c in class g
    / (G n_g), instead of sum_c sum_g a_cg^2 sd_g^2; their ratio (>= 1) is the factor by
    which every class's effective size is divided. 1 when no cluster spans classes.
    """
    if spanning == 0 or n_groups == 1:
        return 1.0
    counts = np.zeros((int(ids.max()) + 1, n_groups))
    np.add.at(counts, (ids, groups), 1.0)
    a = counts / (n_groups * counts.sum(axis=0))
    num = float(np.sum((a @ sd) ** 2))
    den = float(np.sum((a**2) @ (sd**2)))
    return max(1.0, num / den) if den > 0 else 1.0


def _row_hits(
    metric: str, y: NDArray[Any], preds: Sequence[NDArray[Any]], scores: Sequence[float]
) -> NDArray[np.bool_] | None:
    """(n, v) hit of every row and variant, or None if the metric is not 0/1 per row here.

    From `stats.checked_decomposition`, which reproduces the official scores exactly.
    """
    dec = stats.checked_decomposition(metric, y, preds, scores)
    if dec is None or not dec.linear:
        return None
    values = dec.stats[:, :, 0]
    if metric == "balanced_accuracy":
        return np.asarray(values > 0)
    per_row = values * len(y)
    hits = per_row > 0.5
    if not np.allclose(per_row, hits, atol=1e-9):
        return None
    return np.asarray(hits)


def _fallback(
    y: NDArray[Any],
    preds: Sequence[NDArray[Any]],
    metric: str,
    level: float,
    ids: NDArray[np.intp],
    seed: int | None,
    kind: Kind,
    scores: Sequence[float],
) -> Interval:
    """`stats.bootstrap_ci` (clusters passed on when it takes them), flagged from the table.

    An arm's F1 above F1_NEAR reads the table with the high-F1 scenarios (F1 0.88-0.975,
    where the bootstrap under-covers at small n); above F1_MEASURED_MAX it is off the grid.
    """
    estimate = scores[0] - (scores[1] if len(scores) == 2 else 0.0)
    n_clusters = int(ids.max()) + 1
    pred_b = preds[1] if len(preds) == 2 else None
    kwargs: dict[str, Any] = {}
    clustered = n_clusters < len(y)
    ignored = ""
    if clustered:
        if "clusters" in inspect.signature(stats.bootstrap_ci).parameters:
            kwargs["clusters"] = ids
        else:  # this version of stats resamples rows: say so, and flag it
            ignored = (
                f"unreliable: {n_clusters} clusters in {len(y)} rows were ignored "
                "(stats.bootstrap_ci resamples rows only here), so the interval is too narrow"
            )
    ci = stats.bootstrap_ci(
        y, preds[0], pred_b, metric=metric, n_resamples=F1_RESAMPLES, level=level, seed=seed,
        **kwargs,
    )  # fmt: skip
    if abs(ci.estimate - estimate) > 1e-12:
        raise AssertionError("bootstrap_ci's estimate differs from the official metric")
    n_eff = effective_sizes(np.zeros(len(y), dtype=np.intp), ids)
    top = max(scores)
    if metric in F1_METRICS and top > F1_MEASURED_MAX + 1e-12:
        unreliable = True
        measured = (
            f"unreliable: F1 {top:.3f} lies above the highest F1 where coverage was measured "
            f"({F1_MEASURED_MAX}), off the measured grid ({COVERAGE_SOURCE}); its coverage is "
            "unknown"
        )
    elif metric in F1_METRICS:
        unreliable, measured = coverage_flag("f1", kind, n_eff, level, near=top > F1_NEAR)
    else:
        unreliable, measured = True, f"unreliable: no coverage was measured for {metric}"
    # the flag comes from the measured table; bootstrap_ci's class-size rule is not used
    note = "; ".join(x for x in (ignored, ci.note if ci.degenerate else "", measured) if x)
    unreliable = unreliable or bool(ignored)
    return _interval(
        estimate=ci.estimate,
        low=ci.low,
        high=ci.high,
        level=level,
        n_resamples=ci.n_resamples,
        method=ci.method,
        unreliable=unreliable,
        degenerate=ci.degenerate,
        note=note,
        n_clusters=n_clusters,
    )
