"""A row's labels from one evaluation of its prompt, shared label tokens evaluated once, with
the sums of scoring each label on its own (the implementation before issue 35)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from experiments.llm.llama import _LOCK, load_local
from experiments.llm.loglik import _label_walk, _last_logits, _logsoftmax, label_logprobs
from experiments.llm.prefix import common_prefix, trie_size
from promptlib import Catalog, compile_prompt, parse_spec

pytestmark = [pytest.mark.model, pytest.mark.data]


class _Counting:
    """The model, counting the tokens fed to `eval`."""

    def __init__(self, llm: Any) -> None:
        object.__setattr__(self, "_llm", llm)
        object.__setattr__(self, "fed", 0)

    def eval(self, tokens: Sequence[int]) -> None:
        object.__setattr__(self, "fed", self.fed + len(tokens))
        self._llm.eval(tokens)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._llm, name, value)


def _one_by_one(llm: Any, n: int, after_prompt: Any, conts: Sequence[Sequence[int]]) -> list[float]:
    """The reference: each label scored on its own after the prompt's `n` tokens, its tokens
    evaluated one at a time from the prompt's end (label_logprobs before issue 35)."""
    scores = []
    for cont_tokens in conts:
        total = float(after_prompt[cont_tokens[0]])
        llm.n_tokens = n
        for i in range(1, len(cont_tokens)):
            llm.eval([cont_tokens[i - 1]])
            logp = _logsoftmax(_last_logits(llm))
            total += float(logp[cont_tokens[i]])
        scores.append(total)
    llm.n_tokens = n
    return scores


def _compare(prompts: Sequence[str], continuations: Sequence[str]) -> tuple[int, int]:
    """Both ways on the same evaluated prompt: equal sums, equal choice, the KV cache left at
    the prompt's end; (tokens the walk fed, tokens one by one fed) over all prompts."""
    llm = load_local("smollm2")
    walked = single = 0
    for prompt in prompts:
        with _LOCK:
            tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=False)
            conts = [
                llm.tokenize(c.encode("utf-8"), add_bos=False, special=False) for c in continuations
            ]
            shared = min(
                common_prefix(list(llm.input_ids[: llm.n_tokens]), tokens), len(tokens) - 1
            )
            llm.n_tokens = shared  # the previous prompt's prefix reused
            llm.eval(tokens[shared:])
            n = len(tokens)
            after = _logsoftmax(_last_logits(llm))
            counted = _Counting(llm)
            want = _one_by_one(counted, n, after, conts)
            single += counted.fed
            counted = _Counting(llm)
            got = _label_walk(counted, n, after, conts, continuations)
            walked += counted.fed
            assert llm.n_tokens == n and list(llm.input_ids[:n]) == tokens
        assert got == pytest.approx(want, abs=1e-6, rel=0)
        assert max(range(len(got)), key=got.__getitem__) == max(
            range(len(want)), key=want.__getitem__
        )

    return walked, single


def test_hearsay_rows_as_before(catalog: Catalog) -> None:
    task = catalog.task("hearsay")
    compiled = compile_prompt(parse_spec("base"), task)
    prompts = [compiled.render(r) for r in task.rows("test")[:20]]
    walked, single = _compare(
        prompts, [compiled.answer_join + lab for lab in task.spec.labels or ()]
    )
    assert walked == single == 0  # one-token labels: read from the prompt's evaluation alone


def test_multi_token_labels_share_their_prefix_once(catalog: Catalog) -> None:
    task = catalog.task("successor_liability")
    compiled = compile_prompt(parse_spec("base"), task)
    prompts = [compiled.render(r) for r in task.rows("test")[:6]]
    labels = [*(task.spec.labels or ()), "de facto consolidation", "de jure merger", "express"]
    conts = [compiled.answer_join + lab for lab in labels]
    walked, single = _compare(prompts, conts)
    llm = load_local("smollm2")
    toks = [llm.tokenize(c.encode("utf-8"), add_bos=False, special=False) for c in conts]
    assert single == len(prompts) * sum(len(t) - 1 for t in toks)
    assert walked == len(prompts) * trie_size([t[:-1] for t in toks]) < single


def test_label_logprobs_leaves_the_prompt_for_the_next(catalog: Catalog) -> None:
    task = catalog.task("successor_liability")
    compiled = compile_prompt(parse_spec("base"), task)
    prompt = compiled.render(task.rows("test")[0])
    conts = [compiled.answer_join + lab for lab in task.spec.labels or ()]
    label_logprobs("local/smollm2", prompt, conts)
    llm = load_local("smollm2")
    tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=False)
    assert llm.n_tokens == len(tokens) and list(llm.input_ids[: len(tokens)]) == tokens
