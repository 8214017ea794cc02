"""A reply's text and token counts, from a litellm object or llama-cpp-python's own dict alike."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from experiments import bounds
from experiments.llm.calls import _field
from experiments.llm.types import Completion, kept_reply


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


def token_counts(response: Any) -> tuple[int | None, int | None]:
    """(prompt tokens, completion tokens) of a reply's usage (`_int`: 0 when not given, None
    when out of range)."""
    usage = _field(response, "usage")
    return _int(_field(usage, "prompt_tokens")), _int(_field(usage, "completion_tokens"))


def answered(
    response: Any, attempts: int, start: float, cost: Callable[[Any], float | None] | None
) -> Completion:
    """The `Completion` of a reply: its text kept (`kept_reply`: secrets hidden, cut to the
    cap) and its token counts, or a malformed reply's reason as the row's error. `cost`
    prices the reply when both counts are known (None: no price, a local model)."""
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
    counts = token_counts(response)
    price: float | None = None
    if cost is not None and None not in counts:  # a count out of range: cost unknown
        price = cost(response)
    return Completion(
        text=text,
        truncated=truncated,
        redacted=redacted,
        tokens_in=counts[0] or 0,
        tokens_out=counts[1] or 0,
        cost=price,
        latency=time.perf_counter() - start,
        attempts=attempts,
    )
