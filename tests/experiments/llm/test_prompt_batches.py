"""A prompt's answer does not depend on the prompt before it: llama.cpp computes a batch of one
token otherwise than a batch of several, so a prompt is never finished by a batch of one
(`prefix.feed`), even when the one before left all but its last token in the KV cache."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from experiments.llm.gateway import get_model
from experiments.llm.llama import load_local
from experiments.llm.loglik import label_logprobs
from experiments.llm.prefix import feed, ready
from experiments.llm.types import Decoding
from promptlib import Catalog, compile_prompt, parse_spec


class _Fake:
    """What `feed` uses of a llama-cpp-python model: its cached tokens and `eval`."""

    def __init__(self, n_batch: int) -> None:
        self.n_batch = n_batch
        self.input_ids: list[int] = []
        self.n_tokens = 0
        self.batches: list[int] = []

    def eval(self, tokens: Sequence[int]) -> None:
        self.input_ids[self.n_tokens :] = list(tokens)
        self.n_tokens += len(tokens)
        self.batches.append(len(tokens))


@pytest.mark.parametrize("held", [0, 1, 5, 8, 9, 10, 12])
@pytest.mark.parametrize("end", [2, 9, 10, 11, 17, 21])
def test_feed_never_evaluates_one_token_alone(held: int, end: int) -> None:
    tokens = list(range(100, 130))
    llm = _Fake(n_batch=4)
    llm.input_ids, llm.n_tokens = [*tokens[:held], 7, 7], held + 2  # then a different tail
    feed(llm, tokens, end)
    assert llm.input_ids[: llm.n_tokens] == tokens[:end]
    assert all(b >= 2 for b in llm.batches) and all(b <= 4 for b in llm.batches)
    assert sum(llm.batches) <= max(end - min(held, end), 0) + 1  # at most one token again


def _llama_eval(llm: _Fake, tokens: Sequence[int]) -> None:
    """llama-cpp-python's `Llama.eval`: the tokens in batches of `n_batch`."""
    for i in range(0, len(tokens), llm.n_batch):
        llm.eval(tokens[i : i + llm.n_batch])


@pytest.mark.parametrize("held", [0, 1, 5, 8, 12, 20, 28, 29, 30])
@pytest.mark.parametrize("n", [2, 3, 9, 13, 21, 30])
def test_ready_leaves_no_one_token_batch_and_one_evaluation_when_it_can(held: int, n: int) -> None:
    tokens = list(range(100, 100 + n))
    cached = list(range(100, 130))[:held]
    llm = _Fake(n_batch=4)
    llm.input_ids, llm.n_tokens = [*cached, 7, 7], held + 2  # a different tail after them
    ready(llm, tokens)
    fed_here = len(llm.batches)
    _llama_eval(llm, tokens[llm.n_tokens :])  # what generation or log-likelihood evaluates
    assert llm.input_ids[: llm.n_tokens] == tokens
    assert all(b >= 2 for b in llm.batches), llm.batches
    rest = n - min(held, n)
    if rest >= 2 and rest % 4 != 1:  # the rest in one `eval`, the cached prefix all kept
        assert fed_here == 0 and sum(llm.batches) == rest
    else:  # at most one cached token evaluated again
        assert sum(llm.batches) <= max(rest, 1) + 1


def _prompts(catalog: Catalog) -> list[str]:
    compiled = compile_prompt(parse_spec("base"), catalog.task("hearsay"), "test")
    return [compiled.render(r) for r in catalog.task("hearsay").rows("test")[:4]]


@pytest.mark.model
@pytest.mark.data
def test_loglik_sums_do_not_depend_on_the_previous_prompt(catalog: Catalog) -> None:
    llm = load_local("smollm2")
    conts = [" Yes", " No"]
    for prompt in _prompts(catalog):
        llm.reset()
        alone = label_logprobs("local/smollm2", prompt, conts)
        # the same prompt again (a repeated row, next in prefix order): only its last token
        # was left to evaluate, which a batch of one computed otherwise (sums off by 0.03)
        again = label_logprobs("local/smollm2", prompt, conts)
        llm.reset()
        label_logprobs("local/smollm2", prompt[: len(prompt) // 2], conts)
        after_half = label_logprobs("local/smollm2", prompt, conts)
        assert again == alone and after_half == alone


@pytest.mark.model
@pytest.mark.data
def test_a_generation_prompt_is_never_finished_by_one_token_alone(catalog: Catalog) -> None:
    llm = load_local("smollm2")
    lm = get_model("local/smollm2")
    first: list[int] = []
    real_eval = llm.eval

    def recorded(tokens: Sequence[int]) -> Any:
        first.append(len(tokens))
        return real_eval(tokens)

    decoding = Decoding(temperature=0.0, max_tokens=2, stop=(), mode="completion")
    prompt = _prompts(catalog)[0]
    llm.reset()
    lm.complete(prompt, decoding)
    llm.eval = recorded
    try:
        lm.complete(prompt, decoding)  # the same prompt again: all but its end is cached
    finally:
        del llm.eval
    assert first and first[0] >= 2  # the prompt's last batch, before the generated tokens


@pytest.mark.model
@pytest.mark.data
def test_a_generation_after_scoring_the_same_prompt_starts_at_the_prompts_end(
    catalog: Catalog,
) -> None:
    """Scoring a multi-token label leaves llama.cpp's logits after a label token, with the
    KV cache at the prompt's end; llama-cpp-python took the same prompt as cached whole and
    sampled from those logits: the generation went on from the label (' No' became 'ay',
    the rest of ' hearsay', on 4 of 4 hearsay prompts)."""
    llm = load_local("smollm2")
    lm = get_model("local/smollm2")
    decoding = Decoding(temperature=0.0, max_tokens=6, stop=(), mode="completion")
    for prompt in _prompts(catalog)[:2]:
        llm.reset()
        fresh = lm.complete(prompt, decoding).text
        label_logprobs("local/smollm2", prompt, [" Yes, it is hearsay", " No"])
        assert lm.complete(prompt, decoding).text == fresh
