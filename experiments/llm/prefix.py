"""The order of a local model's calls: prompts sharing a prefix one after another, so
llama.cpp's KV cache reuses it (the prefix trie walked depth first)."""

from __future__ import annotations

from collections.abc import Sequence


def prefix_order(token_lists: Sequence[Sequence[int]]) -> list[int]:
    """Indices of `token_lists` sorted by their token sequences (stable: ties keep their
    order): a depth-first walk of the prompts' prefix trie, so each prompt follows the one
    it shares the longest prefix with."""
    return sorted(range(len(token_lists)), key=lambda i: tuple(token_lists[i]))
