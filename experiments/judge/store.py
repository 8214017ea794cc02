"""Where judge scores are kept: ``runs/<trial id>/judge/<judge id>.jsonl`` and ``.json``.

The ``.jsonl`` holds one `JudgeScore` per judged (row, criterion), with the judge prompt and
reply; the ``.json`` is its meta (`JudgeMeta`: the judge model, its decoding or scoring, each
criterion's rubric path and sha256, counts, cost, status) and the sha256 of the ``.jsonl`` it
goes with. Both are written atomically, the scores first, under the trial folder's lock: a
``.jsonl`` whose meta is missing or names other content is an unfinished run, never read as
scores (`load_judge_scores` refuses it, `judge_trial` writes it again).

A score carries the sha256 of the generation it graded (`generation_sha256`), so a score of
a generation since changed is stale and detectable (`JudgeScore.current`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experiments import ids
from experiments.files import atomic_write_text, dir_lock
from promptlib.errors import WorkbenchError

JUDGE_DIR = "judge"
_JUDGE_ID = re.compile(r"[0-9a-f]{64}")


class JudgeStoreError(WorkbenchError):
    """A judge's scores are missing, unfinished or malformed; the message names the file."""

    exit_code = 1


@dataclass(frozen=True)
class JudgeScore:
    """One judged (row, criterion): 1, 0 or None (unparsed reply, or a failed call: `error`)."""

    index: str
    criterion: str
    score: int | None
    generation_sha256: str
    prompt: str
    reply: str | None
    judge_id: str
    rubric_sha256: str
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float | None = None
    cache_hit: bool = False
    error: str | None = None

    @property
    def unparsed(self) -> bool:
        """A reply that gave no grade (not a failed call)."""
        return self.error is None and self.score is None

    def current(self, generation: str | None) -> bool:
        """Whether this score graded `generation` (the row's generation now)."""
        return generation is not None and generation_sha256(generation) == self.generation_sha256

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> JudgeScore:
        try:
            score = d["score"]
            if score not in (0, 1, None) or isinstance(score, bool):
                raise ValueError(f"score {score!r} is not 0, 1 or null")
            return cls(
                index=str(d["index"]),
                criterion=str(d["criterion"]),
                score=score,
                generation_sha256=str(d["generation_sha256"]),
                prompt=str(d["prompt"]),
                reply=None if d["reply"] is None else str(d["reply"]),
                judge_id=str(d["judge_id"]),
                rubric_sha256=str(d["rubric_sha256"]),
                tokens_in=int(d.get("tokens_in") or 0),
                tokens_out=int(d.get("tokens_out") or 0),
                cost=None if d.get("cost") is None else float(d["cost"]),
                cache_hit=bool(d.get("cache_hit", False)),
                error=None if d.get("error") is None else str(d["error"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise JudgeStoreError(
                f"{where}: not a judge score ({type(e).__name__}: {e}); run 'workbench judge' "
                "on the trial again"
            ) from None


@dataclass(frozen=True)
class JudgeMeta:
    """A judge run's meta (the ``.json`` beside its scores)."""

    judge_id: str
    trial_id: str
    task: str
    model: str
    lm_identity: Mapping[str, Any]
    scoring: str  # "generate" or "loglik"
    decoding: Mapping[str, Any]  # the decoding, or the log-likelihood continuations
    template: str
    rubrics: Mapping[str, Mapping[str, str]]  # criterion -> {"path", "sha256"}
    n: int  # rows judged (rows with a generation)
    n_errors: int  # (row, criterion) whose call failed
    n_unparsed: int  # (row, criterion) whose reply gave no grade
    cost: float | None
    status: str  # a `TrialStatus`: complete when no call failed
    means: Mapping[str, float | None]  # criterion -> mean judge score over graded rows
    scores_sha256: str  # of the .jsonl this meta goes with
    written_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def generation_sha256(generation: str) -> str:
    """The hash a judge score (and a hand grade) keeps of the generation it graded."""
    return ids.text_sha256(generation)


def judge_dir(trial_dir: Path) -> Path:
    return trial_dir / JUDGE_DIR


def scores_path(trial_dir: Path, judge_id: str) -> Path:
    return judge_dir(trial_dir) / f"{judge_id}.jsonl"


def meta_path(trial_dir: Path, judge_id: str) -> Path:
    return judge_dir(trial_dir) / f"{judge_id}.json"


def encode_scores(scores: Sequence[JudgeScore]) -> str:
    return "".join(json.dumps(s.to_dict(), ensure_ascii=False) + "\n" for s in scores)


def write_judge(trial_dir: Path, meta: JudgeMeta, scores: Sequence[JudgeScore]) -> None:
    """Write a judge run's scores then its meta, each atomically, under the folder's lock."""
    text = encode_scores(scores)
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != meta.scores_sha256:
        raise ValueError("meta.scores_sha256 is not the sha256 of these scores")
    with dir_lock(trial_dir):
        atomic_write_text(scores_path(trial_dir, meta.judge_id), text)
        atomic_write_text(
            meta_path(trial_dir, meta.judge_id),
            json.dumps(meta.to_dict(), indent=1, ensure_ascii=False) + "\n",
        )


def load_judge_meta(trial_dir: Path, judge_id: str) -> JudgeMeta | None:
    """The meta of a finished judge run (its scores present, whole), or None."""
    path = meta_path(trial_dir, judge_id)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        text = scores_path(trial_dir, judge_id).read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != doc.get("scores_sha256"):
        return None  # a run killed between its two writes: unfinished
    try:
        return JudgeMeta(**{k: doc[k] for k in JudgeMeta.__dataclass_fields__})
    except (KeyError, TypeError):
        return None


def judge_ids(trial_dir: Path) -> list[str]:
    """The ids of the finished judge runs of a trial (sorted)."""
    folder = judge_dir(trial_dir)
    if not folder.is_dir():
        return []
    found = [p.stem for p in folder.glob("*.json") if _JUDGE_ID.fullmatch(p.stem)]
    return sorted(j for j in found if load_judge_meta(trial_dir, j) is not None)


def load_judge_scores(trial_dir: Path, judge_id: str) -> dict[tuple[str, str], JudgeScore]:
    """(row index, criterion) -> the judge's score of a finished judge run.

    Raises `JudgeStoreError` naming the file when the run is missing or unfinished (run
    'workbench judge' again: cached calls are reused). A score whose generation changed
    since is returned as is: check `JudgeScore.current` against the row's generation.
    """
    path = scores_path(trial_dir, judge_id)
    if load_judge_meta(trial_dir, judge_id) is None:
        what = "unfinished or damaged" if path.exists() else "missing"
        raise JudgeStoreError(
            f"{path}: judge scores {what} (no finished meta "
            f"{meta_path(trial_dir, judge_id).name} matching them); run 'workbench judge' on "
            f"trial {trial_dir.name[:12]} again"
        )
    out: dict[tuple[str, str], JudgeScore] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except ValueError as e:
            raise JudgeStoreError(f"{path}:{n}: not a JSON line ({e})") from None
        if not isinstance(d, dict):
            raise JudgeStoreError(f"{path}:{n}: not a judge score (not an object)")
        score = JudgeScore.from_dict(d, f"{path}:{n}")
        out[(score.index, score.criterion)] = score
    return out


__all__ = [
    "JUDGE_DIR",
    "JudgeMeta",
    "JudgeScore",
    "JudgeStoreError",
    "generation_sha256",
    "judge_ids",
    "load_judge_meta",
    "load_judge_scores",
    "meta_path",
    "scores_path",
    "write_judge",
]
