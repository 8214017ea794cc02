"""The dev/held-out split of a task's rows, and the order and weights dev is evaluated with."""

from __future__ import annotations

from dataclasses import dataclass

from experiments.metrics import normalize, scorable_task_metric
from promptlib.errors import WorkbenchError
from promptlib.leakage import content_key, query_columns
from promptlib.tasks import Task
from promptlib.variants import PromptVariant


@dataclass(frozen=True)
class DevHeldout:
    dev: tuple[str, ...]
    heldout: tuple[str, ...]
    seed: int
    fraction: float


def split_dev_heldout(
    task: Task, split: str = "test", heldout_fraction: float = 0.5, seed: int = 0
) -> DevHeldout:
    """Stratified (by answer), seeded split of a task's rows into dev and held-out.

    Rows that show the model the same content (LegalBench repeats some clauses under other
    indices) are kept on the same side: the split is made over groups of identical content,
    so no held-out text can be seen during the search under another index.
    """
    from sklearn.model_selection import train_test_split

    rows = task.rows(split)
    if len(rows) < 4:
        raise WorkbenchError(
            f"task {task.name!r} has {len(rows)} {split} rows; optimisation needs at least 4 "
            "(dev and held-out each need some)"
        )
    cols = query_columns(PromptVariant(), task)
    groups: dict[tuple[tuple[str, str], ...], list[dict[str, str]]] = {}
    for r in rows:
        groups.setdefault(content_key(r, cols), []).append(r)
    keys = list(groups)
    answers = [groups[k][0]["answer"] for k in keys]
    counts = {a: answers.count(a) for a in set(answers)}
    stratify = answers if min(counts.values()) >= 2 else None
    dev_keys, held_keys = train_test_split(
        keys, test_size=heldout_fraction, random_state=seed, stratify=stratify
    )
    held_set = {i for k in held_keys for i in (r["index"] for r in groups[k])}
    dev_set = {i for k in dev_keys for i in (r["index"] for r in groups[k])}
    return DevHeldout(
        tuple(r["index"] for r in rows if r["index"] in dev_set),
        tuple(r["index"] for r in rows if r["index"] in held_set),
        seed,
        heldout_fraction,
    )


def dev_order(
    task: Task, split: DevHeldout, split_name: str = "test", limit: int | None = None
) -> list[str]:
    """Dev rows in the search's evaluation order: stratified by answer, shuffled, seeded.

    LegalBench files are sorted by label (hearsay's first 16 dev rows are all "No"), so
    taking dev in file order would prune on one class. Here each class is shuffled with the
    split's seed and the classes are interleaved by largest deficit: after any t rows, each
    class has within one row of its share of dev times t. Every prefix — the batches a
    pruner sees, and the sample `limit` takes (`--dev-limit`) — keeps dev's class balance.
    The order depends only on the split (rows and seed), so every trial and every worker of
    a study evaluates the same rows in the same order.
    """
    import numpy as np

    answers = {r["index"]: normalize(r["answer"]) for r in task.rows(split_name)}
    rng = np.random.default_rng(split.seed)
    by_class: dict[str, list[str]] = {}
    for i in split.dev:
        by_class.setdefault(answers[i], []).append(i)
    classes = sorted(by_class)
    rank = {c: int(r) for c, r in zip(classes, rng.permutation(len(classes)), strict=True)}
    for c in classes:
        members = by_class[c]
        by_class[c] = [members[int(j)] for j in rng.permutation(len(members))]
    n = len(split.dev)
    taken = dict.fromkeys(classes, 0)
    order: list[str] = []
    for t in range(1, n + 1):
        open_classes = [c for c in classes if taken[c] < len(by_class[c])]
        # the class furthest below its quota len(c) * t / n; ties by a seeded class rank
        pick = max(open_classes, key=lambda c: (len(by_class[c]) * t - taken[c] * n, -rank[c]))
        order.append(by_class[pick][taken[pick]])
        taken[pick] += 1
    return order[:limit] if limit else order


def _batches(rows: list[str], n: int) -> list[list[str]]:
    """`rows` cut into `n` consecutive batches of (nearly) equal size, in order."""
    n = max(1, min(n, len(rows)))
    bounds = [round(len(rows) * i / n) for i in range(n + 1)]
    return [rows[bounds[i] : bounds[i + 1]] for i in range(n)]


def instance_weights(task: Task, split: str, dev: list[str]) -> dict[str, float]:
    """Per-row weights such that the mean over dev of weight x correct is the dev score.

    For balanced accuracy (every classification task's official metric) a row of class c
    weighs n / (K * n_c): K classes, n_c rows of class c among the n dev rows. The Wilcoxon
    pruner compares trials on these per-row values, so it tests the metric the search
    maximises, and the objective (balanced accuracy on dev) is their mean.
    """

    answers = {r["index"]: normalize(r["answer"]) for r in task.rows(split)}
    if scorable_task_metric(task) != "balanced_accuracy":
        return dict.fromkeys(dev, 1.0)
    counts: dict[str, int] = {}
    for i in dev:
        counts[answers[i]] = counts.get(answers[i], 0) + 1
    return {i: len(dev) / (len(counts) * counts[answers[i]]) for i in dev}
