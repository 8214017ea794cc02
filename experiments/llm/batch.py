"""Provider batch APIs: answer many calls through litellm's files and batches, at batch prices.

Why: OpenAI-style batches cost about half of direct calls. `BatchClient.run` takes requests
(a response-cache key, a prompt, its decoding), uploads them as one JSONL file per batch
(``custom_id`` = the cache key), creates the batch, polls it to its end, and puts every
answer in the response cache under the key the direct path uses, so a later run without
batches is all cache hits. Every submission is recorded before and after the batch is
created (`batch_ledger`): a client killed while polling resumes polling the same batch.

A request the batch did not answer (the batch expired, was cancelled or failed, or the
request failed, or its line in the result files cannot be read: `batch_results`) comes back
as a `Completion` with its error and ``retryable``: the row's failure state, never an answer;
the batch's good lines are still answers, and a rerun submits only the failed rows again.
Costs are at the provider's batch prices where litellm knows them
(``input_cost_per_token_batches``), else None ("batch price unknown"), never the direct
price. API keys come from the environment only (litellm's own lookup); errors are redacted
(`experiments.secrets.redact`).

Only providers whose batch path litellm implements the OpenAI way are accepted
(`BATCH_PROVIDERS`); a local or served model, or log-likelihood scoring, is refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from experiments.files import dir_lock
from experiments.llm.backends import backend_for
from experiments.llm.batch_ledger import BatchLedger, BatchRecord
from experiments.llm.batch_results import PROVIDER_FAILED, ResultFile, collect
from experiments.llm.cache import ResponseCache
from experiments.llm.calls import _field, _litellm
from experiments.llm.types import Completion, Decoding, ModelError
from experiments.secrets import redact

BATCH_PROVIDERS = ("openai",)
"""Model prefixes `--batch` supports: litellm 1.110's OpenAI-format files + batches path
(Anthropic message batches are not in its ``create_batch``)."""
ENDPOINTS = {"chat": "/v1/chat/completions", "completion": "/v1/completions"}
TERMINAL = ("completed", "expired", "cancelled", PROVIDER_FAILED)
MAX_REQUESTS = 50_000  # OpenAI's limit of requests in one batch
MAX_POLL_ERRORS = 10  # consecutive failed polls before giving up (the batch stays recorded)
GONE = (404, 410)  # a result file's download status that no retry will change


class BatchError(ModelError):
    """Batches cannot be used or reached; the message says why and what to do."""


def supported_models() -> str:
    return ", ".join(f"{p}/<model>" for p in BATCH_PROVIDERS)


def check_batchable(model: str, api_base: str | None) -> None:
    """Refuse a model with no batch API, saying which models have one."""
    backend = backend_for(model, api_base)
    which = f"--batch supports hosted models of {supported_models()}"
    if backend == "local":
        raise BatchError(f"{model} runs in this process and has no batch API; {which}")
    if backend == "served":
        raise BatchError(
            f"{model} is served at --api-base/api_base, which has no batch API the workbench "
            f"can rely on; {which} (drop --batch for a served model)"
        )
    provider = model.split("/", 1)[0]
    if provider not in BATCH_PROVIDERS:
        raise BatchError(f"{model}: litellm has no OpenAI-style batch path for {provider}; {which}")


def batch_price(model: str) -> tuple[float, float] | None:
    """(input, output) USD per token at batch prices, where litellm knows both; else None."""
    try:
        info = _litellm().get_model_info(model)
    except Exception:  # litellm does not know every model
        return None
    prices = (info.get("input_cost_per_token_batches"), info.get("output_cost_per_token_batches"))
    if any(not isinstance(p, int | float) for p in prices):
        return None
    return float(prices[0]), float(prices[1])


def batch_cost(model: str, tokens_in: int, tokens_out: int) -> float | None:
    """Price in USD of that many tokens at batch prices; None: batch price unknown."""
    price = batch_price(model)
    if price is None:
        return None
    return tokens_in * price[0] + tokens_out * price[1]


@dataclass(frozen=True)
class BatchRequest:
    """One call to make: its response-cache key (the batch line's ``custom_id``)."""

    key: str
    prompt: str
    decoding: Decoding


def request_line(model: str, request: BatchRequest) -> dict[str, Any]:
    """The JSONL line of one request: the body the direct path sends (`LiteLLMModel._call`)."""
    d = request.decoding
    body: dict[str, Any] = {
        "model": model.split("/", 1)[1],
        "temperature": d.temperature,
        "max_tokens": d.max_tokens,
    }
    if d.stop:
        body["stop"] = list(d.stop)
    if d.mode == "completion":
        body["prompt"] = request.prompt
    else:
        body["messages"] = [{"role": "user", "content": request.prompt}]
    return {"custom_id": request.key, "method": "POST", "url": ENDPOINTS[d.mode], "body": body}


Log = Callable[[str], None]


class BatchClient:
    """One model's batches: submit, record, poll, collect into the response cache."""

    def __init__(
        self,
        model: str,
        ledger: BatchLedger,
        *,
        poll: float = 30.0,
        log: Log | None = None,
        max_requests: int = MAX_REQUESTS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        check_batchable(model, None)
        self.model = model
        self.provider = model.split("/", 1)[0]
        self.ledger = ledger
        self.poll = poll
        self.log: Log = log or (lambda message: None)
        self.max_requests = max_requests
        self.sleep = sleep
        self._seen: dict[str, tuple[str, int]] = {}  # batch id -> last logged (status, done)

    def _call(self, name: str, **kwargs: Any) -> Any:
        """litellm's `name` (create_file, create_batch, ...) for this provider; the API key
        and base URL are litellm's own lookup in the environment."""
        return getattr(_litellm(), name)(custom_llm_provider=self.provider, **kwargs)

    def run(self, requests: Iterable[BatchRequest], cache: ResponseCache) -> dict[str, Completion]:
        """Answer `requests` (key -> answer or failure): resume this model's recorded
        batches, submit the requests none of them covers, poll all to their end."""
        by_endpoint: dict[str, dict[str, BatchRequest]] = {}
        for r in requests:
            by_endpoint.setdefault(ENDPOINTS[r.decoding.mode], {}).setdefault(r.key, r)
        pending: list[BatchRecord] = []
        with dir_lock(self.ledger.directory):  # a peer sweep sees these records, not a gap
            for endpoint, todo in by_endpoint.items():
                pending += self._submitted(endpoint, todo)
        return self._poll(pending, cache)

    def _submitted(self, endpoint: str, todo: dict[str, BatchRequest]) -> list[BatchRecord]:
        """The recorded batches of `endpoint` (resumed) and new ones for what they lack."""
        recorded = self.ledger.pending(self.model, endpoint)
        covered = {k for rec in recorded for k in rec.keys}
        for rec in recorded:
            self.log(f"resuming batch {rec.batch_id or '(not yet created)'} of {self.model}")
            if rec.batch_id is None:
                self._create(rec, resumed=True)
        fresh = [r for k, r in todo.items() if k not in covered]
        for start in range(0, len(fresh), self.max_requests):
            chunk = fresh[start : start + self.max_requests]
            recorded.append(self._submit(endpoint, chunk))
        return recorded

    def _submit(self, endpoint: str, chunk: Sequence[BatchRequest]) -> BatchRecord:
        record = BatchRecord(self.model, endpoint, [r.key for r in chunk])
        data = "".join(json.dumps(request_line(self.model, r)) + "\n" for r in chunk).encode()
        try:
            uploaded = self._call(
                "create_file", file=(f"workbench-{record.id}.jsonl", data), purpose="batch"
            )
        except Exception as e:
            raise BatchError(f"uploading the batch file for {self.model} failed: {_why(e)}") from e
        record.file_id = str(uploaded.id)
        self.ledger.save(record)
        self._create(record, resumed=False)
        self.log(
            f"submitted batch {record.batch_id}: {len(chunk)} requests to {self.model} "
            f"(recorded in {self.ledger.directory}; a rerun resumes polling it)"
        )
        return record

    def _create(self, record: BatchRecord, *, resumed: bool) -> None:
        """Create the batch of an uploaded file, or, on a resume, find the one made before
        its id was recorded (the provider's list, by input file)."""
        found = self._created_for(record.file_id) if resumed else None
        if found is None:
            try:
                batch = self._call(
                    "create_batch",
                    completion_window="24h",
                    endpoint=record.endpoint,
                    input_file_id=record.file_id,
                    metadata={"workbench_record": record.id},
                )
            except Exception as e:
                raise BatchError(
                    f"creating the batch for {self.model} failed: {_why(e)}; its file "
                    f"{record.file_id} is recorded, a rerun tries again without re-uploading"
                ) from e
            found = str(batch.id)
        record.batch_id = found
        self.ledger.save(record)

    def _created_for(self, file_id: str | None) -> str | None:
        try:
            listed = self._call("list_batches", limit=100)
        except Exception as e:
            raise BatchError(f"listing {self.model}'s batches failed: {_why(e)}") from e
        for batch in getattr(listed, "data", None) or []:
            if _field(batch, "input_file_id") == file_id:
                return str(_field(batch, "id"))
        return None

    def _poll(self, pending: list[BatchRecord], cache: ResponseCache) -> dict[str, Completion]:
        """Poll every pending batch until each has ended; collect each as it ends."""
        outcomes: dict[str, Completion] = {}
        errors = 0
        while pending:
            waiting: list[BatchRecord] = []
            for record in pending:
                try:
                    batch = self._call("retrieve_batch", batch_id=record.batch_id)
                    ended = str(batch.status) in TERMINAL
                    if ended:
                        outcomes.update(self._collect(record, batch, cache))
                    errors = 0
                except Exception as e:
                    errors += 1
                    if errors >= MAX_POLL_ERRORS:
                        raise BatchError(
                            f"polling batch {record.batch_id} failed {errors} times in a row "
                            f"({_why(e)}); it stays recorded in {self.ledger.directory}: "
                            "rerun to resume polling it"
                        ) from e
                    waiting.append(record)
                    continue
                if ended:
                    self.ledger.remove(record)
                else:
                    self._report(record, batch)
                    waiting.append(record)
            pending = waiting
            if pending:
                self.sleep(self.poll)
        return outcomes

    def _report(self, record: BatchRecord, batch: Any) -> None:
        """One line when a batch's status or progress changes."""
        counts = _field(batch, "request_counts")
        done = int(_field(counts, "completed") or 0) + int(_field(counts, PROVIDER_FAILED) or 0)
        state = (str(batch.status), done)
        if self._seen.get(str(record.batch_id)) != state:
            self._seen[str(record.batch_id)] = state
            self.log(
                f"batch {record.batch_id}: {state[0]}, {done}/{len(record.keys)} done; polling "
                f"every {self.poll:g} s (safe to stop: a rerun resumes polling it)"
            )

    def _collect(
        self, record: BatchRecord, batch: Any, cache: ResponseCache
    ) -> dict[str, Completion]:
        """An ended batch's answers (into the cache) and failures, one per recorded key: a
        line that cannot be read fails its request, never the collection (`batch_results`)."""
        files = [
            self._download(kind, str(file_id))
            for kind, file_id in (
                ("output", _field(batch, "output_file_id")),
                ("error", _field(batch, "error_file_id")),
            )
            if file_id
        ]
        got, notes = collect(
            record.keys,
            files,
            batch_id=str(record.batch_id),
            status=str(batch.status),
            errors=_field(batch, "errors"),
            cost=lambda tokens_in, tokens_out: batch_cost(self.model, tokens_in, tokens_out),
        )
        for key, completion in got.items():
            cache.put(key, completion)  # errors are never cached
        answered = sum(c.error is None for c in got.values())
        unread = f"; could not read {len(notes)}: {'; '.join(notes[:3])}" if notes else ""
        self.log(
            f"batch {record.batch_id} {batch.status}: {answered} of {len(record.keys)} "
            "requests answered"
            + ("" if answered == len(record.keys) else "; the rest are row failures")
            + unread[:1000]
        )
        return got

    def _download(self, kind: str, file_id: str) -> ResultFile:
        """A result file's bytes; a file the provider no longer has (404, 410) is None, its
        rows failures; any other error is a failed poll, retried (the answers are paid for)."""
        try:
            content = self._call("file_content", file_id=file_id)
        except Exception as e:
            if getattr(e, "status_code", None) in GONE:
                return ResultFile(kind, file_id, None, _why(e))
            raise
        return ResultFile(kind, file_id, bytes(getattr(content, "content", content)))


def _why(error: BaseException) -> str:
    return f"{type(error).__name__}: {redact(str(error))[:300]}"
