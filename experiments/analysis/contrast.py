"""Which arm of a comparison is A and which is B, defined once.

Every difference the workbench reports is A − B: score(A) minus score(B), in the task's
official metric. A comparison row carries the names ``a`` and ``b``, and its difference
(``statistic``, the interval ``ci_low``/``ci_high``, a pooled effect, an across-task mean
difference) is always of A − B. Tables, figures and JSON read ``a`` and ``b`` from the row
and name the difference with `Contrast.label`; nothing flips a sign when it is shown.

Which arm is A:

- a pair the user declares (``comparisons: [[A, B]]`` in a spec) is taken as written;
- otherwise A is the one listed first in the study's order of variants (a spec's axes and
  levels as written; an import's variants in name order): `all_pairs` gives every pair as
  (earlier, later);
- a pooled effect of an axis (``instruction: reference − description``) takes as A the level
  listed first, unless a declared pair contrasts exactly these two levels of that axis (and
  no other axis): then the declared order, so the pooled effect has the sign of that pair's
  row in the comparisons table (`LevelOrder`); else the order of the first pair of listed
  variants that contrasts these two levels alone (the first row `all_pairs` makes of them),
  which on a full grid is the level listed first, and where the variants are not a full grid
  (an import's) is still the sign of a row of the table.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from experiments.trials.record import parse_axes

MINUS = "−"  # U+2212, as every figure and table writes A − B


@dataclass(frozen=True)
class Contrast:
    """A comparison of A with B: its difference is score(A) − score(B)."""

    a: str
    b: str

    def diff(self, score_a: float | None, score_b: float | None) -> float | None:
        """score(A) − score(B); None when either has no score."""
        if score_a is None or score_b is None:
            return None
        return float(score_a) - float(score_b)

    @property
    def label(self) -> str:
        """``A − B`` with the names, as tables and figures print it."""
        return f"{self.a} {MINUS} {self.b}"


def all_pairs(names: Sequence[str]) -> list[Contrast]:
    """Every pair of `names`, the one listed first as A."""
    return [Contrast(a, b) for a, b in itertools.combinations(names, 2)]


def _axes(name: str) -> dict[str, str]:
    try:
        return parse_axes(name)
    except ValueError:  # not axis=level pairs (an imported name): no levels to orient
        return {}


@dataclass(frozen=True)
class LevelOrder:
    """Per axis, which of two levels is A in the pooled effect of that axis (see the module)."""

    rank: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    declared: Mapping[tuple[str, frozenset[str]], tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def of(cls, variants: Iterable[str], pairs: Sequence[tuple[str, str]] = ()) -> LevelOrder:
        """From the variants in the study's order and the pairs the user declared."""
        rank: dict[str, dict[str, int]] = {}
        listed = list(dict.fromkeys(variants))
        for name in listed:
            for axis, level in _axes(name).items():
                levels = rank.setdefault(axis, {})
                levels.setdefault(level, len(levels))
        declared: dict[tuple[str, frozenset[str]], tuple[str, str]] = {}
        for a, b in [*pairs, *_one_axis_pairs(listed)]:
            xa, xb = _axes(a), _axes(b)
            differ = [k for k in dict.fromkeys([*xa, *xb]) if xa.get(k) != xb.get(k)]
            if len(differ) == 1 and differ[0] in xa and differ[0] in xb:
                axis = differ[0]
                # the first declaration of two levels wins (a later reversed one is a pair
                # of its own in the table, and cannot turn the pooled effect around); after
                # the declared pairs, the listed variants' own pairs (`_one_axis_pairs`)
                declared.setdefault((axis, frozenset((xa[axis], xb[axis]))), (xa[axis], xb[axis]))
        return cls(rank, declared)

    def contrast(self, axis: str, x: str, y: str) -> Contrast:
        """The contrast of levels `x` and `y` of `axis`, A first (names are the levels)."""
        declared = self.declared.get((axis, frozenset((x, y))))
        if declared is not None:
            return Contrast(*declared)
        a, b = sorted((x, y), key=lambda level: self.position(axis, level))
        return Contrast(a, b)

    def position(self, axis: str, level: str) -> tuple[float, str]:
        """Where `level` is listed among its axis's levels (one not listed: after, by name),
        to sort contrasts in the study's order."""
        return (self.rank.get(axis, {}).get(level, math.inf), level)


def _one_axis_pairs(variants: Sequence[str]) -> list[tuple[str, str]]:
    """The pairs `all_pairs` makes of `variants` that differ in one axis only, in its order.

    Why: where the variants are not a full grid (an import's, in name order) the level listed
    first overall can be the later one in every pair of variants that contrasts the two
    levels alone (``fmt=1,instr=b``, ``fmt=2,instr=a``, ``fmt=2,instr=b``: the table's row
    is ``instr=a`` − ``instr=b``); the pooled effect takes that row's sign. On a full grid
    (a spec's axes) this is the order of the levels as listed."""
    parsed = [_axes(v) for v in variants]
    found: list[tuple[int, int]] = []
    for axis in dict.fromkeys(k for x in parsed for k in x):
        cells: dict[tuple[tuple[str, str], ...], list[int]] = {}
        for i, x in enumerate(parsed):
            if axis in x:
                rest = tuple(sorted((k, v) for k, v in x.items() if k != axis))
                cells.setdefault(rest, []).append(i)
        for members in cells.values():
            found += [(i, j) for i, j in itertools.combinations(members, 2)
                      if parsed[i][axis] != parsed[j][axis]]  # fmt: skip
    return [(variants[i], variants[j]) for i, j in sorted(set(found))]
