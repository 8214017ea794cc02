"""A partial provider result keeps what is good, and a bad line becomes a failed row (issue 30,
defect 5): an ended batch's output and error files damaged line by line and as a whole, against
the stub's fake batches (`experiments.testing.batch_fake`, its `rewrite` hook).

Before: one line the client could not read (a ``response`` that is a string, a ``custom_id``
that is a list, a non-numeric token count, ...) raised while collecting, the collection counted
as a failed poll, and after 10 of them the batch stayed recorded: every rerun failed the same
way and the batch's paid answers were never used."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from experiments.llm.batch import BatchClient, BatchRequest
from experiments.llm.batch_ledger import BatchLedger
from experiments.llm.cache import ResponseCache, cache_key
from experiments.llm.gateway import LiteLLMModel
from experiments.llm.types import Completion, Decoding
from experiments.testing.stub_server import StubOpenAI, hashed_yes_no

MODEL = "openai/gpt-4o-mini"
DECODING = Decoding(max_tokens=8)
N = 6
BAD = 2  # the output line (and request) the damage hits


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubOpenAI]:
    with StubOpenAI(reply_fn=hashed_yes_no) as s:
        monkeypatch.setenv("OPENAI_API_BASE", s.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-the-stub")
        yield s


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[ResponseCache]:
    c = ResponseCache(tmp_path / "responses")
    yield c
    c.close()


def requests(n: int = N, prefix: str = "prompt") -> list[BatchRequest]:
    identity = LiteLLMModel(MODEL).cache_identity()
    prompts = [f"{prefix} {i}" for i in range(n)]
    return [BatchRequest(cache_key(identity, p, DECODING), p, DECODING) for p in prompts]


def client(cache: ResponseCache) -> BatchClient:
    return BatchClient(MODEL, BatchLedger.beside(cache.directory), poll=0.0, sleep=lambda s: None)


def records(cache: ResponseCache) -> list[Path]:
    return list((cache.directory.parent / "batches").glob("*.json"))


Entry = dict[str, Any]


def on_line(change: Callable[[Entry], bytes | list[bytes]], kind: str = "output") -> Any:
    """A `rewrite` that replaces line `BAD` of the `kind` file with `change(its entry)`."""

    def rewrite(which: str, data: bytes) -> bytes | None:
        if which != kind:
            return data
        lines = data.splitlines()
        new = change(json.loads(lines[BAD]))
        lines[BAD : BAD + 1] = new if isinstance(new, list) else [new]
        return b"\n".join(lines) + b"\n"

    return rewrite


def dumps(entry: Entry) -> bytes:
    return json.dumps(entry).encode()


def with_(entry: Entry, **changes: Any) -> bytes:
    return dumps({**entry, **changes})


def with_response(entry: Entry, **changes: Any) -> bytes:
    return dumps({**entry, "response": {**entry["response"], **changes}})


def twice(entry: Entry) -> list[bytes]:
    other = json.loads(json.dumps(entry))
    other["response"]["body"]["choices"][0]["message"]["content"] = "Maybe"
    return [dumps(entry), dumps(other)]


DAMAGES: dict[str, tuple[Callable[[Entry], bytes | list[bytes]], str]] = {
    # (what line BAD becomes, what the failed row's reason says)
    "cut mid-line": (lambda e: dumps(e)[: len(dumps(e)) // 2], "is not JSON"),
    "not JSON at all": (lambda e: b"<html>502 Bad Gateway</html>", "is not JSON"),
    "not UTF-8": (lambda e: dumps(e).replace(b'"id"', b'"\xff\xfe"'), "is not JSON"),
    "nested too deep": (lambda e: b"[" * 100_000, "is not JSON"),
    "not an object": (lambda e: dumps([e]), "is not a JSON object"),
    "no custom_id": (lambda e: with_(e, custom_id=None), "has no custom_id"),
    "custom_id a list": (lambda e: with_(e, custom_id=[e["custom_id"]]), "has no custom_id"),
    "unknown custom_id": (lambda e: with_(e, custom_id="nope"), "not a request of this batch"),
    "custom_id twice": (twice, "2 lines"),
    "response a string": (lambda e: with_(e, response="oops"), "response is str"),
    "response a list": (lambda e: with_(e, response=[1]), "response is list"),
    "status 503, body text": (
        lambda e: with_response(e, status_code=503, body="Service Unavailable"),
        "batch request failed (503)",
    ),
    "status missing": (lambda e: with_(e, response={"body": {}}), "batch request failed"),
    "error code a list": (
        lambda e: with_(e, error={"code": ["x"], "message": "boom"}),
        "batch request failed",
    ),
    "body not a reply": (lambda e: with_response(e, body="oops"), "malformed reply"),
    "choices not a list": (lambda e: with_response(e, body={"choices": 3}), "malformed reply"),
}


def test_the_fake_serves_the_lines_as_written(stub: StubOpenAI, cache: ResponseCache) -> None:
    # the damage below hits request BAD: the output file holds the requests in order
    seen: list[Entry] = []

    def look(kind: str, data: bytes) -> bytes:
        seen.extend(map(json.loads, data.splitlines()))
        return data

    stub.batches.rewrite = look
    reqs = requests()
    client(cache).run(reqs, cache)
    assert [e["custom_id"] for e in seen] == [r.key for r in reqs]


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_one_bad_line_fails_only_its_request_and_a_rerun_submits_only_it(
    stub: StubOpenAI, cache: ResponseCache, damage: str
) -> None:
    change, reason = DAMAGES[damage]
    stub.batches.rewrite = on_line(change)
    reqs = requests()
    out = client(cache).run(reqs, cache)  # before: BatchError after 10 failed polls
    assert stub.batches.counts["batch_retrieve"] == 1  # collected on the poll that saw it end
    assert not records(cache)  # collected: the rerun does not poll it again
    bad = reqs[BAD]
    got = out[bad.key]
    assert got.text is None and got.retryable and cache.get(bad.key) is None
    assert reason in str(got.error), got.error
    for r in reqs:
        if r is not bad:
            assert out[r.key].error is None and out[r.key].text == hashed_yes_no(r.prompt)
            assert cache.get(r.key) is not None  # the paid answers are kept

    stub.batches.rewrite = None
    again = client(cache).run([r for r in reqs if cache.get(r.key) is None], cache)
    assert list(again) == [bad.key]
    assert list(stub.batches.batches.values())[-1].counts["total"] == 1  # only the bad row
    assert again[bad.key].text == hashed_yes_no(bad.prompt)


def test_a_bad_line_in_the_error_file_fails_its_request_with_the_reason(
    stub: StubOpenAI, cache: ResponseCache
) -> None:
    stub.fail_fn = lambda prompt: prompt == "prompt 4"  # its line is in the error file
    stub.batches.rewrite = lambda kind, data: b'{"custom_id": 7}\n' if kind == "error" else data
    reqs = requests()
    out = client(cache).run(reqs, cache)
    failed = [r.prompt for r in reqs if out[r.key].error is not None]
    assert failed == ["prompt 4"]
    assert "has no custom_id" in str(out[reqs[4].key].error)
    assert "error file" in str(out[reqs[4].key].error)


@pytest.mark.parametrize(
    ("rewrite", "reason"),
    [
        (lambda data: b"", "without a result"),
        (lambda data: b"\n\n", "without a result"),
        (lambda data: data[: len(data) // 3], "without a result"),  # truncated file
        (lambda data: None, "could not be downloaded"),  # the batch names it, it is gone
    ],
    ids=["empty", "blank lines", "truncated", "gone"],
)
def test_a_damaged_or_missing_output_file_keeps_what_it_holds_and_fails_the_rest(
    stub: StubOpenAI,
    cache: ResponseCache,
    rewrite: Callable[[bytes], bytes | None],
    reason: str,
) -> None:
    kept: list[bytes | None] = []

    def damage(kind: str, data: bytes) -> bytes | None:
        kept.append(rewrite(data))
        return kept[-1]

    stub.batches.rewrite = damage
    reqs = requests()
    out = client(cache).run(reqs, cache)
    assert stub.batches.counts["batch_retrieve"] == 1 and not records(cache)
    whole = 0
    for line in (kept[0] or b"").splitlines():
        try:
            whole += bool(json.loads(line))
        except ValueError:
            break
    answered = [r for r in reqs if out[r.key].error is None]
    assert answered == reqs[:whole] and all(cache.get(r.key) is not None for r in answered)
    for r in reqs[whole:]:
        error = str(out[r.key].error)
        cut = r.key.encode() in (kept[0] or b"")  # the line cut in the middle of it
        assert (reason in error, "is not JSON" in error) == (not cut, cut), error
        assert out[r.key].retryable


def test_rows_with_no_line_in_either_file_fail_naming_the_unreadable_lines(
    stub: StubOpenAI, cache: ResponseCache
) -> None:
    stub.batches.rewrite = on_line(lambda e: b"")  # request BAD: no line anywhere
    reqs = requests()
    out = client(cache).run(reqs, cache)
    assert "completed without a result for this request" in str(out[reqs[BAD].key].error)
    assert sum(c.error is None for c in out.values()) == N - 1

    # a line that names no request is named on the rows without a line: it may be theirs
    stub.batches.rewrite = on_line(lambda e: b"{not json")
    reqs = requests(prefix="other")
    out = client(cache).run(reqs, cache)
    (bad,) = [c for c in out.values() if c.error is not None]
    assert bad is out[reqs[BAD].key]
    assert "line 3 of the output file" in str(bad.error) and "is not JSON" in str(bad.error)


def test_a_file_download_that_fails_once_is_retried_not_failed(
    stub: StubOpenAI, cache: ResponseCache
) -> None:
    c = client(cache)
    real = c._call
    failures: list[str] = []

    def flaky(name: str, **kwargs: object) -> object:
        if name == "file_content" and not failures:
            failures.append(name)
            raise ConnectionError("provider unreachable")
        return real(name, **kwargs)

    c._call = flaky  # type: ignore[method-assign]
    reqs = requests()
    out = c.run(reqs, cache)
    assert failures and all(x.error is None for x in out.values())  # a poll error, retried


def test_a_token_count_that_is_not_a_number_keeps_the_answer_at_an_unknown_cost(
    stub: StubOpenAI, cache: ResponseCache
) -> None:
    def odd_usage(e: Entry) -> bytes:
        body = {**e["response"]["body"], "usage": {"prompt_tokens": "ten", "completion_tokens": 1}}
        return with_response(e, body=body)

    stub.batches.rewrite = on_line(odd_usage)
    reqs = requests()
    out = client(cache).run(reqs, cache)
    got: Completion = out[reqs[BAD].key]
    assert got.error is None and got.text == hashed_yes_no(reqs[BAD].prompt)
    assert got.cost is None  # never a price computed from a made-up count
    assert out[reqs[0].key].cost is not None


def test_a_line_of_a_shape_nobody_foresaw_is_still_one_failed_row(
    stub: StubOpenAI, cache: ResponseCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    import experiments.llm.batch_results as results

    real = results.reply_text
    bad_prompt = "prompt 3"

    def surprised(body: Any) -> tuple[str | None, str | None]:
        text, problem = real(body)
        if text == bad_prompt:
            raise TypeError("a shape nobody foresaw")
        return text, problem

    stub.reply_fn = lambda prompt: prompt  # each reply names its prompt
    monkeypatch.setattr(results, "reply_text", surprised)
    reqs = requests()
    out = client(cache).run(reqs, cache)
    assert not records(cache)
    bad = [r.prompt for r in reqs if out[r.key].error is not None]
    assert bad == [bad_prompt]
    assert "is unreadable (TypeError: a shape nobody foresaw)" in str(out[reqs[3].key].error)


def test_a_completed_batch_that_names_no_output_file_fails_every_row_once(
    stub: StubOpenAI, cache: ResponseCache
) -> None:
    c = client(cache)
    real = c._call

    def no_output(name: str, **kwargs: object) -> object:
        got = real(name, **kwargs)
        if name == "retrieve_batch":
            got.output_file_id = None  # type: ignore[attr-defined]
        return got

    c._call = no_output  # type: ignore[method-assign]
    reqs = requests()
    out = c.run(reqs, cache)
    assert stub.batches.counts["batch_retrieve"] == 1 and not records(cache)
    for r in reqs:
        assert "completed without a result for this request" in str(out[r.key].error)
        assert cache.get(r.key) is None
    assert len(client(cache).run(reqs, cache)) == N  # the rerun submits them all again
    assert stub.batches.counts["batch_create"] == 2


@pytest.mark.parametrize("tokens", [-5, 10**30])
def test_a_token_count_out_of_range_is_unknown_never_a_cost(
    stub: StubOpenAI, monkeypatch: pytest.MonkeyPatch, tokens: int
) -> None:
    """A server or batch line that says a reply took -5 or 10^30 prompt tokens keeps its
    answer at an unknown cost (0 tokens counted): before, a run was complete with
    tokens_in = -15 and a cost of -4.5e-07 USD, or 3e30 tokens and 4.5e23 USD, unflagged."""
    from experiments.llm.batch_results import parse_line

    usage = {"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": 11}
    payload = stub.reply_payload

    def reply(path: str, body: dict[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {**payload(path, body, *args, **kwargs), "usage": usage}

    monkeypatch.setattr(stub, "reply_payload", reply)
    lm = LiteLLMModel(MODEL, api_base=stub.url, max_retries=0)
    direct = lm.complete("Q: x\nA:", DECODING)
    body = reply("/v1/chat/completions", {"model": "gpt-4o-mini", "messages": []})
    line = {"custom_id": "r0", "response": {"status_code": 200, "body": body}}
    batched = parse_line(line, "batch_1", lambda i, o: 1e-6 * i + 1e-6 * o)
    for c in (direct, batched):
        assert c.error is None and c.text  # the answer is kept
        assert c.cost is None and c.tokens_in == 0
