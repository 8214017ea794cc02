"""`workbench run` is tracked in MLflow (an experiment per task), once per trial id.

A real-model run appears in the store with its metrics; a rerun reuses its run; --no-track
leaves the store untouched; an incomplete trial's run ends FAILED without a score and a
later complete rerun replaces it; an unusable store fails before any model call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, workbench_env

pytestmark = pytest.mark.data


def _runs(root: Path, prefix: str, task: str, model: str = "local/smollm2") -> list[Any]:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    exp = client.get_experiment_by_name(f"{prefix}/run/{task}")
    if exp is None:
        return []
    return list(client.search_runs([exp.experiment_id], f"params.model = '{model}'"))


@pytest.fixture(scope="module")
def store(lb_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One MLflow store for the module (creating a store costs MLflow's migrations)."""
    root = tmp_path_factory.mktemp("track")
    env = workbench_env(root, lb_dir, "trk") | {
        "WORKBENCH_RUNS_DIR": str(root / "runs"),
        "OPENAI_API_KEY": "sk-test-secret-never-logged",
    }
    return root, env


@pytest.fixture(scope="module")
def smollm_runs(lb_dir: Path, store: tuple[Path, dict[str, str]]) -> dict[str, Any]:
    """One real-model trial run twice against the store, and once more with --no-track."""
    root, env = store
    cmd = ["run", "hearsay", "--model", "local/smollm2", "--limit", "10", "--json"]
    first = run_cli(cmd, env | {"FORCE_COLOR": "1"}, root)  # progress drawn as on a terminal
    second = run_cli(cmd, env, root)
    other = root / "untracked"
    other.mkdir()
    env2 = workbench_env(other, lb_dir, "trk") | {
        "WORKBENCH_RUNS_DIR": str(other / "runs"),
        "WORKBENCH_CACHE_DIR": env["WORKBENCH_CACHE_DIR"],  # answers from the first run
    }
    untracked = run_cli([*cmd, "--no-track"], env2, other)
    return {"root": root, "other": other, "runs": (first, second, untracked)}


@pytest.mark.model
@pytest.mark.slow
def test_real_model_run_is_tracked_with_its_metrics(smollm_runs: dict[str, Any]) -> None:
    first = smollm_runs["runs"][0]
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)  # the progress bar goes to stderr: the JSON parses
    assert "hearsay · base · local/smollm2" in first.stderr
    runs = _runs(smollm_runs["root"], "trk", "hearsay")
    assert [r.info.run_id for r in runs] == [summary["mlflow_run_id"]]
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.tags["workbench.trial_id"] == summary["trial_id"]
    m, p = run.data.metrics, run.data.params
    assert m["score"] == pytest.approx(summary["score"])
    assert m["n"] == summary["n"] == 10 and m["n_errors"] == 0
    assert m["invalid_rate"] == pytest.approx(summary["invalid_rate"])
    assert p["task"] == "hearsay" and p["model"] == "local/smollm2" and p["limit"] == "10"
    assert p["split"] == "test" and p["scoring"] == "generate" and p["variant"] == "base"
    assert p["sample_seed"] == "0" and p["variant_id"] == summary["variant_id"]
    # the on-disk copy stays
    assert Path(smollm_runs["root"], summary["predictions"]).is_file()


@pytest.mark.model
@pytest.mark.slow
def test_rerun_reuses_the_run(smollm_runs: dict[str, Any]) -> None:
    first, second, _ = smollm_runs["runs"]
    assert second.returncode == 0, second.stderr
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert b["trial_id"] == a["trial_id"] and b["model_calls"] == 0
    assert b["mlflow_reused"] is True and b["mlflow_run_id"] == a["mlflow_run_id"]
    assert len(_runs(smollm_runs["root"], "trk", "hearsay")) == 1


@pytest.mark.model
@pytest.mark.slow
def test_no_track_leaves_the_store_empty(smollm_runs: dict[str, Any]) -> None:
    untracked = smollm_runs["runs"][2]
    assert untracked.returncode == 0, untracked.stderr
    summary = json.loads(untracked.stdout)
    assert "mlflow_run_id" not in summary and summary["n"] == 10
    assert not (smollm_runs["other"] / "mlflow.db").exists()
    assert (smollm_runs["other"] / summary["predictions"]).is_file()


def test_incomplete_run_is_failed_then_replaced(store: tuple[Path, dict[str, str]]) -> None:
    """Failed rows: a FAILED run with n_errors and no score; the complete rerun replaces it."""
    from experiments.testing.stub_server import StubOpenAI

    root, env = store
    with StubOpenAI(script=["ok", "500", "ok"], reply="Yes") as stub:
        cmd = ["run", "hearsay", "--model", "openai/stub", "--api-base", stub.url]
        cmd += ["--limit", "3", "--retries", "0", "--concurrency", "1", "--json"]
        bad = run_cli(cmd, env, root)
        assert bad.returncode == 1 and "incomplete" in bad.stderr
        runs = _runs(root, "trk", "hearsay", "openai/stub")
        assert len(runs) == 1 and runs[0].info.status == "FAILED"
        assert runs[0].data.metrics["n_errors"] == 1 and "score" not in runs[0].data.metrics
        assert runs[0].data.tags["workbench.status"] == "incomplete"
        good = run_cli(cmd, env, root)
    assert good.returncode == 0, good.stderr
    runs = _runs(root, "trk", "hearsay", "openai/stub")
    assert [r.info.status for r in runs] == ["FINISHED"]
    assert runs[0].data.metrics["score"] == pytest.approx(json.loads(good.stdout)["score"])
    logged = json.dumps([r.data.params for r in runs]) + json.dumps([r.data.tags for r in runs])
    assert "sk-test-secret" not in logged


def test_a_failing_no_cache_rerun_keeps_the_finished_run_alone(
    store: tuple[Path, dict[str, str]],
) -> None:
    """Issue 30, defect 15: a --no-cache rerun of a complete trial that fails half-way added
    a FAILED run beside the FINISHED one. Now the trial keeps exactly its FINISHED run, with
    the original metrics; the failed rerun is one line on stderr and exit 1."""
    import hashlib

    import mlflow

    from experiments.testing.stub_server import StubOpenAI, hashed_yes_no

    root, env = store
    model = "openai/stub-kept"
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        cmd = ["run", "hearsay", "--model", model, "--api-base", stub.url, "--limit", "8"]
        cmd += ["--retries", "0", "--json"]
        done = run_cli(cmd, env, root)
        assert done.returncode == 0, done.stderr
        first = json.loads(done.stdout)
        (run,) = _runs(root, "trk", "hearsay", model)
        stub.fail_fn = lambda prompt: hashlib.sha256(prompt.encode()).digest()[0] % 2 == 0
        bad = run_cli([*cmd, "--no-cache"], env, root)
        assert bad.returncode == 1, bad.stderr
        runs = _runs(root, "trk", "hearsay", model)
        assert [(r.info.run_id, r.info.status) for r in runs] == [(run.info.run_id, "FINISHED")]
        assert runs[0].data.metrics == run.data.metrics  # the original metrics
        assert runs[0].data.metrics["score"] == pytest.approx(first["score"])
        deleted = client.search_runs(
            [run.info.experiment_id], run_view_type=mlflow.entities.ViewType.DELETED_ONLY
        )
        assert not [r for r in deleted if r.data.params.get("model") == model]  # none made
        lines = [x for x in bad.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: trial incomplete"), bad.stderr
        assert run.info.run_id in lines[0] and "was not logged" in lines[0]
        attempt = json.loads(bad.stdout)
        assert attempt["status"] == "incomplete" and 0 < attempt["n_errors"] < 8
        assert "mlflow_run_id" not in attempt  # the partial rows are no run's result
        assert attempt["mlflow_kept_run_id"] == first["mlflow_run_id"]

        stub.fail_fn = None
        again = run_cli(cmd, env, root)  # from the first run's cache: the same trial
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["mlflow_run_id"] == first["mlflow_run_id"]
    assert len(_runs(root, "trk", "hearsay", model)) == 1


def test_rerun_with_other_predictions_replaces_the_run(store: tuple[Path, dict[str, str]]) -> None:
    """A FINISHED run is reused only while it shows the trial's predictions: answers that
    changed (--no-cache, another server) get a new run and the stale one goes."""
    from experiments.testing.stub_server import StubOpenAI

    root, env = store
    model = "openai/stub-yes-no"
    with StubOpenAI(reply="Yes") as stub:
        cmd = ["run", "hearsay", "--model", model, "--api-base", stub.url, "--limit", "4"]
        cmd += ["--json"]
        yes = run_cli(cmd, env, root)
        stub.reply = "No"
        no = run_cli([*cmd, "--no-cache"], env, root)
        # --no-cache neither reads nor writes the cache: the same answers as the last run
        same = run_cli([*cmd, "--no-cache"], env, root)
    for r in (yes, no, same):
        assert r.returncode == 0, r.stderr
    a, b, c = (json.loads(r.stdout) for r in (yes, no, same))
    assert a["trial_id"] == b["trial_id"] == c["trial_id"]
    assert b["mlflow_reused"] is False and b["mlflow_run_id"] != a["mlflow_run_id"]
    assert c["mlflow_reused"] is True and c["mlflow_run_id"] == b["mlflow_run_id"]
    runs = _runs(root, "trk", "hearsay", model)
    assert [r.info.run_id for r in runs] == [b["mlflow_run_id"]]
    assert runs[0].data.metrics["score"] == pytest.approx(b["score"])
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    logged = Path(client.download_artifacts(runs[0].info.run_id, "predictions.jsonl", str(root)))
    assert [json.loads(x)["generation"] for x in logged.read_text().splitlines()] == ["No"] * 4


def _run_reporting_mlflow(
    args: list[str], env: dict[str, str], cwd: Path, check: bool = True
) -> tuple[Any, bool]:
    """`workbench ARGS --json` in a subprocess: its summary (None if it failed and `check`
    is off) and whether it imported mlflow."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom experiments.cli import main\nsys.argv = ['workbench', *sys.argv[1:]]\n"
        "try:\n    main()\nfinally:\n"
        "    print('MLFLOW_IMPORTED=' + str('mlflow' in sys.modules), file=sys.stderr)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )
    imported = "MLFLOW_IMPORTED=True" in r.stderr
    if r.returncode != 0 and not check:
        return None, imported
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), imported


def test_cached_rerun_answers_from_the_store_without_mlflow(
    store: tuple[Path, dict[str, str]],
) -> None:
    """A rerun that changes nothing reads the SQLite store directly (MLflow is not even
    imported) and reports what MLflow's own reuse check reports. Anything log_run would
    change goes the full way: a deleted run, a second run of the trial, other answers."""
    import mlflow

    from experiments.testing.stub_server import StubOpenAI

    root, env = store
    model = "openai/stub-fast-rerun"
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    with StubOpenAI(reply="Yes") as stub:
        cmd = ["run", "hearsay", "--model", model, "--api-base", stub.url, "--limit", "3"]
        first, opened_first = _run_reporting_mlflow(cmd, env, root)
        rerun, opened_rerun = _run_reporting_mlflow(cmd, env, root)
        assert opened_first and not opened_rerun
        assert rerun["model_calls"] == 0 and rerun["mlflow_reused"] is True
        assert rerun["mlflow_run_id"] == first["mlflow_run_id"]
        assert rerun["mlflow_experiment"] == first["mlflow_experiment"] == "trk/run/hearsay"

        # the run deleted in the store (the UI's delete): logged again, through MLflow
        client.delete_run(first["mlflow_run_id"])
        again, opened = _run_reporting_mlflow(cmd, env, root)
        assert opened and again["mlflow_reused"] is False
        assert again["mlflow_run_id"] != first["mlflow_run_id"]
        assert [r.info.run_id for r in _runs(root, "trk", "hearsay", model)] == [
            again["mlflow_run_id"]
        ]

        # a second run of the trial (a killed attempt): log_run deletes it, so MLflow opens
        exp = client.get_experiment_by_name("trk/run/hearsay")
        stray = client.create_run(
            exp.experiment_id,
            tags={"workbench.trial_id": again["trial_id"], "workbench.kind": "run"},
        )
        cleaned, opened = _run_reporting_mlflow(cmd, env, root)
        assert opened and cleaned["mlflow_run_id"] == again["mlflow_run_id"]
        assert client.get_run(stray.info.run_id).info.lifecycle_stage == "deleted"

        # other answers for the same trial: a new run replaces the one shown
        stub.reply = "No"
        other, opened = _run_reporting_mlflow([*cmd, "--no-cache"], env, root)
        assert opened and other["mlflow_reused"] is False
        assert other["mlflow_run_id"] != again["mlflow_run_id"]
        quiet, opened = _run_reporting_mlflow(cmd, env, root)
    # the cache still holds the 'Yes' answers, which the store no longer shows: full way
    assert opened and quiet["mlflow_reused"] is False
    final, opened = _run_reporting_mlflow(cmd, env, root)
    assert not opened and final["mlflow_run_id"] == quiet["mlflow_run_id"]


def test_cached_rerun_trusts_only_a_store_mlflow_opened_at_its_schema(
    lb_dir: Path, tmp_path: Path
) -> None:
    """The direct read is trusted only on the schema revision MLflow last opened the store
    at, in the default workspace: a store at another revision (migrated back, replaced, or
    MLflow upgraded since) and experiments moved to another workspace send the rerun through
    MLflow, which then says what is wrong or notes the revision it opened."""
    import sqlite3

    from experiments.testing.stub_server import StubOpenAI

    env = workbench_env(tmp_path, lb_dir, "sch") | {
        "WORKBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "OPENAI_API_KEY": "sk-test-secret-never-logged",
    }
    with StubOpenAI(reply="Yes") as stub:
        cmd = ["run", "hearsay", "--model", "openai/stub", "--api-base", stub.url, "--limit", "2"]
        first, _ = _run_reporting_mlflow(cmd, env, tmp_path)
        _, opened = _run_reporting_mlflow(cmd, env, tmp_path)
        assert not opened
        db = tmp_path / "mlflow.db"
        with sqlite3.connect(db) as con:
            con.execute("UPDATE experiments SET workspace = 'teamA'")
        moved, opened = _run_reporting_mlflow(cmd, env, tmp_path, check=False)
        assert opened and moved is None  # MLflow refuses the store, as it did before
        with sqlite3.connect(db) as con:
            con.execute("UPDATE experiments SET workspace = 'default'")
            (head,) = con.execute("SELECT version_num FROM alembic_version").fetchone()
            con.execute("UPDATE alembic_version SET version_num = '0a8213491aaa'")
        old, opened = _run_reporting_mlflow(cmd, env, tmp_path, check=False)
        assert opened and old is None
        with sqlite3.connect(db) as con:
            con.execute("UPDATE alembic_version SET version_num = ?", (head,))
        # back at the revision MLflow last opened it at: the direct read is trusted again
        back, opened = _run_reporting_mlflow(cmd, env, tmp_path)
        assert not opened and back["mlflow_run_id"] == first["mlflow_run_id"]
        # a stamp from another revision (MLflow upgraded since): the full way, which rewrites it
        (tmp_path / ".mlflow.db.locks" / "schema-opened").write_text("0a8213491aaa")
        again, opened = _run_reporting_mlflow(cmd, env, tmp_path)
        assert opened and again["mlflow_run_id"] == first["mlflow_run_id"]
        _, opened = _run_reporting_mlflow(cmd, env, tmp_path)
        assert not opened


SAFE_URLS = {
    "query value": ("http://h:8000/v1?token=QTOKEN999", "http://h:8000/v1?token=***"),
    "query values, keys kept": ("http://h/v1?a=1&key=QTOKEN999&b=", "http://h/v1?a=***&key=***&b="),
    "empty user": ("http://:QPASS999@h/db", "http://:***@h/db"),
    "'/' in password": ("postgresql://u:QPA/SS999@h:5432/db", "postgresql://u:***@h:5432/db"),
    "'@' in password": ("http://user:QP@SS999@host/x", "http://user:***@host/x"),
    "'?' in password": ("http://user:QP?SS999@host/x", "http://user:***@host/x"),
    "fragment token": ("https://h/cb#access_token=QTOKEN999", "https://h/cb#access_token=***"),
    "in a text": (
        "cannot reach http://u:QPASS999@h/x?t=QTOKEN999 now",
        "cannot reach http://u:***@h/x?t=*** now",
    ),
    "nothing secret": ("http://localhost:8000/v1", "http://localhost:8000/v1"),
    "'@' in a path": ("https://example.com/@user", "https://example.com/@user"),
    "sqlite path": ("sqlite:////tmp/mlflow.db", "sqlite:////tmp/mlflow.db"),
}


@pytest.mark.parametrize("case", list(SAFE_URLS))
def test_safe_url_hides_passwords_and_query_values(case: str) -> None:
    from experiments.secrets import redact, safe_url

    url, expected = SAFE_URLS[case]
    assert safe_url(url) == expected
    assert "999" not in redact(url)


def test_unusable_store_fails_before_any_call(lb_dir: Path, tmp_path: Path) -> None:
    from experiments.testing.stub_server import StubOpenAI

    env = workbench_env(tmp_path, lb_dir, "bad", tracking_uri="sqlite:////proc/no/such/x.db")
    env["WORKBENCH_RUNS_DIR"] = str(tmp_path / "runs")
    with StubOpenAI() as stub:
        cmd = ["run", "hearsay", "--model", "openai/stub", "--api-base", stub.url, "--limit", "2"]
        r = run_cli(cmd, env, tmp_path)
        assert stub.requests == []
    assert r.returncode == 2 and r.stdout == ""
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "cannot use the MLflow tracking store" in err
    assert "--no-track" in err and "Traceback" not in err


def test_sweep_and_report_show_each_arms_invalid_rate(store: tuple[Path, dict[str, str]]) -> None:
    """Point 3 (display): 'inv A'/'inv B' in the comparison table, from the trials' runs."""
    import hashlib

    from experiments.testing.stub_server import StubOpenAI, hashed_yes_no

    root, env = store
    replies: list[str] = []

    def reply(prompt: str) -> str:
        text = (
            "Maybe"
            if hashlib.sha256(prompt.encode()).digest()[1] % 3 == 0
            else hashed_yes_no(prompt)
        )
        replies.append(text)
        return text

    spec = root / "inv.yaml"
    spec.write_text(
        "name: inv_display\ntasks: [hearsay]\nfixed: {demos: none}\n"
        "axes: {instruction: [reference, description]}\n"
    )
    with StubOpenAI(reply_fn=reply) as stub:
        args = ["--model", "openai/stub", "--api-base", stub.url, "--limit", "12", "--no-cache"]
        swept = run_cli(["sweep", str(spec), *args], env, root)
    assert swept.returncode == 0, swept.stderr
    shown = run_cli(["report", "inv_display"], env, root)
    as_json = run_cli(["report", "inv_display", "--json"], env, root)
    assert shown.returncode == 0 and as_json.returncode == 0, shown.stderr
    rows = json.loads(as_json.stdout)["trial_rows"]
    assert len(rows) == 2 and all(r["n"] == 12 for r in rows)
    # the rates add up to the invalid answers the stub actually gave
    assert sum(r["invalid_rate"] * r["n"] for r in rows) == pytest.approx(replies.count("Maybe"))
    assert 0 < replies.count("Maybe") < len(replies) == 24
    by_variant = {r["variant"]: r["invalid_rate"] for r in rows}
    cmp = json.loads(as_json.stdout)["comparisons"][0]
    expected = f"{by_variant[cmp['a']]:>6.3f} {by_variant[cmp['b']]:>6.3f}"
    for out in (swept.stdout, shown.stdout):
        lines = out.splitlines()
        assert lines[0].startswith("sweep inv_display")
        assert "inv A" in lines[1] and "inv B" in lines[1] and expected in lines[2]


def test_optimize_draws_progress_on_stderr_only(store: tuple[Path, dict[str, str]]) -> None:
    from experiments.testing.stub_server import StubOpenAI, hashed_yes_no

    root, env = store
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        cmd = ["optimize", "hearsay", "--model", "openai/stub", "--api-base", stub.url]
        cmd += ["--trials", "2", "--sampler", "random", "--dev-limit", "8", "--heldout-limit", "8"]
        cmd += ["--storage", f"sqlite:///{root}/optuna.db", "--json"]
        r = run_cli(cmd, env | {"FORCE_COLOR": "1"}, root)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["n_trials"] == 2
    assert "optimize hearsay · optuna" in r.stderr and "held-out verdict" in r.stderr


def test_optimize_scores_a_served_model_by_loglik(store: tuple[Path, dict[str, str]]) -> None:
    """`optimize --scoring loglik --api-base URL` reaches the server (it was refused as if the
    URL were missing) and scores every trial from its prompt log-probabilities."""
    from experiments.testing.stub_server import StubOpenAI

    root, env = store
    with StubOpenAI(echo_logprobs=True) as stub:
        cmd = ["optimize", "hearsay", "--model", "openai/stub-loglik", "--api-base", stub.url]
        cmd += ["--scoring", "loglik", "--trials", "2", "--sampler", "random"]
        cmd += ["--dev-limit", "6", "--heldout-limit", "6"]
        cmd += ["--storage", f"sqlite:///{root}/optuna-loglik.db", "--json"]
        r = run_cli(cmd, env, root)
        echoed = [q for q in stub.requests if q.get("echo")]
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["n_trials"] == 2
    assert echoed, "no log-likelihood request reached the server"
