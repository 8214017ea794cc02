"""The measured coverage of `metric_interval`'s 95% intervals, and the flag read from it.

Every interval is flagged from measured coverage, not from a rule: `COVERAGE` holds the
minimum and median coverage that `benchmarks/coverage.py` measured for each grid cell (read
from the package data file `data/interval_coverage.csv`, which that script writes), the
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

import csv
import io
from importlib import resources
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from promptlib.errors import DataError

FloatArray = NDArray[np.float64]
Kind = Literal["single", "paired"]
Family = Literal["balanced", "rows", "f1"]

MIN_COVERAGE = 0.93  # a 95% interval whose measured coverage falls below this is flagged
MAX_COVERAGE = 0.97  # a minimum coverage above this is noted as conservative (not flagged)
COVERAGE_SOURCE = "benchmarks/coverage.py"
NEAR_BOUND = 0.95  # an observed rate beyond this looks the table up with the ceiling rows
F1_NEAR = 0.75  # an observed F1 above this reads the F1 table with its high-F1 scenarios
F1_MEASURED_MAX = 0.975  # the highest true F1 of the measured scenarios (coverage.F1_SINGLE)

# ---- measured coverage (package data written by `benchmarks/coverage.py --emit`) --------------
# COVERAGE[(family, kind)][cell] = (min, median, worst scenario) of the 95% interval's
# coverage over the generating scenarios of that cell (true recalls 0.5-0.95; the
# "+ceiling" families add 0.97, 0.99, 1.0). Cells: (n, minority share) for "balanced"
# (two classes) and "rows"; (classes, rows per class) for "classes"; (documents, rows per
# document and class) for "spanning" (clusters holding rows of both classes).
# Simulations per scenario: one variant, two classes: exact (every outcome); paired 1000;
# classes 600 (10 classes: 250); spanning through metric_interval: one variant 600, paired
# 300; F1 300 (n = 200: 200). F1 cells: "f1" true F1 0.52-0.66, "f1+ceiling" 0.52-0.975.
COVERAGE_SIMS = 1000
COVERAGE_FILE = "data/interval_coverage.csv"  # in this package (pyproject's package-data)
COVERAGE_COLUMNS = ("family", "kind", "n", "share", "min", "median", "worst")
CoverageTable = dict[tuple[str, str], dict[tuple[int, float], tuple[float, float, str]]]


def read_coverage(text: str, source: str = COVERAGE_FILE) -> CoverageTable:
    """The coverage table from its CSV text: one row per (family, kind, cell), in file order.

    Cells are (int, float) and coverages floats, exactly as `benchmarks/coverage.py` wrote
    them, so a note quoting a cell or a coverage reads as it did when the table was pasted."""
    rows = csv.DictReader(io.StringIO(text))
    if tuple(rows.fieldnames or ()) != COVERAGE_COLUMNS:
        raise DataError(
            f"{source}: the header must be {','.join(COVERAGE_COLUMNS)}, not "
            f"{','.join(rows.fieldnames or ())}; regenerate it with benchmarks/coverage.py --emit"
        )
    table: CoverageTable = {}
    for line, row in enumerate(rows, start=2):
        try:
            cell = (int(row["n"]), float(row["share"]))
            value = (float(row["min"]), float(row["median"]), str(row["worst"]))
        except (TypeError, ValueError) as e:
            raise DataError(
                f"{source}, line {line}: {e}; regenerate it with benchmarks/coverage.py --emit"
            ) from None
        table.setdefault((row["family"], row["kind"]), {})[cell] = value
    return table


def load_coverage() -> CoverageTable:
    """The measured table shipped with the package (read once, at import)."""
    resource = resources.files("experiments.analysis").joinpath(COVERAGE_FILE)
    return read_coverage(resource.read_text(encoding="utf-8"))


COVERAGE: CoverageTable = load_coverage()


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
