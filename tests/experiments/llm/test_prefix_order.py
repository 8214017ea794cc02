"""`prefix_order` walks the prompts' prefix trie; `trie_size` counts its nodes."""

from __future__ import annotations

import random

from experiments.llm.prefix import common_prefix, prefix_order, trie_size


def _prefixes(token_lists: list[list[int]]) -> int:
    """The trie's nodes, counted the slow way: every distinct non-empty prefix."""
    return len({tuple(t[:k]) for t in token_lists for k in range(1, len(t) + 1)})


def _evaluated(token_lists: list[list[int]], order: list[int]) -> int:
    """Tokens a one-sequence KV cache evaluates when the prompts come in `order`."""
    total, previous = 0, list[int]()
    for i in order:
        total += len(token_lists[i]) - common_prefix(previous, token_lists[i])
        previous = token_lists[i]
    return total


def _prompts(seed: int, n: int = 40) -> list[list[int]]:
    rng = random.Random(seed)
    heads = [[rng.randrange(5) for _ in range(rng.randrange(0, 6))] for _ in range(4)]
    return [
        rng.choice(heads) + [rng.randrange(4) for _ in range(rng.randrange(0, 5))] for _ in range(n)
    ]


def test_a_permutation_in_lexicographic_order() -> None:
    lists = _prompts(1)
    order = prefix_order(lists)
    assert sorted(order) == list(range(len(lists)))
    keys = [lists[i] for i in order]
    assert keys == sorted(lists)


def test_stable_for_equal_prompts() -> None:
    lists = [[3, 1], [1, 2], [3, 1], [1, 2], [1], [3, 1]]
    assert prefix_order(lists) == [4, 1, 3, 0, 2, 5]


def test_the_sorted_order_evaluates_the_trie_once() -> None:
    for seed in range(20):
        lists = _prompts(seed)
        size = _prefixes(lists)
        assert trie_size(lists) == size
        assert _evaluated(lists, prefix_order(lists)) == size
        # file order evaluates at least as much (here, for these seeds, more)
        assert _evaluated(lists, list(range(len(lists)))) >= size


def test_file_order_can_cost_more() -> None:
    lists = [[1, 2, 3], [4, 5], [1, 2, 6], [4, 5, 7]]
    assert _evaluated(lists, list(range(4))) == 3 + 2 + 3 + 3
    assert _evaluated(lists, prefix_order(lists)) == trie_size(lists) == 3 + 1 + 3 == 7


def test_shuffle_invariance() -> None:
    lists = _prompts(7)
    rng = random.Random(0)
    for _ in range(10):
        perm = list(range(len(lists)))
        rng.shuffle(perm)
        shuffled = [lists[i] for i in perm]
        assert [shuffled[i] for i in prefix_order(shuffled)] == [
            lists[i] for i in prefix_order(lists)
        ]
        assert trie_size(shuffled) == trie_size(lists)


def test_empty() -> None:
    assert prefix_order([]) == []
    assert trie_size([]) == 0
    assert trie_size([[], []]) == 0
