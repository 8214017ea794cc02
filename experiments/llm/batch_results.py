"""An ended provider batch's output and error files, read line by line into one outcome per request.

Why: a batch is paid for as a whole, so one line the client cannot read must not cost the
others. Every line is read on its own: a line that is not JSON, not an object, names no
request of the batch or answers one a second time, or carries a failed or unreadable
reply, becomes a failed row for its request with the reason (`failed`), never an error of
the whole collection; the good lines are answers. A request with no usable line (a file cut
short, empty, or gone at the provider) fails saying so and naming the lines that could not
be read, since one of them may have been its answer. Failed rows are never cached, so a
rerun submits exactly them again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from experiments import bounds
from experiments.llm.calls import _field
from experiments.llm.replies import reply_text
from experiments.llm.types import Completion, kept_reply
from experiments.secrets import redact

PROVIDER_FAILED = "failed"
"""OpenAI's word for a failed batch or request count: the provider's vocabulary, not a
`TrialStatus` (a row a failed batch did not answer is a failed row by its error)."""
RERUN = "rerun to submit it again"
_NOT_RUN = {"batch_expired": "expired", "batch_cancelled": "cancelled"}  # error-file codes
_CUSTOM_ID = re.compile(rb'"custom_id"\s*:\s*"([^"\\]{1,200})"')
_SHAPE_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError)
"""What reading an unexpected shape can raise: a backstop, so a shape `parse_line` does not
foresee is still one failed row and not a collection that never ends."""
_NAMED = 3  # unreadable lines named on a row's error (the log line counts them all)

Cost = Callable[[int, int], float | None]
"""(tokens in, tokens out) -> USD at batch prices, None when unknown."""


def failed(reason: str) -> Completion:
    """A request the batch did not answer: the row's failure state; a rerun retries it."""
    return Completion(None, error=reason[:500], retryable=True)


def unanswered(batch_id: str, status: str, errors: Any, context: Sequence[str] = ()) -> str:
    """Why a request of an ended batch has no usable line; `context`: what of its files
    could not be read (one of those lines may have been this request's)."""
    if status == "expired":
        why = f"batch {batch_id} expired before this request ran"
    elif status == "cancelled":
        why = f"batch {batch_id} was cancelled before this request ran"
    elif status == PROVIDER_FAILED:
        why = f"batch {batch_id} failed ({redact(str(errors))[:300]})"
    else:
        why = f"batch {batch_id} {status} without a result for this request"
    if context:
        more = len(context) - _NAMED
        why += f" ({'; '.join(context[:_NAMED])}{f'; {more} more' if more > 0 else ''})"
    return f"{why}; {RERUN}"


def _count(value: Any) -> int | None:
    """A token count as the provider should send it (`bounds.TOKENS`), else None (unknown,
    never guessed)."""
    return value if bounds.TOKENS.contains(value) and isinstance(value, int) else None


def parse_line(entry: dict[str, Any], batch_id: str, cost: Cost) -> Completion:
    """One output- or error-file line as the request's answer, or its failure (any shape)."""
    response = entry.get("response")
    if response is not None and not isinstance(response, dict):
        what = type(response).__name__
        return failed(f"malformed line in batch {batch_id}: response is {what}, not an object")
    response = response or {}
    error = entry.get("error")
    status = response.get("status_code")
    body = response.get("body")
    if error or status != 200:
        detail = error or (body.get("error") if isinstance(body, dict) else None) or {}
        message = detail.get("message") if isinstance(detail, dict) else detail
        code = detail.get("code") if isinstance(detail, dict) else None
        if isinstance(code, str) and code in _NOT_RUN:
            return failed(unanswered(batch_id, _NOT_RUN[code], None))
        if not message and isinstance(body, str):
            message = body  # a proxy's text reply, e.g. "Service Unavailable"
        what = " ".join(str(x) for x in (status, code) if x)
        reason = redact(str(message))[:300] if message else "no reason given"
        return failed(f"batch request failed ({what or 'error'}): {reason}")
    text, problem = reply_text(body)
    if problem is not None or text is None:
        return failed(f"malformed reply in batch output: {problem}")
    text, truncated, redacted = kept_reply(text)
    usage = _field(body, "usage")
    counts = (_count(_field(usage, "prompt_tokens")), _count(_field(usage, "completion_tokens")))
    return Completion(
        text=text,
        truncated=truncated,
        redacted=redacted,
        tokens_in=counts[0] or 0,
        tokens_out=counts[1] or 0,
        cost=None if None in counts else cost(counts[0] or 0, counts[1] or 0),
    )


@dataclass(frozen=True)
class ResultFile:
    """One of an ended batch's files: its bytes, or None with why it could not be had."""

    kind: str  # "output" or "error"
    file_id: str
    data: bytes | None
    why: str = ""


@dataclass(frozen=True)
class _Line:
    """One non-blank line of a result file: the request it names (None: none of the
    batch's), its entry, or what is wrong with it."""

    where: str
    key: str | None
    entry: dict[str, Any] | None
    problem: str | None


def _read(raw: bytes, where: str, keys: set[str]) -> _Line:
    try:
        entry = json.loads(raw)
    except RecursionError:
        return _Line(where, _named(raw, keys), None, "is not JSON (nested too deeply)")
    except ValueError as e:  # UnicodeDecodeError included
        return _Line(where, _named(raw, keys), None, f"is not JSON ({str(e)[:120]})")
    if not isinstance(entry, dict):
        return _Line(where, None, None, f"is not a JSON object ({type(entry).__name__})")
    key = entry.get("custom_id")
    if not isinstance(key, str):
        return _Line(where, None, None, "has no custom_id")
    if key not in keys:
        named = redact(key)[:80]
        return _Line(where, None, None, f"names custom_id {named!r}, not a request of this batch")
    return _Line(where, key, entry, None)


def _named(raw: bytes, keys: set[str]) -> str | None:
    """The request a line that is not JSON names, if its ``custom_id`` is still legible
    (a line cut short keeps it: it comes first)."""
    found = _CUSTOM_ID.search(raw)
    key = found.group(1).decode("ascii", "replace") if found else None
    return key if key in keys else None


def collect(
    keys: Sequence[str],
    files: Sequence[ResultFile],
    *,
    batch_id: str,
    status: str,
    errors: Any,
    cost: Cost,
) -> tuple[dict[str, Completion], list[str]]:
    """One outcome per key of an ended batch, and the notes on what could not be read (a
    file not downloaded, each line that names no request)."""
    wanted = set(keys)
    lines: dict[str, list[_Line]] = {}
    notes: list[str] = []
    for f in files:
        name = f"the {f.kind} file {f.file_id}"
        if f.data is None:
            notes.append(f"{name} could not be downloaded ({f.why})")
            continue
        for n, raw in enumerate(f.data.splitlines(), 1):
            if raw.strip():
                line = _read(raw, f"line {n} of {name}", wanted)
                if line.key is None:
                    notes.append(f"{line.where} {line.problem}")
                else:
                    lines.setdefault(line.key, []).append(line)
    out: dict[str, Completion] = {}
    for key in keys:
        found = lines.get(key, [])
        if not found:
            out[key] = failed(unanswered(batch_id, status, errors, notes))
        elif len(found) > 1:
            where = ", ".join(line.where for line in found[:_NAMED])
            out[key] = failed(f"batch {batch_id}: {len(found)} lines answer this request "
                              f"({where}), so none is used; {RERUN}")  # fmt: skip
        elif found[0].entry is None:
            out[key] = failed(f"batch {batch_id}: {found[0].where} {found[0].problem}; {RERUN}")
        else:
            try:
                out[key] = parse_line(found[0].entry, batch_id, cost)
            except _SHAPE_ERRORS as e:
                why = f"{type(e).__name__}: {redact(str(e))[:200]}"
                out[key] = failed(f"batch {batch_id}: {found[0].where} is unreadable ({why}); "
                                  f"{RERUN}")  # fmt: skip
    return out, notes
