"""Judging a trial: each answered row, criterion by criterion, through the judge model.

The judge is any model the workbench runs (`experiments.llm`: the same gateway, retries,
cost), and every call goes through the same response cache (key: the judge model's identity,
the judge prompt and the decoding), so a rerun makes no call it made before. A failed call is
the (row, criterion)'s state (`error` set, score null), never a score; a reply with no grade
is *unparsed* (score null), kept and counted, never guessed.

Scoring (`--judge-scoring`):

- ``generate``: the judge writes its grade (`prompt.parse_grade` reads the reply's opening
  digit). The default for API and served models.
- ``loglik``: the grade whose continuation (" 1" or " 0", `prompt.CONTINUATIONS`) is likelier
  after the prompt (`LM.loglikelihood`); always parses, but for a tie. The default for local
  models: the embedded ones ramble instead of answering with a digit.

Only rows with a generation are judged. A rerun keeps the scores of a finished run that still
grade the row's generation and have no error, and judges the rest; a finished run that is
complete and current is returned as it is, never rewritten.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from experiments import ids
from experiments.judge.prompt import (
    CONTINUATIONS,
    TEMPLATE_VERSION,
    judge_prompt,
    loglik_grade,
    parse_grade,
)
from experiments.judge.rubrics import CRITERIA, RubricError, TaskRubrics
from experiments.judge.store import (
    JudgeMeta,
    JudgeScore,
    JudgeStoreError,
    encode_scores,
    generation_sha256,
    load_judge_meta,
    load_judge_scores,
    scores_path,
    write_judge,
)
from experiments.llm.backends import backend_class
from experiments.llm.cache import ResponseCache
from experiments.llm.calls import CallInterrupted, calls_stop_on
from experiments.llm.served import ServedCallError
from experiments.llm.types import LM, Completion, ContextTooLong, Decoding, ModelError, clip, is_hit
from experiments.secrets import redact, safe_url
from experiments.trials.predictions import PREDICTIONS_FILE, decode_predictions
from experiments.trials.record import Prediction, TrialStatus
from promptlib.tasks import Catalog

JudgeScoring = Literal["generate", "loglik"]
JUDGE_SCORINGS: tuple[JudgeScoring, ...] = ("generate", "loglik")

JUDGE_MAX_TOKENS = 10
"""Tokens a generating judge may write: the grade opens its reply (`parse_grade`)."""


def default_judge_scoring(model: str) -> JudgeScoring:
    """``loglik`` for a local model (tiny models ramble rather than write one digit), else
    ``generate`` (hosted APIs expose no prompt log-probabilities uniformly)."""
    return backend_class(model).default_judge_scoring(model)


def judge_decoding(lm: LM) -> Decoding:
    """A generating judge's decoding: greedy, a few tokens, no stop (a reply opening with a
    newline still parses)."""
    return Decoding(
        temperature=0.0, max_tokens=JUDGE_MAX_TOKENS, stop=(), mode=getattr(lm, "mode", "chat")
    )


_LOGLIK_DECODING = Decoding(temperature=0.0, max_tokens=0, stop=(), mode="completion")


def scoring_identity(lm: LM, scoring: JudgeScoring) -> dict[str, Any]:
    """How the judge scores, as its id and its meta record it."""
    if scoring == "loglik":
        return {"scoring": "loglik", "continuations": list(CONTINUATIONS)}
    return {"scoring": "generate", "decoding": judge_decoding(lm).to_dict()}


@dataclass(frozen=True)
class JudgeRun:
    """What one `judge_trial` did: the judge id, its counts and cost, its mean judge scores
    per criterion (judge scores, not correctness), its status and where it is stored."""

    judge_id: str
    trial_id: str
    task: str
    model: str
    scoring: JudgeScoring
    criteria: tuple[str, ...]
    n: int  # rows judged
    n_errors: int  # (row, criterion) whose call failed
    n_unparsed: int  # (row, criterion) whose reply gave no grade
    cost: float | None
    means: Mapping[str, float | None]
    status: TrialStatus
    path: Path
    rubrics: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    model_calls: int = 0
    cache_hits: int = 0
    reused: bool = False  # a finished, complete, current run was found: nothing was called

    @property
    def complete(self) -> bool:
        return self.status.ok


@dataclass(frozen=True)
class _Item:
    index: str
    criterion: str
    prompt: str
    generation_sha256: str
    rubric_sha256: str


# ---- reading the trial -----------------------------------------------------------------------
def _read_trial(trial_dir: Path) -> tuple[dict[str, Any], list[Prediction]]:
    path = trial_dir / "summary.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
        preds = decode_predictions((trial_dir / PREDICTIONS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError) as e:
        raise JudgeStoreError(
            f"{trial_dir}: cannot read the trial ({type(e).__name__}: {e}); rerun it with "
            "'workbench run' or 'workbench sweep'"
        ) from None
    if not isinstance(summary, dict) or not all(
        isinstance(summary.get(k), str) for k in ("task", "split", "trial_id")
    ):
        raise JudgeStoreError(f"{path}: not a trial summary (task, split, trial_id)")
    return summary, preds


def _items(
    summary: Mapping[str, Any],
    preds: Sequence[Prediction],
    rubrics: TaskRubrics,
    criteria: tuple[str, ...],
    catalog: Catalog,
) -> tuple[list[_Item], int]:
    """Every (answered row, criterion)'s judge prompt, in row order; and the rows judged."""
    task, split = summary["task"], summary["split"]
    if rubrics.task != task:
        raise RubricError(
            f"{rubrics.path}: a rubric for task {rubrics.task!r}, but trial "
            f"{summary['trial_id'][:12]} is of {task!r}; give --rubric {task}=FILE"
        )
    data = {str(r["index"]): r for r in catalog.task(task).rows(split)}
    answered = [p for p in preds if p.generation is not None]
    items: list[_Item] = []
    for p in answered:
        row = data.get(p.index)
        if row is None:
            raise JudgeStoreError(
                f"trial {summary['trial_id'][:12]}: row {p.index!r} is not in {task}'s "
                f"{split} split any more; judge it with the data it was run on"
            )
        where = f"{task} row {p.index}"
        gen = p.generation or ""
        for criterion in criteria:
            rubric = rubrics.of(criterion)
            items.append(
                _Item(
                    index=p.index,
                    criterion=criterion,
                    prompt=judge_prompt(
                        rubric, rubric.question(row, where), rubric.gold(row, where), gen
                    ),
                    generation_sha256=generation_sha256(gen),
                    rubric_sha256=rubric.sha256,
                )
            )
    return items, len(answered)


# ---- calling the judge -----------------------------------------------------------------------
def _failed(e: BaseException, start: float) -> Completion:
    """A call that raised, as the row's state (the message without secrets)."""
    message = clip(redact(f"{type(e).__name__}: {e}"), 400)
    return Completion(None, latency=time.perf_counter() - start, error=message)


def _generate_one(lm: LM, prompt: str, decoding: Decoding, stop: threading.Event) -> Completion:
    start = time.perf_counter()
    try:
        with calls_stop_on(stop):
            return lm.complete(prompt, decoding)
    except CallInterrupted:
        raise
    except Exception as e:  # a model that raises: the row's state, never the run's end
        return _failed(e, start)


def _loglik_one(lm: LM, prompt: str, stop: threading.Event) -> Completion:
    start = time.perf_counter()
    try:
        with calls_stop_on(stop):
            sums = lm.loglikelihood(prompt, list(CONTINUATIONS))
    except (CallInterrupted, KeyboardInterrupt):
        raise
    except (ServedCallError, ContextTooLong) as e:
        return _failed(e, start)
    except ModelError:
        raise  # the model cannot score by log-likelihood at all: the run's end, said once
    except Exception as e:
        return _failed(e, start)
    if len(sums) != len(CONTINUATIONS):
        return _failed(ValueError(f"{len(sums)} log-likelihoods for 2 continuations"), start)
    text = json.dumps(dict(zip(CONTINUATIONS, (float(s) for s in sums), strict=True)))
    return Completion(text, latency=time.perf_counter() - start)


def _loglik_reply_grade(text: str | None) -> int | None:
    try:
        sums = json.loads(text or "")
        return loglik_grade(float(sums[CONTINUATIONS[0]]), float(sums[CONTINUATIONS[1]]))
    except (ValueError, KeyError, TypeError):
        return None


def _call_all(
    lm: LM,
    prompts: Sequence[str],
    scoring: JudgeScoring,
    cache: ResponseCache | None,
    progress: Callable[[int, int], None] | None,
) -> tuple[list[Completion], list[bool]]:
    """Each prompt's completion (cached, or called), and whether it came from the cache."""
    if scoring == "loglik":
        identity = {**lm.cache_identity(), "judge": "loglik", "continuations": list(CONTINUATIONS)}
        decoding = _LOGLIK_DECODING
    else:
        identity = lm.cache_identity()
        decoding = judge_decoding(lm)
    keys = [ids.cache_key(identity, p, decoding.to_dict()) for p in prompts]
    results: list[Completion | None] = [None] * len(prompts)
    hits = [False] * len(prompts)
    if cache is not None:
        for i, key in enumerate(keys):
            cached = cache.get(key)
            if cached is not None:
                results[i], hits[i] = cached, True
    done = sum(hits)
    if progress:
        progress(done, len(prompts))
    stop = threading.Event()

    def call(i: int) -> tuple[int, Completion]:
        if scoring == "loglik":
            comp = _loglik_one(lm, prompts[i], stop)
        else:
            comp = _generate_one(lm, prompts[i], decoding, stop)
        if cache is not None:
            cache.put(keys[i], comp)  # errors are never cached
        return i, comp

    todo = [i for i, r in enumerate(results) if r is None]
    if lm.concurrency <= 1 or scoring == "loglik":
        for i in todo:
            _, results[i] = call(i)
            done += 1
            if progress:
                progress(done, len(prompts))
    else:
        pool = ThreadPoolExecutor(max_workers=lm.concurrency)
        try:
            for i, comp in pool.map(call, todo):
                results[i] = comp
                done += 1
                if progress:
                    progress(done, len(prompts))
        except BaseException:
            stop.set()  # Ctrl-C: workers give up; answered calls are in the cache already
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
    hits = [is_hit(h, r) for h, r in zip(hits, results, strict=True)]
    return [r for r in results if r is not None], hits


# ---- the run ---------------------------------------------------------------------------------
def judge_trial(
    trial_dir: Path,
    lm: LM,
    rubrics: TaskRubrics,
    criteria: Sequence[str] = CRITERIA,
    cache: ResponseCache | None = None,
    *,
    catalog: Catalog,
    scoring: JudgeScoring | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> JudgeRun:
    """Judge every answered row of the trial in `trial_dir` on `criteria`; store and return.

    Writes ``judge/<judge id>.jsonl`` and ``.json`` in the trial's folder (atomically: a
    killed run leaves no finished-looking file). `catalog` gives each row's task input and
    reference answer (the trial's task and split, as it was run).
    """
    chosen = tuple(dict.fromkeys(criteria))
    if not chosen:
        raise RubricError("no criteria to judge; give --criteria correctness,analysis")
    for c in chosen:
        if c not in CRITERIA:
            raise RubricError(f"unknown criterion {c!r}; use {', '.join(CRITERIA)}")
    how: JudgeScoring = scoring or default_judge_scoring(lm.name)
    if how not in JUDGE_SCORINGS:
        raise RubricError(f"unknown judge scoring {how!r}; use {' or '.join(JUDGE_SCORINGS)}")
    summary, preds = _read_trial(trial_dir)
    items, n_rows = _items(summary, preds, rubrics, chosen, catalog)
    if not items:
        raise JudgeStoreError(
            f"trial {summary['trial_id'][:12]} has no answered row to judge; rerun it first"
        )
    identity = lm.cache_identity()
    scoring_doc = scoring_identity(lm, how)
    shas = rubrics.shas(chosen)
    jid = ids.judge_id(identity, scoring_doc, shas, TEMPLATE_VERSION)
    rubric_doc = {c: {"path": rubrics.of(c).path, "sha256": shas[c]} for c in chosen}

    def run_of(meta: JudgeMeta, calls: int, hits: int, reused: bool) -> JudgeRun:
        return JudgeRun(
            judge_id=jid, trial_id=meta.trial_id, task=meta.task, model=meta.model,
            scoring=how, criteria=chosen, n=meta.n, n_errors=meta.n_errors,
            n_unparsed=meta.n_unparsed, cost=meta.cost, means=dict(meta.means),
            status=TrialStatus(meta.status), path=scores_path(trial_dir, jid),
            rubrics=rubric_doc, model_calls=calls, cache_hits=hits, reused=reused,
        )  # fmt: skip

    # what a finished run of this judge already holds, where it still grades these rows
    kept: dict[tuple[str, str], JudgeScore] = {}
    done = load_judge_meta(trial_dir, jid)
    if done is not None:
        old = load_judge_scores(trial_dir, jid)
        current = {
            (it.index, it.criterion)
            for it in items
            if (s := old.get((it.index, it.criterion))) is not None
            and s.generation_sha256 == it.generation_sha256
            and s.error is None
        }
        kept = {k: old[k] for k in current}
        if len(current) == len(items) == len(old) and done.n_errors == 0:
            return run_of(done, 0, 0, True)

    todo = [it for it in items if (it.index, it.criterion) not in kept]
    comps, hits = _call_all(lm, [it.prompt for it in todo], how, cache, progress)
    fresh: dict[tuple[str, str], JudgeScore] = {}
    for it, comp, hit in zip(todo, comps, hits, strict=True):
        if comp.error is not None or comp.text is None:
            grade = None
        elif how == "loglik":
            grade = _loglik_reply_grade(comp.text)
        else:
            grade = parse_grade(comp.text)
        fresh[(it.index, it.criterion)] = JudgeScore(
            index=it.index,
            criterion=it.criterion,
            score=grade,
            generation_sha256=it.generation_sha256,
            prompt=it.prompt,
            reply=comp.text,
            judge_id=jid,
            rubric_sha256=it.rubric_sha256,
            tokens_in=comp.tokens_in,
            tokens_out=comp.tokens_out,
            cost=comp.cost,
            cache_hit=hit,
            error=comp.error if comp.error is not None else (
                None if comp.text is not None else "no reply"
            ),
        )  # fmt: skip
    scores = [kept.get((it.index, it.criterion)) or fresh[(it.index, it.criterion)] for it in items]
    n_errors = sum(s.error is not None for s in scores)
    costs = [s.cost for s in scores if s.cost is not None]
    means: dict[str, float | None] = {}
    for c in chosen:
        graded = [s.score for s in scores if s.criterion == c and s.score is not None]
        means[c] = sum(graded) / len(graded) if graded else None
    text = encode_scores(scores)
    meta = JudgeMeta(
        judge_id=jid,
        trial_id=str(summary["trial_id"]),
        task=str(summary["task"]),
        model=lm.name,
        lm_identity=_shown_identity(identity),
        scoring=how,
        decoding=scoring_doc,
        template=TEMPLATE_VERSION,
        rubrics=rubric_doc,
        n=n_rows,
        n_errors=n_errors,
        n_unparsed=sum(s.unparsed for s in scores),
        cost=float(sum(costs)) if costs else None,
        status=str(TrialStatus.of(len(scores), n_errors)),
        means=means,
        scores_sha256=ids.text_sha256(text),
        written_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    write_judge(trial_dir, meta, scores)
    return run_of(meta, sum(not h for h in hits), sum(hits), False)


def _shown_identity(identity: Mapping[str, Any]) -> dict[str, Any]:
    """The judge model's identity as stored: a URL without its password."""
    out = dict(identity)
    if isinstance(out.get("api_base"), str):
        out["api_base"] = safe_url(out["api_base"])
    return out


__all__ = [
    "JUDGE_SCORINGS",
    "JudgeRun",
    "JudgeScoring",
    "default_judge_scoring",
    "judge_decoding",
    "judge_trial",
]
