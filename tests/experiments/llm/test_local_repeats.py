"""A repeated greedy prompt a local model answers from the reply before it (no evaluation) is
counted as what it is: a hit, not a model call. The trial's ``model_calls``, each row's
``cache_hit`` and the tokens a sweep says it sent count the evaluations llama.cpp made.

llama.cpp is replaced by a recording stand-in (`_Llama`): what is counted here is the calls,
not the answers (those are the real model's, `test_prompt_batches`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from experiments.llm import get_model, llama
from experiments.llm.cache import ResponseCache
from experiments.llm.types import Decoding
from experiments.sweeps.cost import Cost
from experiments.trials.run import _generate, run_trial
from experiments.trials.spec import TrialSpec
from promptlib import Catalog, parse_spec

GREEDY = Decoding(temperature=0.0, max_tokens=4, stop=("\n",), mode="completion")


class _Llama:
    """What `LocalModel` uses of a llama-cpp-python model, answering `reply` and recording
    each prompt it evaluates."""

    n_batch = 512

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.evaluated: list[Any] = []
        self.input_ids: list[int] = [0] * 1_000_000
        self.n_tokens = 0
        self.model_params = SimpleNamespace(use_extra_bufts=True)

    def n_ctx(self) -> int:
        return len(self.input_ids)

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = True) -> list[int]:
        return list(text)

    def eval(self, tokens: Sequence[int]) -> None:
        self.input_ids[self.n_tokens : self.n_tokens + len(tokens)] = list(tokens)
        self.n_tokens += len(tokens)

    def create_completion(self, prompt: Any, **gen: Any) -> dict[str, Any]:
        self.evaluated.append(prompt)
        return {
            "choices": [{"text": self.reply, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": 1},
        }


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> _Llama:
    """The stand-in, loaded as local/smollm2 for this test."""
    llm = _Llama(" Yes")
    monkeypatch.setitem(llama._LOADED, "smollm2", llm)
    return llm


def test_a_repeat_is_marked_reused_and_another_model_is_evaluated(
    fake: _Llama, monkeypatch: pytest.MonkeyPatch
) -> None:
    lm = get_model("local/smollm2")
    first = lm.complete("Q: x\nA:", GREEDY)
    again = lm.complete("Q: x\nA:", GREEDY)
    assert len(fake.evaluated) == 1  # the repeat was not evaluated
    assert not first.reused and again.reused  # and says so
    assert (again.text, again.tokens_in, again.tokens_out) == (" Yes", 7, 1)
    # another model loaded under the same name (another GGUF or n_ctx): evaluated, its reply
    other = _Llama(" No")
    monkeypatch.setitem(llama._LOADED, "smollm2", other)
    moved = lm.complete("Q: x\nA:", GREEDY)
    assert (moved.text, moved.reused, len(other.evaluated)) == (" No", False, 1)


def test_repeated_rows_are_hits_not_model_calls(fake: _Llama, tmp_path: Path) -> None:
    """Before: 6 rows, 3 evaluations, and 6 model calls counted, no hit, every row's tokens
    counted as sent."""
    prompts = ["Q: b\nA:", "Q: a\nA:", "Q: b\nA:", "Q: c\nA:", "Q: b\nA:", "Q: a\nA:"]
    for cache in (None, ResponseCache(tmp_path / "cache")):
        fake.evaluated.clear()
        lm = get_model("local/smollm2")  # nothing given again from the previous round
        completions, hits = _generate(lm, prompts, GREEDY, cache, None)
        assert len(fake.evaluated) == 3  # a, b, c: each repeat next to its first in order
        assert sum(not h for h in hits) == 3 and sum(hits) == 3  # model_calls, cache_hits
        assert [c.text for c in completions] == [" Yes"] * 6
        assert hits == [c.reused for c in completions]
    # cached now: every row a hit, none given again by the model
    completions, hits = _generate(get_model("local/smollm2"), prompts, GREEDY, cache, None)
    assert all(hits) and not any(c.reused for c in completions)


def test_sampled_rows_are_each_a_model_call(fake: _Llama) -> None:
    prompts = ["Q: a\nA:", "Q: a\nA:", "Q: a\nA:"]
    sampled = Decoding(temperature=0.7, max_tokens=4, stop=("\n",), mode="completion")
    completions, hits = _generate(get_model("local/smollm2"), prompts, sampled, None, None)
    assert len(fake.evaluated) == 3 and not any(hits)
    assert not any(c.reused for c in completions)


@pytest.mark.data
def test_a_trials_model_calls_are_its_evaluations(fake: _Llama, catalog: Catalog) -> None:
    """cuad_audit_rights repeats texts in its first rows: the trial's model calls are the
    evaluations made, the repeats hits, and a sweep's tokens sent those of the evaluations."""
    spec = TrialSpec(
        task="cuad_audit_rights", variant=parse_spec("base"), model="local/smollm2", limit=300
    )
    res = run_trial(spec, catalog, get_model("local/smollm2"))
    distinct = len({p.prompt_hash for p in res.predictions})
    assert distinct < len(res.predictions)  # the premise: repeated texts
    assert res.complete and res.model_calls == len(fake.evaluated) == distinct
    assert res.cache_hits == len(res.predictions) - distinct
    assert res.summary()["model_calls"] == distinct
    cost = Cost()
    cost.add(res.model_calls, res.cache_hits, res.predictions, res.spent)
    assert cost.tokens_in == sum(len(p) for p in fake.evaluated)  # each evaluation's tokens
