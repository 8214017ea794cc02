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


def _min_batch(llm: Any, min_batch: int) -> int:
    return max(1, min(min_batch, int(llm.n_batch) // 2))


def batches(start: int, end: int, n_batch: int, min_batch: int) -> list[tuple[int, int]]:
    """``[start, end)`` in consecutive batches of at most `n_batch` tokens, none smaller than
    `min_batch` (``end - start >= min_batch``; ``n_batch >= 2 * min_batch``)."""
    out: list[tuple[int, int]] = []
    while end - start > n_batch:
        step = n_batch if end - start - n_batch >= min_batch else end - start - min_batch
        out.append((start, start + step))
        start += step
    out.append((start, end))
    return out


def ready(llm: Any, tokens: Sequence[int], min_batch: int = MIN_BATCH) -> None:
    """Leave llama.cpp's KV cache so that the caller's evaluation of the rest of `tokens`
    (llama-cpp-python's `eval` of ``tokens[llm.n_tokens:]``, in batches of ``n_batch``)
    is one batch of at least `min_batch` tokens (`MIN_BATCH` says why), every earlier one
    fed here no smaller, and the cached prefix kept where it was written so: the prompt's
    logits are those of its evaluation from an empty cache, whatever came before.

    A prompt of `min_batch` tokens or fewer is evaluated whole, from its start."""
    n = len(tokens)
    m = _min_batch(llm, min_batch)
    if n <= m:
        llm.n_tokens = 0
        setattr(llm, _EXACT, 0)  # written by a small batch: not for reuse
        return
    held = min(common_prefix(llm.input_ids[: _exact(llm)], tokens), n - m)
    parts = batches(held, n, int(llm.n_batch), m)
    llm.n_tokens = held
    for start, stop in parts[:-1]:
        llm.eval(list(tokens[start:stop]))
    llm.n_tokens = parts[-1][0]
    setattr(llm, _EXACT, n)  # once the caller evaluates the last batch (capped by n_tokens)
