"""The order rows are evaluated in: seeded, random within each class, classes interleaved."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from experiments.analysis import stats


def row_order(answers: Sequence[str], seed: int) -> list[int]:
    """A seeded random order of row indices, stratified by class (every prefix of length m
    holds each class in about its share), the same in every process.

    Classes are the normalised answers, sorted; each class's rows are permuted by
    `numpy.random.default_rng(seed)` and its j-th row gets the key (j + u_c) / n_c, u_c
    uniform per class; rows run in key order. So each class is a uniformly random order
    of its rows and every prefix holds each class within about one row of its share; the
    class pattern depends only on the class counts and the seed, not on the input order.
    """
    labels = stats.normalized_labels(list(answers))
    names = sorted(set(labels))
    rng = np.random.default_rng(seed)
    offsets = rng.random(len(names))
    keys: list[tuple[float, int, int]] = []
    for c, name in enumerate(names):
        rows = [i for i, label in enumerate(labels) if label == name]
        perm = rng.permutation(len(rows))
        n_c = len(rows)
        keys.extend(((j + offsets[c]) / n_c, c, rows[int(perm[j])]) for j in range(n_c))
    keys.sort()
    return [row for _, _, row in keys]
