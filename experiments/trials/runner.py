"""The trial's shared row and status types, used by the run, the store and everything after.

`TrialStatus` says what a trial's rows add up to; `Prediction` is one evaluated row (its
fields, in order, are the keys of a line of predictions.jsonl).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class TrialStatus(StrEnum):
    """What a trial's rows add up to; decided here only, carried to tracking and exit codes."""

    COMPLETE = "complete"  # every row answered: the trial has a score
    INCOMPLETE = "incomplete"  # some rows failed: no score; rerun to retry those rows
    FAILED = "failed"  # no row answered

    @classmethod
    def of(cls, n_rows: int, n_errors: int) -> TrialStatus:
        if n_errors == 0:
            return cls.COMPLETE
        return cls.FAILED if n_errors >= n_rows else cls.INCOMPLETE

    @property
    def ok(self) -> bool:
        return self is TrialStatus.COMPLETE


@dataclass
class Prediction:
    index: str
    prompt_hash: str
    answer: str
    generation: str | None
    parsed: str | None
    correct: bool | None
    tokens_in: int = 0
    tokens_out: int = 0
    latency: float = 0.0
    cache_hit: bool = False
    error: str | None = None
    attempts: int = 0
    truncated: str | None = None  # the reply was cut to MAX_REPLY_BYTES: its size and the cap
