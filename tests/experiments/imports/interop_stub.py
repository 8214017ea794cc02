"""The interop tests' model: the stub server answering each (variant, row) right or wrong as a
designed correctness vector says, so a harness's log can be checked against known truth.

Rows share a difficulty (one latent draw per row, both variants answer the easy rows right),
which is what makes pairing pay: the paired test sees only the rows where the variants differ."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pytest

from experiments.testing.stub_server import StubOpenAI

N_ROWS = 40
VARIANTS = ("A", "B")
_ROW = re.compile(r"\brow (\d+)\b")
_VARIANT = re.compile(r"\bVariant ([A-Z])\b")


def answer(row: int) -> str:
    """The gold answer of a row: Yes and No alternate (both classes present)."""
    return "Yes" if row % 2 == 0 else "No"


def wrong(row: int) -> str:
    return "No" if answer(row) == "Yes" else "Yes"


def designed_correctness(n: int = N_ROWS, seed: int = 23) -> dict[str, list[int]]:
    """Per variant, which rows it answers right: A above difficulty 0.55, B above 0.30, and
    each flipped on ~5% of rows independently (so the variants also disagree both ways)."""
    rng = np.random.default_rng(seed)
    difficulty = rng.random(n)
    out = {}
    for variant, bar in (("A", 0.55), ("B", 0.30)):
        right = difficulty > bar
        flip = rng.random(n) < 0.05
        out[variant] = [int(r != f) for r, f in zip(right, flip, strict=True)]
    return out


def question(row: int) -> str:
    return f"row {row}: does the clause apply? Answer Yes or No."


def reply_fn(correct: Mapping[str, Sequence[int]]) -> Callable[[str], str]:
    """The stub's reply to a prompt naming ``Variant X`` and ``row N``: the right answer when
    `correct[X][N]`, else the wrong one."""

    def reply(prompt: str) -> str:
        row, variant = _ROW.search(prompt), _VARIANT.search(prompt)
        assert row is not None and variant is not None, f"unexpected prompt {prompt!r}"
        i = int(row.group(1))
        return answer(i) if correct[variant.group(1)][i] else wrong(i)

    return reply


def stub_for(correct: Mapping[str, Sequence[int]]) -> StubOpenAI:
    return StubOpenAI(reply_fn=reply_fn(correct))


def need(module: str) -> None:
    """Skip without the interop extra, except in CI (which installs it: a skip there would
    hide a test that never ran)."""
    if os.environ.get("CI"):
        __import__(module)
        return
    pytest.importorskip(module, reason="the interop extra: pip install -e '.[interop]'")
