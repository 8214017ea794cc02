"""A small headless Chromium driver over the DevTools protocol, for tests and benchmarks that
must see a page as a browser builds it (the HTML report, issue 34), with no new dependency.

Chromium is started with `--remote-debugging-pipe`: it reads commands from its fd 3 and writes
replies and events to its fd 4, each message one JSON object followed by a NUL byte. The two
pipes are moved to the child's fds 3 and 4 between fork and exec. Used as a
context manager, the browser (its whole process group) is always killed and its temporary
profile removed.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from promptlib.errors import WorkbenchError

#: seconds any one wait may take (the CI machine is loaded: generous, never a speed claim)
TIMEOUT = 60.0
_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class ChromiumError(WorkbenchError):
    """No browser, a browser that died, a protocol error, or a wait that timed out."""


def find_chromium() -> str | None:
    """The path of a Chromium (or Chrome) binary on PATH, or None."""
    for name in _CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass(frozen=True)
class LoadTime:
    """A page's open time in ms from navigation start: until `document.body.dataset.ready`
    was set (`ready_ms`, what the page itself recorded) and until the first frame painted
    after it (`painted_ms`)."""

    ready_ms: float
    painted_ms: float


class Chromium:
    """One headless browser with one page; `with Chromium() as b: b.open(url)`."""

    def __init__(
        self,
        binary: str | None = None,
        *,
        width: int = 1400,
        height: int = 900,
        timeout: float = TIMEOUT,
    ) -> None:
        path = binary or find_chromium()
        if path is None:
            raise ChromiumError(
                "no Chromium found on PATH (chromium, chromium-browser, google-chrome): "
                "install it (Debian: apt-get install chromium)"
            )
        self.binary = path
        self.width, self.height, self.timeout = width, height, timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._profile: str | None = None
        self._to_child = self._from_child = -1
        self._buffer = b""
        self._events: deque[dict[str, Any]] = deque()
        self._next_id = 0
        self._session: str | None = None
        self._target: str | None = None

    # ---- life cycle --------------------------------------------------------------------
    def __enter__(self) -> Chromium:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _start(self) -> None:
        self._profile = tempfile.mkdtemp(prefix="workbench-chromium-")
        child_in, self._to_child = os.pipe()  # we write commands, Chromium reads fd 3
        self._from_child, child_out = os.pipe()  # Chromium writes fd 4, we read
        args = [
            self.binary,
            "--headless=new",
            "--disable-gpu",
            "--remote-debugging-pipe",
            f"--user-data-dir={self._profile}",
            f"--window-size={self.width},{self.height}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--mute-audio",
            "--allow-file-access-from-files",
        ]
        if os.geteuid() == 0:
            args.append("--no-sandbox")
        args.append("about:blank")

        def to_3_and_4() -> None:  # runs in the child, between fork and exec
            # copies above 9 first: a pipe end may already be fd 3 or 4 (dup2 onto itself
            # would leave it close-on-exec, and one dup2 could clobber the other's source)
            high_in = fcntl.fcntl(child_in, fcntl.F_DUPFD, 10)
            high_out = fcntl.fcntl(child_out, fcntl.F_DUPFD, 10)
            os.dup2(high_in, 3, inheritable=True)
            os.dup2(high_out, 4, inheritable=True)

        try:
            self._proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                # not pass_fds: it keeps fds by their parent numbers, and the fds the child
                # needs (3, 4) exist only after the dup2; Python's own fds are not inheritable
                # (PEP 446), so nothing else reaches the child
                close_fds=False,
                preexec_fn=to_3_and_4,
                start_new_session=True,  # its own process group: close() kills all of it
            )
        finally:
            os.close(child_in)
            os.close(child_out)
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._target = target
        attached = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session = attached["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.viewport(self.width, self.height)

    def viewport(self, width: int, height: int) -> None:
        """Lay the page out at `width` x `height` CSS pixels (a screenshot's size too)."""
        self.width, self.height = width, height
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def close(self) -> None:
        """Kill the browser's process group, close the pipes, remove the profile."""
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=self.timeout)
        for fd in (self._to_child, self._from_child):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._to_child = self._from_child = -1
        if self._profile is not None:
            shutil.rmtree(self._profile, ignore_errors=True)
            self._profile = None

    # ---- the protocol ------------------------------------------------------------------
    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        """One command (on the page's session once attached, or on `session`, a frame's);
        its result, or ChromiumError."""
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        session = session or self._session
        if session is not None and not method.startswith("Target."):
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self._to_child, data) :]
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline, f"the reply to {method}")
            if reply.get("id") == msg["id"]:
                if "error" in reply:
                    raise ChromiumError(f"Chromium refused {method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self._events.append(reply)

    def wait_event(self, method: str, timeout: float | None = None) -> dict[str, Any]:
        """The next event named `method` (earlier events of other names are dropped)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            while self._events:
                event = self._events.popleft()
                if event.get("method") == method:
                    return event
            self._events.append(self._read(deadline, f"the event {method}"))

    def _read(self, deadline: float, what: str) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChromiumError(f"Chromium sent no {what} within {self.timeout:.0f} s")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                code = None if self._proc is None else self._proc.poll()
                raise ChromiumError(
                    f"Chromium closed its pipe (exit code {code}) while we waited for {what}"
                )
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    # ---- what tests use ----------------------------------------------------------------
    def open(self, url: str | Path, ready: str | None = None) -> None:
        """Navigate to `url` (a Path becomes a file:// URL), wait for its load event and, if
        given, until the JS expression `ready` is truthy."""
        href = url.resolve().as_uri() if isinstance(url, Path) else url
        self._events.clear()
        nav = self.send("Page.navigate", {"url": href})
        if nav.get("errorText"):
            raise ChromiumError(f"Chromium could not open {href}: {nav['errorText']}")
        self.wait_event("Page.loadEventFired")
        if ready is not None:
            self.wait_for(ready)

    def evaluate(self, expression: str, frame: str | None = None) -> Any:
        """The value of a JS expression (promises awaited), returned by value; in the page,
        or in the child frame `frame` names (see `frame`)."""
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        result = self.send("Runtime.evaluate", params, frame)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise ChromiumError(f"the page's JS failed: {text}\nin: {expression[:300]}")
        return result.get("result", {}).get("value")

    def frame(self, ready: str = "true", timeout: float | None = None) -> str:
        """A handle on the page's child frame that runs in its own process (a sandboxed
        iframe, as MLflow's artifact view shows HTML in) once the JS expression `ready` is
        truthy in it, waiting for both; pass it as `frame=` to `evaluate` and the rest."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        attached: dict[str, str] = {}
        while True:
            for info in self.send("Target.getTargets")["targetInfos"]:
                if info["type"] != "iframe" or info.get("parentFrameId") != self._target:
                    continue
                tid = info["targetId"]
                if tid not in attached:
                    params = {"targetId": tid, "flatten": True}
                    attached[tid] = self.send("Target.attachToTarget", params)["sessionId"]
                try:
                    if self.evaluate(ready, attached[tid]):
                        return attached[tid]
                except ChromiumError:  # its document is being replaced
                    continue
            if time.monotonic() > deadline:
                raise ChromiumError(
                    f"no child frame made this true in {self.timeout:.0f} s: {ready}"
                )
            time.sleep(0.02)

    def wait_for(
        self, expression: str, timeout: float | None = None, frame: str | None = None
    ) -> Any:
        """Poll until the JS expression is truthy; its value."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            value = self.evaluate(expression, frame)
            if value:
                return value
            if time.monotonic() > deadline:
                raise ChromiumError(
                    f"the page never made this true in {self.timeout:.0f} s: {expression}"
                )
            time.sleep(0.02)

    def select(self, selector: str, value: str, frame: str | None = None) -> None:
        """Set a <select>'s value and dispatch `change` on it, as a user's choice would."""
        found = self.evaluate(
            f"""(() => {{
              const s = document.querySelector({json.dumps(selector)});
              if (!s) return "missing";
              if (![...s.options].some(o => o.value === {json.dumps(value)})) return "no option";
              s.value = {json.dumps(value)};
              s.dispatchEvent(new Event("change", {{bubbles: true}}));
              return "ok";
            }})()""",
            frame,
        )
        if found != "ok":
            raise ChromiumError(f"cannot choose {value!r} in {selector}: {found}")

    def screenshot(self, *, selector: str | None = None, full_page: bool = False) -> bytes:
        """A PNG of the viewport, of the whole page, or of one element (scrolled to)."""
        params: dict[str, Any] = {"format": "png"}
        if selector is not None:
            box = self.evaluate(
                f"""(() => {{
                  const e = document.querySelector({json.dumps(selector)});
                  if (!e) return null;
                  e.scrollIntoView();
                  const r = e.getBoundingClientRect();
                  return {{x: r.left + scrollX, y: r.top + scrollY,
                           width: r.width, height: r.height}};
                }})()"""
            )
            if not box:
                raise ChromiumError(f"no element {selector} to take a screenshot of")
            params |= {"clip": {**box, "scale": 1}, "captureBeyondViewport": True}
        elif full_page:
            size = self.evaluate(
                "({width: document.documentElement.scrollWidth,"
                " height: document.documentElement.scrollHeight})"
            )
            params |= {"clip": {"x": 0, "y": 0, **size, "scale": 1}, "captureBeyondViewport": True}
        data = self.send("Page.captureScreenshot", params)["data"]
        return base64.b64decode(data)

    def load_time(self, url: str | Path, ready: str = "document.body.dataset.ready") -> LoadTime:
        """Open `url` and measure navigation start -> ready (the page's own
        `window.__reportRenderMs` when it sets one, else when the poll first saw it) and ->
        the first frame painted after it."""
        self.open(url, ready)
        value = self.evaluate(
            """new Promise(done => requestAnimationFrame(() => setTimeout(() => done({
                 ready: typeof window.__reportRenderMs === "number"
                   ? window.__reportRenderMs : null,
                 painted: performance.now()}), 0)))"""
        )
        painted = float(value["painted"])
        ready_ms = painted if value["ready"] is None else float(value["ready"])
        return LoadTime(ready_ms=ready_ms, painted_ms=painted)
