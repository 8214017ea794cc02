"""Where a sweep's trials run: in this process, or on a Ray cluster.

The sweep driver (`experiments.sweeps.driver.run_sweep`) stays in charge of everything that must
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
  providers go through the same backends (`experiments.llm.get_model`) with their
  concurrency and retries. An actor whose process dies is restarted and its trial retried
  (`max_restarts`, `max_task_retries`); when the retries are spent, the trial comes back
  as `TrialLost` and the sweep reports it incomplete, left for resume. A trial that raises
  ends the sweep as in-process, after the trials running beside it are logged. `start`
  (called before the sweep writes anything) waits a bounded time for the actors and refuses
  workers whose local model identity differs from the driver's.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import socket
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from experiments import settings
from experiments.llm.answer_env import all_answer_names
from experiments.llm.backends import backend_class
from experiments.llm.cache import ResponseCache
from experiments.llm.identity import LOCAL_IDENTITY_KEYS, machine_identity, node_identity
from experiments.trials.run import run_trial
from promptlib.errors import WorkbenchError

if TYPE_CHECKING:
    from experiments.llm.cache import ResponseCache
    from experiments.llm.types import LM
    from experiments.trials.run import TrialResult
    from experiments.trials.spec import ResolvedTrial
    from promptlib.tasks import Catalog, Task

# Settings a worker process needs from the driver's environment. Provider API keys are *not*
# forwarded (they would be stored in the cluster's runtime environment): set them on each
# node before `ray start`. A local instance (no address) inherits the driver's environment.
# The CPU description (WORKBENCH_CPUINFO) is each node's own and is not forwarded.
FORWARDED_ENV = (
    "LITELLM_LOCAL_MODEL_COST_MAP",
    settings.LOCAL_N_CTX_ENV,
    settings.EXTRA_BUFTS_ENV,
    "OMP_WAIT_POLICY",
    "GOMP_SPINCOUNT",
)
START_TIMEOUT_ENV = settings.RAY_START_TIMEOUT_ENV
ACTORS_ENV = settings.RAY_ACTORS_ENV


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

    def start(self, lms: Sequence[LM], cache: ResponseCache | None) -> None:
        """Get ready for the sweep's models (raise if they cannot run) before it logs."""

    def map_trials(
        self, jobs: Iterable[TrialJob], catalog: Catalog, cache: ResponseCache | None
    ) -> Iterator[tuple[TrialJob, TrialResult | TrialLost]]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """Today's behaviour: each trial runs in this process right after it is claimed."""

    def start(self, lms: Sequence[LM], cache: ResponseCache | None) -> None:
        pass

    def map_trials(
        self, jobs: Iterable[TrialJob], catalog: Catalog, cache: ResponseCache | None
    ) -> Iterator[tuple[TrialJob, TrialResult | TrialLost]]:

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
    """Load a model that runs here in this actor with `n_threads` threads: the CPUs Ray gave
    the actor, not every core of the node (llama.cpp would oversubscribe them). Its backend
    decides (`preload`): a served or API model has nothing to load."""
    backend_class(name).preload(name, n_threads)


def worker_cache_dir(cache: ResponseCache | None) -> tuple[bool, str | None]:
    """(use a cache, its folder) for the workers: the driver's folder only when the user
    chose it (``WORKBENCH_CACHE_DIR``, or a cache opened on an explicit path); otherwise
    None, and each node opens its own default (a driver's home folder may not exist there)."""

    if cache is None:
        return False, None
    default = settings.default_responses_dir()  # `ResponseCache()`'s
    explicit = settings.cache_dir_from_env() or cache.directory != default
    return True, (str(cache.directory) if explicit else None)


class TrialWorker:
    """A Ray actor body: one model replica that runs whole trials, in row order.

    On start it computes its own identity of the sweep's local models (`local_identity`),
    which the driver compares with its own before any trial is sent; `run` checks it again
    against each trial's identity (a restarted actor may land on another node)."""

    def __init__(
        self, n_threads: int, use_cache: bool, cache_dir: str | None, models: Sequence[str]
    ) -> None:
        self.n_threads = n_threads
        self.use_cache = use_cache
        self.cache_dir = cache_dir
        self._cache: ResponseCache | None = None
        self.identity = {m: node_identity(m) for m in models}

    def hello(self) -> dict[str, Any]:
        """Who this replica is: process, node, model identities and cache folder."""

        return {
            "pid": os.getpid(),
            "node": socket.gethostname(),
            "identity": self.identity,
            "cache_dir": (self.cache_dir or str(settings.responses_dir()))
            if self.use_cache
            else None,
        }

    def run(self, job: TrialJob) -> TrialResult:

        mine = machine_identity(job.lm)
        env = mine.pop("env", None)
        # every identity key either side has: the layout key is present only when off
        keys = set(mine) | (LOCAL_IDENTITY_KEYS & set(job.resolved.lm_identity))
        mine = {k: mine.get(k) for k in keys}
        theirs = {k: job.resolved.lm_identity.get(k) for k in keys}
        # the environment that decides the model's answers (a server named by OPENAI_BASE_URL)
        mine["env"] = env
        theirs["env"] = job.resolved.lm_identity.get("env")
        if mine != theirs:
            raise ExecutorError(identity_mismatch(job.lm.name, socket.gethostname(), mine, theirs))
        if self.use_cache and self._cache is None:
            self._cache = ResponseCache(self.cache_dir)  # None: this node's default folder
        _preload_local(job.lm.name, self.n_threads)
        return run_trial(
            job.resolved,
            _OneTask(job.task),  # type: ignore[arg-type]
            job.lm,
            cache=self._cache,
        )


def identity_mismatch(model: str, node: str, worker: dict[str, Any], driver: dict[str, Any]) -> str:
    diff = ", ".join(
        f"{k} {worker.get(k)!r} on the worker, {driver.get(k)!r} on the driver"
        for k in sorted(set(worker) | set(driver))
        if worker.get(k) != driver.get(k)
    )
    return (
        f"the Ray worker on {node} has another {model} than this machine ({diff}): its "
        "results would be logged under this machine's identity. Install the same package "
        "versions and set the same WORKBENCH_LOCAL_N_CTX and the same variables naming a "
        "model's server (OPENAI_BASE_URL, ...) on every node (and, where some CPUs "
        "have AMX and others not, WORKBENCH_LLAMA_EXTRA_BUFTS=off here: it is forwarded), "
        "or run with "
        "--executor local"
    )


def _worker_died() -> tuple[type[BaseException], ...]:
    from ray import exceptions as rex

    return tuple(
        getattr(rex, n)
        for n in ("RayActorError", "WorkerCrashedError", "NodeDiedError", "ObjectLostError")
        if hasattr(rex, n)
    )


def _first_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[0][:300] if lines else type(e).__name__


def _reason(e: BaseException) -> str:
    """The exception behind a Ray error, in one line: an actor that died in ``__init__``
    carries it only inside its message's traceback (its last exception line)."""
    cause = getattr(e, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {_first_line(cause)}"
    found = re.findall(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception): .+)$", str(e), re.MULTILINE)
    return found[-1][:300] if found else _first_line(e)


def _start_timeout() -> float:
    return settings.ray_start_timeout(ExecutorError)


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
        self.where = address or "a local Ray instance"
        self.n_threads = n_threads
        self.max_restarts = max_restarts
        self.max_task_retries = max_task_retries
        self.start_timeout = _start_timeout()
        self._started = False
        self._signals: dict[int, Any] = {}
        # and the variables that decide a model's answers (OPENAI_BASE_URL, ...): the workers
        # call the server this machine's identity names
        forwarded = (*FORWARDED_ENV, *sorted(all_answer_names()))
        env = {k: os.environ[k] for k in forwarded if k in os.environ}
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
            # ray.init installs a SIGTERM handler (sys.exit) that outlives ray.shutdown: put
            # the process's own back on close, or a later optimize in this process cannot
            # install its clean-up handler (it only replaces a default one)
            self._signals = _current_handlers()
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError, TimeoutError) as e:
                _restore_handlers(self._signals)
                raise ExecutorError(
                    f"cannot start or join the Ray cluster at {self.where}: {e}"
                ) from e
            self._started = True
        cpus = int(ray.cluster_resources().get("CPU", 1))  # type: ignore[no-untyped-call]
        self.replicas = replicas or max(1, cpus // n_threads)
        self._actors: list[Any] = []
        self._models: list[str] = []
        self._cache: tuple[bool, str | None] = (False, None)
        self.spawned_pids: list[int] = []
        self.workers: list[dict[str, Any]] = []  # each started actor's `TrialWorker.hello`

    def start(self, lms: Sequence[LM], cache: ResponseCache | None) -> None:
        """Start the actors and check their model identities against this process's,
        before the sweep writes anything; raises `ExecutorError` with what to do."""
        self._models = sorted({lm.name for lm in lms})
        self._cache = worker_cache_dir(cache)
        expected = {}
        for lm in lms:
            expected[lm.name] = node_identity(lm.name)
        self._spawn()
        for info in self.workers:
            for name, want in expected.items():
                got = info["identity"].get(name, {})
                if got != want:
                    self.close()
                    raise ExecutorError(identity_mismatch(name, info["node"], got, want))

    def _spawn(self) -> None:
        """Start `replicas` actors and wait (bounded) until each has said hello."""
        ray = self.ray
        worker = ray.remote(
            num_cpus=self.n_threads,
            max_restarts=self.max_restarts,
            max_task_retries=self.max_task_retries,
        )(TrialWorker)
        use_cache, cache_dir = self._cache
        actors = [
            worker.remote(self.n_threads, use_cache, cache_dir, self._models)
            for _ in range(self.replicas)
        ]
        self._actors = actors
        refs = [a.hello.remote() for a in actors]
        _, waiting = ray.wait(refs, num_returns=len(refs), timeout=self.start_timeout)
        try:
            if waiting:
                free = ray.available_resources().get("CPU", 0)
                total = ray.cluster_resources().get("CPU", 0)
                raise ExecutorError(
                    f"{len(waiting)} of {len(refs)} Ray actors did not start within "
                    f"{self.start_timeout:g} s on the cluster at {self.where} (each needs "
                    f"{self.n_threads} CPU; {free:g} of {total:g} CPUs are free): free CPUs "
                    f"on the cluster, start fewer actors ({ACTORS_ENV}), or run with "
                    f"--executor local ({START_TIMEOUT_ENV} sets how long to wait)"
                )
            infos = ray.get(refs)
        except BaseException as e:
            self._kill(actors)  # nothing left holding the cluster's CPUs
            if not isinstance(e, ray.exceptions.RayError):
                raise
            raise ExecutorError(
                f"a Ray actor failed to start on the cluster at {self.where}: "
                f"{_reason(e)}. Check that every node has this package and its "
                "extras installed (pip install -e '.[ray,local]') with the same settings, "
                "or run with --executor local"
            ) from None
        self.workers += infos
        self.spawned_pids += [int(i["pid"]) for i in infos]

    def _kill(self, actors: list[Any]) -> None:
        for actor in actors:
            with contextlib.suppress(Exception):  # already gone
                self.ray.kill(actor)
        self._actors = [a for a in self._actors if a not in actors]

    def map_trials(
        self, jobs: Iterable[TrialJob], catalog: Catalog, cache: ResponseCache | None
    ) -> Iterator[tuple[TrialJob, TrialResult | TrialLost]]:
        """Run the jobs on the actors; yield each result as it arrives.

        A trial that raises on its worker stops the claiming of new trials, as it stops a
        local sweep; the trials already running on other actors are still awaited and
        yielded (logged by the driver), then the first trial's exception is raised."""
        ray = self.ray
        source = iter(jobs)
        first = next(source, None)
        if first is None:  # every trial resumed or held by a peer: start no actor
            return
        source = itertools.chain([first], source)
        if not self._actors:
            if not self.workers:  # `start` was not called: same checks now
                self.start([first.lm], cache)
            else:
                self._spawn()
        free = list(self._actors)
        running: dict[Any, tuple[TrialJob, Any]] = {}
        exhausted = False
        failure: BaseException | None = None
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
                if failure is not None:
                    raise failure
                return
            ready, _ = ray.wait(list(running), num_returns=1)
            job, actor = running.pop(ready[0])
            try:
                result: TrialResult | TrialLost = ray.get(ready[0])
            except ray.exceptions.RayTaskError as e:  # the trial itself raised: as locally
                cause = e.cause if isinstance(e.cause, BaseException) else None
                failure = failure or cause or ExecutorError(str(e))
                exhausted = True  # claim nothing more; let the running trials finish
                free.append(actor)
                continue
            except died as e:
                result = TrialLost(f"Ray worker lost: {_first_line(e)[:200]}")
            if not isinstance(result, TrialLost) and result.trial_id != job.resolved.id:
                raise ExecutorError(
                    f"a Ray worker returned trial {result.trial_id} for trial "
                    f"{job.resolved.id}: refusing to log it (a bug; please report it)"
                )
            yield job, result
            if isinstance(result, TrialLost):
                self._kill([actor])  # a dropped replica must free its CPUs
                if not self._actors and not exhausted:  # every replica is gone: once more
                    self._spawn()
                    free = list(self._actors)
                continue
            free.append(actor)

    def close(self) -> None:
        self._kill(list(self._actors))
        if self._started:
            self.ray.shutdown()
            self._started = False
            _restore_handlers(self._signals)


def _current_handlers() -> dict[int, Any]:
    """SIGTERM's and SIGINT's handlers, where this thread may change them (the main one)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}


def _restore_handlers(handlers: dict[int, Any]) -> None:
    """Put the handlers back; only the main thread may (a sweep may close its executor from
    another thread: Python raises ValueError there, so the handlers stay as Ray left them)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig, handler in handlers.items():
        if handler is not None:  # None: set outside Python, cannot be put back
            signal.signal(sig, handler)


def check_choice(name: str, address: str | None = None) -> None:
    """Refuse a wrong ``--executor``/``--ray-address`` pair before anything starts."""
    if name not in ("local", "ray"):
        raise ExecutorError(f"--executor must be local or ray, not {name!r}")
    if name == "local" and address is not None:
        raise ExecutorError("--ray-address needs --executor ray")


def _actors_from_env() -> int | None:
    return settings.ray_actors(ExecutorError)


def get_executor(name: str, address: str | None = None) -> Executor:
    """The executor behind ``--executor local|ray`` and ``--ray-address``
    (``WORKBENCH_RAY_ACTORS``: how many actors; default one per cluster CPU)."""
    check_choice(name, address)
    return LocalExecutor() if name == "local" else RayExecutor(address, replicas=_actors_from_env())
