"""A local OpenAI-compatible HTTP server with injected latency and faults.

It answers ``/v1/chat/completions`` and ``/v1/completions`` with a scripted reply, after a
configurable delay (and OpenAI's files and batches endpoints: `batch_fake`, as `batches`),
and fails a configurable share of requests with 429 (with Retry-After),
500, or a stall longer than the client's timeout. Used by the tests and benchmarks to
exercise the litellm path, concurrency and retries for real, on loopback only.

Outcomes (random with `fault_rate` over `faults`, or one per request from `script`):

- ``ok``: the reply;
- ``429``: rate limited, with ``Retry-After: <retry_after>``, or with exactly the headers
  given as `rate_limit_headers` (e.g. ``{"Retry-After": "-1"}`` or ``{"retry-after-ms": "nan"}``);
- ``500``: internal error; ``timeout``: a stall of `stall` seconds, then 504;
- malformed 200 replies: ``empty_choices`` (``"choices": []``), ``null_content`` (chat
  ``content: null`` / completion ``text: null``), ``tool_call`` (chat: a tool call and no
  content; completion: ``text: null``), ``list_content`` (content / text is a list),
  ``not_json`` (an HTML body);
- ``drip``: the reply, one byte every `drip_interval` seconds (a per-read timeout never
  fires; the stub stops dripping when it is stopped, or at once when the client closes the
  connection, so `open_connections` counts what the client holds open);
- ``404``: not found, the body echoing the request's path and query as some servers do
  (``Not Found: /v1?api_key=...``);
- ``401``: the key refused, the body quoting the request's ``Authorization`` header whole
  (a careless server's "Incorrect API key provided: Bearer ...").

``GET /v1/models`` answers with `models` (what the server says it serves, as vLLM and
llama.cpp's server do) when given, else 404.

`reply_bytes` pads the reply to that many bytes (a server ignoring ``max_tokens``);
`echo_headers` appends the named request headers to the reply, as ``Name: value`` (a server
echoing ``Authorization: Bearer <key>`` back);
`logprob_fn(token, value)` rewrites each echoed log-probability (probabilities sent as
log-probabilities, a single +50.0).

A completion sent with ``echo`` and ``logprobs`` gets ``logprobs: null`` (a server that does
not return prompt log-probabilities), or, with ``echo_logprobs=True``, the echoed text with
deterministic per-token log-probabilities (`stub_logprobs`, each shifted by
`stub_context_shift` of the text before it unless ``context_logprobs=False``), as vLLM and
llama.cpp's server;
``logprob_offsets="bytes"`` counts their offsets in UTF-8 bytes, and ``shifted_logprobs=True``
reproduces llama-cpp-python's off-by-one prompt log-probabilities.

    python -m experiments.testing.stub_server --port 8765 --latency 0.2 --fault-rate 0.2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import select
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from experiments.testing.batch_fake import FakeBatches


def hashed_yes_no(prompt: str) -> str:
    """A deterministic, prompt-dependent Yes/No: different prompts score differently."""
    return "Yes" if hashlib.sha256(prompt.encode()).digest()[0] % 2 else "No"


def stub_token_logprob(token: str) -> float:
    """A deterministic log-probability in [-9.9, -1] for a token (below `stub_top_logprob`'s
    values, so the reported most likely token is the most likely)."""
    return -(1 + (hashlib.sha256(token.encode()).digest()[0] % 90) / 10)


def stub_context_shift(context: str) -> float:
    """What the served stub adds to a token's `stub_token_logprob` after `context` (the text
    before the token), in (-0.01, 0]: a real model's log-likelihoods depend on the prompt,
    and a server whose label sums are the same on every prompt is refused as giving no
    information. Both labels' first tokens follow the same context, so the label order
    (and an exact tie) is `stub_token_logprob`'s."""
    return -int.from_bytes(hashlib.sha256(f"ctx|{context}".encode()).digest()[:4]) / 2**32 / 100


def _shift_by_context(logprobs: dict[str, Any]) -> None:
    """Each echoed token's log-probability (and its own ``top_logprobs`` entry) plus
    `stub_context_shift` of the text before it."""
    seen = ""
    for i, token in enumerate(logprobs["tokens"]):
        value = logprobs["token_logprobs"][i]
        if value is not None:
            shifted = value + stub_context_shift(seen)
            logprobs["token_logprobs"][i] = shifted
            top = logprobs["top_logprobs"][i]
            if top is not None and token in top:
                top[token] = shifted
        seen += token


def stub_tokens(text: str) -> list[str]:
    """The stub's tokenizer: each run of spaces is glued to the word after it."""
    import re

    return re.findall(r"\s*\S+|\s+$", text)


STUB_TOP = "<top>"
"""The key under which `stub_logprobs` reports each position's most likely next token; the
next ones, when more are asked for, are ``<top1>``, ``<top2>``, ..."""


def stub_top_key(rank: int) -> str:
    return STUB_TOP if rank == 0 else f"<top{rank}>"


def stub_top_logprob(context: str, rank: int = 0) -> float:
    """The stub's `rank`-th most likely next token's log-probability after `context`, in
    (-1 - rank, -rank]: it depends on the whole context, so a shifted server's values differ
    between labels."""
    return -rank - (hashlib.sha256(f"top{rank}|{context}".encode()).digest()[0] % 100) / 100


def stub_logprobs(
    text: str,
    generated: str = "",
    *,
    offsets: str = "chars",
    shifted: bool = False,
    top_k: int = 1,
) -> dict[str, Any]:
    """OpenAI completions ``logprobs`` for an echoed `text` followed by the `generated` text
    (tokenized on its own, as a server's generated tokens are; first token: None, as OpenAI).

    Each position's ``top_logprobs`` holds the stub's `top_k` most likely next tokens
    (`stub_top_key`) given the text before the position, and the token's own
    log-probability, as llama.cpp's server lists them. `offsets` ``"bytes"`` counts
    ``text_offset`` in UTF-8 bytes (as some servers do); `shifted` reproduces
    llama-cpp-python's server bug for models without a BOS token: each position's values
    come from the distribution *after* its own token.
    """
    tokens = stub_tokens(text) + (stub_tokens(generated) if generated else [])
    starts, at = [], 0
    for token in tokens:
        starts.append(at)
        at += len(token.encode()) if offsets == "bytes" else len(token)
    values: list[float | None] = []
    tops: list[dict[str, float] | None] = []
    seen = ""
    for token in tokens:
        context = seen + token if shifted else seen
        value = stub_token_logprob(token + ("|shifted" if shifted else ""))
        values.append(value)
        top = {stub_top_key(r): stub_top_logprob(context, r) for r in range(top_k)}
        tops.append({**top, token: value})
        seen += token
    if values:
        values[0] = None
        tops[0] = None
    return {
        "tokens": tokens,
        "token_logprobs": values,
        "text_offset": starts,
        "top_logprobs": tops,
    }


def _rewrite_logprobs(logprobs: dict[str, Any], fn: Callable[[str, float], float]) -> None:
    """Each token's log-probability (and its own entry in ``top_logprobs``) through `fn`."""
    for i, (token, value) in enumerate(
        zip(logprobs["tokens"], logprobs["token_logprobs"], strict=True)
    ):
        if value is None:
            continue
        logprobs["token_logprobs"][i] = fn(token, value)
        top = logprobs["top_logprobs"][i]
        if top is not None and token in top:
            top[token] = fn(token, value)


def _prompt(body: dict[str, Any]) -> str:
    """The prompt of a completion or chat request body."""
    prompt = body.get("prompt")
    if prompt is None:
        prompt = (body.get("messages") or [{}])[-1].get("content", "")
    if isinstance(prompt, list):
        prompt = "".join(map(str, prompt))
    return str(prompt)


class StubOpenAI:
    def __init__(
        self,
        *,
        latency: float = 0.0,
        fault_rate: float = 0.0,
        faults: tuple[str, ...] = ("429", "500", "timeout"),
        retry_after: float = 0.05,
        stall: float = 3.0,
        reply: str = "Yes",
        reply_fn: Callable[[str], str] | None = None,
        fail_fn: Callable[[str], bool] | None = None,
        seed: int = 0,
        script: list[str] | None = None,
        rate_limit_headers: dict[str, str] | None = None,
        port: int = 0,
        echo_logprobs: bool = False,
        logprob_offsets: str = "chars",
        shifted_logprobs: bool = False,
        drip_interval: float = 2.0,
        reply_bytes: int | None = None,
        logprob_fn: Callable[[str, float], float] | None = None,
        keep_alive: bool = False,
        context_logprobs: bool = True,
        echo_headers: tuple[str, ...] = (),
        models: list[dict[str, Any]] | None = None,
    ) -> None:
        self.latency = latency
        self.fault_rate = fault_rate
        self.faults = faults
        self.retry_after = retry_after
        self.stall = stall
        self.reply = reply
        self.reply_fn = reply_fn  # reply computed from the prompt, e.g. hashed_yes_no
        self.fail_fn = fail_fn  # prompts it returns True for always get a 500 (persistent)
        self.script = list(script or [])  # explicit per-request outcomes, consumed first
        self.rate_limit_headers = rate_limit_headers  # sent with 429s instead of Retry-After
        # answer completions sent with echo and logprobs with the prompt's log-probabilities
        # (`stub_logprobs`), as vLLM and llama.cpp's server do; otherwise logprobs is null
        self.echo_logprobs = echo_logprobs
        self.logprob_offsets = logprob_offsets  # "bytes": text_offset in UTF-8 bytes
        self.shifted_logprobs = shifted_logprobs  # llama-cpp-python's off-by-one server bug
        self.drip_interval = drip_interval  # seconds between the bytes of a "drip" reply
        self.reply_bytes = reply_bytes  # pad replies to this size (ignores max_tokens)
        self.logprob_fn = logprob_fn  # rewrites echoed log-probabilities
        self.keep_alive = keep_alive  # HTTP/1.1: a connection serves many requests
        # echoed log-probabilities depend on the prompt (`stub_context_shift`), as a model's
        self.context_logprobs = context_logprobs
        self.echo_headers = echo_headers  # request headers quoted in the reply (their values)
        # GET /v1/models answers {"data": models} (what the server says it serves); None: 404
        self.models = models
        self.paths: list[str] = []  # each request's path with its query
        self._stopping = threading.Event()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.headers_seen: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        # TCP connections open now / at most (counted from accept to close, idle keep-alive
        # ones included): what a client leaves open, seen from the server
        self.open_connections = 0
        self.max_open_connections = 0
        self.connections = 0  # accepted in all (a client reusing one connection: 1)
        # the files and batches endpoints (`batch_fake`): each request line answered as here
        self.batches = FakeBatches(self.batch_answer)
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> StubOpenAI:
        # `stop` waits for the serve loop to look at its flag: every 0.05 s, not the default
        # 0.5 s that each test starting a stub paid once more on its way out
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # a dripping reply ends (the client sees a cut reply)
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> StubOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _outcome(self) -> str:
        with self._lock:
            if self.script:
                return self.script.pop(0)
            if self._rng.random() < self.fault_rate:
                return self._rng.choice(self.faults)
            return "ok"

    def batch_answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(status, reply) for one request line of a batch: a 500 where `fail_fn` says so
        (a partly failed batch), else the endpoint's own reply (`reply_payload`)."""
        if self.fail_fn is not None and self.fail_fn(_prompt(body)):
            return 500, {"error": {"message": "internal error", "type": "server_error"}}
        return 200, self.reply_payload(path, body)

    def reply_payload(
        self,
        path: str,
        body: dict[str, Any],
        outcome: str = "ok",
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """The 200 reply to a completion request `body` sent to `path` under `outcome` (``ok``
        or a malformed-reply outcome): what the HTTP endpoint sends, and what a batch's output
        file holds for the same request (`experiments.testing.batch_fake`); the request's
        `headers` named in `echo_headers` are quoted after the reply."""
        prompt = _prompt(body)
        reply = self.reply_fn(prompt) if self.reply_fn else self.reply
        lowered = {k.lower(): v for k, v in (headers or {}).items()}
        for name in self.echo_headers:
            reply += f" {name}: {lowered.get(name.lower(), '(none)')}"
        if self.reply_bytes is not None and len(reply) < self.reply_bytes:
            reply += "x" * (self.reply_bytes - len(reply.encode()))
        usage = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
        content: Any = reply
        if outcome in ("null_content", "tool_call"):
            content = None
        elif outcome == "list_content":
            content = [{"type": "text", "text": reply}]
        if path.endswith("/chat/completions"):
            message: dict[str, Any] = {"role": "assistant", "content": content}
            finish = "stop"
            if outcome == "tool_call":
                finish = "tool_calls"
                message["tool_calls"] = [
                    {
                        "id": "call_stub",
                        "type": "function",
                        "function": {"name": "answer", "arguments": '{"x": 1}'},
                    }
                ]
            choice: dict[str, Any] = {
                "index": 0,
                "message": message,
                "finish_reason": finish,
            }
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": content, "finish_reason": "stop"}
            if body.get("echo") and body.get("logprobs") is not None:
                choice["logprobs"] = None
                if self.echo_logprobs:
                    choice["text"] = prompt + str(content)
                    choice["logprobs"] = stub_logprobs(
                        prompt,
                        str(content),
                        offsets=self.logprob_offsets,
                        shifted=self.shifted_logprobs,
                        top_k=int(body["logprobs"]),
                    )
                    if self.context_logprobs:
                        _shift_by_context(choice["logprobs"])
                    if self.logprob_fn is not None:
                        _rewrite_logprobs(choice["logprobs"], self.logprob_fn)
            obj = "text_completion"
        choices = [] if outcome == "empty_choices" else [choice]
        return {
            "id": "stub",
            "object": obj,
            "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": choices,
            "usage": usage,
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        """The request-handler class of this stub's server.

        Long because it is a class: its methods close over the stub (`stub`), so it is
        defined here, and its length is the sum of its short methods (`_answer` aside)."""
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if stub.keep_alive else "HTTP/1.0"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def setup(self) -> None:
                super().setup()
                with stub._lock:
                    stub.open_connections += 1
                    stub.connections += 1
                    stub.max_open_connections = max(
                        stub.max_open_connections, stub.open_connections
                    )

            def finish(self) -> None:
                try:
                    super().finish()
                except OSError:
                    pass  # the client closed the connection first
                finally:
                    with stub._lock:
                        stub.open_connections -= 1

            def do_GET(self) -> None:
                if stub.models is not None and self.path.rstrip("/").endswith("/v1/models"):
                    return self._send(200, {"object": "list", "data": stub.models})
                if not stub.batches.handles(self.path):
                    return self._send(404, {"error": {"message": f"Not Found: {self.path}"}})
                self._send_raw(*stub.batches.handle("GET", self.path, self.headers, b""))

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                if stub.batches.handles(self.path):  # files and batches: not completions
                    data = self.rfile.read(length)
                    return self._send_raw(
                        *stub.batches.handle("POST", self.path, self.headers, data)
                    )
                body = json.loads(self.rfile.read(length) or b"{}")
                with stub._lock:
                    stub.times.append(time.monotonic())
                    stub.requests.append(body)
                    stub.headers_seen.append(dict(self.headers))
                    stub.paths.append(self.path)
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                try:
                    self._answer(body)
                finally:
                    with stub._lock:
                        stub.in_flight -= 1

            def _answer(self, body: dict[str, Any]) -> None:
                """Reply to a completion request as the drawn outcome says.

                Long because it is one branch per fault the stub can inject (timeout, 429,
                500, 401, 404, not_json, drip, null/list/tool-call content, empty choices) and
                the reply shapes of both endpoints, chat and echoed completions."""
                self._drip = False
                outcome = stub._outcome()
                if outcome == "ok" and stub.fail_fn is not None and stub.fail_fn(_prompt(body)):
                    outcome = "500"
                with stub._lock:
                    stub.counts[outcome] += 1
                time.sleep(stub.latency)
                if outcome == "timeout":
                    time.sleep(stub.stall)
                    return self._send(504, {"error": {"message": "stalled"}})
                if outcome == "429":
                    return self._send(
                        429,
                        {"error": {"message": "rate limited", "type": "rate_limit_exceeded"}},
                        stub.rate_limit_headers
                        if stub.rate_limit_headers is not None
                        else {"Retry-After": f"{stub.retry_after:g}"},
                    )
                if outcome == "500":
                    return self._send(500, {"error": {"message": "internal error"}})
                if outcome == "401":
                    said = self.headers.get("Authorization", "")
                    return self._send(
                        401,
                        {
                            "error": {
                                "message": f"Incorrect API key provided: {said}",
                                "type": "invalid_request_error",
                                "code": "invalid_api_key",
                            }
                        },
                    )
                if outcome == "404":
                    return self._send(
                        404, {"error": {"message": f"Not Found: {self.path}", "type": "not_found"}}
                    )
                self._drip = outcome == "drip"
                if outcome == "not_json":
                    return self._send_raw(200, b"<html>upstream hiccup</html>", "text/html")
                return self._send(
                    200, stub.reply_payload(self.path, body, outcome, dict(self.headers))
                )

            def _pause_ends_drip(self, seconds: float) -> bool:
                """Wait `seconds`; True as soon as the stub stops or the client closes the
                connection (seen at once, so `open_connections` counts what the client has
                open, not what a later write would find closed)."""
                end = time.monotonic() + seconds
                while (left := end - time.monotonic()) > 0:
                    if stub._stopping.is_set():
                        return True
                    readable, _, _ = select.select([self.connection], [], [], min(left, 0.05))
                    if readable:
                        try:
                            if self.connection.recv(1, socket.MSG_PEEK) == b"":
                                return True  # the client closed (or shut down) its end
                        except OSError:
                            return True
                        time.sleep(min(left, 0.05))  # data from the client: not a close
                return stub._stopping.is_set()

            def _send(
                self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                self._send_raw(status, json.dumps(payload).encode(), headers=headers)

            def _send_raw(
                self,
                status: int,
                data: bytes,
                content_type: str = "application/json",
                headers: dict[str, str] | None = None,
            ) -> None:
                try:
                    self.send_response(status)
                    self.send_header("content-type", content_type)
                    self.send_header("content-length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    if not getattr(self, "_drip", False):
                        self.wfile.write(data)
                        return
                    self.wfile.flush()
                    for i in range(len(data)):  # one byte, then a pause: reads never time out
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        if self._pause_ends_drip(stub.drip_interval):
                            self.close_connection = True
                            return
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up: nothing to answer

        return Handler


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--latency", type=float, default=0.0)
    p.add_argument("--fault-rate", type=float, default=0.0)
    p.add_argument("--reply", default="Yes", help="fixed reply, or 'hash' for hashed_yes_no")
    args = p.parse_args()
    stub = StubOpenAI(
        latency=args.latency,
        fault_rate=args.fault_rate,
        reply=args.reply,
        reply_fn=hashed_yes_no if args.reply == "hash" else None,
        port=args.port,
    )
    print(f"serving {stub.url}", flush=True)
    stub.server.serve_forever()


if __name__ == "__main__":
    main()
