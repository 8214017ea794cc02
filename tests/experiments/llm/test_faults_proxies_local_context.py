"""The model gateway's faults (issue 19), after the per-attempt transports:
environment proxies ignored, a chat template's overflow retried, a WORKBENCH_LOCAL_N_CTX
llama.cpp pads past llama-cpp-python's buffer, and log-likelihoods that do not depend on
the prompt taken as answers.

Each runs the real path where there is one: a recording proxy and the stub server on
loopback, or the bundled SmolLM2.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from experiments.llm import calls, llama, loglik
from experiments.llm.cache import ResponseCache
from experiments.llm.gateway import get_model
from experiments.llm.types import ContextTooLong, Decoding, ModelError, Scoring
from experiments.testing.stub_server import StubOpenAI
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec
from promptlib import Catalog, parse_spec

_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Some key for the OpenAI client; no proxy but the test's own."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")
    for name in _PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


def _set_proxy(monkeypatch: pytest.MonkeyPatch, url: str, no_proxy: str | None = None) -> None:
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, url)
    if no_proxy is not None:
        for name in ("no_proxy", "NO_PROXY"):
            monkeypatch.setenv(name, no_proxy)


# ---- 1. HTTP(S)_PROXY / NO_PROXY ------------------------------------------------------------
@pytest.fixture
def recording_proxy() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP proxy that answers every chat completion itself and records the
    request line's target (a proxied request names the absolute URL)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            seen.append(self.path)
            body = json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "Proxied"},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_remote_call_goes_through_http_proxy(
    recording_proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The api_base's host does not resolve: only the proxy can answer. The old code sent
    every attempt through a transport without the environment's proxy (Connection error)."""
    url, seen = recording_proxy
    _set_proxy(monkeypatch, url)
    lm = get_model("openai/m", api_base="http://proxied.invalid/v1", timeout=10, max_retries=0)
    out = lm.complete("Q: x\nA:", Decoding())
    assert out.error is None, out.error
    assert out.text == "Proxied"
    assert seen == ["http://proxied.invalid/v1/chat/completions"]


def test_no_proxy_hosts_are_called_directly(
    recording_proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """NO_PROXY is honoured as httpx honours it: the stub on 127.0.0.1 is called directly,
    the proxy sees nothing."""
    url, seen = recording_proxy
    _set_proxy(monkeypatch, url, no_proxy="localhost,127.0.0.1")
    with StubOpenAI() as stub:
        lm = get_model("openai/stub", api_base=stub.url, timeout=10, max_retries=0)
        out = lm.complete("Q: x\nA:", Decoding())
    assert out.error is None, out.error
    assert out.text == "Yes"
    assert seen == []


def test_an_abandoned_proxied_attempt_closes_its_proxy_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A proxy that never answers: the attempt is abandoned at its deadline and its socket
    to the proxy is shut down then, like a direct one (the proxy sees the connection end)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    connected = threading.Event()
    closed = threading.Event()

    def hold() -> None:
        conn, _ = listener.accept()
        connected.set()
        with conn:
            while conn.recv(65536):
                pass
        closed.set()

    threading.Thread(target=hold, daemon=True).start()
    _set_proxy(monkeypatch, f"http://127.0.0.1:{listener.getsockname()[1]}")
    try:
        calls._litellm()  # its import (seconds) is no part of the deadline
        lm = get_model("openai/m", api_base="http://proxied.invalid/v1", timeout=1, max_retries=0)
        out = lm.complete("Q: x\nA:", Decoding())
        assert out.text is None and out.retryable
        assert connected.is_set(), "the request never reached the proxy"
        assert closed.wait(3), "the abandoned attempt kept its connection to the proxy open"
    finally:
        listener.close()


# ---- 2. a chat prompt that overflows only with its template ---------------------------------
@pytest.mark.model
def test_a_chat_template_overflow_is_not_retried() -> None:
    """The raw prompt fits (`check_local_fits` passes), the chat template's tokens make it
    overflow: llama-cpp-python's ValueError, wrapped by litellm as an APIConnectionError
    (transient), was retried and the row told to be rerun. Now one attempt, not retryable."""
    lm = get_model("local/smollm2", mode="chat", max_retries=2, backoff=0.01)
    llm = llama.load_local("smollm2")
    limit = min(llm.n_ctx(), len(llm.input_ids))

    def raw(k: int) -> int:
        return len(llm.tokenize(("word " * k).encode(), add_bos=True, special=True))

    k = limit - 8
    while raw(k) >= limit:
        k -= 1
    assert raw(k) >= limit - 10, raw(k)  # within the template's tokens of the limit
    out = lm.complete("word " * k, Decoding(max_tokens=4, mode="chat"))
    assert out.text is None
    assert out.attempts == 1 and not out.retryable
    assert out.error is not None
    assert "prompt longer than the model's context" in out.error
    assert "chat template" in out.error and "WORKBENCH_LOCAL_N_CTX" in out.error
    assert "rerun" not in out.error.lower()


# ---- 3. WORKBENCH_LOCAL_N_CTX that llama.cpp pads -------------------------------------------
def test_local_n_ctx_refuses_a_value_llama_cpp_would_pad(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_LOCAL_N_CTX", "200")
    with pytest.raises(
        ModelError, match=r"multiple of 256.*not 200: set WORKBENCH_LOCAL_N_CTX=256$"
    ):
        llama.local_n_ctx()
    monkeypatch.setenv("WORKBENCH_LOCAL_N_CTX", "1000")
    with pytest.raises(ModelError, match="WORKBENCH_LOCAL_N_CTX=768 or 1024"):
        llama.local_n_ctx()
    for ok in ("256", "2048", "4096"):
        monkeypatch.setenv("WORKBENCH_LOCAL_N_CTX", ok)
        assert llama.local_n_ctx() == int(ok)


class _PaddedLlama:
    """What llama-cpp-python gives for n_ctx=200: llama.cpp's padded context of 256, a
    token buffer of 200. Any evaluation is a failure of the test."""

    input_ids = np.zeros(200, dtype=np.intc)
    n_tokens = 0

    def __init__(self, n_prompt: int) -> None:
        self.n_prompt = n_prompt

    def n_ctx(self) -> int:
        return 256

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return [1] * (self.n_prompt if add_bos else 1)

    def eval(self, tokens: Any) -> None:
        raise AssertionError("evaluated a prompt past llama-cpp-python's buffer")


def test_the_fit_checks_use_the_buffer_not_the_padded_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 210-token prompt passed both checks against n_ctx() 256 and crashed in the 200-token
    buffer ("could not broadcast", a traceback under --scoring loglik)."""
    for looked_up_in in (llama, loglik):  # check_local_fits, label_logprobs
        monkeypatch.setattr(looked_up_in, "load_local", lambda name: _PaddedLlama(210))
    monkeypatch.setattr(loglik, "require_loglik_model", lambda model: None)
    with pytest.raises(ContextTooLong, match="context of 200 tokens"):
        llama.check_local_fits("local/smollm2", "prompt")
    with pytest.raises(ContextTooLong, match="context of 200 tokens"):
        loglik.label_logprobs("local/smollm2", "prompt", [" Yes", " No"])
    monkeypatch.setattr(llama, "load_local", lambda name: _PaddedLlama(199))
    llama.check_local_fits("local/smollm2", "prompt")  # fits


# ---- 4. log-likelihoods that do not depend on the prompt -------------------------------------
@pytest.mark.data
@pytest.mark.parametrize("scoring", ["loglik", "loglik-norm"])
def test_prompt_independent_log_likelihoods_are_a_failed_trial(
    catalog: Catalog, scoring: Scoring, tmp_path: Path
) -> None:
    """Every token of " Yes" scores -1.0 and of " No" -2.0 on every prompt: no tie, but the
    same vector on every row, so the old code gave a complete trial of constant answers.
    None of those rows is cached: a fixed server is asked again."""

    def fn(token: str, v: float) -> float:
        return -2.0 if "No" in token else -1.0

    spec = TrialSpec(
        task="hearsay", variant=parse_spec("base"), model="openai/stub", limit=5, scoring=scoring
    )
    cache = ResponseCache(tmp_path / "cache")
    with StubOpenAI(echo_logprobs=True, logprob_fn=fn) as stub:
        lm = get_model(
            "openai/stub", api_base=stub.url, mode="completion", backoff=0.01, max_retries=0
        )
        res = run_trial(spec, catalog, lm, cache=cache)
    assert not res.complete and str(res.status) == "failed"
    assert res.score is None
    assert len(res.predictions) == 5
    for p in res.predictions:
        assert p.error is not None, p
        assert "the model returned no information" in p.error
        assert "the same on every row, whatever the prompt" in p.error
        assert "--scoring generate" in p.error and "rerun" not in p.error.lower()
    assert not res.rerun_helps
    assert len(cache) == 0
    cache.close()


def test_identical_vectors_need_two_distinct_prompts() -> None:
    """One row, or the same prompt twice, says nothing about dependence on the prompt; a
    vector that differs anywhere keeps the trial."""
    from experiments.llm.scripted import LMDefaults
    from experiments.llm.types import Completion
    from experiments.trials.loglik_rows import _no_information

    def row(yes: float, no: float) -> Completion:
        return Completion(text=" Yes", extra={"logprobs": {" Yes": yes, " No": no}})

    same = [row(-1.0, -2.0), row(-1.0, -2.0)]
    assert _no_information(same, None, ["a", "a"]) is same
    assert _no_information(same[:1], None, ["a"]) == same[:1]
    varied = [row(-1.0, -2.0), row(-1.0, -2.5), row(-1.0, -2.0)]
    assert _no_information(varied, None, ["a", "b", "c"]) is varied
    failed = _no_information(same, LMDefaults(), ["a", "b"])
    assert all(c.error and "whatever the prompt" in c.error for c in failed)
