"""Storage that fails mid-sweep is a state, not a traceback (issue 19: defects 4, 9, 10, 14).

Each fault is injected by a fake model whose Nth call breaks the store (deletes or locks
`mlflow.db`, deletes or replaces the artifact folder, replaces `reports/<sweep>` by a file).
The sweep must end with one line on stderr and a non-zero exit, and a rerun with the storage
restored must complete with the p-values of a sweep that never failed. The CLI runs in this
process (typer's runner) with the fake model patched in; between two invocations MLflow's
per-process store cache is cleared, as a new process would start without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from experiments.llm.scripted import LMDefaults
from experiments.llm.types import Completion, Decoding
from tests.conftest import workbench_env

pytestmark = pytest.mark.data
REPO = Path(__file__).resolve().parents[3]

SPEC = """
name: storage_faults
tasks: [hearsay]
fixed: {demos: none}
axes:
  instruction: [reference, description]
comparisons: [[instruction=reference, instruction=description]]
n_resamples: 200
limit: 8
"""
ROWS = 8  # per trial; the first trial is logged before call ROWS + 1


@dataclass
class FaultyLM(LMDefaults):
    """Answers Yes/No from a hash of the prompt; its `at`-th call runs `fault` first."""

    fault: Callable[[], None] | None = None
    at: int = ROWS + 1
    name: str = "fake/storage"
    mode: str = "completion"
    concurrency: int = 1
    calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        with self._lock:
            self.calls += 1
            if self.calls == self.at and self.fault is not None:
                self.fault()
        yes = hashlib.sha256(prompt.encode("utf-8")).digest()[0] % 2 == 0
        return Completion(" Yes" if yes else " No", tokens_in=len(prompt) // 4, tokens_out=1)


def _forget_mlflow_stores() -> None:
    """What a new process starts with: no cached store (and no pooled connections)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.tracking._tracking_service import utils

    utils._tracking_store_registry._get_store_with_resolved_uri.cache_clear()
    with SqlAlchemyStore._engine_map_lock:
        for engine in SqlAlchemyStore._engine_map.values():
            engine.dispose()
        SqlAlchemyStore._engine_map.clear()


@dataclass
class Workbench:
    root: Path
    monkeypatch: pytest.MonkeyPatch
    lm: FaultyLM = field(default_factory=FaultyLM)

    def cli(self, *args: str) -> Any:
        import experiments.llm.gateway

        _forget_mlflow_stores()
        self.monkeypatch.setattr(experiments.llm.gateway, "get_model", lambda *_a, **_k: self.lm)
        from experiments.cli import app

        return CliRunner().invoke(app, list(args), catch_exceptions=False)

    def sweep(self) -> Any:
        return self.cli("sweep", str(self.root / "spec.yaml"), "--model", self.lm.name, "--json")

    def parent_status(self) -> str:
        return str(self._parent("status"))

    def parent_end_time(self) -> int:
        return int(self._parent("end_time"))

    def _parent(self, column: str) -> Any:
        con = sqlite3.connect(f"file:{self.root / 'mlflow.db'}?mode=ro", uri=True)
        try:
            rows = con.execute(
                f"SELECT r.{column} FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
                "WHERE t.key = 'workbench.kind' AND t.value = 'sweep' "
                "AND r.lifecycle_stage = 'active'"
            ).fetchall()
        finally:
            con.close()
        assert len(rows) == 1, rows
        return rows[0][0]


@pytest.fixture
def wb(tmp_path: Path, lb_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workbench]:
    env = workbench_env(tmp_path, lb_dir, "faults")
    (tmp_path / "mlflow.yaml").write_text(
        f"tracking_uri: sqlite:///{tmp_path}/mlflow.db\nartifact_location: {tmp_path}/artifacts\n"
        "experiment_prefix: faults\nprompt_registry: false\n"
    )
    for key in ("LEGALBENCH_DIR", "WORKBENCH_MLFLOW_CONFIG", "WORKBENCH_CACHE_DIR"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.delenv("WORKBENCH_NO_TRACK", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.yaml").write_text(SPEC)
    yield Workbench(tmp_path, monkeypatch)
    _forget_mlflow_stores()


def _p_values(result: Any) -> list[float | None]:
    return [row["p_value"] for row in json.loads(result.stdout)["comparisons"]]


def _one_line(result: Any, capfd: pytest.CaptureFixture[str]) -> str:
    """The command's stderr (and anything written to fd 2 meanwhile) is one `error:` line."""
    leaked = capfd.readouterr().err
    lines: list[str] = [*result.stderr.splitlines(), *leaked.splitlines()]
    assert len(lines) == 1, "\n".join(lines[:40])
    assert lines[0].startswith("error: ")
    assert "Traceback" not in lines[0]
    return lines[0]


# ---- defect 4: each storage fault mid-sweep -> one line; restored -> same p-values -------
class Locked:
    """Holds an exclusive SQLite lock on the store from the fault until `release`."""

    def __init__(self) -> None:
        self.con: sqlite3.Connection | None = None

    def __call__(self, db: Path) -> None:
        self.con = sqlite3.connect(db, timeout=1, check_same_thread=False)
        self.con.execute("BEGIN EXCLUSIVE")

    def release(self) -> None:
        if self.con is not None:
            self.con.rollback()
            self.con.close()


def _replace_by_file(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not a folder\n")


FAULTS: dict[str, tuple[str | None, str]] = {
    # name: (what the one line says, or None when the faulted run itself can end well;
    #        what the rerun must do)
    "db_deleted": ("was deleted while logging trial hearsay", "new store"),
    "db_locked": ("database is locked", "resume"),
    "artifacts_deleted": (None, "rebuild"),
    "artifacts_replaced_by_a_file": ("failed while logging trial hearsay", "resume"),
    "reports_replaced_by_a_file": ("cannot write the sweep report to reports/storage", "resume"),
}


@pytest.fixture(scope="module")
def clean_p_values(tmp_path_factory: pytest.TempPathFactory, lb_dir: Path) -> list[float | None]:
    """The p-values of the same sweep when nothing fails."""
    mp = pytest.MonkeyPatch()
    try:
        root = tmp_path_factory.mktemp("clean")
        env = workbench_env(root, lb_dir, "faults")
        for key in ("LEGALBENCH_DIR", "WORKBENCH_MLFLOW_CONFIG", "WORKBENCH_CACHE_DIR"):
            mp.setenv(key, env[key])
        mp.delenv("WORKBENCH_NO_TRACK", raising=False)
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        mp.chdir(root)
        (root / "spec.yaml").write_text(SPEC)
        result = Workbench(root, mp).sweep()
        assert result.exit_code == 0, result.stderr
        return _p_values(result)
    finally:
        _forget_mlflow_stores()
        mp.undo()


@pytest.mark.slow
@pytest.mark.parametrize("fault", list(FAULTS))
def test_storage_fault_mid_sweep_is_one_line_and_a_rerun_completes(
    wb: Workbench,
    fault: str,
    clean_p_values: list[float | None],
    capfd: pytest.CaptureFixture[str],
) -> None:
    says, rerun = FAULTS[fault]
    db, artifacts, reports = wb.root / "mlflow.db", wb.root / "artifacts", wb.root / "reports"
    locked = Locked()
    wb.lm.fault = {
        "db_deleted": lambda: db.unlink(),
        "db_locked": lambda: locked(db),
        "artifacts_deleted": lambda: shutil.rmtree(artifacts),
        "artifacts_replaced_by_a_file": lambda: _replace_by_file(artifacts),
        "reports_replaced_by_a_file": lambda: _replace_by_file(reports / "storage_faults"),
    }[fault]
    capfd.readouterr()
    try:
        first = wb.sweep()
    finally:
        locked.release()
    assert wb.lm.calls == 2 * ROWS  # the fault struck mid-sweep, after the first trial
    if says is None:
        assert first.exit_code == 0, first.stderr
    else:
        line = _one_line(first, capfd)
        assert first.exit_code == 2, line
        assert says in line, line
        assert "run the same command again" in line, line

    # storage restored (a deleted store is not: the rerun starts a new one)
    if fault == "artifacts_replaced_by_a_file":
        artifacts.unlink()
    if fault == "reports_replaced_by_a_file":
        (reports / "storage_faults").unlink()
    calls = wb.lm.calls
    again = wb.sweep()
    assert again.exit_code == 0, again.stderr
    assert _p_values(again) == clean_p_values
    assert wb.parent_status() == "FINISHED"
    done = json.loads(again.stdout)
    if rerun == "new store":  # every trial logged again, answers from the response cache
        assert done["resumed"] == 0
    elif rerun == "rebuild":  # the trial whose artifacts vanished ran again and was logged
        assert len(done["rebuilt"]) == 1 and "lost their MLflow artifacts" in again.stderr
    assert wb.lm.calls == calls  # nothing reached the model: the cache answered
    # and the store is whole again: a third run is a no-op that reads everything back
    third = wb.sweep()
    assert third.exit_code == 0, third.stderr
    assert json.loads(third.stdout)["resumed"] == 2
    assert _p_values(third) == clean_p_values
    assert wb.cli("report", "storage_faults").exit_code == 0


# ---- defect 10: an interrupted rerun that has nothing to do leaves FINISHED alone --------
@pytest.mark.slow
@pytest.mark.parametrize("where", ["claim", "compare"])
def test_interrupted_noop_rerun_leaves_the_parent_finished(wb: Workbench, where: str) -> None:
    import experiments.sweeps.driver
    from experiments.tracking import Tracker

    assert wb.sweep().exit_code == 0
    assert wb.parent_status() == "FINISHED"
    ended = wb.parent_end_time()
    again = wb.sweep()  # a rerun with nothing to do writes nothing to the parent
    assert again.exit_code == 0 and json.loads(again.stdout)["resumed"] == 2
    assert wb.parent_end_time() == ended
    with pytest.MonkeyPatch.context() as mp:
        if where == "claim":  # Ctrl-C while the second trial is being read back
            real = Tracker.claim
            seen = []

            def claim(self: Tracker, *args: Any, **kwargs: Any) -> Any:
                seen.append(1)
                if len(seen) == 2:
                    raise KeyboardInterrupt
                return real(self, *args, **kwargs)

            mp.setattr(Tracker, "claim", claim)
        else:  # Ctrl-C while the comparisons are computed

            def compare(*args: Any, **kwargs: Any) -> Any:
                raise KeyboardInterrupt

            mp.setattr(experiments.sweeps.driver, "compare", compare)
        with contextlib.suppress(KeyboardInterrupt):  # click may make it "Aborted!", exit 1
            assert wb.sweep().exit_code != 0
    assert wb.parent_status() == "FINISHED"
    report = wb.cli("report", "storage_faults")
    assert report.exit_code == 0, report.stderr


@pytest.mark.slow
def test_sigterm_during_a_noop_rerun_leaves_the_parent_finished(
    wb: Workbench,
) -> None:
    """SIGTERM ends the process at once (no finally): nothing a no-op rerun does may leave
    the parent other than FINISHED. It is sent once the rerun has found the parent."""
    assert wb.sweep().exit_code == 0
    con = sqlite3.connect(f"file:{wb.root / 'mlflow.db'}?mode=ro", uri=True, timeout=5)
    last_run = "SELECT value FROM tags WHERE key = 'workbench.last_run'"
    before = con.execute(last_run).fetchall()
    # the same fake model in a process of its own (this file's environment: its store,
    # cache and data); it answers nothing, the response cache does
    driver = (
        "import sys, experiments.llm.gateway as m\n"
        "from tests.experiments.tracking.test_faults_storage import FaultyLM\n"
        "m.get_model = lambda *a, **k: FaultyLM()\n"
        "from experiments.cli import main\n"
        "sys.argv = ['workbench', *sys.argv[1:]]\n"
        "main()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", driver, "sweep", "spec.yaml", "--model", "fake/storage"],
        cwd=wb.root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None:
            try:
                if con.execute(last_run).fetchall() != before:
                    break
            except sqlite3.OperationalError:
                pass
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        con.close()
    assert wb.parent_status() == "FINISHED"
    assert wb.cli("report", "storage_faults").exit_code == 0


# ---- defect 14: report on a running sweep exits 1; a sweep with every task skipped ----------
def test_report_on_a_running_sweep_exits_1(wb: Workbench) -> None:
    from experiments.tracking import Tracker

    _forget_mlflow_stores()
    tracker = Tracker()
    tracker.parent_run("storage_faults", "0" * 64, {"spec": "spec.yaml"})  # RUNNING, no table
    result = wb.cli("report", "storage_faults")
    assert result.exit_code == 1, result.stderr
    assert "RUNNING" in result.stderr and "run the sweep again" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_a_sweep_whose_every_task_is_skipped_fails_and_logs_nothing(wb: Workbench) -> None:
    spec = wb.root / "skipped.yaml"
    spec.write_text("name: all_skipped\ntasks: [canada_tax_court_outcomes]\nfixed: {demos: none}\n")
    result = wb.cli("sweep", str(spec), "--model", wb.lm.name)
    assert result.exit_code != 0
    assert "every task was skipped" in result.stderr
    assert "canada_tax_court_outcomes: no test split" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert wb.lm.calls == 0
    if (wb.root / "mlflow.db").exists():  # no parent run pretends to be a result
        con = sqlite3.connect(f"file:{wb.root / 'mlflow.db'}?mode=ro", uri=True)
        try:
            tags = con.execute("SELECT value FROM tags WHERE key = 'workbench.kind'").fetchall()
        finally:
            con.close()
        assert ("sweep",) not in tags


# ---- defect 9: names over MLflow's 250 characters --------------------------------------------
def test_metric_key_is_short_deterministic_and_distinct() -> None:
    from experiments.names import MAX_KEY, metric_key, safe_name

    long_a = "p_value.maud_" + "x" * 120 + ".openai/gpt." + "instruction=reference," * 8
    long_b = long_a[:-1] + "?"
    assert len(long_a) > 250
    key = metric_key(long_a)
    assert len(key) <= MAX_KEY and key == metric_key(long_a)  # the same name, the same key
    assert key.startswith(safe_name(long_a)[:200])  # readable
    assert metric_key(long_b) != key  # the hash covers the whole name
    assert metric_key("p_value.hearsay.m.a_vs_b") == "p_value.hearsay.m.a_vs_b"


def test_comparisons_with_names_over_250_characters_are_logged(tmp_path: Path) -> None:
    """A maud_* task with three axes makes p-value names over 250 characters; MLflow refuses
    those, which crashed after every trial had run, and again on every rerun."""
    from experiments.tracking import Tracker, TrackingConfig

    _forget_mlflow_stores()
    tracker = Tracker(
        TrackingConfig(
            tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
            artifact_location=(tmp_path / "artifacts").as_uri(),
            experiment_prefix="names",
            prompt_registry=False,
            source="test",
        )
    )
    task = "maud_ability_to_consummate_concept_is_subject_to_mae_carveouts"
    a = "instruction=rule_description,register=technical,demos=balanced_k4,format=json"
    b = "instruction=rule_reference,register=plain_english,demos=balanced_k4,format=json"
    row = {"task": task, "model": "openai/some-long-served-model-name", "a": a, "b": b}
    doc = {"comparisons": [{**row, "p_value": 0.25, "p_corrected": 0.5}]}
    full = f"p_value.{task}.{row['model']}.{a}_vs_{b}"
    assert len(full) > 250
    for _ in range(2):  # a rerun logs the same names again
        parent = tracker.parent_run("names", "1" * 64, {"spec": "names.yaml"})
        tracker.log_comparisons(parent, doc, {})
    metrics = tracker.run_metrics(parent)
    names = json.loads(tracker._artifact_text(parent, "metric_names.json"))
    assert all(len(k) <= 250 for k in metrics)
    by_full = {v: k for k, v in names.items()}
    assert metrics[by_full[full]] == 0.25
    corrected = by_full[full.replace("p_value.", "p_value_corrected.", 1)]
    assert metrics[corrected] == 0.5
    _forget_mlflow_stores()


# ---- defect 14: MLflow's logger stays quiet where the workbench says it in one line ------
@pytest.mark.slow
def test_a_locked_store_under_run_is_one_line_without_mlflow_log_output(
    wb: Workbench, capfd: pytest.CaptureFixture[str]
) -> None:
    """SQLAlchemy's "database is locked" made MLflow log a traceback (its ERROR logger)
    before `workbench run` printed its own line."""
    locked = Locked()
    wb.lm.fault = lambda: locked(wb.root / "mlflow.db")
    wb.lm.at = 2
    wb.monkeypatch.setenv("WORKBENCH_RUNS_DIR", str(wb.root / "runs"))
    capfd.readouterr()
    try:
        result = wb.cli("run", "hearsay", "--model", wb.lm.name, "--limit", "4")
    finally:
        locked.release()
    line = _one_line(result, capfd)
    assert result.exit_code == 2, line
    assert "database is locked" in line and "not tracked" in line


def test_param_values_over_6000_characters_are_logged(tmp_path: Path) -> None:
    """A sweep's `variants` param joins every variant name: many axes pass MLflow's 6000."""
    from experiments.tracking import Tracker, TrackingConfig

    _forget_mlflow_stores()
    tracker = Tracker(
        TrackingConfig(
            tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
            artifact_location=(tmp_path / "artifacts").as_uri(),
            experiment_prefix="params",
            prompt_registry=False,
            source="test",
        )
    )
    variants = ";".join(f"instruction=reference,register=plain,demos=k{i}" for i in range(200))
    assert len(variants) > 6000
    parent = tracker.parent_run("params", "2" * 64, {"variants": variants})
    logged = tracker.client.get_run(parent).data.params["variants"]
    assert len(logged) <= 6000 and logged.startswith(variants[:5000])
    assert f"[{len(variants)} chars, sha256 " in logged
    _forget_mlflow_stores()
