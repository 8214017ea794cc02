"""Log-likelihood from a served model: echo parsing, the alignment check, served scores."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from experiments.llm.calls import _field, _finite, _litellm
from experiments.llm.types import Completion, ModelError
from experiments.secrets import safe_url


# ---- log-likelihood from a served model -----------------------------------------------------
class NoPromptLogprobs(ModelError):
    """The server does not return prompt log-probabilities: loglik scoring is impossible."""


class MisalignedPromptLogprobs(NoPromptLogprobs):
    """The server returns prompt log-probabilities that do not belong to their tokens."""


def _no_prompt_logprobs(server: str, why: str) -> NoPromptLogprobs:

    return NoPromptLogprobs(
        f"the server at {safe_url(server)} does not return prompt log-probabilities ({why}); "
        "log-likelihood scoring needs a completions endpoint that honours echo with logprobs "
        "(vLLM, llama.cpp's server with --logits_all true); use --scoring generate"
    )


def _unusable_echo(server: str, why: str) -> NoPromptLogprobs:

    return NoPromptLogprobs(
        f"the server at {safe_url(server)} returns prompt log-probabilities this workbench "
        f"cannot use safely ({why}); the label's log-likelihood would be a guess; "
        "use --scoring generate"
    )


ALIGNMENT_TOLERANCE = 0.01
"""How far apart (nats) two requests' log-probabilities of the same listed token at the
label's first position may be before the server counts as misaligned. An aligned llama.cpp
server gives identical values; a shifted one differs by 0.28-1.05 nats over its five most
likely tokens on the hearsay rows where the most likely token alone differed by as little as
0.001 (measured). Not measured on GPU servers: bf16 kernels whose results depend on the batch
(vLLM under concurrent load) may differ by more, and are then refused, not scored."""

ALIGNMENT_TOP_K = 5
"""Tokens asked for in ``top_logprobs`` (OpenAI's completions API allows at most 5)."""

SERVED_ALIGNMENT_CHECK = f"top_logprobs {ALIGNMENT_TOP_K}, every listed token"
"""Names the alignment check served log-likelihoods passed, in their trial and cache
identities."""


@dataclass(frozen=True)
class EchoedContinuation:
    """What one echoed completion says about a continuation after a prompt."""

    logprob: float
    """Summed log-probability of the continuation's tokens."""
    prompt_tokens: tuple[str, ...]
    """The server's tokens before the continuation (requests are compared only when equal)."""
    first_tops: tuple[tuple[str, float], ...] | None
    """``top_logprobs`` at the continuation's first token, as (token, log-probability)
    pairs: the most likely next tokens *given the prompt only*, if the server is aligned,
    so the same in every label's request. None when the server sends none there."""


LOGPROB_ROUNDING = 1e-6
"""The most a served log-probability may exceed 0 (rounding of a probability of 1). A
log-probability is <= 0: a larger value is a probability sent as a log-probability, or a
broken server, and one +50.0 would make its label win every row."""


def _above_zero(value: Any, token: str) -> str:
    return (
        f"log-probability {value!r} for {token!r} is above 0, which no log-probability can "
        "be (probabilities sent as log-probabilities?)"
    )


def _char_offsets(tokens: Sequence[str], offsets: Sequence[Any], text: str) -> list[int]:
    """Character offsets of the echoed tokens in `text`.

    When the tokens spell `text` from its start, their positions follow from their lengths,
    whatever unit the server's ``text_offset`` is in (some count UTF-8 bytes). Otherwise the
    server's offsets are taken as they are, and the caller checks every token it counts.
    """
    if "".join(tokens).startswith(text):
        out, at = [], 0
        for token in tokens:
            out.append(at)
            at += len(token)
        return out
    return [int(o) for o in offsets]


def echoed_continuation(
    logprobs: Any, prompt: str, continuation: str, server: str
) -> EchoedContinuation:
    """The continuation's summed log-probability in an echoed completion, checked.

    `logprobs` is the OpenAI completions ``choices[0].logprobs`` of ``prompt + continuation``
    sent with ``echo=True``: ``tokens``, ``token_logprobs``, ``text_offset`` and optionally
    ``top_logprobs``. The continuation's tokens are those starting at or after
    ``len(prompt)`` and before its end (the generated token after it is left out); they must
    sit where the text has them, start exactly at the prompt's end and join to the
    continuation exactly, or nothing is summed (offsets in another unit would otherwise add
    a prompt token's log-probability silently). A token spanning the boundary means the
    server's tokenizer merged the prompt's end with the label, so the label has no
    log-probability of its own: that is an error, not a guess.

    Long because of this docstring and its checks: the code (about 70 lines) is one check
    after another on the reply, each with its own error.
    """
    if logprobs is None:
        raise _no_prompt_logprobs(server, "no logprobs in the reply")
    offsets = _field(logprobs, "text_offset")
    values = _field(logprobs, "token_logprobs")
    tokens = _field(logprobs, "tokens")
    tops = _field(logprobs, "top_logprobs")
    if not offsets or values is None or tokens is None:
        raise _no_prompt_logprobs(server, "no token offsets or log-probabilities")
    if not (len(offsets) == len(values) == len(tokens)):
        raise _no_prompt_logprobs(server, "tokens, offsets and log-probabilities differ in count")
    if tops is not None and len(tops) != len(tokens):
        raise _no_prompt_logprobs(server, "tokens and top_logprobs differ in count")
    tokens = [str(t) for t in tokens]
    text = prompt + continuation
    start, end = len(prompt), len(text)
    if min(int(o) for o in offsets) >= start:
        raise _no_prompt_logprobs(server, "the prompt was not echoed")
    chars = _char_offsets(tokens, offsets, text)
    total, first = 0.0, None
    counted: list[str] = []
    prompt_tokens: list[str] = []
    for i, (token, offset, value) in enumerate(zip(tokens, chars, values, strict=True)):
        if (
            offset < end
            and offset + len(token) > start
            and text[offset : offset + len(token)] != token
        ):
            raise _unusable_echo(
                server,
                f"token {token!r} is not at text offset {offset}: the offsets count bytes, "
                "not characters, or the token runs past the label",
            )
        if offset < start < offset + len(token):
            raise ModelError(
                f"the server at {safe_url(server)} tokenizes the end of the prompt together "
                f"with the label {continuation!r} (token {token!r}): the label's "
                "log-likelihood is not defined there; end the prompt differently or use "
                "--scoring generate"
            )
        if offset < start:
            prompt_tokens.append(token)
        elif offset < end:
            if not counted:
                if offset != start:
                    raise _unusable_echo(
                        server, f"the label's first token starts at {offset}, not {start}"
                    )
                first = i
            if not _finite(value) and value != float("-inf"):
                raise _no_prompt_logprobs(server, f"log-probability {value!r} for {token!r}")
            if value > LOGPROB_ROUNDING:
                raise _unusable_echo(server, _above_zero(value, token))
            total += float(value)
            counted.append(token)
    if not counted:
        raise _no_prompt_logprobs(server, f"no token of {continuation!r} in the echo")
    if "".join(counted) != continuation:
        raise _unusable_echo(
            server, f"the label's tokens {counted!r} do not spell {continuation!r}"
        )
    first_tops = None
    if tops is not None and first is not None and tops[first]:
        try:
            first_tops = tuple((str(k), float(v)) for k, v in dict(tops[first]).items())
        except (TypeError, ValueError) as e:
            raise _unusable_echo(server, f"top_logprobs {tops[first]!r} ({e})") from e
        for key, top in first_tops:
            if math.isnan(top) or top > LOGPROB_ROUNDING:
                raise _unusable_echo(server, f"in top_logprobs, {_above_zero(top, key)}")
    return EchoedContinuation(total, tuple(prompt_tokens), first_tops)


def check_alignment(
    echoes: Sequence[EchoedContinuation], continuations: Sequence[str], server: str
) -> None:
    """Raise `MisalignedPromptLogprobs` if the echoes show the server's log-probabilities
    belong to other positions than their tokens, `NoPromptLogprobs` if they cannot show it.

    ``top_logprobs`` at a label's first token lists the most likely tokens of the
    distribution that position's log-probability comes from. On an aligned server that is
    the distribution given the prompt, the same whatever the label, so a token listed in two
    labels' requests has the same value in both. llama-cpp-python's server (0.3.x) for
    models without a BOS token (SmolLM2) reports, at position k, the distribution given the
    tokens up to and including k: it depends on the label. Comparing the most likely token
    alone let 3 of 40 hearsay rows of such a server through (its value can agree by chance
    after two labels); every token listed in both requests must agree. A necessary
    condition still, not a proof; a server that lists no ``top_logprobs`` there, or no
    token common to two labels' lists (an aligned server lists the same most likely tokens
    in both), cannot be checked and is refused.
    """

    if len(echoes) < 2:
        return
    url = safe_url(server)
    groups: dict[tuple[str, ...], list[tuple[str, dict[str, float]]]] = {}
    for echo, cont in zip(echoes, continuations, strict=True):
        if echo.first_tops is None:
            raise _unusable_echo(
                server,
                f"no top_logprobs at the first token of {cont!r}, so the alignment of its "
                "log-probabilities cannot be checked",
            )
        groups.setdefault(echo.prompt_tokens, []).append((cont, dict(echo.first_tops)))
    for seen in groups.values():
        if len(seen) < 2:
            raise _unusable_echo(
                server,
                f"the prompt is tokenized differently in the request for {seen[0][0]!r} "
                "than in the others, so their log-probabilities cannot be compared",
            )
        (ref_cont, ref), others = seen[0], seen[1:]
        uncheckable = None
        for cont, tops in others:
            common = ref.keys() & tops.keys()
            if not common:
                uncheckable = uncheckable or cont
                continue
            # the widest gap; among equal gaps a token with visible text names it best
            token = max(common, key=lambda t: (_gap(ref[t], tops[t]), t != "", t))
            if _gap(ref[token], tops[token]) > ALIGNMENT_TOLERANCE:
                raise MisalignedPromptLogprobs(
                    f"the server at {url} returns misaligned prompt log-probabilities: after "
                    f"the same prompt, the next token {token!r} has log-probability "
                    f"{ref[token]:.4f} in the request for {ref_cont!r} and {tops[token]:.4f} "
                    f"in the one for {cont!r}, so each position's value depends on its own "
                    "token (a known llama-cpp-python server bug for models without a BOS "
                    "token, e.g. SmolLM2, or log-probabilities that change from request to "
                    "request, as batch-dependent GPU kernels can make them); the label "
                    "log-likelihoods would be wrong; use --scoring generate, or, for "
                    "llama-cpp-python's server, serve the model with the BOS token it assumes "
                    "(--kv_overrides tokenizer.ggml.add_bos_token=bool:true; the model then "
                    "sees a BOS token the local model does not, so compare it only with itself)"
                )
        if uncheckable is not None:
            raise _unusable_echo(
                server,
                f"the requests for {ref_cont!r} and {uncheckable!r} list no common token in "
                "top_logprobs at the label's first position, so their alignment cannot be "
                "checked",
            )


def _gap(a: float, b: float) -> float:
    """|a - b|, with equal infinities 0 apart and a NaN infinitely far."""
    if a == b:
        return 0.0
    gap = abs(a - b)
    return gap if not math.isnan(gap) else math.inf


class ServedCallError(ModelError):
    """A served log-likelihood call failed after its retries: a row state, not a crash."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable  # False: the same prompt fails the same way every time


class ServedCalls(Protocol):
    """The slice of `experiments.llm.remote.ServedModel` a served log-likelihood call uses:
    its server, its timeout, and its retries and failure reasons."""

    name: str
    api_base: str | None
    timeout: float

    def with_retries(self, call: Any) -> tuple[Any, BaseException | None, int]: ...

    def failure(self, exc: BaseException | None, attempts: int, start: float) -> Completion: ...


def served_label_logprobs(
    lm: ServedCalls, prompt: str, continuations: Sequence[str]
) -> list[float]:
    """Summed log-likelihood of each continuation after `prompt`, from a served model.

    One ``/v1/completions`` call per label through litellm (``echo=True``,
    ``logprobs=ALIGNMENT_TOP_K``, one generated token, temperature 0), with the gateway's
    retries. The server tokenizes ``prompt + continuation`` as a whole, as
    lm-evaluation-harness's API models do. The replies are checked against each other
    (`check_alignment`) before any sum is used.
    """
    if not lm.api_base:
        raise ModelError(f"{lm.name}: served log-likelihood needs an api_base")
    if any(not c for c in continuations):
        raise ModelError("log-likelihood scoring needs non-empty continuations")
    litellm = _litellm()
    echoes = []
    for cont in continuations:
        kwargs: dict[str, Any] = {
            "model": lm.name,
            "api_base": lm.api_base,
            "prompt": prompt + cont,
            "echo": True,
            "logprobs": ALIGNMENT_TOP_K,
            "max_tokens": 1,  # 0 means "no limit" to some servers
            "temperature": 0.0,
            "timeout": lm.timeout,
            "num_retries": 0,
            "max_retries": 0,
        }
        response, exc, attempts = lm.with_retries(lambda kw=kwargs: litellm.text_completion(**kw))
        if exc is not None:
            failed = lm.failure(exc, attempts, time.perf_counter())
            raise ServedCallError(
                failed.error or "served log-likelihood call failed", retryable=failed.retryable
            )
        choices = _field(response, "choices")
        if not choices:
            raise _no_prompt_logprobs(lm.api_base, "no choices in the reply")
        logprobs = _field(choices[0], "logprobs")
        echoes.append(echoed_continuation(logprobs, prompt, cont, lm.api_base))
    check_alignment(echoes, continuations, lm.api_base)
    return [e.logprob for e in echoes]
