"""The order of a trial's model calls: the model's own (`LM.call_order`), results in row order."""

from __future__ import annotations

from collections.abc import Sequence

from experiments.llm.types import LM, ModelError


def in_call_order(lm: LM, prompts: Sequence[str], todo: Sequence[int]) -> list[int]:
    """The rows `todo` (indices of `prompts`) in the order the model asks its calls to be
    made (`LM.call_order`: a local model's prefix order, so llama.cpp evaluates each prompt
    token that rows share once). Only the calls' order changes: results stay in row order."""
    if len(todo) < 2:
        return list(todo)
    order = lm.call_order([prompts[i] for i in todo])
    if sorted(order) != list(range(len(todo))):
        raise ModelError(
            f"{type(lm).__name__}.call_order gave no permutation of its {len(todo)} prompts"
        )
    return [todo[j] for j in order]
