"""Log-likelihood scoring with the local model: label bytes, per-byte scores, picking a label."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from experiments.llm.backends import backend_class, local_name
from experiments.llm.llama import _LOCK, _local_limit, load_local
from experiments.llm.prefix import common_prefix, prefix_order, ready
from experiments.llm.types import (
    ContextTooLong,
    LoglikNorm,
    ModelError,
    Scoring,
)


def default_scoring(model: str, *, zero_shot: bool, has_label_set: bool) -> Scoring:
    """How a trial is scored when its spec does not say (issue 10, point 3): its backend's
    `default_scoring` (a local model on a zero-shot prompt of a task with a label set:
    log-likelihood; everything else generates)."""
    return backend_class(model).default_scoring(
        model, zero_shot=zero_shot, has_label_set=has_label_set
    )


def require_loglik_model(model: str, api_base: str | None = None) -> None:
    """Raise `ModelError` (one clear line) unless `model` can be scored by log-likelihood.

    The bundled local models can, and so can a served model behind `api_base` whose
    completions endpoint returns prompt log-probabilities (``echo`` with ``logprobs``, as
    vLLM and llama.cpp's server do; checked on the first call). Hosted APIs without an
    `api_base` do not expose the log-probabilities of a given continuation uniformly.
    """
    backend_class(model, api_base).require_loglik(model, api_base)


def label_bytes(label: str) -> int:
    """Length of a label in UTF-8 bytes: the denominator of per-byte normalisation."""
    return len(label.encode("utf-8"))


def per_byte_scores(sums: Sequence[float], labels: Sequence[str]) -> list[float]:
    """Each label's summed log-likelihood divided by the label's length in UTF-8 bytes.

    This is lm-evaluation-harness's ``acc_norm`` (EleutherAI/lm-evaluation-harness,
    ``lm_eval/api/task.py``: ``ConfigurableTask.process_results`` for ``multiple_choice``
    tasks and ``MultipleChoiceTask.process_results``). There the model scores the
    continuation ``target_delimiter + choice`` (``" " + choice``), and the prediction is the
    argmax of the summed log-likelihoods divided by ``completion_len``, an array of
    ``float(len(choice))`` for each choice: the choice's length in characters, *without*
    the delimiter, although the delimiter's log-probability is in the sum. We do the same
    with `labels` (the label text, not the joined continuation), counting UTF-8 bytes, which
    equals the character count for ASCII labels such as LegalBench's. Leaving the
    separator out also keeps the normalisation independent of the prompt format's
    ``answer_join``.
    """
    if len(sums) != len(labels):
        raise ValueError(f"{len(sums)} scores for {len(labels)} labels")
    out = []
    for total, label in zip(sums, labels, strict=True):
        n = label_bytes(label)
        if n == 0:
            raise ModelError("per-byte log-likelihood needs non-empty labels, got ''")
        out.append(total / n)
    return out


def pick_label(sums: Sequence[float], labels: Sequence[str], how: LoglikNorm) -> int:
    """Index of the most likely label by `how`; a tie goes to the first label in order.

    The first-wins tie rule is ``numpy.argmax``'s, as in lm-evaluation-harness. A NaN score
    is an error (it would make the choice depend on the label order).
    """
    if not labels:
        raise ValueError("no labels to choose from")
    if how == "sum":
        scores = [float(x) for x in sums]
        if len(scores) != len(labels):
            raise ValueError(f"{len(scores)} scores for {len(labels)} labels")
    elif how == "per_byte":
        scores = per_byte_scores(sums, labels)
    else:
        raise ValueError(f"unknown log-likelihood normalisation {how!r}")
    if any(math.isnan(x) for x in scores):
        raise ModelError(
            f"log-likelihood is NaN for a label: {dict(zip(labels, scores, strict=True))}"
        )
    if all(x == -math.inf for x in scores):  # the "choice" would be the first label
        raise ModelError(
            "every label has log-likelihood -inf (probability 0), so none can be chosen: "
            f"{dict(zip(labels, scores, strict=True))}"
        )
    best = 0
    for j in range(1, len(scores)):
        if scores[j] > scores[best]:  # strictly greater: ties keep the earlier label
            best = j
    return best


LOGLIK_TIE_TOLERANCE = 1e-9
"""Nats within which two label scores count as equal (`loglik_tie`). Summing the same
log-probabilities in another order moves a sum by about 1e-13; a model that prefers one
label does so by far more than 1e-9 nats (a probability ratio of 1.000000001)."""


def loglik_tie(sums: Sequence[float], labels: Sequence[str], how: LoglikNorm) -> str | None:
    """Why the labels' log-likelihoods choose no label, or None when they do.

    `pick_label` gives a tie to the first label, so a model (or server) that returns one
    value for everything would get a "complete" trial of constant first-label answers. A
    row is not decided by the model when every label has the same summed log-likelihood
    (then ``loglik-norm`` would choose by the labels' lengths alone), or when the best score
    under `how` is shared by two labels (the choice would be their order).
    """
    raw = [float(x) for x in sums]
    if len(raw) < 2 or not all(math.isfinite(x) for x in raw):
        return None  # one label, or -inf / NaN: `pick_label` decides or refuses
    if max(raw) - min(raw) <= LOGLIK_TIE_TOLERANCE:
        return f"every label has the same log-likelihood ({raw[0]:.6g})"
    scores = raw if how == "sum" else per_byte_scores(raw, labels)
    best = max(scores)
    tied = [lab for lab, x in zip(labels, scores, strict=True) if best - x <= LOGLIK_TIE_TOLERANCE]
    if len(tied) > 1:
        per = "" if how == "sum" else " per byte"
        return f"labels {', '.join(map(repr, tied))} tie at log-likelihood{per} {best:.6g}"
    return None


def label_logprobs(model: str, prompt: str, continuations: Sequence[str]) -> list[float]:
    """Summed log-likelihood of each continuation after `prompt`, for local models only.

    The prompt is evaluated once (past the prefix it shares with the previous prompt, still
    in the KV cache), and every label is scored from that one evaluation: the labels' tokens
    are walked as a trie (`_label_walk`), so a token prefix labels share is evaluated once.
    The sums are not length-normalised: `pick_label` compares them as they are (``sum``) or
    per byte (``per_byte``), so one pass serves both.
    """
    require_loglik_model(model)
    if any(not c for c in continuations):
        raise ModelError("log-likelihood scoring needs non-empty continuations")
    llm = load_local(local_name(model))
    with _LOCK:
        tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=False)
        conts = [
            llm.tokenize(c.encode("utf-8"), add_bos=False, special=False) for c in continuations
        ]
        # Checked before any decode: llama.cpp fails a decode past its context with
        # "llama_decode returned 1", a RuntimeError that would end the whole run.
        # The last label token is only read, never evaluated.
        needed = len(tokens) + max((len(c) for c in conts), default=1) - 1
        limit = _local_limit(llm)
        if needed > limit:
            raise ContextTooLong(
                f"prompt of {needed} tokens with its longest label is longer than the local "
                f"model's context of {limit} tokens: shorten it (fewer demonstrations) "
                "or raise WORKBENCH_LOCAL_N_CTX; it fails the same way every time"
            )
        # Reuse the KV cache for the prefix shared with the previous prompt, the rest in
        # batches of `prefix.MIN_BATCH` tokens or more (`prefix.ready`): the sums do not
        # depend on the previous prompt
        n = len(tokens)
        ready(llm, tokens)
        llm.eval(tokens[llm.n_tokens :])
        scores = _label_walk(llm, n, _logsoftmax(_last_logits(llm)), conts, continuations)
        llm.n_tokens = n
    return scores


def _label_walk(
    llm: Any,
    n: int,
    after_prompt: Any,
    conts: Sequence[Sequence[int]],
    continuations: Sequence[str],
) -> list[float]:
    """Each label's summed log-likelihood after the prompt's `n` tokens (in the KV cache,
    `after_prompt` the log-softmax after them), evaluating each distinct label-token prefix
    once: the labels in lexicographic order of their tokens are a walk of their trie, and
    moving to the next one rolls the KV cache back (``llm.n_tokens``) to the prefix the two
    share. A label's last token is only read, never evaluated. Each token is evaluated
    alone at the same position as scoring the labels one by one did, so the sums are the
    same, bit for bit. The KV cache ends at the prompt's end, for the next prompt to reuse.
    """
    for cont, cont_tokens in zip(continuations, conts, strict=True):
        if not cont_tokens:
            raise ModelError(f"continuation {cont!r} tokenizes to nothing")
    scores = [0.0] * len(conts)
    path: list[int] = []  # label tokens in the KV cache after the prompt
    dists = [after_prompt]  # dists[k]: log-softmax after the prompt and path[:k]
    for j in prefix_order(conts):
        cont_tokens = list(conts[j])
        shared = common_prefix(path, cont_tokens[:-1])
        del path[shared:], dists[shared + 1 :]
        llm.n_tokens = n + shared
        for token in cont_tokens[shared:-1]:
            llm.eval([token])
            path.append(token)
            dists.append(_logsoftmax(_last_logits(llm)))
        scores[j] = sum(float(dists[i][t]) for i, t in enumerate(cont_tokens))
    llm.n_tokens = n
    return scores


def _last_logits(llm: Any) -> Any:
    """Logits after the last evaluated token (llama.cpp keeps only those without logits_all)."""
    import numpy as np

    raw = llm._ctx.get_logits()
    return np.array(np.ctypeslib.as_array(raw, shape=(llm.n_vocab(),)), dtype=np.float64)


def _logsoftmax(logits: Any) -> Any:
    import numpy as np

    m = logits.max()
    return logits - m - np.log(np.exp(logits - m).sum())
