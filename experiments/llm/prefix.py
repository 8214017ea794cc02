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


def feed(llm: Any, tokens: Sequence[int], end: int) -> None:
    """Bring llama.cpp's KV cache to hold `tokens[:end]`: the prefix it holds already is kept,
    the rest evaluated in batches of at least two tokens (never a batch of one).

    Why: llama.cpp's CPU kernels compute a batch of one token another way than a batch of
    several, and the results differ (local/smollm2, the last of a 250-token hearsay prompt
    evaluated alone: logits off by up to 0.55, a label's sum by up to 0.035), while any
    split into batches of two or more gives the same bits. Which prefix is still cached
    depends on the previous prompt (in prefix order a repeated prompt follows itself, and
    only its last token was left to evaluate), so a batch of one made a row's answer depend
    on the other rows of its trial. With this, a prompt's logits are those of evaluating it
    whole, whatever came before.
    """
    held = common_prefix(llm.input_ids[: llm.n_tokens], tokens[:end])
    start = min(held, end)
    if end - start == 1 and start > 0:
        start -= 1  # re-evaluate one cached token rather than evaluate one alone
    llm.n_tokens = start
    step = max(int(llm.n_batch), 3)
    while start < end:
        stop = min(start + step, end)
        if end - stop == 1:
            stop -= 1  # the last batch takes two tokens, not one
        llm.eval(list(tokens[start:stop]))
        start = stop


def ready(llm: Any, tokens: Sequence[int]) -> None:
    """Leave llama.cpp's KV cache so that evaluating the rest of `tokens` (llama-cpp-python's
    `eval` of ``tokens[llm.n_tokens:]``, in batches of ``n_batch``) has no batch of one token
    (`feed` says why), with as few evaluations as that allows: the cached prefix is kept
    whenever two or more tokens are left (one `eval` for the rest, as before); with one or
    none left it is cut back to all but the last two; only when the rest would end in a
    batch of one after ``n_batch``-token batches are its first tokens fed here. Each extra
    evaluation is a graph computation, which on a busy machine costs a thread wake-up."""
    n = len(tokens)
    held = min(common_prefix(llm.input_ids[: llm.n_tokens], tokens), n)
    rest = n - held
    if rest < 2:
        llm.n_tokens = max(n - 2, 0)
    elif rest % max(int(llm.n_batch), 2) == 1:
        feed(llm, tokens, n - 2)
    else:
        llm.n_tokens = held
