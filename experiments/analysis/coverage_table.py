"""The measured coverage of `metric_interval`'s 95% intervals, and the flag read from it.

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

from typing import Literal

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
Kind = Literal["single", "paired"]
Family = Literal["balanced", "rows", "f1"]

MIN_COVERAGE = 0.93  # a 95% interval whose measured coverage falls below this is flagged
MAX_COVERAGE = 0.97  # a minimum coverage above this is noted as conservative (not flagged)
COVERAGE_SOURCE = "benchmarks/coverage.py"
NEAR_BOUND = 0.95  # an observed rate beyond this looks the table up with the ceiling rows
F1_NEAR = 0.75  # an observed F1 above this reads the F1 table with its high-F1 scenarios
F1_MEASURED_MAX = 0.975  # the highest true F1 of the measured scenarios (coverage.F1_SINGLE)

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
