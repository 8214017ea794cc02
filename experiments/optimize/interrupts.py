"""Signals that stop a study, and the clean-up of what a stopped or killed worker left running."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from experiments.optimize.study import FAILURE_ATTR
from experiments.secrets import redact

log = logging.getLogger("workbench.optimize")
WORKER_ATTR = "worker"  # host, pid and process start of the process running the trial
INTERRUPTED = "interrupted"  # FAILURE_ATTR of a trial whose process was stopped mid-way
# A RUNNING trial or child run that carries no worker (made by code before WORKER_ATTR, or a
# process killed in the instant between creating it and naming itself) is left to its
# process for this long before it counts as abandoned.
STALE_AFTER = 600.0
# parent run id -> when this process began logging a trial's child run under it (until done)
_LOGGING: dict[str, float] = {}


class _Interrupts:
    """The signals `_signals_interrupt` took, and whether one may interrupt right now.

    While `critical` (Optuna writing a trial's state between evaluations), a signal is only
    noted and `open()` raises it once that is done, so a trial is never left half-told.
    """

    def __init__(self) -> None:
        self.received: list[int] = []
        self.critical = False
        self.pending = False

    def signalled(self, signum: int) -> None:
        self.received.append(signum)
        if self.critical:
            self.pending = True
            return
        raise KeyboardInterrupt

    def open(self) -> None:
        """Leave the critical section, raising a signal noted in it."""
        self.critical = False
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[_Interrupts]:
    """Within: SIGTERM raises KeyboardInterrupt as Ctrl-C does, so the study is cleaned up.

    Without it SIGTERM ends the process at once: the running Optuna trial stays RUNNING and
    its half-logged MLflow run keeps a score. Only in the main thread (the only one Python
    delivers signals to), and only where the signal still has its default handler.
    """
    guard = _Interrupts()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return

    def interrupt(signum: int, frame: Any) -> None:
        guard.signalled(signum)

    defaults = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}
    previous = {sig: signal.getsignal(sig) for sig in defaults}
    mine = [sig for sig, default in defaults.items() if previous[sig] is default]
    for sig in mine:
        signal.signal(sig, interrupt)
    try:
        yield guard
    finally:
        for sig in mine:
            signal.signal(sig, previous[sig])


def _process_start(pid: int) -> str | None:
    """When process `pid` started (Linux: clock ticks since boot), to tell a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def _pid_namespace() -> str | None:
    """Which pid namespace this process sees (containers on one host share its name)."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _worker() -> dict[str, Any]:
    """This process, as recorded on the trials it runs."""
    return {
        "host": socket.gethostname(),
        "pids": _pid_namespace(),
        "pid": os.getpid(),
        "start": _process_start(os.getpid()),
    }


def _abandoned(trial: Any, mine: bool) -> bool:
    """A RUNNING trial that no live process will finish.

    With `mine`: a trial of this process (an interrupt stopped it). Otherwise: a trial of
    a process on this host and pid namespace that is gone (or whose pid now names another
    process), or one with no worker recorded that has run for over STALE_AFTER. A trial of
    another host or container is left alone: its process cannot be checked from here.
    """
    worker = trial.user_attrs.get(WORKER_ATTR)
    if not isinstance(worker, dict):
        if mine:
            return False
        started = trial.datetime_start.timestamp() if trial.datetime_start else time.time()
        return time.time() - started > STALE_AFTER
    me = _worker()
    if worker.get("host") != me["host"] or worker.get("pids") != me["pids"]:
        return False  # another machine or container: its pids mean nothing here
    if mine:
        return bool(worker.get("pid") == me["pid"] and worker.get("start") == me["start"])
    pid = worker.get("pid")
    if not isinstance(pid, int) or (pid == me["pid"] and worker.get("start") == me["start"]):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass  # alive, another user's
    return _process_start(pid) != worker.get("start")


def _clean_up(study: Any, tracker: Any, parent: str, mine: bool) -> None:
    """Leave the study as if the abandoned trials had failed before logging anything.

    Abandoned RUNNING trials (`_abandoned`) are marked FAIL with FAILURE_ATTR
    "interrupted"; the MLflow child runs of interrupted trials are deleted (a FINISHED one
    too: its trial counts as no result), as are unfinished child runs whose trial has ended
    and unfinished ones naming no trial that are older than STALE_AFTER. Best effort: a
    store that fails here is cleaned up by the next invocation.
    """
    from optuna.trial import Trial, TrialState

    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if _abandoned(t, mine):
            with contextlib.suppress(Exception):  # a peer may be failing it too
                Trial(study, t._trial_id).set_user_attr(FAILURE_ATTR, INTERRUPTED)
                study.tell(t.number, state=TrialState.FAIL)
    client = getattr(tracker, "client", None)
    if client is None:  # not tracked in MLflow
        return
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    try:
        exp = client.get_run(parent).info.experiment_id
        children = client.search_runs(
            [exp], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'", max_results=50_000
        )
        for run in children:
            number = run.data.params.get("optuna.trial")
            trial = trials.get(int(number)) if number and number.isdigit() else None
            unfinished = run.info.status not in ("FINISHED", "FAILED")
            if trial is None:  # killed before it named its trial (or not a trial's run)
                started = run.info.start_time / 1000
                ours = mine and started >= _LOGGING.get(parent, float("inf")) - 1.0
                doomed = (
                    unfinished and number is None and (ours or time.time() - started > STALE_AFTER)
                )
            elif trial.state == TrialState.FAIL:
                doomed = unfinished or trial.user_attrs.get(FAILURE_ATTR) == INTERRUPTED
            else:
                doomed = unfinished and trial.state != TrialState.RUNNING
            if doomed:
                client.delete_run(run.info.run_id)
    except Exception as e:  # the store went away: the next invocation cleans up
        log.warning("could not clean up the study's MLflow runs: %s", redact(str(e))[:200])
    finally:
        if mine:
            _LOGGING.pop(parent, None)
