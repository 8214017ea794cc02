"""A local model's answer to a prompt does not depend on the prompt before it (issue 35)."""

from __future__ import annotations

import pytest

from experiments.llm.backends import get_model
from experiments.llm.llama import load_local
from experiments.llm.types import Decoding

pytestmark = [pytest.mark.model]

PROMPT = "Q: Is the sky blue? Answer yes or no.\nA:"


@pytest.mark.parametrize("mode", ["completion", "chat"])
def test_the_same_prompt_twice_gives_the_same_answer(mode: str) -> None:
    """Prefix order puts a trial's repeated prompts side by side. llama-cpp-python then
    decodes only the last prompt token again, alone, whose logits differ from a fresh
    evaluation's: the second answer was "" (0 tokens) where the first was " No.".

    Evaluated again, each time by another `LocalModel` over the same loaded model: one
    `LocalModel` gives a repeated greedy prompt the reply before it (`reused`), which would
    leave the KV cache's answer untested."""
    lm = get_model("local/smollm2", mode=mode)
    load_local("smollm2").reset()
    first = lm.complete(PROMPT, Decoding(max_tokens=8))
    again = [
        get_model("local/smollm2", mode=mode).complete(PROMPT, Decoding(max_tokens=8))
        for _ in range(2)
    ]
    assert first.error is None and first.tokens_out > 0
    assert not any(out.reused for out in again)  # evaluated, after the same prompt
    for out in again:
        assert (out.text, out.tokens_in, out.tokens_out) == (
            first.text,
            first.tokens_in,
            first.tokens_out,
        )


def test_a_prompt_one_token_past_the_cache_is_decoded_as_afresh() -> None:
    """The previous prompt plus one token: that one token alone would be decoded with the
    one-token kernels too."""
    llm = load_local("smollm2")
    lm = get_model("local/smollm2")
    tokens = llm.tokenize(PROMPT.encode("utf-8"), add_bos=True, special=True)
    shorter = llm.detokenize(tokens[:-1]).decode("utf-8")  # SmolLM2 adds no BOS
    assert llm.tokenize(shorter.encode("utf-8"), add_bos=True, special=True) == tokens[:-1]
    llm.reset()
    fresh = lm.complete(PROMPT, Decoding(max_tokens=8, stop=()))
    llm.reset()
    llm.eval(tokens[:-1])  # exactly the shorter prompt in the cache, nothing after it
    # another LocalModel: `lm` would give its reply before again (`reused`), not decode
    after = get_model("local/smollm2").complete(PROMPT, Decoding(max_tokens=8, stop=()))
    assert not after.reused and after.text == fresh.text


def test_log_likelihoods_of_a_repeated_prompt_are_its_fresh_ones() -> None:
    """`label_logprobs` reused the cache up to the prompt's last token and decoded that one
    alone: a repeated prompt (side by side in prefix order, with --no-cache) got other
    sums than the first time."""
    from experiments.llm.loglik import label_logprobs

    labels = [" Yes", " No"]
    load_local("smollm2").reset()
    fresh = label_logprobs("local/smollm2", PROMPT, labels)
    assert label_logprobs("local/smollm2", PROMPT, labels) == fresh
