"""With the real local model, the runner's calls arrive in prefix order and llama.cpp is fed
each distinct prompt token about once (the prompts' prefix trie)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from experiments.llm.gateway import get_model
from experiments.llm.llama import load_local
from experiments.llm.prefix import trie_size
from experiments.llm.types import Completion, Decoding
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec
from promptlib import Catalog, parse_spec

pytestmark = [pytest.mark.model, pytest.mark.data]


class Recording:
    """The real model, recording the prompts of its calls in the order they come."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.prompts: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        self.prompts.append(prompt)
        return self._inner.complete(prompt, decoding)  # type: ignore[no-any-return]

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        self.prompts.append(prompt)
        return self._inner.loglikelihood(prompt, continuations)  # type: ignore[no-any-return]


def _tokens(prompts: Sequence[str], special: bool) -> list[list[int]]:
    llm = load_local("smollm2")
    return [llm.tokenize(p.encode("utf-8"), add_bos=True, special=special) for p in prompts]


def test_loglik_trials_feed_the_prompt_trie_once(catalog: Catalog) -> None:
    llm = load_local("smollm2")
    fed: list[int] = []
    real_eval = llm.eval

    def counted(tokens: Sequence[int]) -> None:
        fed.append(len(tokens))
        real_eval(tokens)

    lm = Recording(get_model("local/smollm2"))
    llm.reset()
    llm.eval = counted
    try:
        results = [
            run_trial(
                TrialSpec(
                    task="cuad_audit_rights",
                    variant=parse_spec(v),
                    model="local/smollm2",
                    limit=12,
                    scoring="loglik",
                ),
                catalog,
                lm,
            )
            for v in ("base", "demos=4,seed=0")
        ]
    finally:
        del llm.eval
    assert all(r.complete and r.model_calls == 12 for r in results)
    tokens = _tokens(lm.prompts, special=False)
    for trial in (tokens[:12], tokens[12:]):  # each trial's calls in prefix order
        assert trial == sorted(trial)
    conts = [llm.tokenize(b" Yes", add_bos=False), llm.tokenize(b" No", add_bos=False)]
    limit = trie_size([t + c[:-1] for t in tokens for c in conts])
    # each prompt re-reads nothing it shares with the one before; file order shares less
    assert limit <= sum(fed) <= 1.02 * limit


def test_generation_calls_arrive_in_prefix_order(catalog: Catalog) -> None:
    lm = Recording(get_model("local/smollm2"))
    spec = TrialSpec(
        task="cuad_audit_rights", variant=parse_spec("base"), model="local/smollm2", limit=8
    )
    res = run_trial(spec, catalog, lm)
    assert res.model_calls == 8 and len(lm.prompts) == 8
    tokens = _tokens(lm.prompts, special=True)
    assert tokens == sorted(tokens)
    assert [p.index for p in res.predictions] == sorted((p.index for p in res.predictions), key=int)
