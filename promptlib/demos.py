"""Resampled demonstrations: class-balanced, seeded, and never the evaluated example.

The paper's protocol (Section on in-context demonstrations): merge train and test, draw four
demonstrations, two from each class, five times with different seeds, and evaluate each prompt
on the rows no draw used. `sample_demos` draws one set; `bind` records the drawn rows on the
variant; `demonstrations` gives a variant's demonstrations. Which rows a variant may be
evaluated on, and every other leakage check, is `promptlib.leakage`.
"""

from __future__ import annotations

from collections.abc import Sequence
from weakref import WeakKeyDictionary

from promptlib import verbalizers
from promptlib.errors import VariantError
from promptlib.tasks import Task
from promptlib.templates import Demo
from promptlib.variants import APPLICATION, BASE_FILE, DemoRef, PromptVariant
from promptlib.verbalizers import LabelMap

Row = dict[str, str]


Pool = tuple[tuple[DemoRef, Row], ...]

# Per task: each pool's candidates, and each split's rows by index. A task's rows never change
# once read, and building these is linear with a large constant (a DemoRef per row): done for
# every variant, it made planning a 100k-row split take seconds (issue 19, defect 6).
_POOLS: WeakKeyDictionary[Task, dict[str, Pool]] = WeakKeyDictionary()
_BY_INDEX: WeakKeyDictionary[Task, dict[str, dict[str, Row]]] = WeakKeyDictionary()
# Per task: each (pool, k, seed, balanced) draw's rows (`bind` runs for every compile).
_DRAWS: WeakKeyDictionary[Task, dict[tuple[str, int, int, bool], tuple[DemoRef, ...]]] = (
    WeakKeyDictionary()
)


def _pool_splits(task: Task, pool: str) -> tuple[str, ...]:
    if pool == "train":
        return ("train",)
    if not task.has_split("test"):
        raise VariantError(
            f"pool=train+test needs a test split, which task {task.name!r} lacks here; "
            "use pool=train"
        )
    return ("train", "test")


def pool_rows(task: Task, pool: str) -> list[tuple[DemoRef, Row]]:
    """The candidate rows, in a fixed order (train then test, file order)."""
    splits = _pool_splits(task, pool)
    cached = _POOLS.setdefault(task, {})
    if pool not in cached:
        cached[pool] = tuple(
            (DemoRef(split, r["index"]), r) for split in splits for r in task.rows(split)
        )
    return list(cached[pool])


def _row_by_index(task: Task, split: str) -> dict[str, Row]:
    """A split's rows by `index` (unique: `read_tsv` refuses repeats)."""
    cached = _BY_INDEX.setdefault(task, {})
    if split not in cached:
        cached[split] = {r["index"]: r for r in task.rows(split)}
    return cached[split]


def sample_demos(
    candidates: Sequence[tuple[DemoRef, Row]],
    k: int,
    seed: int,
    *,
    balanced: bool = True,
    what: str = "task",
) -> tuple[DemoRef, ...]:
    """Draw k rows; with `balanced`, k is split evenly over the answers present.

    When k is not a multiple of the number of classes, the remainder goes to classes
    picked by the same seeded generator. The result's order is shuffled too, so a prompt's
    demonstrations do not come grouped by class.
    """
    if k < 1 or seed < 0:
        raise VariantError(
            f"{what}: a draw needs k >= 1 and seed >= 0, not k={k}, seed={seed} "
            "(e.g. demos=4,seed=0)"
        )
    if k > len(candidates):
        raise VariantError(
            f"{what}: asked for k={k} demonstrations but the pool has only {len(candidates)} rows; "
            "lower k or use pool=train+test"
        )
    # start-up time: numpy (~0.1 s) only once demonstrations are drawn
    import numpy as np

    rng = np.random.default_rng(seed)
    if not balanced:
        picks = rng.choice(len(candidates), size=k, replace=False)
        return tuple(candidates[int(i)][0] for i in picks)
    by_class: dict[str, list[int]] = {}
    for i, (_, row) in enumerate(candidates):
        by_class.setdefault(row["answer"], []).append(i)
    classes = sorted(by_class)
    quota = {c: k // len(classes) for c in classes}
    for c in rng.permutation(classes)[: k % len(classes)]:
        quota[str(c)] += 1
    chosen: list[int] = []
    for c in classes:
        if quota[c] > len(by_class[c]):
            raise VariantError(
                f"{what}: class {c!r} has {len(by_class[c])} rows in the pool but a balanced draw "
                f"of k={k} over {len(classes)} classes needs {quota[c]}; lower k or use "
                "pool=train+test"
            )
        chosen.extend(int(i) for i in rng.choice(by_class[c], size=quota[c], replace=False))
    order = rng.permutation(len(chosen))
    return tuple(candidates[chosen[int(j)]][0] for j in order)


def bind(variant: PromptVariant, task: Task) -> PromptVariant:
    """Resolve a variant against a task: record the drawn rows of resampled demos and the
    label mapping of a verbalizer, so the bound variant's id pins both."""
    if variant.task not in (None, task.name):
        raise VariantError(f"variant is bound to task {variant.task!r}, not {task.name!r}")
    label_map = _label_map(variant, task)
    if variant.demos == "rows":
        return variant.bound(task.name, variant.demo_rows, label_map)
    if variant.demos != "sample":
        return variant.bound(task.name, None, label_map)
    if variant.demo_rows is not None:
        return variant.bound(task.name, variant.demo_rows, label_map)
    assert variant.k is not None and variant.seed is not None
    balanced = task.spec.task_type in ("binary", "multi-class")
    draw = (variant.pool, variant.k, variant.seed, balanced)
    drawn = _DRAWS.setdefault(task, {})
    if draw not in drawn:  # the same draw every time: seeded, and the rows never change
        drawn[draw] = sample_demos(
            pool_rows(task, variant.pool),
            variant.k,
            variant.seed,
            balanced=balanced,
            what=f"task {task.name!r}",
        )
    return variant.bound(task.name, drawn[draw], label_map)


def _label_map(variant: PromptVariant, task: Task) -> LabelMap | None:
    """The verbalizer's mapping for this task's labels; a saved mapping must still be it."""
    if variant.verbalizer is None:
        return None
    resolved = verbalizers.resolve(
        variant.verbalizer, task.spec.labels, task.name, task.spec.task_type
    )
    if variant.label_map is not None and variant.label_map != resolved:
        raise VariantError(
            f"task {task.name!r}: the variant's label_map {list(variant.label_map)} is not what "
            f"verbalizer={variant.verbalizer} gives for the task's labels now "
            f"({list(resolved)}); the labels changed since it was saved: re-bind the variant "
            "without label_map"
        )
    return resolved


def demonstrations(variant: PromptVariant, task: Task) -> tuple[Demo, ...]:
    """The variant's demonstrations as (fields, answer) pairs, in its `order`."""
    demos = _drawn_demonstrations(variant, task)
    if variant.order is None:
        return demos
    return permuted(demos, variant.order)


def permuted(demos: tuple[Demo, ...], seed: int) -> tuple[Demo, ...]:
    """The same demonstrations in the order a seeded permutation gives.

    numpy's PCG64 (`default_rng`) gives the same permutation for a seed in every process and
    version that keeps its stream guarantee; a seed may give the identity (with 2 demos, half
    of them do): it is a draw, not a promise that the order differs.
    """
    # start-up time: numpy (~0.1 s) only once demonstrations are drawn
    import numpy as np

    order = np.random.default_rng(seed).permutation(len(demos))
    return tuple(demos[int(i)] for i in order)


def _drawn_demonstrations(variant: PromptVariant, task: Task) -> tuple[Demo, ...]:
    if variant.demos == "none" or variant.instruction == APPLICATION:
        return ()  # an application file's demonstrations are part of its text
    if variant.demos == "base":
        return _file_demos(task, BASE_FILE)
    if variant.demos.startswith("icl:"):
        return _file_demos(task, f"icl_{variant.demos.split(':', 1)[1]}.txt")
    bound = bind(variant, task)
    assert bound.demo_rows is not None
    pool = "train+test" if variant.demos == "rows" and task.has_split("test") else variant.pool
    splits = _pool_splits(task, pool)
    found: dict[DemoRef, Row] = {}
    for ref in bound.demo_rows:
        row = _row_by_index(task, ref.split).get(ref.index) if ref.split in splits else None
        if row is not None:
            found[ref] = row
    missing = [r for r in bound.demo_rows if r not in found]
    if missing:
        raise VariantError(
            f"task {task.name!r}: demonstration rows {missing[:3]} do not exist in its data"
        )
    return tuple(Demo.of(found[ref], found[ref]["answer"]) for ref in bound.demo_rows)


def _file_demos(task: Task, filename: str) -> tuple[Demo, ...]:
    if filename not in task.spec.prompt_files:
        raise VariantError(
            f"task {task.name!r} has no {filename} (its prompt files: "
            f"{', '.join(task.spec.prompt_files) or 'none'})"
        )
    return task.prompt(filename).demos
