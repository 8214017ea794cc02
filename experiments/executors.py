"""Where a sweep's trials run: in this process, or on a Ray cluster.

The sweep driver (`experiments.sweeps.run_sweep`) stays in charge of everything that must
happen once: it claims each trial (`Tracker.claim`), hands the claimed trials to an
executor, and logs each `TrialResult` the executor gives back to MLflow, then releases the
claim. Workers only *compute* trials; they never talk to MLflow. So resume, run states,
comparisons and exit codes are the same whichever executor ran the trials, and a worker
that dies mid-trial cannot leave a FINISHED run behind: nothing is logged until its result
reaches the driver.

- `LocalExecutor` runs each trial as it is claimed, in this process (the historical
  behaviour: claim, run, log, one trial after another).
- `RayExecutor` runs whole trials on a pool of Ray actors. Each actor is one model replica:
  a local (llama.cpp) model is loaded once per actor, with `n_threads` threads, and a trial's
  rows go through it in order, so llama.cpp's prefix reuse works as in a local run. Remote
  providers go through the same gateway (`experiments.models.LiteLLMModel`) with its
  concurrency and retries. An actor whose process dies is restarted and its trial retried
  (`max_restarts`, `max_task_retries`); when the retries are spent, the trial comes back
  as `TrialLost` and the sweep reports it incomplete, left for resume.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from promptlib.errors import WorkbenchError

if TYPE_CHECKING:
    from experiments.cache import ResponseCache
    from experiments.models import LM
    from experiments.runner import ResolvedTrial, TrialResult
    from promptlib.tasks import Catalog, Task

# Settings a worker process needs from the driver's environment. Provider API keys are *not*
# forwarded (they would be stored in the cluster's runtime environment): set them on each
# node before `ray start`. A local instance (no address) inherits the driver's environment.
FORWARDED_ENV = ("LITELLM_LOCAL_MODEL_COST_MAP", "WORKBENCH_LOCAL_N_CTX", "OMP_WAIT_POLICY")


class ExecutorError(WorkbenchError):
    pass


@dataclass(frozen=True)
class TrialJob:
    """One claimed trial: what a worker needs to run it without the data folder."""

    key: int  # the driver's index of the trial in its plan
    resolved: ResolvedTrial
    task: Task  # carries the rows and spec it was resolved from
    lm: LM


@dataclass(frozen=True)
class TrialLost:
    """A trial whose worker died and whose retries are spent: no result, left for resume."""

    reason: str


class Executor(Protocol):
    """Runs claimed trials and yields each one's result as it finishes (any order)."""

    def map_trials(
        self, jobs: Iterable[TrialJob], catalog: Catalog, cache: ResponseCache | None
    ) -> Iterator[tuple[TrialJob, TrialResult | TrialLost]]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """Today's behaviour: each trial runs in this process right after it is claimed."""

    def map_trials(
        self, jobs: Iterable[TrialJob], catalog: Catalog, cache: ResponseCache | None
    ) -> Iterator[tuple[TrialJob, TrialResult | TrialLost]]:
        from experiments.runner import run_trial

        for job in jobs:  # pulled one at a time: the next claim waits for this log
            yield job, run_trial(job.resolved, catalog, job.lm, cache=cache)

    def close(self) -> None:
        pass


class _OneTask:
    """The slice of `Catalog` that `run_trial` uses, backed by a shipped `Task`."""

    def __init__(self, task: Task) -> None:
        self._task = task

    def task(self, name: str) -> Task:
        if name != self._task.name:
            raise ExecutorError(f"worker got task {self._task.name!r}, asked for {name!r}")
        return self._task


def _preload_local(name: str, n_threads: int) -> None:
    """Load a bundled model in this actor with `n_threads` threads: the CPUs Ray gave the
    actor, not every core of the node (llama.cpp would oversubscribe them)."""
    from unittest import mock

    from experiments import models

    if not name.startswith(models.LOCAL_PROVIDER + "/"):
        return
    os.environ["WORKBENCH_LOCAL_N_THREADS"] = str(n_threads)
    # `load_local` sizes its thread pool by os.cpu_count(); in this actor process that is
    # the actor's share. Same loader, so every other setting is as in a local run.
    with mock.patch.object(os, "cpu_count", return_value=n_threads):
        models.load_local(name.split("/", 1)[1])


class TrialWorker:
    """A Ray actor body: one model replica that runs whole trials, in row order."""

    def __init__(self, n_threads: int, cache_dir: str | None) -> None:
        self.n_threads = n_threads
        self.cache_dir = cache_dir
        self._cache: ResponseCache | None = None

    def pid(self) -> int:
        return os.getpid()

    def run(self, job: TrialJob) -> TrialResult:
        from experiments.cache import ResponseCache
        from experiments.runner import run_trial

        if self.cache_dir is not None and self._cache is None:
            self._cache = ResponseCache(self.cache_dir)
        _preload_local(job.lm.name, self.n_threads)
        return run_trial(
            job.resolved,
            _OneTask(job.task),  # type: ignore[arg-type]
            job.lm,
            cache=self._cache,
        )


def _worker_died() -> tuple[type[BaseException], ...]:
    from ray import exceptions as rex

    return tuple(
        getattr(rex, n)
        for n in ("RayActorError", "WorkerCrashedError", "NodeDiedError", "ObjectLostError")
        if hasattr(rex, n)
    )


class RayExecutor:
    """Whole trials on Ray actors; the driver keeps claiming, tracking and comparing.

    `address`: None starts a private local Ray instance (loopback, no dashboard, `num_cpus`
    CPUs, shut down by `close`); ``auto``, ``host:port`` or ``ray://host:10001`` joins a
    running cluster, where every node has this package installed (``pip install
    '.[ray,local]'``) and, for remote providers, the API keys in its environment.
    `replicas` actors are started (default: the cluster's CPUs divided by `n_threads`),
    each holding at most one trial at a time.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        replicas: int | None = None,
        n_threads: int = 1,
        num_cpus: int | None = None,
        max_restarts: int = 2,
        max_task_retries: int = 2,
    ) -> None:
        try:
            import ray
        except ImportError as e:
            raise ExecutorError("--executor ray needs Ray: pip install -e '.[ray]'") from e
        if n_threads < 1 or (replicas is not None and replicas < 1):
            raise ExecutorError("replicas and n_threads must be at least 1")
        self.ray = ray
        self.n_threads = n_threads
        self.max_restarts = max_restarts
        self.max_task_retries = max_task_retries
        self._started = False
        env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {
                "runtime_env": {"env_vars": env},
                "log_to_driver": False,
                "logging_level": "ERROR",
                "configure_logging": True,
            }
            if address is None:
                kwargs.update(
                    include_dashboard=False,
                    num_cpus=num_cpus or os.cpu_count() or 1,
                    _node_ip_address="127.0.0.1",
                )
            else:
                kwargs["address"] = address
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError, TimeoutError) as e:
                where = address or "a local instance"
                raise ExecutorError(f"cannot start or join the Ray cluster at {where}: {e}") from e
            self._started = True
        cpus = int(ray.cluster_resources().get("CPU", 1))  # type: ignore[no-untyped-call]
        self.replicas = replicas or max(1, cpus // n_threads)
        self._actors: list[Any] = []
        self.spawned_pids: list[int] = []

    def _spawn(self, cache_dir: str | None) -> None:
        worker = self.ray.remote(
            num_cpus=self.n_threads,
            max_restarts=self.max_restarts,
            max_task_retries=self.max_task_retries,
        )(TrialWorker)
        self._actors = [worker.remote(self.n_threads, cache_dir) for _ in range(self.replicas)]
        # Wait for the replicas to be up (their processes' ids, e.g. for a fault test).
        self.spawned_pids += [int(p) for p in self.ray.get([a.pid.remote() for a in self._actors])]

    def map_trials(
        self, jobs: Iterable[TrialJob], catalog: Catalog, cache: ResponseCache | None
    ) -> Iterator[tuple[TrialJob, TrialResult | TrialLost]]:
        ray = self.ray
        source = iter(jobs)
        first = next(source, None)
        if first is None:  # every trial resumed or held by a peer: start no actor
            return
        source = itertools.chain([first], source)
        if not self._actors:
            self._spawn(str(cache.directory) if cache is not None else None)
        free = list(self._actors)
        running: dict[Any, tuple[TrialJob, Any]] = {}
        exhausted = False
        died = _worker_died()
        while True:
            # Claim only as many trials as there are idle replicas: a claimed trial waits
            # on no queue, and a peer process can take the rest.
            while free and not exhausted:
                job = next(source, None)
                if job is None:
                    exhausted = True
                    break
                actor = free.pop()
                running[actor.run.remote(job)] = (job, actor)
            if not running:
                return
            ready, _ = ray.wait(list(running), num_returns=1)
            job, actor = running.pop(ready[0])
            try:
                result: TrialResult | TrialLost = ray.get(ready[0])
            except ray.exceptions.RayTaskError as e:  # the trial itself raised: as locally
                cause = e.cause if isinstance(e.cause, BaseException) else None
                raise (cause or ExecutorError(str(e))) from None
            except died as e:
                lines = str(e).strip().splitlines()
                result = TrialLost(f"Ray worker lost: {lines[0][:200] if lines else e}")
            if not isinstance(result, TrialLost) and result.trial_id != job.resolved.id:
                raise ExecutorError(
                    f"a Ray worker returned trial {result.trial_id} for trial "
                    f"{job.resolved.id}: refusing to log it (a bug; please report it)"
                )
            yield job, result
            if isinstance(result, TrialLost):
                self._actors.remove(actor)
                with contextlib.suppress(Exception):  # a dropped replica must free its CPUs
                    ray.kill(actor)
                if not self._actors:  # every replica is gone: restart the pool once more
                    self._spawn(str(cache.directory) if cache is not None else None)
                    free = list(self._actors)
                continue
            free.append(actor)

    def close(self) -> None:
        for actor in self._actors:
            with contextlib.suppress(Exception):  # already gone
                self.ray.kill(actor)
        self._actors = []
        if self._started:
            self.ray.shutdown()
            self._started = False


def check_choice(name: str, address: str | None = None) -> None:
    """Refuse a wrong ``--executor``/``--ray-address`` pair before anything starts."""
    if name not in ("local", "ray"):
        raise ExecutorError(f"--executor must be local or ray, not {name!r}")
    if name == "local" and address is not None:
        raise ExecutorError("--ray-address needs --executor ray")


def get_executor(name: str, address: str | None = None) -> Executor:
    """The executor behind ``--executor local|ray`` and ``--ray-address``."""
    check_choice(name, address)
    return LocalExecutor() if name == "local" else RayExecutor(address)
