"""What `sensitivity_report` returns: a typed, frozen `SensitivityReport`, and its one JSON form
(`to_dict`), the ``sensitivity`` section of a sweep's or an import's document.

The record is what a caller reads (fields, not keys); `to_dict` is the section as written to
comparisons.json and logged to MLflow (sensitivity.json, the parent's metrics), key for key
and in the same order as before the record existed, so no byte changed when it was introduced.
The section read back from MLflow (`workbench report`) is that dict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SensitivityReport:
    """A study's prompt sensitivity: per (task, model) measures, the variance shares per
    model, the pooled effects per axis, the models' rank stability, the trials left out
    (incomplete), notes, the resamples behind every interval, and the study's variants in
    its order (the figures list and number them in it)."""

    per_task: Sequence[dict[str, Any]]
    variance_shares: dict[str, dict[str, Any]]  # model -> shares, CIs, components
    meta_analysis: Sequence[dict[str, Any]]  # one pooled effect per (model, axis, metric)
    rank_stability: Sequence[dict[str, Any]]
    excluded: Sequence[dict[str, str]]  # {task, model, variant, status}
    notes: Sequence[str]
    n_resamples: int
    variants: Sequence[str]

    def to_dict(self) -> dict[str, Any]:
        """The ``sensitivity`` section: today's keys, in today's order."""
        return {
            "per_task": list(self.per_task),
            "variance_shares": self.variance_shares,
            "meta_analysis": list(self.meta_analysis),
            "rank_stability": list(self.rank_stability),
            "excluded": list(self.excluded),
            "notes": list(self.notes),
            "n_resamples": self.n_resamples,
            "variants": list(self.variants),
        }
