"""The calibrated records: one frozen row per (variant, criterion) estimate and per
(pair, criterion) comparison, the cell of one (task, model), and the report.

Numbers labelled `judge_*` are the judge's scores alone: "judge score (not calibrated)",
never correctness or analysis. Every other estimate combines the hand grades with the judge
scores by prediction-powered inference (`experiments.analysis.stats.ppi`). `to_dict()` is
the JSON form (`workbench grade report --json`), `from_dict` reads it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

JUDGE_LABEL = "judge score (not calibrated)"

_R = TypeVar("_R")


def _from(cls: type[_R], d: Mapping[str, Any]) -> _R:
    """A record from its dict (keys it does not know are ignored, missing ones read None)."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: d.get(k) for k in names})


@dataclass(frozen=True)
class Agreement:
    """Judge against hand grades on the rows graded both ways (a hand grade that is a tie
    of graders, 0.5, is left out): raw agreement, Cohen's kappa with its interval."""

    n: int
    raw: float | None
    kappa: float | None
    kappa_low: float | None
    kappa_high: float | None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Agreement:
        return _from(cls, d)


@dataclass(frozen=True)
class CalibratedMean:
    """One variant's share of rows passing one criterion: the PPI mean and interval (None
    when there are too few hand grades: `valid` False, `reason`, `hand_needed`), the
    judge-only mean (labelled as judge score), and how the judge agrees with the graders."""

    task: str
    model: str
    variant: str
    criterion: str
    trial_id: str
    level: float
    n_rows: int
    n_hand: int
    estimate: float | None
    low: float | None
    high: float | None
    se: float | None
    lam: float | None
    effective_n: float | None
    method: str
    valid: bool
    reason: str | None
    hand_needed: int | None
    judge_mean: float | None
    judge_low: float | None
    judge_high: float | None
    n_unscored: int
    stale_judge: int
    stale_hand: int
    random_subset: bool
    subset_note: str | None
    agreement: Agreement | None
    n_unanswered: int = 0  # rows whose call failed: left out of every number here

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["judge_label"] = JUDGE_LABEL
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CalibratedMean:
        agree = d.get("agreement")
        return _from(
            cls,
            {
                **d,
                "agreement": Agreement.from_dict(agree) if agree else None,
                "n_unanswered": d.get("n_unanswered") or 0,
            },
        )


@dataclass(frozen=True)
class CalibratedComparison:
    """A − B on one criterion for one (task, model), rows paired by index.

    `estimate` [`low`, `high`], `p_value` (`p_corrected`: `correction` over the
    `family_size` valid comparisons of the whole report) are the PPI paired difference
    (`test`); `hand_*` the hand grades alone (`width_ratio`: calibrated width / hand-only
    width), `judge_*` the judge's scores alone (a judge score, not the criterion).
    `agreement_differs`: the judge agrees with the graders differently on A and B (the bias
    that flips comparisons), `agreement_note` by how much."""

    task: str
    model: str
    criterion: str
    a: str
    b: str
    level: float
    test: str
    n_rows: int
    n_hand_a: int
    n_hand_b: int
    n_hand_both: int
    estimate: float | None
    low: float | None
    high: float | None
    p_value: float | None
    p_corrected: float | None
    correction: str | None
    family_size: int | None
    se: float | None
    lam_a: float | None
    lam_b: float | None
    effective_n: float | None
    valid: bool
    reason: str | None
    hand_needed: int | None
    hand_estimate: float | None
    hand_low: float | None
    hand_high: float | None
    hand_method: str | None
    width_ratio: float | None
    judge_estimate: float | None
    judge_low: float | None
    judge_high: float | None
    judge_p: float | None
    agreement_differs: bool
    agreement_note: str | None
    random_subset: bool
    subset_note: str | None
    decision: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["judge_label"] = JUDGE_LABEL
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CalibratedComparison:
        return _from(cls, d)


@dataclass(frozen=True)
class CalibratedCell:
    """One (task, model): its variants' means and its comparisons, per criterion."""

    task: str
    model: str
    judge_id: str
    criteria: tuple[str, ...]
    pairs_note: str | None
    means: tuple[CalibratedMean, ...]
    comparisons: tuple[CalibratedComparison, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "model": self.model,
            "judge_id": self.judge_id,
            "criteria": list(self.criteria),
            "pairs_note": self.pairs_note,
            "means": [m.to_dict() for m in self.means],
            "comparisons": [c.to_dict() for c in self.comparisons],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CalibratedCell:
        return cls(
            task=str(d["task"]),
            model=str(d["model"]),
            judge_id=str(d["judge_id"]),
            criteria=tuple(d["criteria"]),
            pairs_note=d.get("pairs_note"),
            means=tuple(CalibratedMean.from_dict(m) for m in d["means"]),
            comparisons=tuple(CalibratedComparison.from_dict(c) for c in d["comparisons"]),
        )


@dataclass(frozen=True)
class CalibratedReport:
    """The calibrated comparisons of a sweep (or a set of trials), one cell per (task,
    model)."""

    name: str
    judge_id: str
    cells: tuple[CalibratedCell, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "judge_id": self.judge_id,
            "judge_label": JUDGE_LABEL,
            "cells": [c.to_dict() for c in self.cells],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CalibratedReport:
        return cls(
            str(d["name"]),
            str(d["judge_id"]),
            tuple(CalibratedCell.from_dict(c) for c in d["cells"]),
        )
