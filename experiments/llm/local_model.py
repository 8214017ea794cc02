"""The local backend: a bundled GGUF run in this process by llama-cpp-python, no litellm.

`LocalModel.complete` calls llama-cpp-python as litellm's custom provider ``local`` did
(`register_litellm_provider`, still there for callers that go through litellm):
``create_completion(prompt, max_tokens=, temperature=, stop=)`` in completion mode,
``create_chat_completion(messages=[{"role": "user", "content": prompt}], ...)`` in chat mode,
so a prompt gives the same text and token counts. A call runs in this thread (llama.cpp is
not to be abandoned mid-decode), one example after another (the KV cache reuses the prefix a
prompt shares with the one before: `call_order`).
"""

from __future__ import annotations

import copy
import dataclasses
import time
import weakref
from array import array
from collections.abc import Sequence
from typing import Any, Literal

from experiments.llm import loglik
from experiments.llm.backends import LOCAL_PROVIDER, local_name
from experiments.llm.calls import _CONTEXT_WORDS, _litellm, _without_traceback
from experiments.llm.env_file import load_env_file
from experiments.llm.identity import local_identity, plain_loglik_identity
from experiments.llm.llama import _LOCK, check_local_fits, load_local, prompt_tokens
from experiments.llm.prefix import forget, prefix_order, ready
from experiments.llm.replies import answered
from experiments.llm.retry import BACKOFF, MAX_BACKOFF, MAX_RETRIES, TIMEOUT, RetryingModel
from experiments.llm.types import (
    LOCAL_LOGLIK_ADVICE,
    Completion,
    ContextTooLong,
    Decoding,
    LoglikNorm,
    Mode,
    Scoring,
)
from experiments.llm.weights import local_model_path
from experiments.secrets import redact


class _Repeat(dict[str, Any]):
    """llama-cpp-python's reply given again by `LocalModel._call` without a model call: the
    greedy call just before was the same. `complete` marks its `Completion` ``reused``, so
    the runner counts the row as a hit, not as a model call that took no time."""


class LocalModel(RetryingModel):
    """A bundled model (``local/<name>``) run in-process by llama.cpp."""

    caches_loglik_at_once = True  # its sums are computed here: nothing to check first

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
        # the project .env litellm's import loaded, loaded here without it: every setting
        # read from here on (the identity's n_ctx, the load's) is the one it always was
        load_env_file()
        super().__init__(
            name,
            concurrency=concurrency,
            max_retries=max_retries,
            timeout=timeout,
            backoff=backoff,
            max_backoff=max_backoff,
        )
        self.api_base = api_base  # unused, but in its identity as it always was
        local_model_path(local_name(name))  # fail early, with the install hint
        # one example after another, so llama.cpp reuses the shared prefix
        self.concurrency = 1
        self.mode: Mode = mode or "completion"
        # the tokens `call_order` computed, kept for the calls it ordered: a prompt is
        # tokenized once (4-byte arrays: a long trial's prompts take MBs, not 100s of MB)
        self._tokens: dict[str, array[int]] = {}
        # the last greedy call and its reply: a repeated prompt (next to itself in
        # `call_order`) is answered from it, not evaluated again (`_call`)
        self._last: tuple[tuple[Any, ...], Any] | None = None

    # ---- what is asked by name, before a model is built ------------------------------------
    @classmethod
    def timed_here(cls) -> bool:
        return True

    @classmethod
    def price(
        cls, model: str, prompt_tokens: int, completion_tokens: int, *, batch: bool = False
    ) -> float | None:
        """Nothing: it runs on this machine."""
        return 0.0

    @classmethod
    def default_scoring(cls, model: str, *, zero_shot: bool, has_label_set: bool) -> Scoring:
        """Log-likelihood on a zero-shot prompt of a task with a label set: tiny local
        models answer those with an empty line or prose, so generation would measure their
        formatting, not their choice (issue 10, point 3)."""
        return "loglik" if zero_shot and has_label_set else "generate"

    @classmethod
    def default_judge_scoring(cls, model: str) -> Literal["generate", "loglik"]:
        """Log-likelihood: tiny models ramble rather than write one digit."""
        return "loglik"

    @classmethod
    def require_loglik(cls, model: str, api_base: str | None) -> None:
        local_model_path(local_name(model))  # unknown or missing local model: install hint

    @classmethod
    def preload(cls, model: str, threads: int) -> None:
        """Load the model now with `threads` threads (a Ray actor's share of the CPUs, not
        every core of the node, which llama.cpp would oversubscribe)."""
        load_env_file()  # its context size and layout as the driver's (`__init__`)
        load_local(local_name(model), n_threads=threads)

    # ---- the model -------------------------------------------------------------------------
    def cache_identity(self) -> dict[str, Any]:
        """Name, server and mode, and its weights, context size and load layout, which its
        name alone does not pin down (`identity.local_identity`)."""
        identity: dict[str, Any] = {"model": self.name, "api_base": self.api_base}
        identity["mode"] = self.mode
        identity.update(local_identity(self.name))
        return identity

    def loglik_identity(
        self, how: LoglikNorm | None = None, continuations: Sequence[str] | None = None
    ) -> dict[str, Any]:
        return plain_loglik_identity(self.name, how, continuations)

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """From llama.cpp in this process (`loglik.label_logprobs`). The tokens `call_order`
        kept for `prompt` are dropped: scoring tokenizes the prompt its own way (special
        tokens as text), so nothing would take them, and a log-likelihood trial's arrays
        stayed held until the next `call_order`."""
        self._tokens.pop(prompt, None)
        return loglik.label_logprobs(self.name, prompt, continuations)

    def loglik_advice(self) -> str:
        return LOCAL_LOGLIK_ADVICE

    def call_order(self, prompts: Sequence[str]) -> list[int]:
        """Prompts sharing a prefix one after another (`prefix.prefix_order` over their
        tokens, as llama-cpp-python tokenizes a text completion). The tokens are kept for
        the calls that follow (`_tokens_of`): each prompt is tokenized once."""
        llm = load_local(local_name(self.name))
        with _LOCK:
            tokens = [prompt_tokens(llm, p) for p in prompts]
        self._tokens = {p: array("i", t) for p, t in zip(prompts, tokens, strict=True)}
        return prefix_order(tokens)

    def _tokens_of(self, llm: Any, prompt: str) -> list[int]:
        """`prompt`'s tokens: those `call_order` computed (taken once), or tokenized now.
        Either way the same list (a prompt's tokens depend on its text alone), so what is
        kept only saves work, whichever thread or trial ordered it."""
        kept = self._tokens.pop(prompt, None)
        if kept is not None:
            return kept.tolist()
        with _LOCK:
            return prompt_tokens(llm, prompt)

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        start = time.perf_counter()
        response, exc, attempts = self.with_retries(lambda: self._call(prompt, decoding))
        if exc is not None or response is None:
            return self.failure(exc, attempts, start)
        done = answered(response, attempts, start, None)  # no price: it runs here
        if isinstance(response, _Repeat):  # no model call: counted as a hit, not a call
            done = dataclasses.replace(done, reused=True)
        return done

    def _call(self, prompt: str, decoding: Decoding) -> Any:
        llm = load_local(local_name(self.name))
        tokens = self._tokens_of(llm, prompt)
        check_local_fits(self.name, prompt, len(tokens))
        gen: dict[str, Any] = {
            "max_tokens": decoding.max_tokens,
            "temperature": decoding.temperature,
            "stop": list(decoding.stop) or None,
        }
        # A greedy reply depends on the prompt and the decoding alone (never on the call
        # before: `prefix.ready`), so the same prompt asked again with the same decoding, as
        # LegalBench's repeated texts are (32 of cuad_audit_rights' first 300 rows), gets the
        # reply computed for it, not a second evaluation: the same text and token counts,
        # marked (`_Repeat`, then `Completion.reused`) so no count calls it a model call.
        greedy = decoding.temperature == 0
        # its text gives its tokens; and the model object itself (a weak reference: equal
        # while it lives, compared by identity), so a model loaded anew under the same name
        # (another GGUF or n_ctx) is evaluated, and the old one is not kept alive here
        key = (weakref.ref(llm), self.mode, prompt, *gen.values())
        with _LOCK:
            if greedy and self._last is not None and self._last[0] == key:
                return _Repeat(copy.deepcopy(self._last[1]))
            response = self._evaluate(llm, prompt, tokens, gen)
            self._last = (key, copy.deepcopy(response)) if greedy else None
            return response

    def _evaluate(self, llm: Any, prompt: str, tokens: list[int], gen: dict[str, Any]) -> Any:
        """llama-cpp-python's reply to `prompt` (its `tokens`). Call under `_LOCK`."""
        if self.mode == "completion":
            # the cached prefix kept only where the rest is one evaluation of at least
            # `prefix.MIN_BATCH` tokens: the text does not depend on the previous prompt
            ready(llm, tokens)
            # its tokens, not its text: llama-cpp-python would tokenize it again, to
            # the same tokens (BOS added as the model asks; `prompt_tokens`)
            return llm.create_completion(tokens if prompt else prompt, **gen)
        # a chat prompt is evaluated whole: its template's tokens are added inside
        # llama-cpp-python, which would evaluate the rest after a shared prefix in
        # batches this process does not choose (a few tokens: other logits)
        llm.n_tokens = 0
        forget(llm)
        return llm.create_chat_completion(messages=[{"role": "user", "content": prompt}], **gen)

    def _attempt(self, call: Any) -> Any:
        """One attempt, in this thread. A chat prompt that only overflows with its template's
        tokens (not counted by `check_local_fits`) fails inside llama-cpp-python: the same
        every time, so it is `ContextTooLong` (not retried, not worth running again)."""
        try:
            return call()
        except Exception as e:
            if not isinstance(e, ContextTooLong) and _CONTEXT_WORDS.search(str(e)):
                raise ContextTooLong(
                    "prompt longer than the model's context (with its chat template's "
                    "tokens): shorten it (fewer demonstrations) or raise "
                    "WORKBENCH_LOCAL_N_CTX; it fails the same way every time "
                    f"({_without_traceback(str(e))[:300]})"
                ) from e
            raise

    def _retryable(self, exc: BaseException) -> bool:
        """Any failure but a prompt too long (as when litellm wrapped llama-cpp-python's
        errors as a transient connection error)."""
        return not isinstance(exc, ContextTooLong)

    def failure(self, exc: BaseException | None, attempts: int, start: float) -> Completion:
        """The `Completion` of a call that failed after `attempts`."""
        message = _without_traceback(redact(str(exc)))[:500] if exc is not None else "unknown error"
        too_long = isinstance(exc, ContextTooLong)  # counted before the call: says it all
        kind = type(exc).__name__ if exc is not None else "Error"
        return Completion(
            None,
            latency=time.perf_counter() - start,
            error=message if too_long else f"{kind} after {attempts} attempt(s): {message}",
            attempts=attempts,
            retryable=not too_long,
        )


def register_litellm_provider() -> None:
    """Register the local models with litellm as its custom provider ``local``, for a caller
    that reaches them through litellm; the workbench itself calls `LocalModel`."""
    litellm = _litellm()
    from litellm.llms.custom_llm import CustomLLM
    from litellm.types.utils import Usage

    if any(p.get("provider") == LOCAL_PROVIDER for p in litellm.custom_provider_map):
        return

    class LocalLlama(CustomLLM):
        """llama.cpp in-process; raw prompt for text completion, chat template otherwise."""

        def completion(self, *args: Any, **kwargs: Any) -> Any:
            model: str = kwargs["model"]
            messages: list[dict[str, str]] = kwargs["messages"]
            params: dict[str, Any] = kwargs.get("optional_params") or {}
            response = kwargs["model_response"]
            # Raw text for litellm.text_completion, or when a caller (the DSPy adapter) asks
            # for it with raw_prompt=True; the model's chat template otherwise.
            text_completion = bool(
                (kwargs.get("litellm_params") or {}).get("text_completion")
                or params.get("raw_prompt")
            )
            llm = load_local(model)
            gen = {
                "max_tokens": params.get("max_tokens", 32),
                "temperature": params.get("temperature", 0.0),
                "stop": params.get("stop") or None,
            }
            llm.n_tokens = 0  # evaluated whole, its KV cache not for reuse (`prefix.forget`)
            forget(llm)
            if text_completion:
                prompt = "".join(m["content"] for m in messages)
                out = llm.create_completion(prompt, **gen)
                text = out["choices"][0]["text"]
                usage = out["usage"]
            else:
                out = llm.create_chat_completion(messages=messages, **gen)
                text = out["choices"][0]["message"]["content"]
                usage = out["usage"]
            response.choices[0].message.content = text
            response.model = f"{LOCAL_PROVIDER}/{model}"
            response.usage = Usage(
                prompt_tokens=usage["prompt_tokens"],
                completion_tokens=usage["completion_tokens"],
                total_tokens=usage["total_tokens"],
            )
            return response

    litellm.custom_provider_map = [
        *litellm.custom_provider_map,
        {"provider": LOCAL_PROVIDER, "custom_handler": LocalLlama()},
    ]


_register_local_provider = register_litellm_provider
