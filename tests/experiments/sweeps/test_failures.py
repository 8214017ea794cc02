"""Faults a hostile user meets: each becomes a state or one clear line, never a traceback.

Table-driven through the real CLI (`python -m experiments.cli`), plus the concurrency cases:
two invocations of one sweep on one store, at once and staggered.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from experiments.sweeps.spec import SpecError, load_spec
from experiments.testing.stub_server import StubOpenAI, hashed_yes_no
from tests.conftest import run_cli, workbench_env

SECRET = "s3cretpassw0rd"


def one_clear_line(r: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert r.returncode == code, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("error:")]
    assert len(errors) == 1, r.stderr
    return errors[0]


# ---- sweep specs ---------------------------------------------------------------------------
GOOD = "tasks: [hearsay]\nfixed: {demos: none}\naxes: {instruction: [reference, description]}\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('name: "../../x"\n' + GOOD, "name '../../x' must be letters"),
        ("name: a/b\n" + GOOD, "must be letters, digits"),
        ("name: .hidden\n" + GOOD, "must be letters, digits"),
        ("name: x\nn_resamples: 0\n" + GOOD, "n_resamples must be an integer from 100 to 1000000"),
        ("name: x\nn_resamples: -5\n" + GOOD, "n_resamples must be an integer from 100 to 1000000"),
        ("name: x\nn_resamples: true\n" + GOOD, "field 'n_resamples' has the wrong type"),
        ("name: x\nsample_seed: -1\n" + GOOD, "sample_seed must be an integer from 0 to 4294967295, not -1"),
        ("name: x\nlimit: 0\n" + GOOD, "limit must be an integer from 1 to 10000000, not 0"),
        ("name: x\nsplit: dev\n" + GOOD, "split must be train or test, not 'dev'"),
        ("name: x\ntasks: [hearsay, hearsay]\naxes: {instruction: [reference, description]}\n", "tasks lists 'hearsay' twice"),
        ("name: x\ntasks: [hearsay]\naxes: {instruction: [reference, reference]}\n", "axes.instruction lists 'reference' twice"),
        ("name: x\nmodels: [a/b, a/b]\n" + GOOD, "models lists 'a/b' twice"),
        ("name: x\n" + GOOD + "comparisons: [[instruction=reference, instruction=reference]]\n", "compares a variant with itself"),
        ("name: x\n" + GOOD + "comparisons: [[instruction=reference, instruction=description], [instruction=description, instruction=reference]]\n", "listed twice"),
        ("name: x\ntasks: [hearsay]\nfixed: {instruction: reference}\naxes: {instruction: [reference, description]}\n", "both fixed and varied"),
    ],
)  # fmt: skip
def test_bad_specs_are_rejected_with_the_fix(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert str(path) in str(err.value) and message in str(err.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"name: x\ntasks: [caf\xe9]\n", "is not UTF-8 text (line 2: byte 0xe9)"),
        (b"name: [x\n", "malformed YAML at line"),
    ],
)
def test_spec_and_tracking_config_bytes(tmp_path: Path, data: bytes, message: str) -> None:
    from experiments.tracking import load_config
    from promptlib.errors import WorkbenchError

    path = tmp_path / "f.yaml"
    path.write_bytes(data)
    for load in (load_spec, load_config):
        with pytest.raises(WorkbenchError) as err:
            load(path)
        assert str(path) in str(err.value) and message in str(err.value)


# ---- the CLI: bad setups -------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def env(lb_dir: Path, tmp_path: Path) -> dict[str, str]:
    return {
        **workbench_env(tmp_path, lb_dir, "t"),
        "WORKBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "OPENAI_API_KEY": "sk-dummy-key-for-the-local-stub",
    }


@pytest.mark.data
def test_unreachable_tracking_store_is_one_line_without_the_password(
    env: dict[str, str], tmp_path: Path
) -> None:
    port = _free_port()  # nothing listens there
    cases = {
        "server": f"http://user:{SECRET}@127.0.0.1:{port}",
        "postgres": f"postgresql+psycopg2://user:{SECRET}@127.0.0.1:{port}/db",
    }
    for what, uri in cases.items():
        start = time.monotonic()
        r = run_cli(["report", "anything"], {**env, "MLFLOW_TRACKING_URI": uri}, tmp_path)
        line = one_clear_line(r)
        assert "cannot use the MLflow tracking store" in line, what
        assert SECRET not in r.stderr + r.stdout and "user:***@" in line, what
        assert time.monotonic() - start < 90, f"{what}: took too long to give up"


@pytest.mark.data
def test_optuna_storage_password_never_shown(env: dict[str, str], tmp_path: Path) -> None:
    port = _free_port()
    r = run_cli(
        [
            "optimize",
            "hearsay",
            "--storage",
            f"postgresql+psycopg2://u:{SECRET}@127.0.0.1:{port}/d",
        ],
        env,
        tmp_path,
    )
    line = one_clear_line(r)
    assert "cannot open Optuna storage" in line and SECRET not in r.stderr + r.stdout


@pytest.mark.data
def test_unwritable_outputs_are_found_before_any_model_call(
    env: dict[str, str], tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with StubOpenAI(reply="Yes") as stub:
        base = ["--model", "openai/stub", "--api-base", stub.url]
        cases: list[tuple[list[str], dict[str, str], str]] = [
            (["run", "hearsay", "--limit", "3", *base], {"WORKBENCH_RUNS_DIR": str(blocker / "runs")}, "trial results"),
            (["run", "hearsay", "--limit", "3", *base], {"WORKBENCH_CACHE_DIR": str(blocker)}, ""),
        ]  # fmt: skip
        for args, extra, what in cases:
            r = run_cli(args, {**env, **extra}, tmp_path)
            line = one_clear_line(r)
            assert str(blocker) in line and what in line
        # a sweep whose reports/ folder cannot be made (a file is in the way): reports/ is
        # beside the project file (env's mlflow.yaml in tmp_path), wherever the command runs
        spec = tmp_path / "spec.yaml"
        spec.write_text("name: blocked\n" + GOOD)
        cwd = tmp_path / "work"
        cwd.mkdir()
        (tmp_path / "reports").write_text("a file, not a folder")
        r = run_cli(["sweep", str(spec), "--limit", "3", *base], env, cwd)
        assert "sweep reports" in one_clear_line(r)
        assert not stub.requests, "a model was called although the results could not be kept"


@pytest.mark.data
def test_ui_on_a_port_in_use_exits_non_zero(env: dict[str, str], tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = run_cli(["ui", "--port", str(port)], env, tmp_path, timeout=60)
    line = one_clear_line(r)
    assert f"127.0.0.1:{port}" in line and "--port" in line
    bad = run_cli(["ui", "--port", "70000"], env, tmp_path, timeout=60)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


# ---- two invocations of one sweep on one store ---------------------------------------------
SPEC = """
name: concurrent_check
tasks: [hearsay, personal_jurisdiction]
fixed: {demos: none}
axes:
  instruction: [reference, description]
comparisons: [[instruction=reference, instruction=description]]
n_resamples: 200
"""


def _all_runs(root: Path) -> list[Any]:
    import mlflow
    from mlflow.entities import ViewType

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    exp = client.get_experiment_by_name("t/concurrent_check")
    assert exp is not None
    return list(client.search_runs([exp.experiment_id], run_view_type=ViewType.ALL))


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize("stagger", [0.0, 4.0])
def test_two_sweeps_at_once_share_the_work_and_never_duplicate(
    env: dict[str, str], tmp_path: Path, stagger: float
) -> None:
    """Fresh store (both create its schema at once) and staggered (one mid-sweep)."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    with StubOpenAI(latency=0.05, reply_fn=hashed_yes_no) as stub:
        cmd = [
            sys.executable, "-m", "experiments.cli", "sweep", str(spec), "--model", "openai/stub",
            "--api-base", stub.url, "--concurrency", "1", "--limit", "25", "--json",
        ]  # fmt: skip
        procs = []
        for k in range(2):
            if k and stagger:
                time.sleep(stagger)
            procs.append(
                subprocess.Popen(
                    cmd,
                    env=env,
                    cwd=tmp_path,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        outs = [p.communicate(timeout=300) for p in procs]
        n_requests = len(stub.requests)
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
        assert "Traceback" not in err
    results = [json.loads(out) for out, _ in outs]
    runs = _all_runs(tmp_path)
    children = [r for r in runs if r.data.tags.get("workbench.kind") == "trial"]
    finished = [r for r in children if r.info.status == "FINISHED"]
    # exactly one FINISHED run per trial, and none of them deleted by the peer
    assert len(finished) == 4 and len({r.data.tags["workbench.trial_id"] for r in finished}) == 4
    assert all(r.info.lifecycle_stage == "active" for r in finished)
    assert n_requests == 4 * 25, "two invocations sent the same prompts twice"
    assert [c["p_value"] for c in results[0]["comparisons"]] == [
        c["p_value"] for c in results[1]["comparisons"]
    ]
    assert sum(r["resumed"] for r in results) == 4  # each trial ran once, read back once
    parents = [r for r in runs if r.data.tags.get("workbench.kind") == "sweep"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert os.path.isdir(tmp_path / ".mlflow.db.locks")


@pytest.mark.data
@pytest.mark.slow
def test_a_sweep_against_another_server_does_not_resume_the_first_ones_results(
    env: dict[str, str], tmp_path: Path
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    outs = []
    for reply in ("Yes", "No"):
        with StubOpenAI(reply=reply) as stub:
            r = run_cli(
                ["sweep", str(spec), "--model", "openai/stub", "--api-base", stub.url,
                 "--tasks", "hearsay", "--limit", "10", "--json"],
                env,
                tmp_path,
            )  # fmt: skip
            assert r.returncode == 0, r.stderr[-2000:]
            assert len(stub.requests) == 2 * 10, "results of another server were reused"
            outs.append(json.loads(r.stdout))
    assert [o["resumed"] for o in outs] == [0, 0]
    assert outs[0]["sweep_id"] != outs[1]["sweep_id"]
    assert outs[0]["parent_run_id"] != outs[1]["parent_run_id"]


@pytest.mark.data
@pytest.mark.slow
def test_edited_prompts_start_a_new_sweep_and_report_shows_the_latest_state(
    env: dict[str, str], lb_dir: Path, tmp_path: Path
) -> None:
    import shutil

    data = tmp_path / "lb"
    shutil.copytree(lb_dir / "tasks" / "hearsay", data / "tasks" / "hearsay")
    env = {**env, "LEGALBENCH_DIR": str(data)}
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("tasks: [hearsay, personal_jurisdiction]", "tasks: [hearsay]"))
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        cmd = ["sweep", str(spec), "--model", "openai/stub", "--api-base", stub.url,
               "--retries", "0", "--limit", "10", "--json"]  # fmt: skip
        first = run_cli(cmd, env, tmp_path)
        assert first.returncode == 0, first.stderr[-2000:]
        prompt = data / "tasks" / "hearsay" / "rule_description_prompt.txt"
        prompt.write_text(prompt.read_text().replace("hearsay", "hear-say", 1))
        stub.fail_fn = lambda p: "hear-say" in p  # the edited variant fails every row
        second = run_cli(cmd, env, tmp_path)
        assert second.returncode == 1
        p1, p2 = (json.loads(r.stdout)["parent_run_id"] for r in (first, second))
        assert p1 != p2, "an edited prompt resumed the old sweep's parent"
        report = run_cli(["report", "concurrent_check"], env, tmp_path)
        assert report.returncode == 1 and p2 in report.stdout and "not tested" in report.stdout
        stub.fail_fn = None
        third = run_cli(cmd, env, tmp_path)
        assert third.returncode == 0 and json.loads(third.stdout)["parent_run_id"] == p2
        report = run_cli(["report", "concurrent_check", "--json"], env, tmp_path)
        assert report.returncode == 0
        assert json.loads(report.stdout)["run"]["run_id"] == p2
    # the first parent still holds exactly its own two FINISHED trials
    runs = _all_runs(tmp_path)
    for parent in (p1, p2):
        kids = [
            r for r in runs
            if r.data.tags.get("mlflow.parentRunId") == parent and r.info.lifecycle_stage == "active"
        ]  # fmt: skip
        assert len(kids) == 2 and all(r.info.status == "FINISHED" for r in kids)


def test_compare_never_uses_an_incomplete_arm_and_pairs_in_a_canonical_order() -> None:
    from experiments.analysis import compare
    from experiments.trials.record import TrialRecord

    rng = __import__("random").Random(0)
    answers = [rng.choice(["Yes", "No"]) for _ in range(60)]
    idx = [str(i) for i in range(60)]

    def arm(name: str, p: float, status: str = "complete", order: list[int] | None = None) -> Any:
        gens = [a if rng.random() < p else ("No" if a == "Yes" else "Yes") for a in answers]
        o = order or list(range(60))
        from experiments.metrics import balanced_accuracy

        return TrialRecord.of(
            variant=name, metric="balanced_accuracy", indices=[idx[j] for j in o],
            answers=[answers[j] for j in o], generations=[gens[j] for j in o],
            score=balanced_accuracy(gens, answers), status=status,
            n_errors=0 if status == "complete" else 3,
        )  # fmt: skip

    a, b = arm("A", 0.8), arm("B", 0.6)
    shuffled = list(range(60))
    rng.shuffle(shuffled)
    a2 = a.replace(indices=[a.indices[j] for j in shuffled],
                   answers=[a.answers[j] for j in shuffled],
                   generations=[a.generations[j] for j in shuffled])  # fmt: skip
    r1 = compare.pair(a, b, n_resamples=999)
    r2 = compare.pair(a2, b, n_resamples=999)
    assert r1.p_value == r2.p_value and r1.statistic == r2.statistic
    # an incomplete arm that still carries a score is neither tested nor used across tasks
    bad = b.replace(status="incomplete", n_errors=3)
    rows = []
    for t, (x, y) in enumerate([(a, bad), (a, b), (a, b)]):
        rows.append(replace(compare.pair(x, y, n_resamples=999), model="m", task=f"t{t}"))
    assert rows[0].p_value is None and rows[0].score_b is None
    (across,) = compare.across_tasks(rows, kind="pairs", test="t", all_tasks=["t0", "t1", "t2"])
    assert across.missing_tasks == ["t0"] and across.n_tasks == 2
