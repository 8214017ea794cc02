"""Retries with backoff, shared by every backend: the attempts, the waits, the settings' ranges.

A backend says what one attempt is (`RetryingModel._attempt`), which errors are worth another
(`_retryable`) and how long a server asked to wait (`_asked_delay`); the loop, the exponential
backoff and the interruptible sleeps are here, with no provider library imported.
"""

from __future__ import annotations

from typing import Any

from experiments import bounds
from experiments.llm.backends import DEFAULT_MODEL
from experiments.llm.calls import CallInterrupted, _finite, _sleep, _stop_event

# The call defaults live in `experiments.llm.defaults` (the CLI's --help reads them there)
from experiments.llm.defaults import CONCURRENCY as CONCURRENCY
from experiments.llm.defaults import MAX_RETRIES as MAX_RETRIES
from experiments.llm.defaults import TIMEOUT as TIMEOUT
from experiments.llm.types import ModelError

BACKOFF = 0.5
MAX_BACKOFF = 30.0
"""The first and the longest wait between attempts (seconds), unless Retry-After says more."""


class RetryingModel:
    """A model whose calls are retried with exponential backoff (and a server's Retry-After)."""

    name: str

    def __init__(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        max_retries: int = MAX_RETRIES,
        timeout: float = TIMEOUT,
        backoff: float = BACKOFF,
        max_backoff: float = MAX_BACKOFF,
    ) -> None:
        if "/" not in name:
            raise ModelError(
                f"model {name!r} has no provider prefix; use e.g. openai/gpt-4o-mini, "
                f"anthropic/claude-3-5-haiku-latest, ollama/llama3, or {DEFAULT_MODEL}"
            )
        # the ranges of --timeout, --retries and --concurrency (`experiments.bounds`): a
        # timeout of 1e308 s overflowed the socket's, and every call failed as a retried 500
        bounds.TIMEOUT.check(timeout, "timeout", ModelError)
        bounds.RETRIES.check(max_retries, "max_retries", ModelError)
        if concurrency is not None:
            bounds.CONCURRENCY.check(concurrency, "concurrency", ModelError)
        for label, value in (("backoff", backoff), ("max_backoff", max_backoff)):
            if not (_finite(value) and value >= 0):
                raise ModelError(f"{label} must be a finite number of seconds >= 0, not {value!r}")
        self.name = name
        self.max_retries = max_retries
        self.timeout = timeout
        self.backoff = backoff
        self.max_backoff = max_backoff

    def _attempt(self, call: Any) -> Any:
        """One attempt of `call`."""
        raise NotImplementedError

    def _retryable(self, exc: BaseException) -> bool:
        """Whether another attempt can end otherwise than `exc`."""
        raise NotImplementedError

    def _asked_delay(self, exc: BaseException) -> float | None:
        """Seconds the server asked to wait before the next attempt (None: it did not say)."""
        return None

    def delay(self, exc: BaseException, attempt: int) -> float:
        """Seconds before the next attempt: the server's Retry-After if valid, else
        exponential backoff; both capped at `max_backoff`."""
        asked = self._asked_delay(exc)
        if asked is not None:
            return max(0.0, min(asked, self.max_backoff))
        exponent = min(attempt - 1, 64)  # 2**64 * backoff is finite
        return float(max(0.0, min(self.backoff * 2.0**exponent, self.max_backoff)))

    def with_retries(self, call: Any) -> tuple[Any, BaseException | None, int]:
        """(reply, None, attempts), or (None, the last error, attempts) after the retries.

        `CallInterrupted` (the run is stopping) passes through: it is no row's state.
        """
        stop = _stop_event()
        attempts = 0
        while True:
            attempts += 1
            try:
                return self._attempt(call), None, attempts
            except CallInterrupted:
                raise
            except Exception as e:  # a provider error is a row state, not a crash
                if attempts > self.max_retries or not self._retryable(e):
                    return None, e, attempts
                _sleep(self.delay(e, attempts), stop)
