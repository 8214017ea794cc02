"""Running a trial: answer its rows from the cache or the model, map them to labels, score.

`run_trial` answers the rows from the response cache or the model, maps generations to labels
the LegalBench way, and scores them with the task's official metric. A row whose call failed
is kept with its error, and the trial's `TrialStatus` says so: *complete* (every row
answered), *incomplete* (some rows failed) or *failed* (no row answered). Only a complete
trial has a score; the score on the answered rows is reported under its own name. Rerunning
the same trial retries only the failed rows; the rest come from the cache.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from experiments.llm.cache import ResponseCache, cache_key
from experiments.llm.calls import calls_stop_on
from experiments.llm.types import LM, Completion, Decoding, clip, is_hit
from experiments.metrics import (
    ClassReport,
    class_report,
    is_rule_conclusion,
    parse_label,
    row_correct,
    score,
)
from experiments.secrets import redact_reply, safe_url
from experiments.trials.loglik_rows import _loglik
from experiments.trials.order import in_call_order
from experiments.trials.record import NOT_SHOWN, Prediction, TrialStatus
from experiments.trials.spec import (
    LOGLIK,
    MANUAL,
    Progress,
    ResolvedTrial,
    TrialSpec,
    prompt_hash,
    resolve_trial,
    trial_decoding,
)
from promptlib.conclusions import parse_conclusion, question_start
from promptlib.render import CompiledPrompt
from promptlib.tasks import Catalog

FIRST_ERROR_CHARS = 400
"""The most of a row's error the one-line failure reason shows: the advice it starts with (a
variable to set, a URL to check) whole."""


@dataclass
class TrialResult:
    spec: TrialSpec
    trial_id: str
    variant_id: str
    metric: str
    predictions: list[Prediction]
    score: float | None
    score_on_answered: float | None
    report: ClassReport | None
    model_calls: int
    cache_hits: int
    wall_time: float
    cost: float | None
    excluded_rows: list[str] = field(default_factory=list)
    lm_identity: dict[str, Any] = field(default_factory=dict)
    decoding: dict[str, Any] = field(default_factory=dict)
    unretryable: list[str] = field(default_factory=list)
    """Rows whose error the same prompt meets every time (longer than the model's context)."""
    spent: float | None = None
    """USD of the calls this run made (cache hits and failed calls excluded; 0 when it made
    none; None when one has no known price): what a sweep's cost line adds up. `cost` also
    prices the rows read from the cache."""

    @property
    def rerun_helps(self) -> bool:
        """Whether running the trial again can answer a failed row: False when every failed
        row's error cannot change (`unretryable`)."""
        failed = {p.index for p in self.predictions if p.error is not None}
        return bool(failed - set(self.unretryable))

    @property
    def redacted_rows(self) -> int:
        """Rows whose reply held a secret, scored on it hidden as ``***`` (`llm.kept_reply`):
        said with the trial, since a redacted reply may parse to another label."""
        return sum(p.redacted > 0 for p in self.predictions)

    @property
    def n_errors(self) -> int:
        return sum(p.error is not None for p in self.predictions)

    @property
    def status(self) -> TrialStatus:
        return TrialStatus.of(len(self.predictions), self.n_errors)

    @property
    def complete(self) -> bool:
        return self.status.ok

    def failure_reason(self) -> str:
        """One line: how many rows failed, and the first error."""
        errors = [p.error for p in self.predictions if p.error is not None]
        if not errors:
            return ""
        first = clip(errors[0], FIRST_ERROR_CHARS)
        return f"{len(errors)} of {len(self.predictions)} rows failed (first: {first})"

    def summary(self) -> dict[str, Any]:
        preds = self.predictions
        return {
            "trial_id": self.trial_id,
            "task": self.spec.task,
            "model": self.spec.model,
            "api_base": _shown_url(self.lm_identity.get("api_base")),
            # the environment that decided the answers (OPENAI_BASE_URL, ...), when any
            **({"env": self.lm_identity["env"]} if self.lm_identity.get("env") else {}),
            "mode": self.lm_identity.get("mode"),
            "variant": self.spec.variant.label,
            "variant_id": self.variant_id,
            "split": self.spec.split,
            "limit": self.spec.limit,
            "seed": self.spec.seed,
            "scoring": self.spec.scoring,
            "definition": self.spec.definition,
            "decoding": self.decoding,
            "status": str(self.status),
            "metric": self.metric,
            "score": self.score,
            "score_on_answered": self.score_on_answered,
            "n": len(preds),
            "n_errors": self.n_errors,
            "invalid_rate": self.report.invalid_rate if self.report else None,
            "accuracy": self.report.accuracy if self.report else None,
            "recall": self.report.recall if self.report else None,
            "model_calls": self.model_calls,
            "cache_hits": self.cache_hits,
            "tokens_in": sum(p.tokens_in for p in preds),
            "tokens_out": sum(p.tokens_out for p in preds),
            "cost": self.cost,
            "mean_latency": (sum(p.latency for p in preds) / len(preds)) if preds else None,
            "wall_time": round(self.wall_time, 3),
            "excluded_rows": self.excluded_rows,
            # replies scored on their redacted text (a key hidden as ***), when any
            **({"redacted_rows": self.redacted_rows} if self.redacted_rows else {}),
        }


def _shown_url(url: Any) -> Any:

    return safe_url(url) if isinstance(url, str) else url


def _correct(metric: str, generation: str, answer: str) -> bool:
    return row_correct(metric, generation, answer)


def run_trial(
    spec: TrialSpec | ResolvedTrial,
    catalog: Catalog,
    lm: LM,
    *,
    cache: ResponseCache | None = None,
    progress: Progress | None = None,
) -> TrialResult:
    """Run one trial; never raises for a provider failure (those rows carry the error).

    A hand-graded trial (metric `MANUAL`, from `resolve_trial(..., hand_graded=True)`) gets
    its generations and no score: no row is marked correct or wrong, a person decides.
    """
    start = time.perf_counter()
    resolved = spec if isinstance(spec, ResolvedTrial) else resolve_trial(spec, catalog, lm)
    spec = resolved.spec
    task = catalog.task(spec.task)
    compiled, rows, metric = resolved.compiled, resolved.rows, resolved.metric
    prompts = [compiled.render(r) for r in rows]
    labels = task.spec.labels
    if spec.scoring in LOGLIK:
        completions, hits = _loglik(spec, task, compiled, prompts, cache, progress, lm)
    else:
        decoding = trial_decoding(task.spec, getattr(lm, "mode", "chat"), compiled)
        completions, hits = _generate(lm, prompts, decoding, cache, progress)

    scored = metric != MANUAL
    multi = task.spec.task_type == "multi-label"
    preds = _predictions(rows, prompts, completions, hits, compiled, metric, multi)
    answered = [p for p in preds if p.generation is not None]
    gens = [p.scored_text or "" for p in answered]
    answers = [p.answer for p in answered]
    on_answered = (
        score(spec.task, gens, answers, spec.definition, metric=metric)
        if answered and scored
        else None
    )
    report = class_report(gens, answers, labels) if (labels and answered) else None
    costs = [c.cost for c in completions if c.cost is not None]
    made = [c for c, h in zip(completions, hits, strict=True) if not h and c.error is None]
    # a call of unknown price makes the total unknown: a partial sum would read as the price
    spent = None if any(c.cost is None for c in made) else float(sum(c.cost or 0.0 for c in made))
    status = TrialStatus.of(len(preds), len(preds) - len(answered))
    return TrialResult(
        spec=spec,
        trial_id=resolved.id,
        variant_id=compiled.variant.id,
        metric=metric,
        predictions=preds,
        score=on_answered if status.ok else None,
        score_on_answered=on_answered,
        report=report,
        model_calls=sum(not h for h in hits),
        cache_hits=sum(hits),
        wall_time=time.perf_counter() - start,
        cost=sum(costs) if costs else None,
        spent=spent,
        excluded_rows=resolved.excluded,
        lm_identity=resolved.lm_identity,
        decoding=resolved.decoding,
        unretryable=[
            row["index"]
            for row, comp in zip(rows, completions, strict=True)
            if comp.error is not None and not comp.retryable
        ],
    )


def _predictions(
    rows: Sequence[dict[str, str]],
    prompts: Sequence[str],
    completions: Sequence[Completion],
    hits: Sequence[bool],
    compiled: CompiledPrompt,
    metric: str,
    multi: bool = False,
) -> list[Prediction]:
    """One `Prediction` per row, in row order: its answer mapped to a label and, unless the
    trial is graded by hand (`MANUAL`), marked correct or wrong.

    Under a verbalizer the reply is mapped back to its official label first
    (`CompiledPrompt.official`), and that label is what the metric scores (`scored`); a reply
    naming no shown label, the official words included, scores as `NOT_SHOWN` (invalid). The
    An application trial's explanation (a rule-conclusion metric) is scored on the
    conclusion `parse_conclusion` finds (`parsed`; `scored` is it, or `NO_CONCLUSION`:
    wrong and invalid); `multi` (a multi-label task) concludes a set of labels. The
    generation is kept as the model gave it, but for its secrets: each ``***`` before it is
    scored or recorded (the gateway and the cache hide them already; this covers any `LM`).
    """
    scored = metric != MANUAL
    labels = compiled.labels
    verbalized = compiled.label_map is not None
    explained = is_rule_conclusion(metric)
    asks = question_start(compiled.query) if explained else None
    preds: list[Prediction] = []
    for row, prompt, (comp, hit) in zip(
        rows, prompts, zip(completions, hits, strict=True), strict=True
    ):
        gen, hidden = redact_reply(comp.text) if comp.text is not None else (None, 0)
        mapped: str | None = None
        if gen is not None and explained:  # an explanation: its conclusion is scored
            conclusion = parse_conclusion(
                gen, labels or (), compiled.task, multi_label=multi, next_question=asks
            )
            parsed = conclusion.label
            mapped = conclusion.scored(row["answer"], multi)
        elif gen is not None and verbalized:
            parsed = compiled.official(gen)
            mapped = parsed if parsed is not None else NOT_SHOWN
        else:
            parsed = parse_label(gen, labels) if (gen is not None and labels) else None
        text = mapped if mapped is not None else gen
        preds.append(
            Prediction(
                index=row["index"],
                prompt_hash=prompt_hash(prompt),
                answer=row["answer"],
                generation=gen,
                parsed=parsed,
                correct=None
                if text is None or not scored
                else _correct(metric, text, row["answer"]),
                tokens_in=comp.tokens_in,
                tokens_out=comp.tokens_out,
                latency=round(comp.latency, 4),
                cache_hit=hit,
                error=comp.error,
                attempts=comp.attempts,
                truncated=comp.truncated,
                scored=mapped,
                redacted=comp.redacted + hidden,
            )
        )
    return preds


def _generate(
    lm: LM,
    prompts: Sequence[str],
    decoding: Decoding,
    cache: ResponseCache | None,
    progress: Progress | None,
) -> tuple[list[Completion], list[bool]]:
    identity = lm.cache_identity()
    keys = [cache_key(identity, p, decoding) for p in prompts]
    results: list[Completion | None] = [None] * len(prompts)
    hits = [False] * len(prompts)
    done = 0
    if cache is not None:
        for i, k in enumerate(keys):
            cached = cache.get(k)
            if cached is not None:
                results[i], hits[i] = cached, True
                done += 1
    if progress:
        progress(done, len(prompts))
    todo = in_call_order(lm, prompts, [i for i, r in enumerate(results) if r is None])

    stop = threading.Event()  # set when this thread is interrupted: the workers give up

    def call(i: int) -> tuple[int, Completion]:
        with calls_stop_on(stop):
            comp = lm.complete(prompts[i], decoding)
        if cache is not None:
            cache.put(keys[i], comp)
        return i, comp

    if lm.concurrency <= 1:
        for i in todo:  # one after another: consecutive prompts share the KV-cache prefix
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
            # Ctrl-C (or any error) here: the workers' waits and backoff sleeps end within
            # a poll, queued rows never start, and nothing waits for a retry loop to finish
            # (answered rows are in the cache already).
            stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
    hits = [is_hit(h, r) for h, r in zip(hits, results, strict=True)]
    return [r for r in results if r is not None], hits
