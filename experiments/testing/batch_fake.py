"""A loopback fake of OpenAI's files and batches endpoints, served by the stub server.

Why: ``--batch`` must be tested end to end (upload, create, poll, output and error files,
expiry, cancellation, a killed client resuming) without a provider account. The stub server
(`experiments.testing.stub_server.StubOpenAI`) routes ``/v1/files…`` and ``/v1/batches…`` here;
each request line of a batch is answered as the stub's own completion endpoints answer it
(`answer`), so a batched sweep and a direct one see the same replies.

Endpoints (OpenAI's shapes, as the ``openai`` SDK litellm uses reads them):

- ``POST /v1/files`` (multipart ``file`` + ``purpose``), ``GET /v1/files/{id}``,
  ``GET /v1/files/{id}/content``;
- ``POST /v1/batches``, ``GET /v1/batches`` (list), ``GET /v1/batches/{id}``,
  ``POST /v1/batches/{id}/cancel``.

A batch is ``validating`` when created and finishes on its `polls_to_finish`-th retrieve (a
poll-driven clock, so tests are deterministic): ``completed`` (`ending`), ``expired`` (only
the first `partial` requests ran; the rest are in the error file as ``batch_expired``) or
``failed`` (nothing ran). A cancelled batch is ``cancelling`` until its next retrieve, then
``cancelled`` with its first `partial` requests answered. A request the stub's ``fail_fn``
marks fails with a 500 in the error file (a partly failed batch). `rewrite` (kind ``output``
or ``error``, the file's bytes) -> bytes or None damages what a provider might return: a
malformed, truncated or empty file, or None for a file whose id the batch gives but whose
content is gone (404). `counts` counts every
endpoint call (``file_upload``, ``batch_create``, ``batch_retrieve``, ...) and ``request``
(each request line answered).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

Answer = Callable[[str, dict[str, Any]], tuple[int, dict[str, Any]]]
"""(endpoint path, request body) -> (HTTP status, reply body): the stub's answer."""

Reply = tuple[int, bytes, str]
"""(HTTP status, body, content type)."""

ENDPOINTS = ("/v1/chat/completions", "/v1/completions")
PROVIDER_FAILED = "failed"  # OpenAI's batch status, not a TrialStatus
ENDINGS = ("completed", "expired", PROVIDER_FAILED)


@dataclass
class _File:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int = field(default_factory=lambda: int(time.time()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
        }


@dataclass
class _Batch:
    id: str
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, str] | None
    status: str = "validating"
    polls: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: dict[str, Any] | None = None
    counts: dict[str, int] = field(
        default_factory=lambda: {"total": 0, "completed": 0, "failed": 0}
    )
    created_at: int = field(default_factory=lambda: int(time.time()))
    ended_at: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": self.errors,
            "input_file_id": self.input_file_id,
            "completion_window": self.completion_window,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "expires_at": self.created_at + 86400,
            **{f"{k}_at": v for k, v in self.ended_at.items()},
            "request_counts": dict(self.counts),
            "metadata": self.metadata,
        }


def _json(status: int, payload: dict[str, Any]) -> Reply:
    return status, json.dumps(payload).encode(), "application/json"


def _error(status: int, message: str) -> Reply:
    return _json(status, {"error": {"message": message, "type": "invalid_request_error"}})


class FakeBatches:
    """The files and batches of one stub server, and how its batches end (see the module)."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.polls_to_finish = 1  # retrieves of a running batch before it ends
        self.ending = "completed"  # how a batch that is not cancelled ends: ENDINGS
        self.partial = 0  # requests answered by an expired or cancelled batch
        self.rewrite: Callable[[str, bytes], bytes | None] | None = None  # see the module
        self.counts: Counter[str] = Counter()
        self.files: dict[str, _File] = {}
        self.batches: dict[str, _Batch] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def handles(self, path: str) -> bool:
        route = path.split("?", 1)[0]
        return route.startswith(("/v1/files", "/v1/batches"))

    def handle(self, method: str, path: str, headers: Any, body: bytes) -> Reply:
        """Answer one HTTP request to a files or batches endpoint."""
        parts = [p for p in path.split("?", 1)[0].split("/") if p][1:]  # without "v1"
        with self._lock:
            if method == "POST" and parts == ["files"]:
                return self._upload(headers, body)
            if method == "GET" and len(parts) in (2, 3) and parts[0] == "files":
                return self._file(parts[1], content=len(parts) == 3 and parts[2] == "content")
            if method == "POST" and parts == ["batches"]:
                return self._create(json.loads(body or b"{}"))
            if method == "GET" and parts == ["batches"]:
                self.counts["batch_list"] += 1
                data = [b.to_dict() for b in reversed(self.batches.values())]
                return _json(200, {"object": "list", "data": data, "has_more": False})
            if method == "GET" and len(parts) == 2 and parts[0] == "batches":
                return self._retrieve(parts[1])
            if method == "POST" and len(parts) == 3 and parts[::2] == ["batches", "cancel"]:
                return self._cancel(parts[1])
        return _error(404, f"no route {method} {path}")

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-fake{next(self._ids)}"

    def _upload(self, headers: Any, body: bytes) -> Reply:
        self.counts["file_upload"] += 1
        head = f"Content-Type: {headers.get('content-type', '')}\r\n\r\n".encode()
        message = BytesParser(policy=HTTP).parsebytes(head + body)
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            fields[str(name)] = (
                part.get_filename(),
                payload if isinstance(payload, bytes) else b"",
            )
        if "file" not in fields:
            return _error(400, "no file in the upload")
        purpose = fields.get("purpose", (None, b""))[1].decode()
        upload = _File(
            self._new_id("file"), fields["file"][0] or "upload", purpose, fields["file"][1]
        )
        self.files[upload.id] = upload
        return _json(200, upload.to_dict())

    def _file(self, file_id: str, *, content: bool) -> Reply:
        self.counts["file_content" if content else "file_retrieve"] += 1
        found = self.files.get(file_id)
        if found is None:
            return _error(404, f"no file {file_id}")
        if content:
            return 200, found.data, "application/octet-stream"
        return _json(200, found.to_dict())

    def _create(self, body: dict[str, Any]) -> Reply:
        self.counts["batch_create"] += 1
        file_id = str(body.get("input_file_id"))
        if file_id not in self.files:
            return _error(400, f"input_file_id {file_id} is not an uploaded file")
        if body.get("endpoint") not in ENDPOINTS:
            return _error(400, f"endpoint {body.get('endpoint')!r} is not batchable here")
        batch = _Batch(
            self._new_id("batch"),
            file_id,
            str(body["endpoint"]),
            str(body.get("completion_window")),
            body.get("metadata"),
        )
        batch.counts["total"] = len(self._lines(batch))
        self.batches[batch.id] = batch
        return _json(200, batch.to_dict())

    def _retrieve(self, batch_id: str) -> Reply:
        self.counts["batch_retrieve"] += 1
        batch = self.batches.get(batch_id)
        if batch is None:
            return _error(404, f"no batch {batch_id}")
        if batch.status == "cancelling":
            self._finish(batch, "cancelled", self.partial)
        elif batch.status in ("validating", "in_progress", "finalizing"):
            batch.polls += 1
            if batch.polls >= self.polls_to_finish:
                done = {"completed": None, "expired": self.partial, "failed": 0}[self.ending]
                self._finish(batch, self.ending, done)
            else:
                batch.status = "in_progress"
        return _json(200, batch.to_dict())

    def _cancel(self, batch_id: str) -> Reply:
        self.counts["batch_cancel"] += 1
        batch = self.batches.get(batch_id)
        if batch is None:
            return _error(404, f"no batch {batch_id}")
        if batch.status in ("validating", "in_progress", "finalizing"):
            batch.status = "cancelling"
            batch.ended_at["cancelling"] = int(time.time())
        return _json(200, batch.to_dict())

    def _lines(self, batch: _Batch) -> list[dict[str, Any]]:
        data = self.files[batch.input_file_id].data
        return [json.loads(line) for line in data.splitlines() if line.strip()]

    def _finish(self, batch: _Batch, status: str, done: int | None) -> None:
        """End `batch` as `status`, answering its first `done` requests (None: all)."""
        batch.status = status
        batch.ended_at[status] = int(time.time())
        if status == PROVIDER_FAILED:
            failure = {"code": "fake_failure", "message": "the fake was told to fail", "line": None}
            batch.errors = {"object": "list", "data": [failure]}
            return
        lines = self._lines(batch)
        cut = len(lines) if done is None else min(done, len(lines))
        out: list[dict[str, Any]] = []
        err: list[dict[str, Any]] = []
        for i, line in enumerate(lines):
            request = {"id": f"batch_req_{batch.id}_{i}", "custom_id": line.get("custom_id")}
            if i >= cut:
                why = "batch_expired" if status == "expired" else "batch_cancelled"
                error = {"code": why, "message": f"not run: the batch {status}"}
                err.append({**request, "response": None, "error": error})
                continue
            self.counts["request"] += 1
            code, reply = self.answer(str(line.get("url")), dict(line.get("body") or {}))
            response = {"status_code": code, "request_id": request["id"], "body": reply}
            entry = {**request, "response": response, "error": None}
            (out if code == 200 else err).append(entry)
        batch.counts.update(completed=len(out), failed=len(err))
        batch.output_file_id = self._store(batch, "output", out)
        batch.error_file_id = self._store(batch, "error", err)

    def _store(self, batch: _Batch, kind: str, entries: list[dict[str, Any]]) -> str | None:
        if not entries:
            return None  # as OpenAI: no file for no lines
        data = "".join(json.dumps(e) + "\n" for e in entries).encode()
        kept = data if self.rewrite is None else self.rewrite(kind, data)
        file_id = self._new_id("file")
        if kept is not None:  # None: the batch names a file that is gone
            made = _File(file_id, f"{batch.id}_{kind}.jsonl", f"batch_{kind}", kept)
            self.files[made.id] = made
        return file_id
