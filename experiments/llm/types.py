"""The model interface: `LM`, `Decoding`, `Completion`, the model errors and shared constants."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from experiments.secrets import redact_reply
from promptlib.errors import WorkbenchError

log = logging.getLogger("workbench.models")
Mode = Literal["chat", "completion"]


@dataclass(frozen=True)
class Decoding:
    """Decoding parameters; part of the cache key, so any change is a different call."""

    temperature: float = 0.0
    max_tokens: int = 32
    stop: tuple[str, ...] = ("\n",)
    mode: Mode = "chat"

    def to_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "stop": list(self.stop),
            "mode": self.mode,
        }


@dataclass
class Completion:
    """One model answer, or the reason there is none."""

    text: str | None
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float | None = None
    latency: float = 0.0
    error: str | None = None
    attempts: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    retryable: bool = True
    """False when the error cannot change on another attempt (the prompt is longer than the
    model's context): no retry, and no advice to run again."""
    truncated: str | None = None
    """Set when the reply was longer than `MAX_REPLY_BYTES` and `text` keeps only its start
    (`cap_reply`); says the reply's size and the cap."""
    redacted: int = 0
    """How many secrets (a key the server echoed, a bearer token) `text` had, each now
    ``***`` (`kept_reply`): a reply is recorded only without them."""
    reused: bool = False
    """Given again without a model call: the same greedy call just before got this reply
    (`LocalModel`, a repeated prompt next to itself in call order). Wherever calls are
    counted (a trial's ``model_calls``, a row's ``cache_hit``, the tokens a sweep sent) it
    is a hit, as a reply from the response cache is, not a call that took no time."""


def is_hit(cached: bool, completion: Completion | None) -> bool:
    """Whether a call counts as a hit, not a model call: answered from the response cache
    (`cached`), or given again without a call (`Completion.reused`). The one home of the rule,
    so every count (a trial's ``model_calls``, a row's ``cache_hit``, a judge's or a DSPy
    program's rails, a generator's calls) agrees."""
    return cached or (completion is not None and completion.reused)


MAX_REPLY_BYTES = 64 * 1024
"""The most of one reply that is kept (UTF-8 bytes): LegalBench answers are a label or a few
sentences (rule_qa: 150 tokens), so a longer reply is a server ignoring ``max_tokens``; two
such replies of 30 MB made 750 MB of memory and 60 MB in each store."""


def cap_reply(text: str, limit: int = MAX_REPLY_BYTES) -> tuple[str, str | None]:
    """(`text`, None) if it fits in `limit` UTF-8 bytes, else (its start, cut at a
    character boundary, a note saying the reply's size and the cap)."""
    if len(text) * 4 <= limit:  # no character takes more than 4 bytes: fits, no encoding
        return text, None
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, None
    kept = data[:limit].decode("utf-8", errors="ignore")  # drops a cut last character
    return kept, f"reply of {len(data)} bytes truncated at {limit} bytes"


def clip(text: str, limit: int) -> str:
    """`text` as one line of at most `limit` characters: cut at the last space before the
    limit, with "…". A message says what to do first (`experiments.llm.advice`), so a cut
    keeps that and drops the provider's own text after it."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"


_REDACT_MARGIN = 4096  # characters past the cap redacted too: a key across the cut goes whole


def kept_reply(text: str) -> tuple[str, str | None, int]:
    """A reply as it is kept, scored and recorded: its secrets hidden
    (`secrets.redact_reply`), then cut to `MAX_REPLY_BYTES` (`cap_reply`); with the cut's
    note and how many secrets were hidden. Redacted before the cut, so a key the cut would
    halve is hidden whole; of a reply far past the cap only the start is searched."""
    original = text
    sliced = len(text) > MAX_REPLY_BYTES + _REDACT_MARGIN
    if sliced:
        text = text[: MAX_REPLY_BYTES + _REDACT_MARGIN]
    text, hidden = redact_reply(text)
    kept, truncated = cap_reply(text)
    if sliced:  # never the slice's end, where a key may have been halved
        kept = kept[: len(text) - _REDACT_MARGIN // 2]
    if truncated is not None or sliced:  # the note gives the reply's own size
        size = len(original.encode("utf-8"))
        truncated = f"reply of {size} bytes truncated at {MAX_REPLY_BYTES} bytes"
    return kept, truncated, hidden


class LM(Protocol):
    """What the runner needs from a model (as lm-evaluation-harness's ``LM``: generation and
    log-likelihood), and what it asks a model instead of asking which backend it is."""

    name: str
    concurrency: int
    mode: Mode
    caches_loglik_at_once: bool
    """Whether a row's log-likelihood sums may be cached as soon as they are decided (a local
    model's, computed here), or only once the trial's checks passed (a served model's: a
    server refused at row 5 may have let rows 1-4 through by chance)."""

    def complete(self, prompt: str, decoding: Decoding) -> Completion: ...

    def cache_identity(self) -> dict[str, Any]: ...

    def loglik_identity(
        self, how: LoglikNorm | None = None, continuations: Sequence[str] | None = None
    ) -> dict[str, Any]:
        """A log-likelihood trial's model identity, or with `how` and `continuations` its
        response-cache identity (part of trial ids and cache keys: byte for byte)."""
        ...

    def call_order(self, prompts: Sequence[str]) -> list[int]:
        """The order in which to make the calls for `prompts` (a permutation of their
        indices): a local model's prefix order, so its KV cache evaluates each shared prefix
        once (`experiments.llm.prefix`); the prompts' own order for any other. Results stay
        in the prompts' order whatever the calls' order."""
        ...

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """Summed log-probability of each continuation after `prompt`, not normalised.

        A failure the same prompt meets every time is `ContextTooLong`; a served call that
        failed after its retries is `experiments.llm.served.ServedCallError`: both are the
        row's state. Any other `ModelError` ends the trial."""
        ...

    def loglik_advice(self) -> str:
        """What to check when the model's log-likelihoods carry no information."""
        ...


class BackendClass(LM, Protocol):
    """A backend's class in `experiments.llm.backends._BACKENDS`: a model, and the answers
    to the questions asked by model name before one is built."""

    def __init__(self, name: str, **kwargs: Any) -> None: ...

    @classmethod
    def timed_here(cls) -> bool:
        """Whether the model runs on this machine, so its measured speed times a study."""
        ...

    @classmethod
    def price(
        cls, model: str, prompt_tokens: int, completion_tokens: int, *, batch: bool = False
    ) -> float | None:
        """Price in USD of that many tokens (None: unknown)."""
        ...

    @classmethod
    def default_scoring(cls, model: str, *, zero_shot: bool, has_label_set: bool) -> Scoring:
        """How a trial is scored when its spec does not say."""
        ...

    @classmethod
    def default_judge_scoring(cls, model: str) -> Literal["generate", "loglik"]:
        """How a judge model grades when the user does not say."""
        ...

    @classmethod
    def require_loglik(cls, model: str, api_base: str | None) -> None:
        """Raise `ModelError` (one clear line) unless `model` can be scored by
        log-likelihood."""
        ...

    @classmethod
    def preload(cls, model: str, threads: int) -> None:
        """Load the model in this process now, with `threads` threads where it runs here."""
        ...


LOCAL_LOGLIK_ADVICE = "check the local model (workbench doctor), or use --scoring generate"


class ModelError(WorkbenchError):
    pass


class ContextTooLong(ModelError):
    """A prompt (with its longest label) does not fit the local model's context: a row state
    the same prompt meets every time, so it is neither retried nor worth running again."""


# ---- log-likelihood scoring ----------------------------------------------------------------
LoglikNorm = Literal["sum", "per_byte"]
"""How label log-likelihoods are compared: summed over the continuation's tokens, or that sum
divided by the label's length in UTF-8 bytes (lm-evaluation-harness ``acc_norm``)."""


Scoring = Literal["generate", "loglik", "loglik-norm"]
