"""The sweep's trials grouped per (task, model): `Group`, `_group` (rows aligned by index,
clusters of identical prompts), and the names the measures share.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from experiments import ids
from experiments.analysis import stats
from experiments.analysis.align import common_rows
from experiments.analysis.clusters import for_rows
from experiments.metrics import base_metric
from experiments.trials.record import TrialRecord, parse_axes
from promptlib.variants.axes import draw_axes

FloatArray = NDArray[np.float64]
N_RESAMPLES = 1000
LEVEL = 0.95
RESIDUAL = "residual (row x prompt)"
ROW = "row (within task)"
TASK = "task"
AXIS_X_AXIS = "axis x axis"
UNATTRIBUTED = "prompt (not attributed: unbalanced task)"
# demonstration draws (seed) and orders (order): exchangeable levels, no pooled direction
DRAW_AXES = draw_axes()
MEASURES = ("spread", "maxp", "avgp", "sensitiscore", "share_prompt_dependent")
# measures with a bootstrap CI: a percentile bootstrap of a max (MaxP) or of max - min (spread)
# does not cover (measured 21-24% for MaxP of equal variants, 0% for a spread of 0), so those
# two carry no CI; the spread's inference is the range permutation test's p-value
CI_MEASURES = ("avgp", "sensitiscore", "share_prompt_dependent")
TIE_TOL = 1e-12


def draw_factor(axis: str) -> str:
    """The variance factor of a demonstration-draw axis: its levels mean nothing across tasks
    (draw 0 of one task is not draw 0 of another), so it is never split into a pooled main
    effect and an "x task" part. Also the factor of any axis whose levels differ between
    the tasks (a sweep skipped a level a task cannot run): nothing to pool it over."""
    return f"{axis} (within task)"


def _group_seed(seed: int, *parts: str) -> int:
    """A group's own RNG seed from the user's seed and its identity: no number depends on the
    order of the trials or on which other (task, model)s the sweep holds (`ids.seed_int`)."""
    return ids.seed_int(seed, *parts)


def with_axes(records: Iterable[TrialRecord]) -> list[TrialRecord]:
    """The records, each with its axis values (`parse_axes` of its variant's name where it
    carries none): a name that is not axis=level pairs is refused here, for every record."""
    return [t if t.axes else t.replace(axes=parse_axes(t.variant)) for t in records]


# ---- one (task, model): aligned rows ----------------------------------------------------------
@dataclass(frozen=True)
class Group:
    """A (task, model)'s complete variants on their common rows, in a canonical row order."""

    task: str
    model: str
    metric: str
    variants: tuple[str, ...]
    axes: tuple[dict[str, str], ...]
    indices: tuple[str, ...]
    answers: tuple[str, ...]
    generations: tuple[tuple[str, ...], ...]  # [variant][row]
    correct: NDArray[np.float64]  # (rows, variants) 0/1
    scores: tuple[float, ...]  # the trials' official scores
    notes: tuple[str, ...] = ()  # rows dropped to align the variants
    # cluster id per aligned row (`analysis.clusters.by_prompts` over the variants' prompt
    # hashes); None: every row its own cluster
    clusters: NDArray[np.intp] | None = None
    cluster_how: str = "rows"
    # the variants in the order they were given (the sweep's plan order): the range test
    # takes them in that order, as `experiments.analysis.compare.best_vs_worst` does
    given_order: tuple[str, ...] = ()

    def cluster_ids(self) -> NDArray[np.intp]:
        """Cluster id per row, 0..C-1 (every row its own cluster when none were recorded)."""
        if self.clusters is None:
            return np.arange(len(self.indices), dtype=np.intp)
        return self.clusters

    @property
    def n_clusters(self) -> int:
        ids = self.cluster_ids()
        return int(ids.max()) + 1 if len(ids) else 0

    @property
    def stat_metric(self) -> str:
        """The official metric `metric` computes (a rule-conclusion metric's own): what the
        statistics key their methods on."""
        return base_metric(self.metric)


def _group(
    trials: Sequence[TrialRecord],
    cluster_by: str = "prompt",
    column: dict[str, str] | None = None,
) -> Group:
    """Align a (task, model)'s variants on their common rows. Each trial's own score is first
    checked against its generations on all its rows; variants scored on different rows are
    restricted to the common rows with a note saying how many rows each lost. Rows are
    clustered by the variants' prompt hashes (`experiments.analysis.clusters.by_prompts`): rows that
    some variant gave the same prompt cannot vary apart, so every resample takes them
    together."""
    given = tuple(dict.fromkeys(t.variant for t in trials))
    trials = sorted(trials, key=lambda t: t.variant)
    first = trials[0]
    indices = common_rows(trials)
    fn = stats.metric_fn(base_metric(first.metric))
    for t in trials:
        if t.score is None:
            continue
        own = fn(
            np.asarray([str(a) for a in t.answers], dtype=object),
            np.asarray([str(g) for g in t.generations], dtype=object),
        )
        if not math.isclose(float(own), float(t.score), rel_tol=0, abs_tol=1e-9):
            raise AssertionError(
                f"{t.task} ({t.model}) {t.variant}: score recomputed from its generations "
                f"{float(own)} is not the trial's score {t.score}; refusing to report the "
                "sensitivity of another quantity"
            )
    notes: tuple[str, ...] = ()
    if any(len(t.indices) != len(indices) for t in trials):
        notes = (
            f"{first.task} ({first.model}): variants scored on different rows; restricted to "
            f"the {len(indices)} rows all share ("
            + ", ".join(f"{t.variant}: {len(t.indices)} rows, {len(t.indices) - len(indices)} "
                        "dropped" for t in trials)
            + "); each trial's own score was checked on its own rows",
        )  # fmt: skip
    gens, corr = [], []
    answers: tuple[str, ...] = ()
    hashes: list[list[str | None]] = []
    for t in trials:
        t_indices, t_gens, t_correct = t.indices, t.generations, t.correct
        pos = {idx: j for j, idx in enumerate(t_indices)}
        gens.append(tuple(str(t_gens[pos[i]]) for i in indices))
        corr.append([1.0 if t_correct[pos[i]] else 0.0 for i in indices])
        if not answers:
            t_answers = t.answers
            answers = tuple(str(t_answers[pos[i]]) for i in indices)
        t_hashes = t.prompt_hashes
        if t_hashes:  # as `compare.clustering`: a row without a hash links nothing
            by_index = dict(zip(t_indices, t_hashes, strict=False))
            hashes.append([by_index.get(i) or None for i in indices])
    # the sweep's cluster_by, by the comparisons' own rule; None: every row its own cluster
    clustering = None
    if indices and (cluster_by.startswith("column:") or (cluster_by == "prompt" and hashes)):
        clustering = for_rows(hashes, indices, cluster_by, column or {})
    metrics = {t.metric for t in trials}
    if len(metrics) != 1:
        raise ValueError(f"{first.task} ({first.model}): variants scored with {sorted(metrics)}")
    return Group(
        task=first.task,
        model=first.model,
        metric=first.metric,
        variants=tuple(t.variant for t in trials),
        axes=tuple(dict(t.axes or parse_axes(t.variant)) for t in trials),
        indices=indices,
        answers=answers,
        generations=tuple(gens),
        correct=np.asarray(corr, dtype=np.float64).T,
        # the trials' own scores, to check the recomputed ones against (same rows only)
        scores=tuple(float(t.score) for t in trials if t.score is not None)
        if all(len(t.indices) == len(indices) for t in trials)
        else (),
        notes=notes,
        clusters=None if clustering is None else clustering.ids,
        cluster_how="rows" if clustering is None else clustering.how,
        given_order=given,
    )


def _strata(group: Group) -> NDArray[np.intp]:
    """Answer class of each row for the class-based metrics (as stats.bootstrap_ci), else one."""
    y = np.asarray(group.answers, dtype=object)
    if group.stat_metric in stats.STRATIFIED_METRICS:
        return stats.class_index(y, group.stat_metric)
    return np.zeros(len(y), dtype=np.intp)
