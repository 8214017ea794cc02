"""The order rows are evaluated in: seeded, random within each class, classes interleaved,
the rows of one cluster (repeated texts) together."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np

from experiments.analysis import stats


def row_order(
    answers: Sequence[str],
    seed: int,
    keys: Sequence[str] | None = None,
    clusters: Sequence[Hashable] | None = None,
) -> list[int]:
    """A seeded random order of row indices, stratified by class (every prefix of length m
    holds each class in about its share), the same in every process.

    Classes are the normalised answers, sorted; each class's units are permuted by
    `numpy.random.default_rng(seed)` and its j-th unit gets the key (j + u_c) / n_c, u_c
    uniform per class; units run in key order. So each class is a uniformly random order
    of its units and every prefix holds each class within about one unit of its share; the
    class pattern depends only on the class counts and the seed, not on the input order.

    A unit is a row, or with `clusters` (one key per row: rows with equal keys got the same
    prompt, so their answers cannot vary apart) every row of one cluster, kept together in
    the order: a sequential design bets on a whole cluster at once (it enters the sequence
    once, with all its rows), as the fixed design's tests swap and resample whole clusters.
    A cluster's class is its rows' most common answer (ties: the first in sorted order).
    With every cluster a single row the order is the row order exactly.

    With `keys` (the rows' own ids, e.g. LegalBench's ``index``) each class's units are put
    in key order (a cluster by its smallest key) before they are permuted, so the same rows
    given in another order are evaluated in the same order, and a sequential verdict does
    not depend on how the file was sorted. Without them the permutation is of input
    positions.
    """
    if keys is not None and len(keys) != len(answers):
        raise ValueError(f"row_order: {len(keys)} keys for {len(answers)} answers")
    if clusters is not None and len(clusters) != len(answers):
        raise ValueError(f"row_order: {len(clusters)} cluster keys for {len(answers)} answers")
    labels = stats.normalized_labels(list(answers))

    def key_of(i: int) -> tuple[str, int]:
        return (str(keys[i]), i) if keys is not None else ("", i)

    # the units: a cluster's rows in key order, the cluster labelled by its class
    members: dict[Hashable, list[int]] = {}
    for i in range(len(labels)):
        members.setdefault(clusters[i] if clusters is not None else i, []).append(i)
    units: dict[str, list[list[int]]] = {}
    for rows in members.values():
        rows.sort(key=key_of)
        counts = Counter(labels[i] for i in rows)
        top = max(counts.values())
        label = min(name for name, n in counts.items() if n == top)
        units.setdefault(label, []).append(rows)
    names = sorted(set(labels))
    rng = np.random.default_rng(seed)
    offsets = rng.random(len(names))
    slots: list[tuple[float, int, list[int]]] = []
    for c, name in enumerate(names):
        group = sorted(units.get(name, []), key=lambda rows: key_of(rows[0]))
        if not group:
            continue  # a class only inside clusters labelled by another class
        perm = rng.permutation(len(group))
        n_c = len(group)
        slots.extend(((j + offsets[c]) / n_c, c, group[int(perm[j])]) for j in range(n_c))
    slots.sort(key=lambda s: (s[0], s[1]))
    return [row for _, _, rows in slots for row in rows]
