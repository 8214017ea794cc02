"""Inter-grader agreement: for each pair of graders who graded the same rows, per criterion,
how many rows overlap, their raw agreement and Cohen's kappa with its interval.

A grader's grade of a row is their latest one of that row's generation (as in
`store.current_grades`), a grader being `store.grader_key` of the name; two graders overlap
on a row only when they graded the same generation. Rows are keyed by (trial, row), so the
result does not depend on the order of the store's lines beyond which of one grader's
re-grades is latest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from experiments.analysis.stats.agreement import KappaEstimate, cohen_kappa
from experiments.grading.criteria import CRITERIA
from experiments.grading.store import (
    HandGrade,
    SheetKey,
    grader_key,
    load_grades,
    load_sheet_keys,
)


@dataclass(frozen=True)
class PairAgreement:
    """Two graders on one criterion, over the rows both graded."""

    criterion: str
    grader_a: str
    grader_b: str
    n: int
    agreement: float | None  # share of the overlapping rows given the same grade
    kappa: KappaEstimate

    def to_dict(self) -> dict[str, Any]:
        k = self.kappa
        return {
            "criterion": self.criterion,
            "grader_a": self.grader_a,
            "grader_b": self.grader_b,
            "n": self.n,
            "agreement": self.agreement,
            "kappa": k.kappa,
            "kappa_low": k.low,
            "kappa_high": k.high,
            "level": k.level,
            "valid": k.valid,
            "reason": k.reason,
            "kappa_items_needed": k.items_needed,
            "method": k.method,
        }


def grader_agreement(
    grades: Sequence[HandGrade] | None = None,
    *,
    task: str | None = None,
    keys: Mapping[str, SheetKey] | None = None,
    root: Path | None = None,
    level: float = 0.95,
) -> list[PairAgreement]:
    """Every pair of graders who share at least one graded row, per criterion (the paper's
    criteria first, then any other), graders in name order. `task` keeps the grades made on
    sheets of that task (the sheet keys say which)."""
    grades = load_grades(root) if grades is None else grades
    if task is not None:
        keys = load_sheet_keys(root) if keys is None else keys
        grades = [g for g in grades if g.sheet in keys and keys[g.sheet].task == task]
    latest: dict[tuple[str, str], dict[tuple[str, str, str], int]] = {}
    shown: dict[str, str] = {}  # grader_key -> the name as last written
    for g in grades:  # later lines win
        shown[grader_key(g.grader)] = g.grader
        latest.setdefault((g.criterion, grader_key(g.grader)), {})[
            (g.trial_id, g.index, g.generation_sha256)
        ] = g.grade
    criteria = sorted(
        {c for c, _ in latest},
        key=lambda c: (c not in CRITERIA, CRITERIA.index(c) if c in CRITERIA else 0, c),
    )
    out = []
    for c in criteria:
        graders = sorted(g for crit, g in latest if crit == c)
        for a, b in combinations(graders, 2):
            ga, gb = latest[(c, a)], latest[(c, b)]
            common = sorted(set(ga) & set(gb))
            if not common:
                continue
            xa = [ga[k] for k in common]
            xb = [gb[k] for k in common]
            agree = sum(x == y for x, y in zip(xa, xb, strict=True)) / len(common)
            kappa = cohen_kappa(xa, xb, level=level)
            out.append(PairAgreement(c, shown[a], shown[b], len(common), agree, kappa))
    return out


__all__ = ["PairAgreement", "grader_agreement"]
