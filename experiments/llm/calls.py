"""One remote call: deadlines per attempt, interrupts, per-attempt transports, retry classification.

The timeout of a remote call is a deadline for each attempt as a whole (`call_with_deadline`),
not httpx's limit per read, which a server sending a byte every few seconds never trips;
each retry gets a deadline of its own. An abandoned attempt's connections are shut down at
its deadline (`_AttemptTransport`), so retries never pile up open connections.
Backoff sleeps and the wait for a call end as soon as the run is interrupted
(`calls_stop_on`), so Ctrl-C never waits for a worker's retries.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

from experiments.llm.types import ContextTooLong

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import


def _litellm() -> Any:
    """litellm, imported on first use (it is slow to import) and told to stay quiet."""
    import litellm

    litellm.suppress_debug_info = True
    _route_through_attempts(litellm)
    return litellm


# ---- the litellm model ---------------------------------------------------------------------
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    return int(code) if isinstance(code, int) else None


_TRACEBACK = "Traceback (most recent call last):"
# litellm's text when a 200 reply parsed as JSON but not as a completion (content not a
# string, ...); it wraps that as a 500 with the Python traceback inside the message.
_INVALID_RESPONSE = "Invalid response object"


def _malformed(exc: BaseException) -> bool:
    """litellm could not read the provider's reply: asking again at temperature 0 won't help."""
    return _INVALID_RESPONSE in str(exc)


def _without_traceback(message: str) -> str:
    """A provider message with an embedded Python traceback cut down to its final error."""
    head, found, tail = message.partition(_TRACEBACK)
    if not found:
        return message
    lines = tail.splitlines()
    for i, line in enumerate(lines):
        if line.strip() and not line[0].isspace():  # the exception line after the frames
            detail = [line.strip()]
            for more in lines[i + 1 : i + 3]:
                if not more.strip():
                    break
                detail.append(more.strip())
            return f"{head.rstrip()} ({' '.join(detail)})"
    return head.rstrip()


class DeadlineExceeded(Exception):
    """A remote call ran past its deadline for the whole attempt (`call_with_deadline`)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(f"timed out after {seconds:g} s (deadline for one attempt, not per read)")


class CallInterrupted(Exception):
    """The run is being stopped (`calls_stop_on`): the call gives up, recording nothing."""


_STOP = threading.local()
# the stop event of threads no run gave one (DSPy's own workers): set by `stop_all_calls`
# when the process is interrupted
_PROCESS_STOP = threading.Event()


def _stop_event() -> threading.Event:
    event = getattr(_STOP, "event", None)
    return event if isinstance(event, threading.Event) else _PROCESS_STOP


def stop_all_calls() -> None:
    """Every call in this process gives up now (Ctrl-C or SIGTERM): threads the workbench
    did not start (DSPy's) have no `calls_stop_on` event, and would otherwise finish their
    retries before the process could exit."""
    _PROCESS_STOP.set()


@contextlib.contextmanager
def calls_stop_on(event: threading.Event) -> Iterator[None]:
    """Calls made by this thread inside the block give up as soon as `event` is set: the
    wait for a reply and the sleeps between retries end with `CallInterrupted`.

    Why: worker threads cannot receive Ctrl-C. The runner sets `event` when the main thread
    is interrupted, so its workers stop within `_POLL` seconds instead of finishing their
    retries (minutes, with Retry-After and long timeouts) before the process can exit.
    """
    previous = getattr(_STOP, "event", None)
    _STOP.event = event
    try:
        yield
    finally:
        _STOP.event = previous


_POLL = 0.1
"""Seconds between looks at the stop event while a call or a backoff waits."""


# ---- the connections of one attempt ---------------------------------------------------------
_ATTEMPT = threading.local()
"""The call thread's `_AttemptTransport` (set by `call_with_deadline`): every request that
litellm or the OpenAI client sends from that thread goes through it (`_RoutingTransport`)."""


class _TrackedBackend:
    """httpcore's network backend, noting each socket it opens for its `_AttemptTransport`."""

    def __init__(self, inner: Any, owner: _AttemptTransport) -> None:
        self._inner = inner
        self._owner = owner

    def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        return self._owner._opened(self._inner.connect_tcp(*args, **kwargs))

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
        return self._owner._opened(self._inner.connect_unix_socket(*args, **kwargs))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _ssl_settings() -> tuple[Any, Any]:
    """(verify, cert) as litellm's own clients use them (SSL_VERIFY, SSL_CERT_FILE,
    SSL_CERTIFICATE, litellm.ssl_verify), so routing through the workbench changes no TLS."""
    import litellm

    try:
        from litellm.llms.custom_httpx.http_handler import get_ssl_configuration

        verify: Any = get_ssl_configuration()
    except Exception:  # another litellm: httpx's default verification
        verify = True
    return verify, os.getenv("SSL_CERTIFICATE", getattr(litellm, "ssl_certificate", None))


class _AttemptTransport:
    """An httpx transport (own connection pools) for one attempt at a time, whose sockets
    `abort` shuts down from another thread.

    Why: an attempt abandoned at its deadline kept its thread blocked in a read and its
    connection open while the retry opened another; against a dripping server at
    --concurrency 2, 48 connections were open at once. ``shutdown`` wakes the blocked read
    at once (a plain ``close`` from another thread does not, on Linux) and closes the
    connection, so open connections stay bounded by the number of running attempts.

    A client given a transport drops httpx's proxies from the environment (and litellm
    skips its own proxy mounts for ``litellm.sync_transport``), so this routes each request
    as httpx's mounts would: HTTP(S)_PROXY / ALL_PROXY / NO_PROXY read at the request
    (httpx's `get_environment_proxies`), one proxy transport per proxy URL, whose sockets
    are tracked and shut on abort like the direct ones.
    """

    def __init__(self) -> None:
        import httpx

        verify, cert = _ssl_settings()
        self._verify, self._cert = verify, cert
        self._lock = threading.Lock()
        self._sockets: list[Any] = []
        self._aborted = False
        self._proxies: dict[str, Any] = {}  # proxy URL -> its httpx.HTTPTransport
        self.http = httpx.HTTPTransport(verify=verify, cert=cert)
        self.tracked = self._track(self.http)

    def _track(self, transport: Any) -> bool:
        pool = getattr(transport, "_pool", None)  # httpx 0.28: its httpcore pool (or proxy)
        inner = getattr(pool, "_network_backend", None)
        if inner is None:
            return False
        pool._network_backend = _TrackedBackend(inner, self)  # type: ignore[union-attr]
        return True

    def _for_url(self, url: Any) -> Any:
        """The transport httpx's own mounts would pick for `url`: a proxy's or the direct one."""
        from httpx._utils import URLPattern, get_environment_proxies

        mounts = sorted(
            ((URLPattern(k), v) for k, v in get_environment_proxies().items()),
            key=lambda m: m[0],
        )
        proxy = next((v for pattern, v in mounts if pattern.matches(url)), None)
        if proxy is None:
            return self.http
        with self._lock:
            transport = self._proxies.get(proxy)
            if transport is None:
                import httpx

                transport = httpx.HTTPTransport(
                    verify=self._verify, cert=self._cert, proxy=httpx.Proxy(url=proxy)
                )
                self._track(transport)
                self._proxies[proxy] = transport
        return transport

    def handle_request(self, request: Any) -> Any:
        return self._for_url(request.url).handle_request(request)

    def _opened(self, stream: Any) -> Any:
        sock = stream.get_extra_info("socket")
        with self._lock:
            self._sockets = [s for s in self._sockets if s.fileno() != -1]
            if not self._aborted:
                self._sockets.append(sock)
                return stream
        _shutdown(sock)  # opened after the attempt was abandoned
        return stream

    def abort(self) -> None:
        """Close every connection now, even one another thread is reading from."""
        with self._lock:
            self._aborted = True
            sockets, self._sockets = self._sockets, []
            transports = [self.http, *self._proxies.values()]
        for sock in sockets:
            _shutdown(sock)
        for transport in transports:
            with contextlib.suppress(Exception):
                transport.close()


def _shutdown(sock: Any) -> None:
    import socket

    with contextlib.suppress(OSError, AttributeError):
        sock.shutdown(socket.SHUT_RDWR)


_IDLE: list[_AttemptTransport] = []
_IDLE_LOCK = threading.Lock()
_IDLE_MAX = 64
"""Transports of finished attempts, kept for the next ones: their connections stay alive
(keep-alive), so a TLS handshake is not paid on every call. An abandoned one is never kept."""


def _take_transport() -> _AttemptTransport:
    with _IDLE_LOCK:
        if _IDLE:
            return _IDLE.pop()
    return _AttemptTransport()


def _give_back(transport: _AttemptTransport) -> None:
    with _IDLE_LOCK:
        if len(_IDLE) < _IDLE_MAX:
            _IDLE.append(transport)
            return
    transport.abort()


def _routing_session() -> Any:
    """The httpx client litellm and the OpenAI client send through (`litellm.client_session`,
    `litellm.sync_transport`): a request goes to its call thread's `_AttemptTransport`, or,
    outside `call_with_deadline`, to a shared one."""
    import httpx

    class RoutingTransport(httpx.BaseTransport):
        def __init__(self) -> None:
            self._shared: _AttemptTransport | None = None
            self._lock = threading.Lock()

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            transport = getattr(_ATTEMPT, "transport", None)
            if transport is None:
                with self._lock:
                    if self._shared is None:
                        self._shared = _AttemptTransport()
                    transport = self._shared
            response: httpx.Response = transport.handle_request(request)
            return response

        def close(self) -> None:
            """Shared by every client litellm builds: none of them may close it."""

    class SharedClient(httpx.Client):
        def close(self) -> None:
            """litellm closes cached clients it evicts; this one serves them all."""

    router = RoutingTransport()
    return SharedClient(transport=router, follow_redirects=True), router


_ROUTING: list[Any] = []  # [client, transport], made on first use
_ROUTING_LOCK = threading.Lock()  # a sweep's worker threads may make the first use at once


def _route_through_attempts(litellm: Any) -> None:
    with _ROUTING_LOCK:
        if not _ROUTING:
            _ROUTING.extend(_routing_session())
    client, router = _ROUTING
    if litellm.client_session is not client:
        litellm.client_session = client  # the OpenAI client's http_client (openai/, vLLM)
    if getattr(litellm, "sync_transport", None) is not router:
        litellm.sync_transport = router  # litellm's own HTTPHandler (anthropic/, ollama/)


def call_with_deadline(call: Any, seconds: float, stop: threading.Event | None = None) -> Any:
    """`call()`'s result, or `DeadlineExceeded` once `seconds` have passed in all.

    httpx (under litellm and the OpenAI client) applies a timeout to each read, so a server
    that sends a byte every few seconds keeps a call alive forever. The call runs in a
    daemon thread and is abandoned at the deadline: its HTTP requests go through a
    transport of its own (`_AttemptTransport`), whose connections are shut down then, so
    the thread ends at once and a retry never adds a connection to the abandoned one; it
    never holds up the process's exit. `stop` (default: this
    thread's `calls_stop_on` event) abandons it at once with `CallInterrupted`. In the main
    thread, the wait is interruptible by Ctrl-C.
    """
    stop = stop if stop is not None else _stop_event()
    box: dict[str, Any] = {}
    done = threading.Event()
    transport = _take_transport()

    def target() -> None:
        _ATTEMPT.transport = transport
        try:
            box["value"] = call()
        except BaseException as e:  # handed to the caller, whatever it is
            box["error"] = e
        finally:
            _ATTEMPT.transport = None
            done.set()

    threading.Thread(target=target, name="workbench-call", daemon=True).start()
    end = time.monotonic() + seconds
    try:
        while not done.is_set():
            left = end - time.monotonic()
            if left <= 0:
                raise DeadlineExceeded(seconds)
            if stop.is_set() or _PROCESS_STOP.is_set():
                raise CallInterrupted("the run was interrupted")
            done.wait(min(left, _POLL))
    except BaseException:
        transport.abort()  # the abandoned call's connections close now, its thread ends
        raise
    _give_back(transport)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _sleep(seconds: float, stop: threading.Event) -> None:
    """Sleep `seconds`, or raise `CallInterrupted` as soon as `stop` is set."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if stop.wait(min(left, _POLL)) or _PROCESS_STOP.is_set():
            raise CallInterrupted("the run was interrupted")
    if stop.is_set():
        raise CallInterrupted("the run was interrupted")


# What providers say when the prompt does not fit the model's context: llama-cpp-python's
# "Requested tokens (N) exceed context window of M", OpenAI's and vLLM's "maximum context
# length", newer vLLM's "longer than the maximum model length", llama.cpp server's "exceeds
# the available context size" (exceed_context_size_error), Anthropic's "prompt is too long".
# Whole phrases, not the word "context": a 500 "while loading the context window cache" or a
# 429 quoting a prompt about "the context length of the contract" is transient, and retried.
_CONTEXT_WORDS = re.compile(
    r"exceeds? (?:the )?context window|maximum context length|context_length_exceeded"
    r"|exceeds? the available context size|exceed_context_size"
    r"|longer than the maximum model length|prompt is too long",
    re.IGNORECASE,
)


def _too_long(exc: BaseException) -> bool:
    """The prompt is longer than the model's context: every attempt fails the same way.

    Counted before the call where the context is known (`check_local_fits`: the local
    models' n_ctx); otherwise told by the provider's error, which is trusted only when the
    error is not a transient one (a rate limit, a timeout, a lost connection, 503/504)."""
    if isinstance(exc, ContextTooLong):
        return True
    from litellm.exceptions import (
        APIConnectionError,
        ContextWindowExceededError,
        RateLimitError,
        Timeout,
    )

    if isinstance(exc, ContextWindowExceededError):
        return True
    if isinstance(exc, DeadlineExceeded | Timeout | APIConnectionError | RateLimitError):
        return False
    if _status(exc) in (408, 429, 502, 503, 504):
        return False
    return bool(_CONTEXT_WORDS.search(str(exc)))


# What litellm and the SDKs under it say when no key was given: the OpenAI client's
# "Missing credentials. Please pass an `api_key`...", litellm's "Missing Anthropic API Key",
# "no key is set", the OpenAI client's older "The api_key client option must be set".
_NO_KEY = re.compile(
    r"missing credentials|missing [\w ]{0,30}api[ _]?key|no (?:api )?key is set"
    r"|api_key client option must be set",
    re.IGNORECASE,
)


def _no_key(exc: BaseException) -> bool:
    """The call had no API key (litellm wraps the OpenAI client's refusal as a 500)."""
    return bool(_NO_KEY.search(str(exc)))


def _retryable(exc: BaseException) -> bool:
    from litellm.exceptions import APIConnectionError, AuthenticationError, RateLimitError, Timeout

    if _no_key(exc) or isinstance(exc, AuthenticationError):
        return False  # no key, or a key refused: retrying cannot help
    if _malformed(exc) or _too_long(exc):
        return False
    if isinstance(exc, DeadlineExceeded | Timeout | APIConnectionError | RateLimitError):
        return True
    status = _status(exc)
    return status is not None and (status in _RETRY_STATUS or status >= 500)


def _seconds(value: Any, scale: float = 1.0) -> float | None:
    """A header's delay in seconds if it is a finite number >= 0, else None (ignored)."""
    try:
        seconds = float(str(value).strip()) * scale
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _http_date_delay(value: Any) -> float | None:
    """Seconds until an HTTP-date Retry-After (``Wed, 21 Oct 2015 07:28:00 GMT``), >= 0."""
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(str(value))
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _retry_after(exc: BaseException) -> float | None:
    """Seconds a server asked us to wait (retry-after-ms / Retry-After), if it said so validly.

    A value that is not a finite number >= 0 (negative, ``nan``, ``inf``, garbage) is
    ignored, so the caller falls back to its own exponential backoff. Retry-After may also be
    an HTTP date.
    """
    headers: Any = None
    response = getattr(exc, "response", None)
    if response is not None:
        headers = getattr(response, "headers", None)
    headers = headers or getattr(exc, "litellm_response_headers", None) or {}
    try:
        lowered = {str(k).lower(): v for k, v in headers.items()}
    except Exception:  # headers of an unexpected shape: no advice
        return None
    ms, after = lowered.get("retry-after-ms"), lowered.get("retry-after")
    if ms is not None and (seconds := _seconds(ms, 1 / 1000)) is not None:
        return seconds
    if after is not None:
        seconds = _seconds(after)
        return seconds if seconds is not None else _http_date_delay(after)
    return None


def _finite(value: Any) -> bool:
    """A real number (not a bool), neither nan nor infinite."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _field(obj: Any, name: str) -> Any:
    """An attribute of a litellm object, or a key of a plain dict."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)
