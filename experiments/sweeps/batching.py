"""`workbench sweep --batch`: a sweep's uncached calls answered by provider batches first.

Why: a sweep's calls are known before any trial runs (its resolved trials' prompts), so
they can go to the provider's batch API at about half the price. `SweepBatches` is the
driver's ``before_trials`` hook: it refuses what batches cannot do (a local or served
model, log-likelihood scoring), collects each model's requests the response cache does not
hold (the same keys `run_trial` uses), answers them with `experiments.llm.batch.BatchClient`
(answers go into the cache; a killed sweep resumes polling) and gives the trials a
`BatchedLM` per model: its rows come from the cache as usual, and a row the batch did not
answer gets the batch's failure, a row state like any other failure, never a direct call.
The trials read the cache through `BatchAnswers`, so a row answered by this run's batch
counts as a model call (it was one, at batch price), not as a cache hit.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from experiments.llm.batch import BatchClient, BatchError, BatchRequest, check_batchable
from experiments.llm.batch_ledger import BatchLedger
from experiments.llm.cache import ResponseCache, cache_key
from experiments.llm.types import Completion, Decoding
from experiments.trials.spec import LOGLIK, ResolvedTrial, trial_decoding
from promptlib.tasks import Catalog

NOT_IN_BATCH = (
    "not answered by this sweep's batch (its cached answer could not be read); rerun to "
    "submit it again"
)


class BatchedLM:
    """A model whose uncached rows a batch answered: `complete` gives the batch's answer or
    failure for the call, and never calls the model itself. Everything else, its identity
    included, is the wrapped model's, so trial ids and cache keys are unchanged."""

    def __init__(self, inner: Any, outcomes: dict[str, Completion]) -> None:
        self._inner = inner
        self._outcomes = outcomes
        self._identity = inner.cache_identity()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def name(self) -> str:
        return str(self._inner.name)

    @property
    def concurrency(self) -> int:
        return int(self._inner.concurrency)

    def cache_identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        found = self._outcomes.get(cache_key(self._identity, prompt, decoding))
        return found if found is not None else Completion(None, error=NOT_IN_BATCH)

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        raise BatchError("log-likelihood scoring has no batch path (refused before the sweep)")


class BatchAnswers:
    """The response cache as the trials of a ``--batch`` sweep read it: a key this run's
    batch answered is a miss the first time it is read, so the row goes to `BatchedLM` and
    counts as the model call it was; every other read and every write is the cache's."""

    def __init__(self, cache: ResponseCache, fresh: set[str]) -> None:
        self._cache = cache
        self._fresh = set(fresh)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cache, name)

    def get(self, key: str) -> Completion | None:
        if key in self._fresh:
            self._fresh.discard(key)
            return None
        return self._cache.get(key)

    def put(self, key: str, completion: Completion) -> None:
        self._cache.put(key, completion)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class SweepBatches:
    """The ``before_trials`` hook of a ``--batch`` sweep (see the module)."""

    cache: ResponseCache | None
    poll: float = 30.0
    log: Callable[[str], None] = _stderr
    outcomes: dict[str, dict[str, Completion]] = field(default_factory=dict)  # model -> key ->

    def check(self, models: Sequence[str], api_base: str | None, *, no_cache: bool) -> None:
        """Before anything runs: a cache to fill, and models that have a batch API."""
        if no_cache:
            raise BatchError(
                "--batch puts the batch's answers in the response cache, which --no-cache "
                "turns off: drop one of the two"
            )
        for model in models:
            check_batchable(model, api_base)

    def __call__(
        self,
        catalog: Catalog,
        resolved: Sequence[ResolvedTrial],
        lms: dict[str, Any],
        cache: ResponseCache | None,
    ) -> tuple[dict[str, Any], BatchAnswers]:
        """Answer every model's uncached requests by batch; the models and the cache the
        trials use."""
        self.cache = cache if cache is not None else self.cache
        if self.cache is None:
            raise BatchError("--batch needs the response cache to put the answers in")
        refused = sorted({f"{rt.spec.task} ({rt.spec.scoring})" for rt in resolved
                          if rt.spec.scoring in LOGLIK})  # fmt: skip
        if refused:
            raise BatchError(
                f"log-likelihood scoring has no batch path ({', '.join(refused[:5])}): "
                "drop --batch, or set scoring: generate in the spec"
            )
        ledger = BatchLedger.beside(self.cache.directory)
        out: dict[str, Any] = {}
        for model, lm in lms.items():
            mine = [rt for rt in resolved if rt.spec.model == model]
            requests = uncached_requests(catalog, mine, lm, self.cache)
            if requests:  # a killed sweep's requests are still uncached: it resumes here
                client = BatchClient(model, ledger, poll=self.poll, log=self.log)
                self.outcomes[model] = client.run(requests, self.cache)
            out[model] = BatchedLM(lm, self.outcomes.get(model, {}))
        fresh = {k for answers in self.outcomes.values() for k in answers}
        return out, BatchAnswers(self.cache, fresh)


def uncached_requests(
    catalog: Catalog, resolved: Sequence[ResolvedTrial], lm: Any, cache: ResponseCache
) -> list[BatchRequest]:
    """The calls these trials would make that `cache` cannot answer, each once, in trial and
    row order: the prompts, decodings and keys of `experiments.trials.run.run_trial`."""
    identity = lm.cache_identity()
    seen: set[str] = set()
    out: list[BatchRequest] = []
    for rt in resolved:
        task = catalog.task(rt.spec.task)
        decoding = trial_decoding(task.spec, getattr(lm, "mode", "chat"), rt.compiled)
        for row in rt.rows:
            prompt = rt.compiled.render(row)
            key = cache_key(identity, prompt, decoding)
            if key in seen or cache.get(key) is not None:
                continue
            seen.add(key)
            out.append(BatchRequest(key, prompt, decoding))
    return out
