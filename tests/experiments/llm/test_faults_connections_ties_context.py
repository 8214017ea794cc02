"""The model gateway's faults (issue 19): abandoned attempts kept their
connections, tied or all -inf log-likelihoods, and prompts longer than the context told only
by the server's wording.

Each runs the real path where there is one: the stub server on loopback, or the bundled
SmolLM2.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from experiments.llm import calls, llama, loglik
from experiments.llm.gateway import get_model
from experiments.llm.types import Decoding
from experiments.testing.stub_server import StubOpenAI
from experiments.trials import run
from experiments.trials.run import TrialResult, run_trial
from experiments.trials.spec import TrialSpec, prompt_hash
from promptlib import Catalog, parse_spec


@pytest.fixture(autouse=True)
def _dummy_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The OpenAI client refuses to send a request without some key."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")


def _established_to(port: int) -> int:
    """Client-side TCP connections of this machine to `port` that are ESTABLISHED (what a
    client holds open, whatever the server has noticed yet)."""
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        with open(table, encoding="ascii") as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                remote, state = fields[2], fields[3]
                if state == "01" and int(remote.rsplit(":", 1)[1], 16) == port:
                    n += 1
    return n


# ---- 1. an abandoned attempt closes its connection ------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux's /proc/net/tcp")
def test_abandoned_attempts_close_their_connections() -> None:
    """Every attempt drips past its deadline and is retried once, at --concurrency 2. The
    old code left each abandoned attempt's connection (and thread) open: 16 connections for
    8 rows; now at most the 2 running attempts hold one (+1 for the moment a worker's next
    row connects while the server sees the last close)."""
    calls._litellm()  # its import (seconds) is no part of the calls
    threads_before = threading.active_count()
    with StubOpenAI(fault_rate=1.0, faults=("drip",), drip_interval=0.05) as stub:
        port = int(stub.url.split(":")[2].split("/")[0])
        lm = get_model(
            "openai/stub",
            api_base=stub.url,
            timeout=0.6,
            max_retries=1,
            backoff=0.01,
            concurrency=2,
            mode="completion",
        )
        peak = [0]
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _established_to(port))
                time.sleep(0.01)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            prompts = [f"Q{i}: x\nA:" for i in range(8)]
            comps, _ = run._generate(lm, prompts, Decoding(), None, None)
        finally:
            done.set()
            watcher.join()
        assert all(c.error and "timed out after 0.6 s" in c.error for c in comps)
        assert all(c.attempts == 2 for c in comps)
        settle = time.monotonic() + 3
        while stub.open_connections and time.monotonic() < settle:
            time.sleep(0.05)
        assert stub.open_connections == 0, "an abandoned attempt still holds its connection"
        assert stub.max_open_connections <= 3, stub.max_open_connections
        assert peak[0] <= 3, peak[0]
    settle = time.monotonic() + 3
    while threading.active_count() > threads_before + 1 and time.monotonic() < settle:
        time.sleep(0.05)
    assert threading.active_count() <= threads_before + 1, "abandoned call threads live on"


def test_finished_attempts_reuse_their_connection() -> None:
    """The per-attempt transports are kept for the next attempts: sequential calls that
    finish share one keep-alive connection instead of connecting (and a TLS handshake)
    every time."""
    with StubOpenAI(keep_alive=True) as stub:
        lm = get_model("openai/stub", api_base=stub.url, timeout=10, mode="completion")
        outs = [lm.complete(f"Q{i}:", Decoding()) for i in range(3)]
        assert [o.text for o in outs] == ["Yes"] * 3
        assert stub.connections == 1, stub.connections


def test_the_attempt_transport_can_shut_its_sockets() -> None:
    """The shutdown needs httpx's pool to take the tracking backend (private attributes of
    httpx 0.28 / httpcore 1.0): a new version that moves them must fail here, not leak."""
    assert calls._AttemptTransport().tracked


# ---- 2. ties and 4. all -inf --------------------------------------------------------------
def _served_trial(catalog: Catalog, fn: Any, limit: int = 3) -> TrialResult:
    spec = TrialSpec(
        task="hearsay",
        variant=parse_spec("base"),
        model="openai/stub",
        limit=limit,
        scoring="loglik",
    )
    with StubOpenAI(echo_logprobs=True, logprob_fn=fn) as stub:
        lm = get_model(
            "openai/stub", api_base=stub.url, mode="completion", backoff=0.01, max_retries=0
        )
        return run_trial(spec, catalog, lm)


@pytest.mark.data
@pytest.mark.parametrize(
    ("fn", "message"),
    [
        # a server that returns one value for every token: every label the same
        (lambda token, v: -0.5, "the model returned no information"),
        # every label -inf (the old code crashed in pick_label)
        (lambda token, v: float("-inf"), "every label has log-likelihood -inf"),
    ],
    ids=["constant", "all-minus-inf"],
)
def test_served_loglik_without_information_is_a_failed_trial_not_a_constant_guess(
    catalog: Catalog, fn: Any, message: str
) -> None:
    res = _served_trial(catalog, fn)
    assert not res.complete and str(res.status) == "failed"
    assert res.score is None
    for p in res.predictions:
        assert p.error is not None and message in p.error, p.error
        assert "--scoring generate" in p.error and "rerun" not in p.error.lower()
        assert p.generation is None
    assert sorted(res.unretryable) == sorted(p.index for p in res.predictions)
    assert not res.rerun_helps


def test_loglik_tie_rules() -> None:
    tie = loglik.loglik_tie
    assert tie([-1.0, -2.0], ["Yes", "No"], "sum") is None
    assert "same log-likelihood" in (tie([-0.5, -0.5], ["Yes", "No"], "sum") or "")
    # per byte, equal sums are still no information (the label lengths alone would choose)
    assert "same log-likelihood" in (tie([-0.5, -0.5], ["Yes", "No"], "per_byte") or "")
    # a best score shared by two of three labels: the choice would be their order
    assert "'A', 'B' tie" in (tie([-1.0, -1.0, -3.0], ["A", "B", "C"], "sum") or "")
    # -3/3 == -2/2 per byte: a tie under loglik-norm only
    assert tie([-3.0, -2.0], ["Yes", "No"], "sum") is None
    assert "per byte" in (tie([-3.0, -2.0], ["Yes", "No"], "per_byte") or "")
    assert tie([-1.0, -1.0 - 1e-6], ["Yes", "No"], "sum") is None  # a real preference
    assert tie([float("-inf"), -1.0], ["Yes", "No"], "sum") is None


@pytest.mark.data
def test_tied_rows_are_invalid_answers_and_never_cached(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows whose labels tie are answered with no label (wrong, counted in the invalid
    rate, the reason in the generation); the other rows are scored; the trial is complete.
    The old code answered the tied rows with the first label."""
    from experiments.llm.cache import ResponseCache

    def sums(lm: Any, prompt: str, conts: Any) -> list[float]:
        tied = prompt_hash_bit(prompt)
        return [-1.0, -1.0] if tied else [-2.0, -1.0]

    def prompt_hash_bit(prompt: str) -> bool:
        return prompt_hash(prompt)[0] in "01234567"

    monkeypatch.setattr("experiments.llm.served.served_label_logprobs", sums)
    spec = TrialSpec(
        task="hearsay",
        variant=parse_spec("base"),
        model="openai/stub",
        limit=12,
        scoring="loglik",
    )
    lm = get_model("openai/stub", api_base="http://127.0.0.1:9/v1", mode="completion")
    cache = ResponseCache(tmp_path / "cache")
    res = run_trial(spec, catalog, lm, cache=cache)
    tied = [p for p in res.predictions if p.generation and p.generation.startswith("(no label")]
    decided = [p for p in res.predictions if p not in tied]
    assert tied and decided, "the rows split both ways"
    assert res.complete and res.score is not None
    for p in tied:
        assert p.error is None and p.parsed is None and p.correct is False
        assert "every label has the same log-likelihood (-1)" in (p.generation or "")
    assert all(p.parsed == "No" for p in decided)
    assert res.report is not None
    assert res.report.invalid_rate == pytest.approx(len(tied) / len(res.predictions))
    again = run_trial(spec, catalog, lm, cache=cache)
    assert again.cache_hits == len(decided)  # a tie decided nothing: not cached


# ---- 3. a prompt longer than the context ---------------------------------------------------
@pytest.mark.parametrize(
    ("exc_name", "text", "too_long"),
    [
        # transient errors that mention the context are retried (too_long.py, rev3)
        ("InternalServerError", "worker restarted while loading the context window cache", 0),
        ("RateLimitError", "60000 tokens/min across requests of context length 4096", 0),
        ("ServiceUnavailableError", "overloaded; echo: 'the context length of the contract'", 0),
        # what servers say when the prompt does not fit
        ("BadRequestError", "This model's maximum context length is 8192 tokens", 1),
        ("BadRequestError", "Requested tokens (5000) exceed context window of 4096", 1),
        ("BadRequestError", "the request exceeds the available context size", 1),
        ("InternalServerError", "Requested tokens (5000) exceed context window of 4096", 1),
    ],
)
def test_context_wording_is_a_fallback_for_whole_phrases_of_non_transient_errors(
    exc_name: str, text: str, too_long: int
) -> None:
    import litellm.exceptions as le

    exc = getattr(le, exc_name)(text, llm_provider="openai", model="m")
    assert calls._too_long(exc) is bool(too_long)
    if not too_long:
        assert calls._retryable(exc)


@pytest.mark.model
@pytest.mark.parametrize("mode", ["completion", "chat"])
def test_a_local_prompt_over_n_ctx_is_counted_before_any_call(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prompt's tokens are counted against n_ctx first: a row error naming both counts,
    not retried, no "rerun", and llama.cpp is never asked (the old code learnt it from
    llama-cpp-python's error wording)."""
    litellm = calls._litellm()
    lm = get_model("local/smollm2", backoff=0.5, mode=mode)
    n_ctx = llama.load_local("smollm2").n_ctx()
    called: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        called.append("called")
        raise AssertionError("the model was called")

    monkeypatch.setattr(litellm, "text_completion", refuse)
    monkeypatch.setattr(litellm, "completion", refuse)
    out = lm.complete("word " * (n_ctx + 100), Decoding(max_tokens=4, mode=mode))  # type: ignore[arg-type]
    assert not called
    assert out.text is None and out.attempts == 1 and not out.retryable
    assert out.error is not None
    assert f"the local model's context of {n_ctx} tokens" in out.error
    assert "longer than the model's context: " in out.error
    assert "rerun" not in out.error.lower()
