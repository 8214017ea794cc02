"""The order of calls that computes every distinct prompt token once: a walk of the prefix trie.

llama.cpp keeps one sequence's KV cache and reuses it for the longest prefix the next prompt
shares with the previous one. Over a set of prompts the least it can evaluate is each node of
their prefix trie once (`trie_size`): that is what it evaluates when the prompts come in
lexicographic order of their tokens (`prefix_order`), a depth-first walk of the trie, since
each prompt then shares with the one before the longest prefix it shares with any earlier one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def prefix_order(token_lists: Sequence[Sequence[int]]) -> list[int]:
    """Indices of `token_lists` in lexicographic order of their token sequences.

    A depth-first walk of the prompts' prefix trie: each prompt shares the longest possible
    prefix with the one before, so a model that reuses the previous prompt's KV cache
    evaluates each distinct prefix once (`trie_size` tokens in all). Stable: equal
    sequences, and so the order of a set of identical prompts, keep their given order.
    """
    return sorted(range(len(token_lists)), key=lambda i: tuple(token_lists[i]))


def trie_size(token_lists: Sequence[Sequence[int]]) -> int:
    """Number of distinct non-empty prefixes of `token_lists`: the nodes of their prefix
    trie (its root, the empty prefix, not counted), so the fewest tokens a model with a
    prefix-reusing KV cache must evaluate to see all of them."""
    ordered = sorted(tuple(t) for t in token_lists)
    total = 0
    previous: tuple[int, ...] = ()
    for tokens in ordered:
        total += len(tokens) - common_prefix(previous, tokens)
        previous = tokens
    return total


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of `a` and `b`."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


MIN_BATCH = 32
"""The fewest tokens of a prompt llama.cpp is given in one evaluation (unless the prompt is
shorter, then evaluated whole from its start). Its CPU kernels compute a small batch another
way than a large one, and the KV cells they write differ with them: on this machine
SmolLM2's last-token logits differ for a batch of 1 (by up to 0.55), Gemma 3's for batches of
up to 4 (by up to 0.82), and the same for every batch of 8 tokens or more. A prompt whose
rest after a cached prefix was a few tokens (a repeated row, next to itself in prefix order)
got other logits than the same prompt evaluated whole, so a row's answer and sums depended
on the row before it. 32 leaves a margin for other CPUs' kernels, and is where ggml's BLAS
backend (Accelerate, OpenBLAS builds) takes a matrix product over (`min_batch = 32` in its
`supports_op`): a batch of 32 or more is computed one way there too. The cost is at most 32
tokens evaluated again per prompt (a repeated greedy prompt is not evaluated again at all:
`LocalModel._call`)."""

ALIGN = 4
"""Where a prompt's batches start when llama.cpp's extra buffer types are on (weights
repacked for the CPU's kernels, `cpu.llama_load`): at a multiple of 4 tokens. A repacked
matrix product computes a batch's rows four at a time and its last ``rows % 4`` rows another
way (ggml's repack ``gemm``, then ``gemv``), so a token's KV cells and logits depend on its
row in the batch modulo 4. Measured 2026-12-06 on an AVX-512 CPU (AMD EPYC), Gemma 3 (Q4_K_M),
a hearsay prompt split into two batches of 32 tokens or more: the last-token logits differed
from the prompt evaluated whole at 72 of 175 split points (by up to 0.86), at none of 44
split points on a multiple of 4 (nor of 22 on a multiple of 8); with extra buffer types off,
at no split of 8 tokens or more. So with them on, the cached prefix is reused up to a multiple
of 4 and every batch but the last is a multiple of 4 long: each token is in the same row
modulo 4 as in the prompt's evaluation from an empty cache. Cost: up to 3 tokens evaluated
again per prompt. Not measured on ARM (KleidiAI's kernels)."""

_EXACT = "_workbench_exact_prefix"
"""Attribute of a loaded model: how many of its leading KV cells `ready` wrote in batches of
`MIN_BATCH` tokens or more (a prompt shorter than that: none). Only those are reused; cells
written by a generation's one-token steps, a label walk, or anything that evaluated on the
model without `ready` (`forget`) are evaluated again."""


def forget(llm: Any) -> None:
    """Trust none of `llm`'s KV cache for reuse: something evaluated on it without `ready`
    (a chat completion, litellm's provider, a diagnostic)."""
    setattr(llm, _EXACT, 0)


def _exact(llm: Any) -> int:
    return min(int(getattr(llm, _EXACT, 0)), int(llm.n_tokens))


REPACKED = "_workbench_repacked"
"""Attribute of a loaded model (`llama.build_local`): llama.cpp repacked some of its weights
(SmolLM2's Q4_1 has none to repack; Gemma 3's Q4_K tensors are)."""


def _align(llm: Any) -> int:
    """`ALIGN` when the model's weights are repacked, else 1; unknown (a model not loaded by
    `build_local`): repacked whenever extra buffer types are on."""
    repacked = getattr(llm, REPACKED, None)
    if repacked is None:
        repacked = getattr(getattr(llm, "model_params", None), "use_extra_bufts", False)
    return ALIGN if repacked else 1


def _min_batch(llm: Any, min_batch: int, align: int = 1) -> int:
    """`min_batch`, lowered where `n_batch` is too small for `batches` to keep it."""
    n_batch = int(llm.n_batch)
    full = n_batch - n_batch % align
    return max(1, min(min_batch, n_batch // 2, (full + 2 - align) // 2))


def batches(
    start: int, end: int, n_batch: int, min_batch: int, align: int = 1
) -> list[tuple[int, int]]:
    """``[start, end)`` in consecutive batches of at most `n_batch` tokens, none smaller than
    `min_batch`, each but the last a multiple of `align` long (``end - start >= min_batch``;
    `min_batch` as `_min_batch` bounds it): from an aligned `start`, every batch starts on a
    multiple of `align` (`ALIGN` says why)."""
    full = n_batch - n_batch % align
    out: list[tuple[int, int]] = []
    while end - start > full:
        rest = end - start - min_batch
        step = full if end - start - full >= min_batch else rest - rest % align
        out.append((start, start + step))
        start += step
    out.append((start, end))
    return out


def ready(llm: Any, tokens: Sequence[int], min_batch: int = MIN_BATCH) -> None:
    """Leave llama.cpp's KV cache so that the caller's evaluation of the rest of `tokens`
    (llama-cpp-python's `eval` of ``tokens[llm.n_tokens:]``, in batches of ``n_batch``)
    is one batch of at least `min_batch` tokens (`MIN_BATCH` says why), every earlier one
    fed here no smaller, all starting on a multiple of `ALIGN` where weights are repacked,
    and the cached prefix kept where it was written so: the prompt's logits are those of its
    evaluation from an empty cache, whatever came before.

    A prompt of `min_batch` tokens or fewer is evaluated whole, from its start."""
    n = len(tokens)
    a = _align(llm)
    m = _min_batch(llm, min_batch, a)
    if n <= m:
        llm.n_tokens = 0
        setattr(llm, _EXACT, 0)  # written by a small batch: not for reuse
        return
    held = min(common_prefix(llm.input_ids[: _exact(llm)], tokens), n - m)
    held -= held % a  # each token in the same row modulo `a` as from an empty cache
    parts = batches(held, n, int(llm.n_batch), m, a)
    llm.n_tokens = held
    for start, stop in parts[:-1]:
        llm.eval(list(tokens[start:stop]))
    llm.n_tokens = parts[-1][0]
    setattr(llm, _EXACT, n)  # once the caller evaluates the last batch (capped by n_tokens)
