"""Resampled demonstrations: balanced, deterministic across processes, and leak-free."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

# sample_demos imports numpy on first use; imported here, its seconds under load are not
# counted by Hypothesis as the first example's input generation (too_slow health check)
import numpy  # noqa: F401
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptlib import (
    Catalog,
    LeakageError,
    VariantError,
    compile_prompt,
    evaluation_rows,
    parse_spec,
    sample_demos,
)
from promptlib.variants import DemoRef

# ---- pure sampler, synthetic pools ------------------------------------------------------


def pool_of(sizes: dict[str, int]) -> list[tuple[DemoRef, dict[str, str]]]:
    out = []
    for label, n in sizes.items():
        for i in range(n):
            idx = f"{label}-{i}"
            out.append((DemoRef("train", idx), {"index": idx, "answer": label}))
    return out


@given(
    sizes=st.dictionaries(
        st.sampled_from(["Yes", "No", "a", "b", "c"]), st.integers(3, 12), min_size=2
    ),
    k=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
)
def test_sampler_is_balanced_deterministic_and_distinct(
    sizes: dict[str, int], k: int, seed: int
) -> None:
    pool = pool_of(sizes)
    labels = {ref.index: row["answer"] for ref, row in pool}
    refs = sample_demos(pool, k, seed)
    assert refs == sample_demos(pool, k, seed)
    assert len(refs) == k == len(set(refs))
    counts = Counter(labels[r.index] for r in refs)
    per_class = [counts.get(c, 0) for c in sizes]
    assert max(per_class) - min(per_class) <= 1
    assert min(per_class) == k // len(sizes)


def test_sampler_rejects_impossible_requests() -> None:
    with pytest.raises(VariantError, match="pool has only 4 rows"):
        sample_demos(pool_of({"Yes": 2, "No": 2}), 5, 0)
    with pytest.raises(VariantError, match="class 'Yes' has 1 rows"):
        sample_demos(pool_of({"Yes": 1, "No": 5}), 4, 0)


def test_different_seeds_give_different_draws() -> None:
    pool = pool_of({"Yes": 30, "No": 30})
    draws = {sample_demos(pool, 4, s) for s in range(20)}
    assert len(draws) > 15


# ---- real tasks -------------------------------------------------------------------------

BINARY_WITH_TEST = [
    "hearsay",
    "abercrombie",
    "cuad_audit_rights",
    "overruling",
    "proa",
    "diversity_3",
    "personal_jurisdiction",
    "ucc_v_common_law",
]


@pytest.mark.data
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    task=st.sampled_from(BINARY_WITH_TEST), seed=st.integers(0, 10_000), half_k=st.integers(1, 3)
)
def test_resampled_demos_never_leak_and_are_balanced(
    catalog: Catalog, task: str, seed: int, half_k: int
) -> None:
    t = catalog.task(task)
    labels = t.spec.labels or ()
    k = half_k * len(labels)
    compiled = compile_prompt(parse_spec(f"demos={k},seed={seed},pool=train+test"), t)
    refs = compiled.variant.demo_rows
    assert refs is not None and len(refs) == k
    counts = Counter(d.answer for d in compiled.demos)
    assert set(counts.values()) == {half_k}
    rows, excluded = evaluation_rows(compiled.variant, t, "test")
    test_demo_idx = {r.index for r in refs if r.split == "test"}
    assert test_demo_idx <= set(excluded)
    assert len(rows) + len(excluded) == t.spec.n_test
    assert not test_demo_idx & {r["index"] for r in rows}
    by_index = {r["index"]: r for r in t.rows("test")}
    for idx in test_demo_idx:
        with pytest.raises(LeakageError):
            compiled.render(by_index[idx])
    for row in rows[:3]:
        compiled.render(row)


@pytest.mark.data
def test_rows_repeating_a_demo_text_under_another_index_are_left_out(catalog: Catalog) -> None:
    task = catalog.task("cuad_audit_rights")
    texts = [" ".join(r["text"].split()) for r in task.rows("test")]
    leaked_any = False
    for seed in range(20):
        compiled = compile_prompt(parse_spec(f"demos=4,seed={seed},pool=train+test"), task)
        rows, excluded = evaluation_rows(compiled.variant, task, "test")
        demo_texts = {" ".join(d.values["text"].split()) for d in compiled.demos}
        assert not any(" ".join(r["text"].split()) in demo_texts for r in rows)
        n_test_demos = sum(r.split == "test" for r in compiled.variant.demo_rows or ())
        leaked_any |= len(excluded) > n_test_demos  # a duplicate was caught by content
    assert leaked_any and len(set(texts)) < len(texts)


DRAW_SCRIPT = """
import json, sys
from promptlib import Catalog, LocalSource, compile_prompt, parse_spec
cat = Catalog(LocalSource(sys.argv[1]))
out = []
for task, k, seed, pool in json.loads(sys.stdin.read()):
    v = compile_prompt(parse_spec(f"demos={k},seed={seed},pool={pool}"), cat.task(task)).variant
    out.append([v.id, [[r.split, r.index] for r in v.demo_rows]])
print(json.dumps(out))
"""


@pytest.mark.data
def test_draws_are_identical_in_another_process(catalog: Catalog, lb_dir: object) -> None:
    import random

    rnd = random.Random(1234)
    cases = [
        (rnd.choice(BINARY_WITH_TEST), 2 * rnd.randint(1, 3), rnd.randint(0, 10**6), pool)
        for pool in ("train+test",)
        for _ in range(60)
    ] + [("hearsay", 2, s, "train") for s in range(10)]
    here = []
    for task, k, seed, pool in cases:
        spec = parse_spec(f"demos={k},seed={seed},pool={pool}")
        v = compile_prompt(spec, catalog.task(task)).variant
        here.append([v.id, [[r.split, r.index] for r in v.demo_rows or ()]])
    env = {**os.environ, "PYTHONHASHSEED": "987"}
    proc = subprocess.run(
        [sys.executable, "-c", DRAW_SCRIPT, str(lb_dir)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert json.loads(proc.stdout) == here
