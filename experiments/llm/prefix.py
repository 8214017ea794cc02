"""The order of calls that computes every distinct prompt token once: a walk of the prefix trie.

llama.cpp keeps one sequence's KV cache and reuses it for the longest prefix the next prompt
shares with the previous one. Over a set of prompts the least it can evaluate is each node of
their prefix trie once (`trie_size`): that is what it evaluates when the prompts come in
lexicographic order of their tokens (`prefix_order`), a depth-first walk of the trie, since
each prompt then shares with the one before the longest prefix it shares with any earlier one.
"""

from __future__ import annotations

from collections.abc import Sequence


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
