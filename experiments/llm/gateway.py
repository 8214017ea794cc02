"""The litellm gateway: the base of the served and API backends (`experiments.llm.remote`).

- Any litellm model string (``openai/…``, ``anthropic/…``, ``ollama/…``, ``hosted_vllm/…``,
  or any OpenAI-compatible server via ``api_base``). Keys come from the environment only,
  through litellm's own lookup; this module never reads or logs them.
- The embedded models (``local/…``) are not reached through here: they run in-process
  (`experiments.llm.local_model.LocalModel`), and litellm is imported only when a served
  or API model is used.

Retries (429, 5xx, timeouts, connection errors) use exponential backoff that honours a
server's Retry-After header (`experiments.llm.retry`). A call that still fails is returned
as a `Completion` with `error` set: a state to record, never an exception that loses the row.
An error the same prompt would meet again (a prompt longer than the model's context, a
missing or refused key) is not retried. A missing API key is found before any call
(`advice.missing_keys`); a failed call's error starts with what to do about it
(`advice.advise`: the variable to set, the URL that did not answer).
Each attempt has a deadline of its own and ends when the run is interrupted
(`experiments.llm.calls`). A reply is kept up to `MAX_REPLY_BYTES` (`cap_reply`): a server
that ignores ``max_tokens`` cannot fill the memory, the cache and the stores. A reply's
secrets (a server echoing the ``Authorization`` header, a key) are hidden as ``***`` as it
arrives (`kept_reply`), so it is scored, cached and recorded without them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal

from experiments.llm.advice import advise, key_advice, missing_keys
from experiments.llm.answer_env import settle
from experiments.llm.backends import backend_class, get_model
from experiments.llm.batch import batch_cost
from experiments.llm.calls import (
    _litellm,
    _malformed,
    _retry_after,
    _retryable,
    _status,
    _too_long,
    _without_traceback,
    call_with_deadline,
)
from experiments.llm.identity import lm_identity
from experiments.llm.replies import _int, answered, reply_text
from experiments.llm.retry import (
    BACKOFF,
    CONCURRENCY,
    MAX_BACKOFF,
    MAX_RETRIES,
    TIMEOUT,
    RetryingModel,
)
from experiments.llm.types import (
    Completion,
    ContextTooLong,
    Decoding,
    LoglikNorm,
    Mode,
    ModelError,
    Scoring,
)
from experiments.secrets import redact as redact

__all__ = [
    "BACKOFF",
    "CONCURRENCY",
    "MAX_BACKOFF",
    "MAX_RETRIES",
    "TIMEOUT",
    "LiteLLMModel",
    "_int",
    "estimate_cost",
    "get_model",
    "reply_text",
]


class LiteLLMModel(RetryingModel):
    """A model behind litellm (served or API), with retries, backoff and Retry-After.

    Built directly (``LiteLLMModel("openai/x", api_base=...)``), it is the backend the
    table picks for the name and api_base (`backends.backend_class`): a served model with an
    api_base, a hosted API's without. A local model is no litellm model: `get_model`."""

    caches_loglik_at_once = False

    def __new__(cls, *args: Any, **kwargs: Any) -> LiteLLMModel:
        # no arguments: a copy being unpickled (a Ray actor's), of its own class already
        if cls is LiteLLMModel and (args or "name" in kwargs):
            name = args[0] if args else kwargs["name"]
            chosen = backend_class(name, kwargs.get("api_base"))
            if not (isinstance(chosen, type) and issubclass(chosen, LiteLLMModel)):
                raise ModelError(
                    f"{name} runs in this process, not through litellm: build it with "
                    "experiments.llm.get_model"
                )
            cls = chosen
        return super().__new__(cls)

    def __init__(
        self,
        name: str,
        *,
        api_base: str | None = None,
        concurrency: int | None = None,
        max_retries: int = MAX_RETRIES,
        timeout: float = TIMEOUT,
        backoff: float = BACKOFF,
        max_backoff: float = MAX_BACKOFF,
        mode: Mode | None = None,
    ) -> None:
        super().__init__(
            name,
            concurrency=concurrency,
            max_retries=max_retries,
            timeout=timeout,
            backoff=backoff,
            max_backoff=max_backoff,
        )
        # litellm's import loads its .env into the environment: every setting read from here
        # on (the identity's, the calls') is the one the calls use
        settle()
        self.api_base = api_base
        self.concurrency = concurrency or CONCURRENCY
        self.mode: Mode = mode or "chat"

    # ---- what is asked by name, before a model is built ------------------------------------
    @classmethod
    def timed_here(cls) -> bool:
        return False  # the provider's rate decides its time

    @classmethod
    def price(
        cls, model: str, prompt_tokens: int, completion_tokens: int, *, batch: bool = False
    ) -> float | None:
        """litellm's price (its batch price with `batch`: None where litellm has none, never
        the direct price)."""
        if batch:
            return batch_cost(model, prompt_tokens, completion_tokens)
        return estimate_cost(model, prompt_tokens, completion_tokens)

    @classmethod
    def default_scoring(cls, model: str, *, zero_shot: bool, has_label_set: bool) -> Scoring:
        """Generation: remote APIs do not uniformly expose log-probabilities."""
        return "generate"

    @classmethod
    def default_judge_scoring(cls, model: str) -> Literal["generate", "loglik"]:
        return "generate"

    @classmethod
    def preload(cls, model: str, threads: int) -> None:
        """Nothing to load: the model runs on its server."""

    # ---- the model -------------------------------------------------------------------------
    def cache_identity(self) -> dict[str, Any]:
        """What makes an answer this model's: name, server, mode, the environment that
        decides its answers and what its server says it serves (`identity.lm_identity`)."""
        return lm_identity(self)

    def loglik_identity(
        self, how: LoglikNorm | None = None, continuations: Sequence[str] | None = None
    ) -> dict[str, Any]:
        raise NotImplementedError

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        raise NotImplementedError

    def loglik_advice(self) -> str:
        return (
            "check that the server returns its real prompt log-probabilities, or use "
            "--scoring generate"
        )

    def call_order(self, prompts: Sequence[str]) -> list[int]:
        """The prompts' own order: a server schedules its own cache."""
        return list(range(len(prompts)))

    def _call(self, prompt: str, decoding: Decoding) -> Any:
        litellm = _litellm()
        kwargs: dict[str, Any] = {
            "model": self.name,
            "temperature": decoding.temperature,
            "max_tokens": decoding.max_tokens,
            "timeout": self.timeout,
            "num_retries": 0,
            "max_retries": 0,
        }
        if decoding.stop:
            kwargs["stop"] = list(decoding.stop)
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.mode == "completion":
            return litellm.text_completion(prompt=prompt, **kwargs)
        return litellm.completion(messages=[{"role": "user", "content": prompt}], **kwargs)

    def _attempt(self, call: Any) -> Any:
        """One attempt under the whole-call deadline (`call_with_deadline`)."""
        # imported here, not in the call's thread: importing litellm takes seconds that are
        # no part of the call, and an import abandoned half-way would break the next one
        _litellm()
        return call_with_deadline(call, self.timeout)

    def _retryable(self, exc: BaseException) -> bool:
        return _retryable(exc)

    def _asked_delay(self, exc: BaseException) -> float | None:
        return _retry_after(exc)

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        _litellm()  # its first import (seconds) is no part of the call, nor of its latency
        start = time.perf_counter()
        if missing := missing_keys(self.name, self.api_base):
            # no key: nothing is sent, and a rerun fails the same way until it is set
            return Completion(
                None,
                latency=time.perf_counter() - start,
                error=key_advice(self.name, missing, self.api_base),
                attempts=0,
                retryable=False,
            )
        response, exc, attempts = self.with_retries(lambda: self._call(prompt, decoding))
        if exc is not None or response is None:
            return self.failure(exc, attempts, start)
        return answered(response, attempts, start, _cost)

    def failure(self, exc: BaseException | None, attempts: int, start: float) -> Completion:
        """The `Completion` of a call that failed after `attempts`: its reason starts with
        what to do (`advice.advise`), and says whether running again can help."""
        kind = type(exc).__name__ if exc is not None else "Error"
        status = _status(exc) if exc is not None else None
        message = _without_traceback(redact(str(exc)))[:500] if exc is not None else "unknown error"
        reason = f"{kind}{f' {status}' if status else ''} after {attempts} attempt(s): {message}"
        retryable = True
        advice = advise(exc, self.name, self.api_base, attempts) if exc is not None else None
        if isinstance(exc, ContextTooLong):  # counted before the call: says it all
            retryable = False
            reason = message
        elif advice is not None:  # a missing key, a server that does not answer: the fix first
            retryable = advice.retryable
            reason = advice.text
        elif exc is not None and _malformed(exc):
            reason = f"malformed reply: {message}"
        elif exc is not None and _too_long(exc):
            retryable = False
            reason = (
                "prompt longer than the model's context: shorten it (fewer demonstrations) or "
                f"use a model with a longer context; it fails the same way every time ({message})"
            )
        return Completion(
            None,
            latency=time.perf_counter() - start,
            error=reason,
            attempts=attempts,
            retryable=retryable,
        )


def _cost(response: Any) -> float | None:
    litellm = _litellm()

    try:
        return float(litellm.completion_cost(completion_response=response))
    except Exception:  # litellm does not know every model's price
        return None


def estimate_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Price in USD of that many tokens, where litellm knows the model; else None."""
    litellm = _litellm()
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
        if not prompt_cost and not completion_cost:
            # some providers' models litellm has no entry for cost 0.0 (Fireworks): a price
            # only where its map has the model (ollama's 0 is one), else unknown
            litellm.get_model_info(model)
        return float(prompt_cost + completion_cost)
    except Exception:
        return None
