"""Sweeps on a Ray cluster: same trials, predictions and p-values as in-process; a killed
worker's trial is retried or left for resume, never logged twice.

The module starts a two-node Ray cluster (a head and one worker node, one CPU each) in its own
process groups and takes both groups down at teardown (no `ray stop`, which would stop every
Ray process on the machine).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from experiments.llm.cache import ResponseCache
from experiments.llm.gateway import LiteLLMModel, get_model
from experiments.llm.types import Completion, Decoding, ModelError
from experiments.sweeps.driver import run_sweep
from experiments.sweeps.result import SweepResult
from experiments.sweeps.spec import load_spec
from experiments.testing.stub_server import StubOpenAI, hashed_yes_no
from experiments.tracking import Tracker, TrackingConfig
from promptlib import Catalog
from tests.conftest import workbench_env

ray = pytest.importorskip("ray")
from experiments.sweeps.executors import (  # noqa: E402
    ExecutorError,
    LocalExecutor,
    RayExecutor,
    worker_cache_dir,
)

pytestmark = [pytest.mark.slow, pytest.mark.data]

SPEC = """
name: ray_check
tasks: [hearsay, personal_jurisdiction]
fixed: {demos: none}
axes:
  instruction: [reference, description]
comparisons: [[instruction=reference, instruction=description]]
n_resamples: 200
"""
KEY = "sk-dummy-key-for-the-local-stub"
ROWS = 6  # rows per trial: 4 trials of 6 rows keep each sweep short
BOOT_TIMEOUT = 150.0
Trials = dict[tuple[str, str], dict[str, Any]]
Reference = tuple[SweepResult, Trials]  # a sweep's result and its trials


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_node(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    ray_cli = Path(sys.executable).parent / "ray"
    common = [
        "--block", "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
        "--disable-usage-stats", "--object-store-memory", str(100 * 1024**2),
        "--node-manager-port", str(_port()), "--object-manager-port", str(_port()),
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(ray_cli), "start", *args, *common],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: teardown kills exactly it
        )
    deadline = time.monotonic() + BOOT_TIMEOUT
    while "Ray runtime started" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc)
            pytest.fail(f"ray start did not come up:\n{log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Take down one node's process group: a short graceful drain, then SIGKILL."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _leftovers(marker: str) -> list[int]:
    """Processes of this cluster still alive (their command line names its temp folder)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().split(") ", 1)[1][:1]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A head and one worker node on this machine; yields the GCS address."""
    root = tmp_path_factory.mktemp("ray")
    env = {
        **{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
        "RAY_USAGE_STATS_ENABLED": "0",
        "OPENAI_API_KEY": KEY,  # the workers' environment: the stub's dummy key
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        # a private HOME: an auth token some other Ray left in ~/.ray must not apply here
        "HOME": str(root / "home"),
    }
    port = _port()
    # Ray's sockets live under its temp dir, and an AF_UNIX path is at most 107 bytes: under
    # pytest-xdist the tmp_path ('/tmp/pytest-of-root/pytest-N/popen-gw1/ray0/...') is too long.
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    head = _start_node(
        ["--head", "--port", str(port), "--include-dashboard=false", "--temp-dir", temp],
        root / "head.log",
        env,
    )  # fmt: skip
    try:
        worker = _start_node(
            ["--address", f"127.0.0.1:{port}", "--temp-dir", temp], root / "worker.log", env
        )
    except BaseException:
        _stop(head)
        raise
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield f"127.0.0.1:{port}"
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for sig, handler in handlers.items():  # the tests' own ray.init left Ray's
            signal.signal(sig, handler)
        _stop(worker)
        _stop(head)
        left = _leftovers(temp)
        for pid in left:  # a process of ours that left its group: by id, never by name
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)
        assert not left, f"Ray processes outlived the cluster: {left}"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mlflow")


def _tracker(store: Path, prefix: str) -> Tracker:
    """One MLflow store for the module; each sweep in its own experiment (prefix)."""
    return Tracker(
        TrackingConfig(
            tracking_uri=f"sqlite:///{store}/mlflow.db",
            artifact_location=(store / "artifacts").as_uri(),
            experiment_prefix=prefix,
            prompt_registry=False,
            source="test",
        )
    )


def _sweep(
    spec: Path,
    catalog: Catalog,
    tracker: Tracker,
    lm: LiteLLMModel,
    executor: Any,
    limit: int,
) -> SweepResult:
    try:
        return run_sweep(
            load_spec(spec),
            catalog,
            models=(lm.name,),
            limit=limit,
            tracker=tracker,
            lm_factory=lambda _name: lm,
            executor=executor,
        )
    finally:
        executor.close()


def _trials(tracker: Tracker, parent: str) -> Trials:
    """(task, variant) -> trial id, run status, score and predictions (as compared) of every
    child run of `parent`; fails if a trial has two runs."""
    out: Trials = {}
    keep = ("index", "answer", "generation", "parsed", "correct", "error", "prompt_hash")
    for run in tracker._children(parent):
        key = (run.data.params["task"], run.data.params["variant"])
        assert key not in out, f"two runs for trial {key}"
        preds = tracker.load_predictions(run.info.run_id) if run.info.status == "FINISHED" else []
        out[key] = {
            "trial_id": run.data.tags["workbench.trial_id"],
            "status": run.info.status,
            "score": run.data.metrics.get("score"),
            "predictions": [{k: p.to_dict()[k] for k in keep} for p in preds],
        }
    return out


def _sweep_runs(tracker: Tracker, experiment: str) -> list[Any]:
    """The sweep (parent) runs in `experiment`; none when it was never created."""
    exp = tracker.client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    return list(tracker.client.search_runs([exp.experiment_id], "tags.`workbench.kind` = 'sweep'"))


def _without_ids(trials: Trials) -> dict[Any, Any]:
    """For sweeps on another stub server: its URL is part of the trial id."""
    return {k: {f: v for f, v in t.items() if f != "trial_id"} for k, t in trials.items()}


def _p_values(result: SweepResult) -> list[tuple[str, str, Any, Any]]:
    return [(c["task"], c["model"], c["p_value"], c.get("p_corrected")) for c in result.comparisons]


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("spec") / "ray_check.yaml"
    p.write_text(SPEC)
    return p


@pytest.fixture(scope="module")
def stub() -> Iterator[StubOpenAI]:
    with StubOpenAI(latency=0.05, reply_fn=hashed_yes_no) as s:
        yield s


@pytest.fixture(scope="module")
def local_stub_run(spec_path: Path, catalog: Catalog, store: Path, stub: StubOpenAI) -> Reference:
    """The reference: the same sweep through the local executor."""
    os.environ.setdefault("OPENAI_API_KEY", KEY)
    tracker = _tracker(store, "local")
    lm = LiteLLMModel("openai/stub", api_base=stub.url, concurrency=1)
    result = _sweep(spec_path, catalog, tracker, lm, LocalExecutor(), limit=ROWS)
    assert result.status == "complete"
    return result, _trials(tracker, result.parent_run_id)


def test_ray_gives_the_same_trials_predictions_and_p_values(
    cluster: str,
    spec_path: Path,
    catalog: Catalog,
    store: Path,
    stub: StubOpenAI,
    local_stub_run: Reference,
) -> None:
    local, local_trials = local_stub_run
    tracker = _tracker(store, "ray")
    lm = LiteLLMModel("openai/stub", api_base=stub.url, concurrency=1)
    result = _sweep(spec_path, catalog, tracker, lm, RayExecutor(cluster), limit=ROWS)
    assert result.status == "complete" and result.trials == 4
    assert result.sweep_id == local.sweep_id
    trials = _trials(tracker, result.parent_run_id)
    assert trials == local_trials  # same ids, every prediction, the same scores
    assert _p_values(result) == _p_values(local)
    assert all(p is not None for _, _, p, _ in _p_values(result))
    assert result.across_tasks == local.across_tasks


def _kill_when_busy(executor: RayExecutor, stub: StubOpenAI, after: int) -> list[int]:
    """Wait until the workers have sent `after` requests, then SIGKILL the first actor's
    process (mid-trial: each actor holds a trial whose rows are still being sent)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if executor.spawned_pids and len(stub.requests) >= after:
            victim = executor.spawned_pids[0]
            os.kill(victim, signal.SIGKILL)
            return [victim]
        time.sleep(0.05)
    raise AssertionError("the workers never got busy")


def test_a_killed_worker_is_retried_and_no_trial_has_two_runs(
    cluster: str,
    spec_path: Path,
    catalog: Catalog,
    store: Path,
    local_stub_run: Reference,
) -> None:
    local, local_trials = local_stub_run
    with StubOpenAI(latency=0.15, reply_fn=hashed_yes_no) as slow:
        tracker = _tracker(store, "killed")
        lm = LiteLLMModel("openai/stub", api_base=slow.url, concurrency=1)
        executor = RayExecutor(cluster, max_restarts=2, max_task_retries=2)
        killed: list[tuple[int, float]] = []  # (pid, when): proof the kill happened mid-sweep

        def kill() -> None:
            killed.extend((pid, time.monotonic()) for pid in _kill_when_busy(executor, slow, 3))

        killer = threading.Thread(target=kill, daemon=True)
        killer.start()
        result = _sweep(spec_path, catalog, tracker, lm, executor, limit=ROWS)
        ended = time.monotonic()
        killer.join(5)
        sent = len(slow.requests)
    assert [pid for pid, _ in killed] == executor.spawned_pids[:1], killed
    assert killed[0][1] < ended  # killed while the sweep ran, not after it returned
    # Both actors held a trial when one was killed (4 trials, 2 actors, no trial done yet):
    # the sweep completes only because Ray restarted the actor and retried its trial.
    assert len(executor.spawned_pids) == 2
    with pytest.raises(ProcessLookupError):
        os.kill(executor.spawned_pids[0], 0)
    assert result.status == "complete", result.incomplete
    assert sent >= 4 * ROWS  # more when the victim had sent some of its rows already
    trials = _trials(tracker, result.parent_run_id)
    assert all(t["status"] == "FINISHED" for t in trials.values())
    # one FINISHED run per trial, predictions as in-process
    assert _without_ids(trials) == _without_ids(local_trials)
    assert _p_values(result) == _p_values(local)


def test_a_worker_killed_past_its_retries_leaves_the_trial_for_resume(
    cluster: str,
    spec_path: Path,
    catalog: Catalog,
    store: Path,
    local_stub_run: Reference,
) -> None:
    local, local_trials = local_stub_run
    with StubOpenAI(latency=0.15, reply_fn=hashed_yes_no) as slow:
        tracker = _tracker(store, "lost")
        lm = LiteLLMModel("openai/stub", api_base=slow.url, concurrency=1)
        executor = RayExecutor(cluster, max_restarts=0, max_task_retries=0)
        killer = threading.Thread(target=_kill_when_busy, args=(executor, slow, 3), daemon=True)
        killer.start()
        first = _sweep(spec_path, catalog, tracker, lm, executor, limit=ROWS)
        killer.join(5)
        assert first.status == "incomplete"
        lost = first.incomplete
        assert len(lost) == 1 and lost[0]["status"] == "failed" and lost[0]["n_errors"] == ROWS
        runs = _trials(tracker, first.parent_run_id)
        assert lost[0]["trial_id"] not in {t["trial_id"] for t in runs.values()}  # no run
        assert all(t["status"] == "FINISHED" for t in runs.values()) and len(runs) == 3
        parent = tracker.client.get_run(first.parent_run_id)
        assert parent.info.status == "FAILED"
        # The rerun (here in-process) runs only the lost trial.
        again = _sweep(spec_path, catalog, tracker, lm, LocalExecutor(), limit=ROWS)
    assert again.status == "complete" and again.resumed == 3
    assert again.parent_run_id == first.parent_run_id
    assert _without_ids(_trials(tracker, again.parent_run_id)) == _without_ids(local_trials)
    assert _p_values(again) == _p_values(local)


@pytest.mark.model
def test_real_model_sweep_on_two_ray_replicas_matches_in_process(
    cluster: str, catalog: Catalog, store: Path, tmp_path: Path
) -> None:
    spec = tmp_path / "ray_model.yaml"  # one task, two variants: one trial per replica
    spec.write_text(SPEC.replace("tasks: [hearsay, personal_jurisdiction]", "tasks: [hearsay]"))
    lm = get_model("local/smollm2")
    local = _sweep(spec, catalog, _tracker(store, "m-local"), lm, LocalExecutor(), limit=ROWS)
    tracker = _tracker(store, "m-ray")
    on_ray = _sweep(
        spec, catalog, tracker, lm, RayExecutor(cluster, replicas=2, n_threads=1), limit=ROWS
    )
    assert local.status == on_ray.status == "complete"
    ref = _trials(_tracker(store, "m-local"), local.parent_run_id)
    assert len(ref) == 2 and _trials(tracker, on_ray.parent_run_id) == ref
    assert any(p["generation"] for t in ref.values() for p in t["predictions"])
    assert _p_values(on_ray) == _p_values(local)


def test_cli_sweep_with_executor_ray_joins_the_cluster(
    cluster: str,
    spec_path: Path,
    lb_dir: Path,
    tmp_path: Path,
    stub: StubOpenAI,
    local_stub_run: Reference,
) -> None:
    local, _ = local_stub_run
    cmd = [
        sys.executable, "-m", "experiments.cli", "sweep", str(spec_path),
        "--model", "openai/stub", "--api-base", stub.url, "--concurrency", "1",
        "--limit", str(ROWS), "--no-cache", "--json",
        "--executor", "ray", "--ray-address", cluster,
    ]  # fmt: skip
    env = {**workbench_env(tmp_path, lb_dir, "cli"), "OPENAI_API_KEY": KEY}
    out = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert result["sweep_id"] == local.sweep_id and result["status"] == "complete"
    printed = [(c["task"], c["model"], c["p_value"], c.get("p_corrected"))
               for c in result["comparisons"]]  # fmt: skip
    assert printed == _p_values(local)


ONE_TRIAL_SPEC = """
name: ray_fail
tasks: [hearsay]
fixed: {demos: none, instruction: reference}
n_resamples: 200
"""


def _failing_lm(url: str) -> LiteLLMModel:
    """A model whose every call raises (not a row error: the trial itself fails, as a
    broken local model would). Defined here, so Ray ships the class by value."""

    class Broken(LiteLLMModel):
        def complete(self, prompt: str, decoding: Decoding) -> Completion:
            raise ModelError("the broken model cannot answer")

    return Broken("openai/broken", api_base=url, concurrency=1)


def test_a_trial_that_raises_keeps_the_trials_finished_beside_it(
    cluster: str, tmp_path: Path, catalog: Catalog, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two trials run side by side on the two actors; the second raises at once. As in a
    local sweep, the error ends the sweep, but the first trial is logged and resumed."""
    spec = tmp_path / "ray_fail.yaml"
    spec.write_text(ONE_TRIAL_SPEC)
    monkeypatch.setenv("HOME", str(tmp_path / "driver-home"))  # the driver's default cache
    monkeypatch.delenv("WORKBENCH_CACHE_DIR", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    cache = ResponseCache()
    with StubOpenAI(latency=0.15, reply_fn=hashed_yes_no) as slow:
        lms = {
            "openai/stub": LiteLLMModel("openai/stub", api_base=slow.url, concurrency=1),
            "openai/broken": _failing_lm(slow.url),
        }

        def sweep(prefix: str, executor: Any, lm_factory: Any) -> SweepResult:
            try:
                return run_sweep(
                    load_spec(spec),
                    catalog,
                    models=("openai/stub", "openai/broken"),  # run in this order
                    limit=ROWS,
                    tracker=_tracker(store, prefix),
                    lm_factory=lm_factory,
                    cache=cache if isinstance(executor, RayExecutor) else None,
                    executor=executor,
                )
            finally:
                executor.close()

        ends: dict[str, tuple[Trials, list[str]]] = {}
        on_ray = RayExecutor(cluster)
        for prefix, executor in (("fail-local", LocalExecutor()), ("fail-ray", on_ray)):
            with pytest.raises(ModelError, match="the broken model cannot answer"):
                sweep(prefix, executor, lms.__getitem__)
            tracker = _tracker(store, prefix)
            parents = _sweep_runs(tracker, f"{prefix}/ray_fail")
            assert len(parents) == 1
            ends[prefix] = (_trials(tracker, parents[0].info.run_id), [parents[0].info.status])
        # The same end state as in-process: the healthy trial FINISHED with all its
        # predictions, no run for the one that raised, the sweep's run FAILED.
        assert ends["fail-ray"] == ends["fail-local"]
        trials, status = ends["fail-ray"]
        assert status == ["FAILED"] and list(trials) == [("hearsay", "base")]
        (trial,) = trials.values()
        assert trial["status"] == "FINISHED" and len(trial["predictions"]) == ROWS
        # a rerun with a working model runs only the trial that raised
        lms["openai/broken"] = LiteLLMModel("openai/broken", api_base=slow.url, concurrency=1)
        again = sweep("fail-ray", LocalExecutor(), lms.__getitem__)
    assert again.status == "complete" and again.resumed == 1
    assert again.experiment == "fail-ray/ray_fail"  # from the tracker's typed config
    # the workers cached in their node's default folder, not in the driver's home
    assert len(on_ray.workers) == 2
    assert all(w["cache_dir"] not in (None, str(cache.directory)) for w in on_ray.workers)


def test_workers_use_their_node_cache_folder_unless_one_was_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver's default folder is under its home, which a remote node may not have."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("WORKBENCH_CACHE_DIR", raising=False)
    assert worker_cache_dir(None) == (False, None)
    assert worker_cache_dir(ResponseCache()) == (True, None)  # each node's own default
    mine = ResponseCache(tmp_path / "mine")
    assert worker_cache_dir(mine) == (True, str(tmp_path / "mine"))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "shared"))  # e.g. on NFS
    assert worker_cache_dir(ResponseCache()) == (True, str(tmp_path / "shared" / "responses"))


def test_actors_that_cannot_be_placed_stop_the_sweep_in_time_with_advice(
    cluster: str,
    spec_path: Path,
    catalog: Catalog,
    store: Path,
    stub: StubOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WORKBENCH_RAY_START_TIMEOUT", "3")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    tracker = _tracker(store, "unplaced")
    lm = LiteLLMModel("openai/stub", api_base=stub.url, concurrency=1)
    executor = RayExecutor(cluster, replicas=3)  # one CPU each: the cluster has two
    errors: list[BaseException] = []

    def sweep() -> None:
        try:
            _sweep(spec_path, catalog, tracker, lm, executor, limit=ROWS)
        except BaseException as e:
            errors.append(e)

    runner = threading.Thread(target=sweep, daemon=True)
    runner.start()
    runner.join(90)
    assert not runner.is_alive(), "the sweep is still waiting for actors that cannot start"
    (error,) = errors
    assert isinstance(error, ExecutorError), error
    message = str(error)
    assert "of 3 Ray actors did not start within 3 s" in message and cluster in message
    assert "free CPUs" in message and "WORKBENCH_RAY_ACTORS" in message
    assert "--executor local" in message
    assert _sweep_runs(tracker, "unplaced/ray_check") == []  # nothing written
    assert executor._actors == []  # none left holding a CPU


def _connect(cluster: str, env: dict[str, str]) -> None:
    """Join the cluster with these settings for the workers (as a node's own would be)."""
    ray.init(
        address=cluster,
        runtime_env={"env_vars": env},
        log_to_driver=False,
        logging_level="ERROR",
    )


def test_a_worker_with_another_local_model_identity_is_refused(
    cluster: str,
    catalog: Catalog,
    store: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker whose context size differs would log its answers under this machine's
    trial identity: the sweep refuses before it writes anything."""
    spec = tmp_path / "ray_fail.yaml"
    spec.write_text(ONE_TRIAL_SPEC)
    monkeypatch.delenv("WORKBENCH_LOCAL_N_CTX", raising=False)  # this machine: the default
    tracker = _tracker(store, "n_ctx")
    lm = get_model("local/smollm2")
    _connect(cluster, {"WORKBENCH_LOCAL_N_CTX": "2048"})
    try:
        with pytest.raises(ExecutorError) as refused:
            _sweep(spec, catalog, tracker, lm, RayExecutor(cluster, replicas=1), limit=2)
    finally:
        ray.shutdown()
    message = str(refused.value)
    assert "local/smollm2" in message and "n_ctx 2048 on the worker, 4096 on the driver" in message
    assert "WORKBENCH_LOCAL_N_CTX" in message and "--executor local" in message
    assert _sweep_runs(tracker, "n_ctx/ray_fail") == []


def test_an_actor_that_fails_to_start_says_why_and_what_to_do(cluster: str) -> None:
    _connect(cluster, {"WORKBENCH_LOCAL_N_CTX": "zero"})
    try:
        executor = RayExecutor(cluster, replicas=1)
        with pytest.raises(ExecutorError) as failed:
            executor.start([get_model("local/smollm2")], None)
        assert executor._actors == []
    finally:
        ray.shutdown()
    message = str(failed.value)
    assert f"a Ray actor failed to start on the cluster at {cluster}" in message
    assert "WORKBENCH_LOCAL_N_CTX must be an integer >= 1, not 'zero'" in message
    assert "--executor local" in message


def test_closing_the_executor_gives_back_the_signal_handlers_ray_init_replaced(
    cluster: str,
) -> None:
    """ray.init leaves its own SIGTERM handler (sys.exit) after shutdown; a later `optimize`
    in the same process installs its clean-up handler only over a default one (seen in CI:
    a SIGTERM mid-study raised SystemExit instead of stopping the study cleanly)."""
    if ray.is_initialized():
        ray.shutdown()
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    executor = RayExecutor(cluster)
    executor.close()
    assert {sig: signal.getsignal(sig) for sig in before} == before
