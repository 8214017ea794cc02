"""Anytime-valid paired comparisons: stop evaluating rows as soon as the answer is clear.

A sequential comparison evaluates rows in a seeded, class-stratified random order
(`row_order`), in batches, on both arms, and after each batch updates a confidence sequence
(CS) for metric(A) - metric(B). It stops when the interval excludes 0 (A or B better), lies
inside +-delta (equivalent), or the planned rows run out (undecided, with the interval
reached). `PairedSequence` is one comparison, `Elimination` adaptive best-of-k (successive
elimination); `simulate_paired` and `EliminationCore` run many at once on arrays, with the
same code (benchmarks/sequential_validity.py).

How the sequence works (`betting`)
----------------------------------
- Linear metrics only. Accuracy, balanced accuracy and the share-of-rows metrics are
  weighted means of per-row hits: metric = sum_c omega_c * recall_c over the answer classes
  c, with weights known before any call, omega_c = 1/K for balanced accuracy and n_c / N
  (the planned rows' class shares) for accuracy. The share-of-rows metrics (sara_numeric,
  citation_open, definition_extraction) have nearly unique answers and are one class of
  weight 1. F1 is a ratio of sums, not a mean of row terms: no sequence here covers it, and
  `NotSequential` says to use the fixed design.
- Blocks. The ordered rows are cut, before any call, into blocks: the shortest runs that
  hold every class (about 5 rows for 80/20 classes; the rows after the last full run join
  the last block). A block's statistic is z = sum_c omega_c * mean over its class-c rows of
  d, with d = hit_A - hit_B in {-1, 0, 1}, so z lies in [-1, 1] and, rows of a class being
  exchangeable draws, E[z | earlier blocks] = sum_c omega_c mu_c = the metric difference,
  whatever the class mix of the block: balanced accuracy's weights are built into every
  observation instead of being split across per-class sequences. The price: a class of r
  planned rows makes blocks of about N / r rows, and the sequence learns nothing until a
  block is complete, so a task with a class of a handful of rows decides late (honestly:
  under balanced accuracy that class carries 1/K of the metric).
- The CS is the betting CS of Waudby-Smith & Ramdas (2023), "Estimating means of bounded
  random variables by betting", JRSS-B 86(1), on x = (z + 1) / 2 in [0, 1]: for each
  candidate mean m on a grid of `GRID` points, the capital K_t(m) = prod_b (1 + lambda_b(m)
  (x_b - m)) with the paper's aGRAPA bet lambda_b(m) = (mu - m) / (sigma^2 + (mu - m)^2)
  from the earlier blocks' regularised mean and variance, truncated to [-c/(1-m), c/m]
  (c = `TRUNCATION`); the CS is {m : K_t(m) < 1/alpha}, intersected over looks. The bets
  are predictable, so K_t(m) at the true m is a nonnegative martingale started at 1 and,
  by Ville's inequality, P(exists t: K_t(m) >= 1/alpha) <= alpha: the interval holds at
  every look at once, however often one looks and whenever one stops. Ends are rounded
  outwards to the grid point just outside the accepted set, so the grid only widens.
- What is covered. The decisions "A" and "B" (0 excluded) are exact under the paired
  permutation test's own null (A's and B's replies exchangeable within each row): every d
  is then symmetric given all before it, so K_t(1/2) is a martingale whatever the rows and
  their order, and the size is <= alpha. The interval at m != 0 (and so "equivalent") is for
  the expected difference on the task's rows, rows of a class being exchangeable draws (the
  model the product's bootstrap interval assumes too). Not used, on purpose: the
  without-replacement CS of the same paper, which covers the realised difference on these
  N rows and shrinks to it at t = N, so with two equal prompts it would exclude 0 at the
  end in most runs (their realised difference is rarely exactly 0).
- A library was tried first: installing `confseq` (the authors' code, the same bets, one
  sequence at a time) from its sdist, a C++ build, did not finish in 150 s here, and
  `expectation` needs Python >= 3.12. The bets follow confseq's `lambda_aKelly`
  (src/confseq/betting_strategies.py), vectorised over simulations.
"""

from experiments.analysis.sequential.betting import GRID, NotSequential, strata
from experiments.analysis.sequential.elimination import Elimination, EliminationCore
from experiments.analysis.sequential.group import GroupCore, normal_boundaries, obf_spent
from experiments.analysis.sequential.order import row_order
from experiments.analysis.sequential.paired import (
    METHODS,
    Look,
    Outcomes,
    PairedSequence,
    Planned,
    planned_looks,
    simulate_paired,
)

SEQUENCE = (
    "betting confidence sequence (Waudby-Smith & Ramdas 2023, aGRAPA bets) on block means "
    "of the metric's weighted row terms, anytime-valid at every look"
)
GROUP_TEST = (
    "group-sequential permutation test at the planned looks (swaps of A and B per cluster, "
    "alpha spent as alpha t^2.5, close to O'Brien-Fleming; interval: repeated confidence "
    "interval, normal theory)"
)

__all__ = [
    "GRID",
    "GROUP_TEST",
    "METHODS",
    "SEQUENCE",
    "Elimination",
    "EliminationCore",
    "GroupCore",
    "Look",
    "NotSequential",
    "Outcomes",
    "PairedSequence",
    "Planned",
    "normal_boundaries",
    "obf_spent",
    "planned_looks",
    "row_order",
    "simulate_paired",
    "strata",
]
