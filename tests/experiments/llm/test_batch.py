"""The batch client (`experiments.llm.batch`) against the stub's fake files and batches
endpoints: answers, the cache, resume after a kill, expiry, cancellation, partial failure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from experiments.llm.batch import (
    BatchClient,
    BatchError,
    BatchRequest,
    batch_cost,
    batch_price,
    check_batchable,
)
from experiments.llm.batch_ledger import BatchLedger
from experiments.llm.cache import ResponseCache, cache_key
from experiments.llm.gateway import LiteLLMModel, estimate_cost
from experiments.llm.types import Decoding
from experiments.testing.stub_server import StubOpenAI, hashed_yes_no

MODEL = "openai/gpt-4o-mini"  # litellm knows its batch prices
DECODING = Decoding(max_tokens=8)


class Stop(BaseException):
    """A kill of the polling client (what Ctrl-C or SIGKILL leaves: a recorded batch)."""


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubOpenAI]:
    with StubOpenAI(reply_fn=hashed_yes_no) as s:
        # an `api` model (no api_base): litellm's own environment lookup finds the fake
        monkeypatch.setenv("OPENAI_API_BASE", s.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-the-stub")
        yield s


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[ResponseCache]:
    c = ResponseCache(tmp_path / "responses")
    yield c
    c.close()


def requests(n: int, prefix: str = "prompt") -> list[BatchRequest]:
    identity = LiteLLMModel(MODEL).cache_identity()
    prompts = [f"{prefix} {i}" for i in range(n)]
    return [BatchRequest(cache_key(identity, p, DECODING), p, DECODING) for p in prompts]


def client(cache: ResponseCache, sleep: object = None, **kwargs: object) -> BatchClient:
    return BatchClient(
        MODEL,
        BatchLedger.beside(cache.directory),
        poll=0.0,
        sleep=sleep or (lambda s: None),  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )


def test_a_batch_answers_as_the_direct_path_into_the_same_cache_at_batch_prices(
    stub: StubOpenAI, cache: ResponseCache
) -> None:
    stub.batches.polls_to_finish = 3
    reqs = requests(6)
    out = client(cache).run(reqs, cache)
    counts = stub.batches.counts
    assert (counts["file_upload"], counts["batch_create"], counts["batch_retrieve"]) == (1, 1, 3)
    assert stub.requests == []  # no direct call
    direct = LiteLLMModel(MODEL)
    for r in reqs:
        got = out[r.key]
        assert got.error is None and got.text == hashed_yes_no(r.prompt)
        assert cache.get(r.key) is not None and cache.get(r.key).text == got.text  # type: ignore[union-attr]
        # the key is the direct path's: the same call answered directly gives the same text
        assert direct.complete(r.prompt, DECODING).text == got.text
        assert got.cost == pytest.approx(batch_cost(MODEL, 10, 1))
    assert batch_cost(MODEL, 10, 1) == pytest.approx(estimate_cost(MODEL, 10, 1) / 2)  # type: ignore[operator]
    assert not list((cache.directory.parent / "batches").glob("*.json"))  # collected


def test_a_client_killed_while_polling_resumes_the_same_batch(
    stub: StubOpenAI, cache: ResponseCache
) -> None:
    stub.batches.polls_to_finish = 4
    reqs = requests(5)

    def killed(seconds: float) -> None:
        raise Stop

    with pytest.raises(Stop):
        client(cache, sleep=killed).run(reqs, cache)
    records = list((cache.directory.parent / "batches").glob("*.json"))
    assert len(records) == 1 and "batch-fake" in records[0].read_text()
    out = client(cache).run(reqs, cache)  # the rerun: same requests, nothing cached yet
    counts = stub.batches.counts
    assert (counts["file_upload"], counts["batch_create"]) == (1, 1), "paid twice"
    assert all(out[r.key].text == hashed_yes_no(r.prompt) for r in reqs)


@pytest.mark.parametrize("when", ["after the upload", "after the create"])
def test_a_kill_between_upload_and_record_neither_uploads_nor_creates_twice(
    stub: StubOpenAI, cache: ResponseCache, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    first = client(cache)
    real_save = first.ledger.save
    saves: list[int] = []

    def save(record: object) -> None:
        saves.append(1)
        if when == "after the create" and len(saves) == 2:
            raise Stop  # the batch exists, its id never reached the record
        real_save(record)  # type: ignore[arg-type]
        if when == "after the upload":
            raise Stop  # the file is recorded, the batch never created

    monkeypatch.setattr(first.ledger, "save", save)
    reqs = requests(3)
    with pytest.raises(Stop):
        first.run(reqs, cache)
    out = client(cache).run(reqs, cache)
    counts = stub.batches.counts
    assert (counts["file_upload"], counts["batch_create"]) == (1, 1)
    assert counts["batch_list"] == 1  # the rerun looked for a batch made from its file
    assert all(out[r.key].error is None for r in reqs)


def test_an_expired_batch_answers_what_ran_and_fails_the_rest_and_a_rerun_retries_them(
    stub: StubOpenAI, cache: ResponseCache
) -> None:
    stub.batches.ending, stub.batches.partial = "expired", 2
    reqs = requests(5)
    out = client(cache).run(reqs, cache)
    answered = [r for r in reqs if out[r.key].error is None]
    failed = [r for r in reqs if out[r.key].error is not None]
    assert len(answered) == 2 and len(failed) == 3
    for r in failed:
        assert out[r.key].text is None and out[r.key].retryable
        assert "expired" in str(out[r.key].error) and cache.get(r.key) is None  # never cached
    stub.batches.ending = "completed"
    again = client(cache).run([r for r in reqs if cache.get(r.key) is None], cache)
    assert sorted(again) == sorted(r.key for r in failed)
    assert all(c.error is None for c in again.values())
    assert stub.batches.counts["request"] == 2 + 3  # each request answered once


def test_a_cancelled_batch_fails_its_unanswered_rows(
    stub: StubOpenAI, cache: ResponseCache
) -> None:
    import litellm

    stub.batches.polls_to_finish, stub.batches.partial = 10, 1
    cancelled: list[str] = []

    def someone_cancels(seconds: float) -> None:  # the user, at the provider's dashboard
        if not cancelled:
            (batch_id,) = stub.batches.batches
            litellm.cancel_batch(batch_id=batch_id, custom_llm_provider="openai")
            cancelled.append(batch_id)

    reqs = requests(4)
    out = client(cache, sleep=someone_cancels).run(reqs, cache)
    errors = [c.error for c in out.values() if c.error is not None]
    assert len(errors) == 3 and all("was cancelled" in e for e in errors)
    assert stub.batches.counts["batch_cancel"] == 1


def test_requests_that_fail_in_a_batch_are_row_failures_with_the_providers_reason(
    stub: StubOpenAI, cache: ResponseCache
) -> None:
    stub.fail_fn = lambda prompt: prompt.endswith(("1", "3"))
    reqs = requests(5)
    out = client(cache).run(reqs, cache)
    bad = {r.prompt for r in reqs if out[r.key].error is not None}
    assert bad == {"prompt 1", "prompt 3"}
    assert all("500" in str(out[r.key].error) for r in reqs if r.prompt in bad)


def test_a_failed_batch_fails_every_row(stub: StubOpenAI, cache: ResponseCache) -> None:
    stub.batches.ending = "failed"
    out = client(cache).run(requests(3), cache)
    assert all(c.error is not None and "failed" in c.error for c in out.values())


def test_polling_that_keeps_failing_stops_with_the_batch_still_recorded(
    stub: StubOpenAI, cache: ResponseCache
) -> None:
    stub.batches.polls_to_finish = 10**6
    c = client(cache)
    real = c._call

    def flaky(name: str, **kwargs: object) -> object:
        if name == "retrieve_batch":
            raise ConnectionError("provider unreachable")
        return real(name, **kwargs)

    c._call = flaky  # type: ignore[method-assign]
    with pytest.raises(BatchError, match="rerun to resume polling"):
        c.run(requests(2), cache)
    assert len(list((cache.directory.parent / "batches").glob("*.json"))) == 1


@pytest.mark.parametrize(
    ("model", "api_base", "message"),
    [
        ("local/smollm2", None, "runs in this process and has no batch API"),
        ("openai/stub", "http://127.0.0.1:9/v1", "served at --api-base"),
        ("anthropic/claude-3-5-haiku-latest", None, "no OpenAI-style batch path for anthropic"),
    ],
)
def test_models_without_a_batch_api_are_refused_naming_those_with_one(
    model: str, api_base: str | None, message: str
) -> None:
    with pytest.raises(BatchError, match=message) as e:
        check_batchable(model, api_base)
    assert "openai/<model>" in str(e.value)


def test_batch_prices_come_from_litellm_or_are_unknown() -> None:
    assert batch_price(MODEL) == pytest.approx((7.5e-08, 3e-07))
    assert batch_price("openai/no-such-model-xyz") is None
    assert batch_cost("openai/no-such-model-xyz", 100, 10) is None  # never the direct price
