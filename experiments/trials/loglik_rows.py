"""A trial's rows by log-likelihood: the label each row's sums choose, cached, checked.

The sums come from the model (`LM.loglikelihood`, local or served alike); here they become
answers: the label with the highest score, a tie as an invalid answer, and a trial whose
scores carry no information as failed rows (`_no_information`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from experiments.llm.cache import ResponseCache, cache_key
from experiments.llm.loglik import label_bytes, loglik_tie, per_byte_scores, pick_label
from experiments.llm.served import NoPromptLogprobs, ServedCallError
from experiments.llm.types import LM, Completion, ContextTooLong, Decoding, LoglikNorm, ModelError
from experiments.trials.order import in_call_order
from experiments.trials.spec import LOGLIK, Progress, TrialSpec
from promptlib.render import CompiledPrompt
from promptlib.tasks import Task


def _loglik(
    spec: TrialSpec,
    task: Task,
    compiled: CompiledPrompt,
    prompts: Sequence[str],
    cache: ResponseCache | None,
    progress: Progress | None,
    lm: LM,
) -> tuple[list[Completion], list[bool]]:
    """Pick the label with the highest log-likelihood as a continuation of the prompt.

    ``loglik`` compares the summed log-probabilities of ``answer_join + label``;
    ``loglik-norm`` divides each sum by the label's length in UTF-8 bytes (lm-evaluation-
    harness ``acc_norm``; see `experiments.llm.loglik.per_byte_scores`). Both come from the same
    model pass, and both sets of scores are kept in the Completion's ``extra``; the cache
    key names the criterion, so the two scorings never share a cached answer.

    Under a verbalizer the continuations are the labels as shown (``answer_join + "A"``), the
    per-byte lengths theirs, and the Completion's text the shown label picked, which
    `run._predictions` maps back to the official label like any reply.
    """
    labels = compiled.answer_labels or task.spec.labels
    assert labels, "resolve_trial checks the label set"
    how = LOGLIK[spec.scoring]
    conts = [compiled.answer_join + label for label in labels]
    identity = lm.loglik_identity(how, conts)
    # A served row's sums are cached when the trial ends (`LM.caches_loglik_at_once`),
    # unless the server was refused: a server refused at row 5 may have let rows 1-4
    # through by chance, and their cached sums would be reused unchecked once it is fixed.
    pending: list[tuple[str, Completion]] = []
    decoding = Decoding(temperature=0.0, max_tokens=0, stop=(), mode="completion")
    keys = [cache_key(identity, prompt, decoding) for prompt in prompts]
    results: list[Completion | None] = [None] * len(prompts)
    hits = [False] * len(prompts)
    done = 0
    called: set[str] = set()
    refused = False
    try:
        for i, key in enumerate(keys):
            cached = cache.get(key) if cache is not None else None
            if cached is not None:
                results[i], hits[i] = cached, True
                done += 1
                if progress:
                    progress(done, len(prompts))
        # the calls in the model's order (a local model's: prefix order, so each prompt token
        # the rows share is evaluated once); the rows stay in row order
        for i in in_call_order(lm, prompts, [i for i, r in enumerate(results) if r is None]):
            # a prompt repeated in the trial: its first row's sums may be cached just now
            cached = cache.get(keys[i]) if cache is not None and keys[i] in called else None
            if cached is not None:
                results[i], hits[i] = cached, True
            else:
                comp, decided = _loglik_row(lm, prompts[i], conts, labels, how)
                if decided and cache is not None:
                    if lm.caches_loglik_at_once:
                        cache.put(keys[i], comp)
                    else:
                        pending.append((keys[i], comp))
                results[i] = comp
                called.add(keys[i])
            done += 1
            if progress:
                progress(done, len(prompts))
        out = [r for r in results if r is not None]
        checked = _no_information(out, lm, prompts)
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


def _loglik_row(
    lm: LM,
    prompt: str,
    conts: Sequence[str],
    labels: Sequence[str],
    how: LoglikNorm,
) -> tuple[Completion, bool]:
    """One row's answer by log-likelihood, and whether a label was decided (only then is it
    cached). A failed call, a prompt longer than the context, no usable score and a tie are
    row states, not crashes."""
    t0 = time.perf_counter()
    try:
        sums = lm.loglikelihood(prompt, conts)
    except (ServedCallError, ContextTooLong) as e:
        # a served call that failed after retries, or a prompt that never fits the local
        # model: a row state, as under generation
        retryable = e.retryable if isinstance(e, ServedCallError) else False
        return Completion(
            None, latency=time.perf_counter() - t0, error=str(e), retryable=retryable
        ), False
    try:
        best = pick_label(sums, labels, how)
    except ModelError as e:  # every label -inf: no label, a row state
        return Completion(
            None,
            latency=time.perf_counter() - t0,
            error=f"no usable log-likelihood ({lm.loglik_advice()}): {e}",
            retryable=False,
        ), False
    tie = loglik_tie(sums, labels, how)
    extra: dict[str, Any] = {
        "loglik": how,
        "logprobs": dict(zip(labels, sums, strict=True)),
        "label_bytes": {label: label_bytes(label) for label in labels},
        "logprobs_per_byte": dict(zip(labels, per_byte_scores(sums, labels), strict=True)),
    }
    if tie is not None:  # an invalid answer (no label), as a generation of none
        extra["tie"] = tie
        # never cached: nothing was decided
        return Completion(
            text=f"{NO_LABEL} {tie}", latency=time.perf_counter() - t0, extra=extra
        ), False
    return Completion(
        text=labels[best], tokens_in=0, latency=time.perf_counter() - t0, extra=extra
    ), True


NO_LABEL = "(no label: tie)"
"""Starts the generation of a log-likelihood row whose labels tie (`loglik.loglik_tie`):
not a label, so the row is an invalid answer (wrong, and in the invalid rate), and the rest
of the text says what tied."""


def _no_information(out: list[Completion], lm: LM, prompts: Sequence[str] = ()) -> list[Completion]:
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
            f"row): {lm.loglik_advice()}; first row: {answered[0][0].extra['tie']}"
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
            f"every row, whatever the prompt): {lm.loglik_advice()}; all "
            f"{len(answered)} rows: {sums}"
        )
    return [
        Completion(None, latency=c.latency, error=why, retryable=False) if c.error is None else c
        for c in out
    ]
