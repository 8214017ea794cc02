"""One trial's record: its rows (`Prediction`s) with their `TrialStatus`, the one shape a
trial takes in the comparisons, the sensitivity report and the figures.

A `TrialRecord` keeps its rows in the order they were produced or stored; the analysis sorts
them (`experiments.analysis.align`), never the record. `score` is the official score, kept
even when the trial is incomplete: `complete` checks both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from promptlib.errors import WorkbenchError


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


class SweepStatus(StrEnum):
    """What a sweep's trials add up to: complete when every trial is."""

    COMPLETE = "complete"
    INCOMPLETE = "incomplete"

    @classmethod
    def of(cls, ok: bool) -> SweepStatus:
        return cls.COMPLETE if ok else cls.INCOMPLETE


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
    scored: str | None = None
    """What the metric scored when it is not `generation`: a verbalized reply's official
    label, or `NOT_SHOWN` when it names no shown label (None: the generation itself)."""
    redacted: int = 0
    """How many secrets the reply held, each ``***`` in `generation` (`llm.kept_reply`)."""

    def to_dict(self) -> dict[str, Any]:
        """The stored form (predictions.jsonl): `scored` and `redacted` only when set, so
        the rows of a trial without them are stored byte for byte as before they existed."""
        d = dataclasses.asdict(self)
        if d["scored"] is None:
            del d["scored"]
        if not d["redacted"]:
            del d["redacted"]
        return d

    @property
    def scored_text(self) -> str | None:
        """The text the metric scores: the official label of a verbalized reply (or
        `NOT_SHOWN`), else the generation (None for a failed row)."""
        return self.scored if self.scored is not None else self.generation


NOT_SHOWN = "(no label: not one of the shown labels)"
"""What a verbalized trial scores for a reply naming none of its shown labels (a reply in the
official words included): not a label, so the row is an invalid answer, never a lucky match."""


# the per-row columns `TrialRecord.of` and `TrialRecord.replace` take
COLUMNS = ("indices", "answers", "generations", "correct", "prompt_hashes", "n_errors")
ROW_ERROR = "row failed"  # the error `of` gives its first `n_errors` rows


class _Spec(Protocol):
    @property
    def task(self) -> str: ...
    @property
    def model(self) -> str: ...


class RunResult(Protocol):
    """What `TrialRecord.from_result` reads of a `experiments.trials.run.TrialResult`."""

    @property
    def spec(self) -> _Spec: ...
    @property
    def trial_id(self) -> str: ...
    @property
    def metric(self) -> str: ...
    @property
    def score(self) -> float | None: ...
    @property
    def status(self) -> TrialStatus: ...
    @property
    def predictions(self) -> Sequence[Prediction]: ...


@dataclass(frozen=True)
class TrialRecord:
    """One (task, model, variant)'s rows and status, as the analysis takes them."""

    task: str
    model: str
    variant: str  # the sweep's variant name ("instruction=reference"), or "best"/"base"
    metric: str
    status: TrialStatus
    score: float | None  # the official score (kept when incomplete: `complete` checks both)
    rows: tuple[Prediction, ...]  # in the order produced or stored
    trial_id: str = ""
    run_id: str = ""
    resumed: bool = False
    axes: Mapping[str, str] = field(default_factory=dict)  # empty: `parse_axes(variant)`

    @property
    def indices(self) -> tuple[str, ...]:
        return tuple(p.index for p in self.rows)

    @property
    def answers(self) -> tuple[str, ...]:
        return tuple(p.answer for p in self.rows)

    @property
    def generations(self) -> tuple[str | None, ...]:
        """Each row's text as the metric scores it (`Prediction.scored_text`): the generation,
        or a verbalized reply's official label, so a score recomputed from these is the
        trial's."""
        return tuple(p.scored_text for p in self.rows)

    @property
    def correct(self) -> tuple[bool | None, ...]:
        return tuple(p.correct for p in self.rows)

    @property
    def prompt_hashes(self) -> tuple[str | None, ...]:
        """Each row's prompt hash (its cluster key), None where a row has none; empty when no
        row has one (trials from an older version: every row is its own cluster)."""
        if not any(p.prompt_hash for p in self.rows):
            return ()
        return tuple(p.prompt_hash or None for p in self.rows)

    @property
    def n_errors(self) -> int:
        return sum(p.error is not None for p in self.rows)

    @property
    def n(self) -> int:
        return len(self.rows)

    @property
    def complete(self) -> bool:
        return self.status.ok and self.score is not None

    def why_not(self) -> str:
        return f"{self.variant} {self.status} ({self.n_errors} of {len(self.rows)} rows failed)"

    # ---- constructors ------------------------------------------------------------------------
    @classmethod
    def from_result(
        cls,
        result: RunResult,
        *,
        variant: str,
        run_id: str = "",
        axes: Mapping[str, str] | None = None,
    ) -> TrialRecord:
        """The record of a trial the runner just ran (`run_trial`'s `TrialResult`)."""
        return cls(
            task=result.spec.task,
            model=result.spec.model,
            variant=variant,
            metric=result.metric,
            status=TrialStatus(result.status),
            score=result.score,
            rows=tuple(result.predictions),
            trial_id=result.trial_id,
            run_id=run_id,
            axes=dict(axes or {}),
        )

    @classmethod
    def from_stored(
        cls,
        *,
        task: str,
        model: str,
        variant: str,
        trial_id: str,
        run_id: str,
        status: TrialStatus,
        metric: str,
        score: float | None,
        rows: Sequence[Mapping[str, Any] | Prediction],
        rendered: Mapping[str, str],
        resumed: bool,
    ) -> TrialRecord:
        """A trial from its stored predictions (dicts, maybe a subset of `Prediction`'s keys
        for old runs); each row's prompt hash is the one stored with it, or `rendered`'s (row
        index -> hash of the resolved trial's prompt) where none was. The score is kept only
        when the trial is complete."""
        status = TrialStatus(status)
        return cls(
            task=task,
            model=model,
            variant=variant,
            metric=metric,
            status=status,
            score=score if status.ok else None,
            rows=tuple(stored_row(d, rendered) for d in rows),
            trial_id=trial_id,
            run_id=run_id,
            resumed=resumed,
        )

    @classmethod
    def of(
        cls,
        variant: str,
        metric: str,
        indices: Sequence[str],
        answers: Sequence[str],
        generations: Sequence[str | None],
        score: float | None = None,
        status: str | None = None,
        n_errors: int = 0,
        prompt_hashes: Sequence[str | None] = (),
        *,
        task: str = "",
        model: str = "",
        correct: Sequence[bool | None] | None = None,
        complete: bool | None = None,
        axes: Mapping[str, str] | None = None,
    ) -> TrialRecord:
        """A record from columns (tests, benchmarks, the notebook). The first `n_errors` rows
        carry an error; `complete` (if given) must be what the record says: with no `status`,
        False makes it incomplete."""
        if status is None:
            status = TrialStatus.INCOMPLETE if complete is False else TrialStatus.COMPLETE
        record = cls(
            task=task,
            model=model,
            variant=variant,
            metric=metric,
            status=TrialStatus(status),
            score=score,
            rows=_rows(variant, indices, answers, generations, correct, prompt_hashes, n_errors),
            axes=dict(axes or {}),
        )
        if complete is not None and record.complete != complete:
            raise ValueError(
                f"{variant}: complete={complete} but its status is {record.status} and its "
                f"score {record.score}"
            )
        return record

    def replace(self, **changes: Any) -> TrialRecord:
        """A copy with `changes`: record fields, or columns (`COLUMNS`); a status string
        becomes a `TrialStatus`. Columns not given follow the rows by index (`indices`
        reorders or subsets the rows; each keeps its own answer, hash, error and costs), so a
        partial reorder never pairs a row with another row's cluster key or outcome."""
        cols = {k: changes.pop(k) for k in COLUMNS if k in changes}
        if cols:
            changes["rows"] = self._rebuilt(changes.get("variant", self.variant), cols)
        if "status" in changes:
            changes["status"] = TrialStatus(changes["status"])
        return dataclasses.replace(self, **changes)

    def _rebuilt(self, variant: str, cols: dict[str, Any]) -> tuple[Prediction, ...]:
        """The rows after `replace`'s column changes (see there)."""
        indices = list(cols.get("indices", self.indices))
        if "indices" in cols and indices != list(self.indices):
            by_index = {p.index: p for p in self.rows}
            unknown = [i for i in indices if i not in by_index]
            missing = [k for k in ("answers", "generations") if k not in cols]
            if (unknown and missing) or len(by_index) < len(self.rows):
                raise ValueError(
                    f"{variant}: replace(indices=...) with rows this record does not hold "
                    f"({unknown[:3]}) or repeated indices: give every column, or build the "
                    "record with TrialRecord.of"
                )
            base = [by_index.get(i) for i in indices]
        else:
            base = list(self.rows)
        given = _rows(
            variant,
            indices,
            cols.get("answers", [p.answer if p else "" for p in base]),
            cols.get("generations", [p.generation if p else None for p in base]),
            cols.get("correct", [p.correct if p else None for p in base]),
            cols.get("prompt_hashes", [p.prompt_hash if p else "" for p in base]),
            cols.get("n_errors", 0),
        )
        out = []
        for new, old in zip(given, base, strict=True):
            row = new if old is None else dataclasses.replace(
                old, index=new.index, answer=new.answer, generation=new.generation,
                correct=new.correct, prompt_hash=new.prompt_hash,
                scored=None if "generations" in cols else old.scored,
            )  # fmt: skip
            if "n_errors" in cols:
                row = dataclasses.replace(row, error=new.error)
            out.append(row)
        return tuple(out)


def stored_row(d: Mapping[str, Any] | Prediction, rendered: Mapping[str, str]) -> Prediction:
    """One prediction, stored (a dict) or fresh, as a `Prediction`; its prompt hash from
    `rendered` (row index -> hash) where it has none."""
    if isinstance(d, Prediction):
        return dataclasses.replace(d, prompt_hash=d.prompt_hash or rendered.get(d.index) or "")
    index = str(d["index"])
    return Prediction(
        index=index,
        prompt_hash=d.get("prompt_hash") or rendered.get(index) or "",
        answer=str(d["answer"]),
        generation=d["generation"],
        parsed=d.get("parsed"),
        correct=d["correct"],
        tokens_in=d.get("tokens_in", 0),
        tokens_out=d.get("tokens_out", 0),
        latency=d.get("latency", 0.0),
        cache_hit=d.get("cache_hit", False),
        error=d.get("error"),
        attempts=d.get("attempts", 0),
        truncated=d.get("truncated"),
        scored=d.get("scored"),
        redacted=d.get("redacted") or 0,
    )


def _rows(
    variant: str,
    indices: Sequence[str],
    answers: Sequence[str],
    generations: Sequence[str | None],
    correct: Sequence[bool | None] | None = None,
    prompt_hashes: Sequence[str | None] = (),
    n_errors: int = 0,
) -> tuple[Prediction, ...]:
    """Rows from columns, position by position (values kept as given)."""
    n = len(indices)
    hashes = list(prompt_hashes)
    if hashes and len(hashes) != n:
        raise WorkbenchError(
            f"{variant}: {len(hashes)} prompt hashes for {n} rows; give one per row (or none)"
        )
    correct = [None] * n if correct is None else correct
    for name, col in (("answers", answers), ("generations", generations), ("correct", correct)):
        if len(col) != n:
            raise ValueError(f"{variant}: {len(col)} {name} for {n} rows")
    return tuple(
        Prediction(
            index=indices[j],
            prompt_hash=(hashes[j] if hashes else None) or "",
            answer=answers[j],
            generation=generations[j],
            parsed=None,
            correct=correct[j],
            error=ROW_ERROR if j < n_errors else None,
        )
        for j in range(n)
    )


def variant_name(levels: Mapping[str, str]) -> str:
    """A sweep variant's name from its axis levels: ``instruction=reference,seed=0``, or
    ``base`` for none (`parse_axes` reads it back)."""
    return ",".join(f"{k}={v}" for k, v in levels.items()) or "base"


def parse_axes(variant: str) -> dict[str, str]:
    """Axis values from a sweep variant's name: ``instruction=reference,seed=0``."""
    if variant in ("", "base"):
        return {}
    out: dict[str, str] = {}
    last: str | None = None
    for part in variant.split(","):
        key, sep, value = part.partition("=")
        if not sep:
            # a format grammar point's own commas: ``format=sep:dash,case:upper``
            if last is None or ":" not in part:
                raise ValueError(f"variant name {variant!r} is not axis=level pairs")
            out[last] += "," + part.strip()
            continue
        last = key.strip()
        out[last] = value.strip()
    return out
