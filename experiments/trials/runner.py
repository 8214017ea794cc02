"""Trials: one variant of one task through one model, cached, scored and saved.

A `TrialSpec` says what to run (task, variant, model, split, limit, seed, scoring, metric
definition). `resolve_trial` binds it to the data and the model without calling it: the
variant with its drawn demonstration rows, the evaluated rows, the model's identity (name,
api_base, mode) and every decoding parameter. The trial id is the sha256 of all of that plus
a fingerprint of the evaluated rows' content, so anything that can change an answer gives a
new id, and resuming never reuses a result that no longer matches the request.

`run_trial` answers the rows from the response cache or the model, maps generations to labels
the LegalBench way, and scores them with the task's official metric. A row whose call failed
is kept with its error, and the trial's `TrialStatus` says so: *complete* (every row
answered), *incomplete* (some rows failed) or *failed* (no row answered). Only a complete
trial has a score; the score on the answered rows is reported under its own name. Rerunning
the same trial retries only the failed rows; the rest come from the cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from experiments.files import OutputError, atomic_write_dir, dir_lock
from experiments.llm.cache import ResponseCache, cache_key
from experiments.llm.calls import calls_stop_on
from experiments.llm.llama import local_identity
from experiments.llm.loglik import (
    label_bytes,
    label_logprobs,
    loglik_tie,
    per_byte_scores,
    pick_label,
)
from experiments.llm.served import (
    ALIGNMENT_TOP_K,
    NoPromptLogprobs,
    ServedCallError,
    served_label_logprobs,
)
from experiments.llm.types import LM, Completion, ContextTooLong, Decoding, LoglikNorm, ModelError
from experiments.llm.types import Scoring as Scoring
from experiments.metrics import (
    METRICS,
    ClassReport,
    class_report,
    normalize,
    official_metric,
    parse_label,
    scorable_metric,
    score,
)
from experiments.secrets import safe_url
from experiments.trials.record import Prediction, TrialStatus
from promptlib.errors import WorkbenchError
from promptlib.leakage import evaluation_rows
from promptlib.render import CompiledPrompt, compile_prompt
from promptlib.tasks import Catalog, Task, TaskSpec
from promptlib.variants import PromptVariant

# Log-likelihood scorings and how each compares the labels' summed log-probabilities (one
# model pass computes the sums; the criterion is part of the trial id and the cache key).
# loglik-norm divides by the label's UTF-8 bytes, like lm-evaluation-harness's acc_norm.
LOGLIK: dict[str, LoglikNorm] = {"loglik": "sum", "loglik-norm": "per_byte"}
Definition = Literal["code", "paper"]
Progress = Callable[[int, int], None]
# The metric of a task LegalBench grades by hand (rule_qa): generations, no score.
MANUAL = "manual"

# Generation budgets, following the paper: short for classification, 150 tokens for
# rule_qa (answered in prose, graded by hand).
_LONG_FORM = {"rule_qa": 150}


def decoding_for(spec: TaskSpec, mode: Literal["chat", "completion"]) -> Decoding:
    """Temperature 0; classification and extraction stop at the first newline."""
    if spec.name in _LONG_FORM:
        return Decoding(max_tokens=_LONG_FORM[spec.name], stop=(), mode=mode)
    if spec.is_classification:
        longest = max((len(x) for x in spec.labels or ()), default=8)
        return Decoding(max_tokens=max(8, longest // 2 + 8), stop=("\n",), mode=mode)
    return Decoding(max_tokens=64, stop=("\n",), mode=mode)


@dataclass(frozen=True, kw_only=True)
class TrialSpec:
    """What to run. Its trial id needs the data and the model: see `resolve_trial`."""

    task: str
    variant: PromptVariant
    model: str
    split: str = "test"
    limit: int | None = None
    seed: int = 0
    scoring: Scoring = "generate"
    definition: Definition = "code"
    rows: tuple[str, ...] | None = None  # explicit row indices (sweeps pair variants on these)

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise WorkbenchError(f"limit must be at least 1, not {self.limit}")
        if self.seed < 0:
            raise WorkbenchError(f"seed must be an integer >= 0, not {self.seed}")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["variant"] = self.variant.to_dict()
        d["rows"] = None if self.rows is None else list(self.rows)
        return d


def _sha256_json(obj: Any) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def rows_fingerprint(rows: Sequence[dict[str, str]]) -> str:
    """sha256 of the evaluated rows' whole content (every column), in evaluation order."""
    return _sha256_json([sorted(r.items()) for r in rows])


@dataclass(frozen=True)
class ResolvedTrial:
    """A `TrialSpec` bound to the data and the model: everything that decides the answers."""

    spec: TrialSpec
    compiled: CompiledPrompt
    rows: list[dict[str, str]]
    excluded: list[str]
    metric: str
    lm_identity: dict[str, Any]
    decoding: dict[str, Any]
    labels: tuple[str, ...] | None = None  # the label set, when the splits alone lack some

    def identity(self) -> dict[str, Any]:
        identity = {
            "spec": {**self.spec.to_dict(), "variant": self.compiled.variant.to_dict()},
            "lm": self.lm_identity,
            "decoding": self.decoding,
            "metric": self.metric,
            # the prompt as shown (instruction, demonstration texts, query template), so an
            # edited prompt file or demonstration row gives a new trial too
            "template": hashlib.sha256(self.compiled.template().encode("utf-8")).hexdigest(),
            "rows": rows_fingerprint(self.rows),
        }
        # Generations are parsed against the label set, which the keys above do not always
        # pin: labels stated by the task but absent from its rows (a MAUD task's option
        # letters) arrived after trials were run on the rows' labels alone, and parse the
        # same generations otherwise. Only then is the set part of the id, so every other
        # trial keeps the id it had.
        if self.labels is not None:
            identity["labels"] = list(self.labels)
        return identity

    @property
    def id(self) -> str:
        return _sha256_json(self.identity())


def prompt_hash(prompt: str) -> str:
    """A prediction's prompt hash: rows with equal hashes got the same prompt, so they form
    one cluster for the statistics (`experiments.analysis.clusters`)."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]


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

    @property
    def rerun_helps(self) -> bool:
        """Whether running the trial again can answer a failed row: False when every failed
        row's error cannot change (`unretryable`)."""
        failed = {p.index for p in self.predictions if p.error is not None}
        return bool(failed - set(self.unretryable))

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
        return f"{len(errors)} of {len(self.predictions)} rows failed (first: {errors[0][:200]})"

    def summary(self) -> dict[str, Any]:
        preds = self.predictions
        return {
            "trial_id": self.trial_id,
            "task": self.spec.task,
            "model": self.spec.model,
            "api_base": _shown_url(self.lm_identity.get("api_base")),
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
        }


def _shown_url(url: Any) -> Any:

    return safe_url(url) if isinstance(url, str) else url


def select_rows(rows: list[dict[str, str]], limit: int | None, seed: int) -> list[dict[str, str]]:
    """A seeded random subset of `limit` rows, kept in file order (prefix reuse stays high)."""
    if limit is None or limit >= len(rows):
        return rows
    import numpy as np

    picks = sorted(np.random.default_rng(seed).choice(len(rows), size=limit, replace=False))
    return [rows[int(i)] for i in picks]


def _correct(metric: str, generation: str, answer: str) -> bool:
    if metric == "balanced_accuracy":
        return normalize(generation) == normalize(answer)
    return METRICS[metric]([generation], [answer]) == 1.0


def resolve_trial(
    spec: TrialSpec, catalog: Catalog, lm: LM, *, hand_graded: bool = False
) -> ResolvedTrial:
    """Bind a spec to the data and the model (no model call): the trial's full identity.

    A task LegalBench grades by hand (rule_qa) fails here, early, unless `hand_graded`: then
    its metric is `MANUAL` and `run_trial` records its generations with no score, for
    `experiments.trials.grading` to export to graders.
    """
    if hand_graded and official_metric(spec.task, spec.definition) == MANUAL:
        metric = MANUAL
        if spec.scoring != "generate":
            raise WorkbenchError(
                f"task {spec.task!r} is answered in prose and graded by hand; log-likelihood "
                "scoring needs a label set: use --scoring generate"
            )
    else:
        metric = scorable_metric(spec.task, spec.definition)
    task = catalog.task(spec.task)
    compiled = compile_prompt(spec.variant, task, spec.split)
    rows, excluded = evaluation_rows(compiled.variant, task, spec.split)
    if spec.rows is not None:
        allowed = {r["index"]: r for r in rows}  # ids are unique: read_tsv refuses repeats
        seen: set[str] = set()
        repeated: set[str] = set()
        for i in spec.rows:
            (repeated if i in seen else seen).add(i)
        if repeated:  # a row asked for twice would be evaluated, and counted, twice
            twice = sorted(repeated)
            raise WorkbenchError(
                f"task {spec.task!r}: rows {', '.join(twice[:5])} are asked for more than once "
                f"({len(twice)} repeated); name each row once"
            )
        leaked = [i for i in spec.rows if i not in allowed]
        if leaked:
            raise WorkbenchError(
                f"task {spec.task!r}: rows {', '.join(leaked[:5])} cannot be evaluated with "
                f"variant {spec.variant.label} (they are its demonstrations or do not exist)"
            )
        rows = [allowed[i] for i in spec.rows]
    else:
        rows = select_rows(rows, spec.limit, spec.seed)
    if not rows and metric == MANUAL:
        raise WorkbenchError(
            f"task {spec.task!r}: no {spec.split} rows to evaluate (its {spec.split}.tsv is "
            "empty or missing); use the split that holds the questions (LegalBench's rule_qa: "
            "test)"
        )
    if not rows:
        raise WorkbenchError(f"task {spec.task!r}: no {spec.split} rows left to evaluate")
    if spec.scoring in LOGLIK:
        labels = task.spec.labels
        if not labels:
            raise WorkbenchError(
                f"log-likelihood scoring needs a label set; task {task.name!r} is "
                f"{task.spec.task_type}: use --scoring generate"
            )
        lm_identity: dict[str, Any] = {"model": spec.model, "mode": "loglik"}
        if served_api_base(lm):  # a served model: its server is part of its identity
            lm_identity["api_base"] = served_api_base(lm)
            # trials scored under the older one-token check are other trials: a sweep must
            # not resume one as done (it may have let a shifted server's rows through)
            lm_identity["alignment_check"] = SERVED_ALIGNMENT_CHECK
        lm_identity.update(_local_weights(spec.model))
        decoding: dict[str, Any] = {
            "loglik": LOGLIK[spec.scoring],
            "continuations": [compiled.answer_join + label for label in labels],
        }
    else:
        lm_identity = dict(lm.cache_identity())
        decoding = decoding_for(task.spec, getattr(lm, "mode", "chat")).to_dict()
    stated = task.spec.labels if task.spec.stated_only else None
    return ResolvedTrial(spec, compiled, rows, excluded, metric, lm_identity, decoding, stated)


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
        completions, hits = _loglik(
            spec,
            task,
            compiled,
            prompts,
            cache,
            progress,
            served=lm if served_api_base(lm) else None,
        )
    else:
        decoding = decoding_for(task.spec, getattr(lm, "mode", "chat"))
        completions, hits = _generate(lm, prompts, decoding, cache, progress)

    scored = metric != MANUAL
    preds: list[Prediction] = []
    for row, prompt, (comp, hit) in zip(
        rows, prompts, zip(completions, hits, strict=True), strict=True
    ):
        gen = comp.text
        parsed = parse_label(gen, labels) if (gen is not None and labels) else None
        preds.append(
            Prediction(
                index=row["index"],
                prompt_hash=prompt_hash(prompt),
                answer=row["answer"],
                generation=gen,
                parsed=parsed,
                correct=None if gen is None or not scored else _correct(metric, gen, row["answer"]),
                tokens_in=comp.tokens_in,
                tokens_out=comp.tokens_out,
                latency=round(comp.latency, 4),
                cache_hit=hit,
                error=comp.error,
                attempts=comp.attempts,
                truncated=comp.truncated,
            )
        )
    answered = [p for p in preds if p.generation is not None]
    gens = [p.generation or "" for p in answered]
    answers = [p.answer for p in answered]
    on_answered = score(spec.task, gens, answers, spec.definition) if answered and scored else None
    report = class_report(gens, answers, labels) if (labels and answered) else None
    costs = [c.cost for c in completions if c.cost is not None]
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
        excluded_rows=resolved.excluded,
        lm_identity=resolved.lm_identity,
        decoding=resolved.decoding,
        unretryable=[
            row["index"]
            for row, comp in zip(rows, completions, strict=True)
            if comp.error is not None and not comp.retryable
        ],
    )


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
    todo = [i for i, r in enumerate(results) if r is None]

    stop = threading.Event()  # set when this thread is interrupted: the workers give up

    def call(i: int) -> tuple[int, Completion]:
        with calls_stop_on(stop):
            comp = lm.complete(prompts[i], decoding)
        if cache is not None:
            cache.put(keys[i], comp)
        return i, comp

    if lm.concurrency <= 1:
        for i in todo:  # in order: consecutive prompts share the KV-cache prefix
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
    return [r for r in results if r is not None], hits


def _local_weights(model: str) -> dict[str, Any]:
    """A local model's weights, context size and load layout (`llama.local_identity`), so
    new weights never reuse old answers."""

    return local_identity(model)


SERVED_ALIGNMENT_CHECK = f"top_logprobs {ALIGNMENT_TOP_K}, every listed token"
"""Names the alignment check served log-likelihoods passed, in their trial and cache
identities."""


def _loglik(
    spec: TrialSpec,
    task: Task,
    compiled: CompiledPrompt,
    prompts: Sequence[str],
    cache: ResponseCache | None,
    progress: Progress | None,
    served: LM | None = None,
) -> tuple[list[Completion], list[bool]]:
    """Pick the label with the highest log-likelihood as a continuation of the prompt.

    ``loglik`` compares the summed log-probabilities of ``answer_join + label``;
    ``loglik-norm`` divides each sum by the label's length in UTF-8 bytes (lm-evaluation-
    harness ``acc_norm``; see `experiments.llm.loglik.per_byte_scores`). Both come from the same
    model pass, and both sets of scores are kept in the Completion's ``extra``; the cache
    key names the criterion, so the two scorings never share a cached answer.
    """
    labels = task.spec.labels
    assert labels, "resolve_trial checks the label set"
    how = LOGLIK[spec.scoring]
    conts = [compiled.answer_join + label for label in labels]
    identity: dict[str, Any] = {
        "model": spec.model,
        "mode": "loglik",
        "loglik": how,
        "continuations": conts,
    }
    if served is not None:  # a served model's sums come from its server (and its tokenizer)
        identity["api_base"] = served_api_base(served)
        # sums cached before the top-5 check existed were checked on one token only
        identity["alignment_check"] = SERVED_ALIGNMENT_CHECK
    # A served row's sums are cached when the trial ends, unless the server was refused: a
    # server refused at row 5 may have let rows 1-4 through by chance, and their cached
    # sums would be reused unchecked once the server is fixed.
    pending: list[tuple[str, Completion]] = []
    identity.update(_local_weights(spec.model))
    decoding = Decoding(temperature=0.0, max_tokens=0, stop=(), mode="completion")
    out: list[Completion] = []
    hits: list[bool] = []
    refused = False
    try:
        for n, prompt in enumerate(prompts, 1):
            key = cache_key(identity, prompt, decoding)
            cached = cache.get(key) if cache is not None else None
            if cached is not None:
                out.append(cached)
                hits.append(True)
            else:
                t0 = time.perf_counter()
                if served is not None:
                    try:
                        sums = served_label_logprobs(served, prompt, conts)  # type: ignore[arg-type]
                    except ServedCallError as e:  # the call failed after retries: a row state
                        out.append(
                            Completion(
                                None,
                                latency=time.perf_counter() - t0,
                                error=str(e),
                                retryable=e.retryable,
                            )
                        )
                        hits.append(False)
                        if progress:
                            progress(n, len(prompts))
                        continue
                else:
                    try:
                        sums = label_logprobs(spec.model, prompt, conts)
                    except ContextTooLong as e:  # a row state, as under generation
                        out.append(
                            Completion(
                                None,
                                latency=time.perf_counter() - t0,
                                error=str(e),
                                retryable=False,
                            )
                        )
                        hits.append(False)
                        if progress:
                            progress(n, len(prompts))
                        continue
                try:
                    best = pick_label(sums, labels, how)
                except ModelError as e:  # every label -inf: no label, a row state
                    out.append(
                        Completion(
                            None,
                            latency=time.perf_counter() - t0,
                            error=f"no usable log-likelihood ({_check_logprobs(served)}): {e}",
                            retryable=False,
                        )
                    )
                    hits.append(False)
                    if progress:
                        progress(n, len(prompts))
                    continue
                tie = loglik_tie(sums, labels, how)
                extra: dict[str, Any] = {
                    "loglik": how,
                    "logprobs": dict(zip(labels, sums, strict=True)),
                    "label_bytes": {label: label_bytes(label) for label in labels},
                    "logprobs_per_byte": dict(
                        zip(labels, per_byte_scores(sums, labels), strict=True)
                    ),
                }
                if tie is not None:  # an invalid answer (no label), as a generation of none
                    extra["tie"] = tie
                    out.append(
                        Completion(
                            text=f"{NO_LABEL} {tie}",
                            latency=time.perf_counter() - t0,
                            extra=extra,
                        )
                    )
                    hits.append(False)  # never cached: nothing was decided
                    if progress:
                        progress(n, len(prompts))
                    continue
                comp = Completion(
                    text=labels[best],
                    tokens_in=0,
                    latency=time.perf_counter() - t0,
                    extra=extra,
                )
                if cache is not None:
                    if served is None:
                        cache.put(key, comp)
                    else:
                        pending.append((key, comp))
                out.append(comp)
                hits.append(False)
            if progress:
                progress(n, len(prompts))
        checked = _no_information(out, served, prompts)
        if checked is not out:
            refused = True  # rows that carry no information are not cached for a fixed server
        return checked, hits
    except NoPromptLogprobs:
        refused = True  # none of a refused server's rows is kept: some may have slipped
        raise
    finally:  # an interrupt or another error keeps the rows that were checked
        if cache is not None and not refused:
            for key, comp in pending:
                cache.put(key, comp)


NO_LABEL = "(no label: tie)"
"""Starts the generation of a log-likelihood row whose labels tie (`loglik.loglik_tie`):
not a label, so the row is an invalid answer (wrong, and in the invalid rate), and the rest
of the text says what tied."""


def _check_logprobs(served: LM | None) -> str:
    """What to check when log-likelihoods carry no information."""
    if served is None:
        return "check the local model (workbench doctor), or use --scoring generate"
    return (
        "check that the server returns its real prompt log-probabilities, or use --scoring generate"
    )


def _no_information(
    out: list[Completion], served: LM | None, prompts: Sequence[str] = ()
) -> list[Completion]:
    """`out`, with its answered rows made row errors (not retried: the same model answers
    the same way) when its log-likelihoods carry no information, so a trial of invalid or
    constant answers is never complete:

    - every answered row ties (`loglik_tie`);
    - every answered row, over at least 2 distinct prompts, has the same vector of label
      log-likelihoods, exactly: the scores do not depend on the prompt (a server that gives
      every token -1.0 picks the shorter label every time under loglik, the other under
      loglik-norm). A real model's sums are floats out of a forward pass over the whole
      prompt; on distinct prompts they differ at least in their last bits, so in practice
      they are never all identical, however alike the prompts.
    """
    answered = [
        (c, prompts[i] if i < len(prompts) else i) for i, c in enumerate(out) if c.error is None
    ]
    if not answered:
        return out
    if all("tie" in c.extra for c, _ in answered):
        why = (
            f"the model returned no information (its label log-likelihoods tie on every "
            f"row): {_check_logprobs(served)}; first row: {answered[0][0].extra['tie']}"
        )
    else:
        vectors = {
            tuple(c.extra["logprobs"].items())
            for c, _ in answered
            if isinstance(c.extra.get("logprobs"), dict)
        }
        same = len(vectors) == 1 and all("logprobs" in c.extra for c, _ in answered)
        if not same or len({p for _, p in answered}) < 2:
            return out
        sums = ", ".join(f"{label!r}: {v:.6g}" for label, v in vectors.pop())
        why = (
            f"the model returned no information (its label log-likelihoods are the same on "
            f"every row, whatever the prompt): {_check_logprobs(served)}; all "
            f"{len(answered)} rows: {sums}"
        )
    return [
        Completion(None, latency=c.latency, error=why, retryable=False) if c.error is None else c
        for c in out
    ]


def served_api_base(lm: LM) -> str | None:
    """The api_base of a served (non-local) model, else None."""
    base = getattr(lm, "api_base", None)
    if not isinstance(base, str) or not base or getattr(lm, "is_local", False):
        return None
    return base


# ---- saving --------------------------------------------------------------------------------
def runs_dir() -> Path:
    return Path(os.environ.get("WORKBENCH_RUNS_DIR") or "runs")


def save_trial(result: TrialResult, root: Path | None = None) -> Path:
    """Write runs/<trial_id>/{predictions.jsonl,summary.json} together, crash-safe."""
    out = (root or runs_dir()) / result.trial_id
    lines = "".join(
        json.dumps(dataclasses.asdict(p), ensure_ascii=False) + "\n" for p in result.predictions
    )
    summary = {**result.summary(), "spec": result.spec.to_dict()}
    atomic_write_dir(
        out,
        {
            "predictions.jsonl": lines,
            "summary.json": json.dumps(summary, indent=1, ensure_ascii=False),
        },
    )
    return out


# An unfinished rerun of a trial saved complete goes to <runs>/incomplete-reruns/<trial id>/:
# outside the trial's folder, so no rewrite of that folder (a later rerun, a grade import)
# drops it, and no trial id prefix matches it.
INCOMPLETE_RERUNS = "incomplete-reruns"


@dataclass(frozen=True)
class SavedTrial:
    """Where `save_result` put a result."""

    folder: Path  # holds this result's predictions.jsonl and summary.json
    kept: Path | None = None  # the saved trial this unfinished rerun was not saved over
    kept_complete: bool = True  # that trial is complete (else: it answered more rows)

    def kept_note(
        self,
        result: TrialResult,
        trial: str = "complete trial",
        unchanged: str = "its predictions and score",
    ) -> str | None:
        """One line saying the saved trial was kept and where the attempt went."""
        if self.kept is None:
            return None
        if not self.kept_complete:
            trial = "saved trial, which answered more rows,"
        return (
            f"this rerun of trial {result.trial_id[:12]} is {result.status} and was not saved "
            f"over the {trial} in {self.kept} ({unchanged} are unchanged); the attempt is in "
            f"{self.folder}"
        )


def save_result(result: TrialResult, root: Path | None = None) -> SavedTrial:
    """`save_trial`, except that a finished result is never lost to an unfinished rerun.

    A result that is not complete, of a trial already saved complete (a --no-cache rerun
    whose calls failed) or saved with more answered rows (a rerun failing where the first
    run answered), is saved in `<root>/incomplete-reruns/<trial id>/` and the saved trial's
    folder stays as it was, as MLflow keeps its run.
    """

    root = root or runs_dir()
    trial_dir = root / result.trial_id
    target = root
    try:
        # the saved summary is read and replaced under the folder's lock: a peer saving the
        # same trial cannot slip a complete result in between (and be overwritten)
        with dir_lock(trial_dir):
            if not result.complete:
                saved = _saved_summary(trial_dir)
                complete = saved.get("status") == str(TrialStatus.COMPLETE)
                answered = len(result.predictions) - result.n_errors
                if complete or _answered(saved) > answered:
                    target = root / INCOMPLETE_RERUNS
                    attempt = save_trial(result, target)
                    return SavedTrial(attempt, kept=trial_dir, kept_complete=complete)
            return SavedTrial(save_trial(result, root))
    except OSError as e:  # junk in the way (a file named like a folder), a full disk
        where = Path(e.filename) if isinstance(e.filename, str) else target
        raise OutputError(
            f"{where}: cannot save trial {result.trial_id[:12]} under {target} "
            f"({e.strerror or e}); move whatever is in the way (it must be a folder) and rerun "
            "the same command: answered rows come from the cache"
        ) from None


def _saved_summary(trial_dir: Path) -> dict[str, Any]:
    """The saved trial's summary.json; {} if there is none (readable)."""
    try:
        summary = json.loads((trial_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # nothing (readable) saved there: nothing finished to keep
    return summary if isinstance(summary, dict) else {}


def _answered(summary: dict[str, Any]) -> int:
    """Rows the saved trial answered (no provider error); 0 if the summary cannot say."""
    n, errors = summary.get("n"), summary.get("n_errors")
    return n - errors if isinstance(n, int) and isinstance(errors, int) else 0
