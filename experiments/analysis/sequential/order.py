"""The order rows are evaluated in: seeded, random within each class, classes interleaved."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from experiments.analysis import stats


def row_order(answers: Sequence[str], seed: int, keys: Sequence[str] | None = None) -> list[int]:
    """A seeded random order of row indices, stratified by class (every prefix of length m
    holds each class in about its share), the same in every process.

    Classes are the normalised answers, sorted; each class's rows are permuted by
    `numpy.random.default_rng(seed)` and its j-th row gets the key (j + u_c) / n_c, u_c
    uniform per class; rows run in key order. So each class is a uniformly random order
    of its rows and every prefix holds each class within about one row of its share; the
    class pattern depends only on the class counts and the seed, not on the input order.

    With `keys` (the rows' own ids, e.g. LegalBench's ``index``) each class's rows are put in
    key order before they are permuted, so the same rows given in another order are
    evaluated in the same order, and a sequential verdict does not depend on how the file
    was sorted. Without them the permutation is of input positions.
    """
    if keys is not None and len(keys) != len(answers):
        raise ValueError(f"row_order: {len(keys)} keys for {len(answers)} answers")
    labels = stats.normalized_labels(list(answers))
    names = sorted(set(labels))
    rng = np.random.default_rng(seed)
    offsets = rng.random(len(names))
    slots: list[tuple[float, int, int]] = []
    for c, name in enumerate(names):
        rows = [i for i, label in enumerate(labels) if label == name]
        if keys is not None:
            rows.sort(key=lambda i: (str(keys[i]), i))
        perm = rng.permutation(len(rows))
        n_c = len(rows)
        slots.extend(((j + offsets[c]) / n_c, c, rows[int(perm[j])]) for j in range(n_c))
    slots.sort()
    return [row for _, _, row in slots]
