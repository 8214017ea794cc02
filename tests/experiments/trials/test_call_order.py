"""The runner makes its uncached calls in the model's order (`LM.call_order`), and keeps the
results, the cache and the progress in row order."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from experiments.llm.cache import ResponseCache
from experiments.llm.scripted import LMDefaults
from experiments.llm.types import Completion, Decoding
from experiments.trials.loglik_rows import _loglik
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec
from promptlib import Catalog, compile_prompt, parse_spec

pytestmark = pytest.mark.data


class Backwards(LMDefaults):
    """Asks for its calls last row first; answers and sums from the prompt's own text, and
    records the order the calls came in."""

    name = "scripted/backwards"
    mode = "completion"

    def __init__(self, concurrency: int = 1, *, fail_odd: bool = False) -> None:
        self.concurrency = concurrency
        self.fail_odd = fail_odd
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def call_order(self, prompts: Sequence[str]) -> list[int]:
        return list(reversed(range(len(prompts))))

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        with self._lock:
            self.calls.append(prompt)
        if self.fail_odd and len(prompt) % 2:
            return Completion(None, error="RateLimitError 429: slow down")
        return Completion(f" {len(prompt)}", tokens_in=len(prompt) // 4, tokens_out=1)

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        self.calls.append(prompt)
        return [-float((len(prompt) + 7 * j) % 13) - 0.5 * j for j in range(len(continuations))]


@pytest.mark.parametrize("concurrency", [1, 4])
def test_generation_calls_in_call_order_results_in_row_order(
    catalog: Catalog, tmp_path: Path, concurrency: int
) -> None:
    spec = TrialSpec(task="hearsay", variant=parse_spec("base"), model="scripted/lm", limit=12)
    cache = ResponseCache(tmp_path / "cache")
    first = run_trial(spec, catalog, Backwards(fail_odd=True), cache=cache)
    failed = [p.prompt_hash for p in first.predictions if p.error is not None]
    assert 0 < len(failed) < 12  # not cached: the next run calls these
    lm = Backwards(concurrency)
    seen: list[tuple[int, int]] = []
    res = run_trial(spec, catalog, lm, cache=cache, progress=lambda d, n: seen.append((d, n)))
    by_index = {r["index"]: r for r in catalog.task("hearsay").rows("test")}
    compiled = compile_prompt(spec.variant, catalog.task("hearsay"))
    prompts = [compiled.render(by_index[p.index]) for p in res.predictions]
    assert [p.index for p in res.predictions] == [p.index for p in first.predictions]
    assert [p.generation for p in res.predictions] == [f" {len(p)}" for p in prompts]
    todo = [p for p in prompts if len(p) % 2]
    assert [p.cache_hit for p in res.predictions] == [len(p) % 2 == 0 for p in prompts]
    if concurrency == 1:  # the pool's calls start in that order, but may finish in any
        assert lm.calls == list(reversed(todo))
    else:
        assert sorted(lm.calls) == sorted(todo)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and seen[-1] == (12, 12)


def test_loglik_calls_in_call_order_results_in_row_order(catalog: Catalog, tmp_path: Path) -> None:
    task = catalog.task("hearsay")
    spec = TrialSpec(
        task="hearsay", variant=parse_spec("base"), model="scripted/lm", scoring="loglik"
    )
    compiled = compile_prompt(spec.variant, task)
    rows = task.rows("test")[:6]
    prompts = [compiled.render(r) for r in rows]
    prompts = [*prompts, prompts[1]]  # a prompt twice: its second row is a cache hit
    cache = ResponseCache(tmp_path / "cache")
    lm = Backwards()
    seen: list[int] = []
    out, hits = _loglik(spec, task, compiled, prompts, cache, lambda d, n: seen.append(d), lm)
    # the repeated prompt comes first in the backwards order: its row 1 is the hit
    assert lm.calls == [prompts[i] for i in (6, 5, 4, 3, 2, 0)]
    assert hits == [False, True, False, False, False, False, False]
    alone = [Backwards().loglikelihood(p, ["a", "b"]) for p in prompts]
    labels = compiled.answer_labels or task.spec.labels or ()
    called = [c for c, hit in zip(out, hits, strict=True) if not hit]
    assert [list(c.extra["logprobs"].values()) for c in called] == alone[:1] + alone[2:]
    assert [c.text for c in out] == [labels[max(range(2), key=s.__getitem__)] for s in alone]
    assert seen == list(range(1, 8))
    again = Backwards()
    _, hits = _loglik(spec, task, compiled, prompts, cache, None, again)
    assert hits == [True] * 7 and again.calls == []
