"""`workbench sweep --batch` end to end against the stub's fake batches endpoints: completes,
is killed mid-poll and resumes without resubmitting (counted at the fake), and gives the
results of the same sweep without --batch; failures are row states; refusals are clear."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from experiments.testing.stub_server import StubOpenAI, hashed_yes_no
from tests.conftest import run_cli, workbench_env

SPEC = """
name: batch_check
tasks: [hearsay]
fixed: {demos: none}
axes:
  instruction: [reference, description]
comparisons: [[instruction=reference, instruction=description]]
n_resamples: 200
"""
MODEL = "openai/gpt-4o-mini"
LIMIT = 12
ARGS = ["--model", MODEL, "--limit", str(LIMIT), "--json"]


def env_for(
    root: Path, lb_dir: Path, stub: StubOpenAI, cache: Path | None = None
) -> dict[str, str]:
    """A subprocess environment: its own MLflow store and cache; the `api` model's base URL
    from the environment (litellm's lookup), pointing at the stub."""
    root.mkdir(parents=True, exist_ok=True)
    env = {
        **workbench_env(root, lb_dir, "t"),
        "OPENAI_API_BASE": stub.url,
        "OPENAI_API_KEY": "sk-dummy-key-for-the-local-stub",
    }
    if cache is not None:
        env["WORKBENCH_CACHE_DIR"] = str(cache)
    return env


def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return path


def numbers(result: dict[str, Any]) -> list[dict[str, Any]]:
    """What a sweep found: its comparisons (scores, difference, interval, p), which hold no
    run id; the scores are checked to be there, so equal tables are not two empty ones."""
    assert all(c["score_a"] is not None for c in result["comparisons"]), result["comparisons"]
    return list(result["comparisons"])


def trial_metrics(root: Path) -> list[dict[str, float]]:
    """The metrics of the sweep's trial runs in the store under `root`."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    exp = client.get_experiment_by_name("t/batch_check")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], "tags.`workbench.kind` = 'trial'")
    return [dict(r.data.metrics) for r in runs]


def wait_for(check: Any, timeout: float = 240.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.05)


@pytest.mark.data
@pytest.mark.slow
def test_batch_sweep_killed_mid_poll_resumes_without_resubmitting_and_equals_direct(
    lb_dir: Path, tmp_path: Path
) -> None:
    spec = spec_file(tmp_path)
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        fake = stub.batches
        fake.polls_to_finish = 10**6  # running until the test lets it end
        env = env_for(tmp_path / "batch", lb_dir, stub)
        cmd = [sys.executable, "-m", "experiments.cli", "sweep", str(spec), *ARGS,
               "--batch", "--batch-poll", "0.05"]  # fmt: skip
        proc = subprocess.Popen(
            cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            wait_for(lambda: fake.counts["batch_retrieve"] >= 3 or proc.poll() is not None)
        finally:
            proc.send_signal(signal.SIGKILL)  # killed while polling: no clean-up at all
            _, err = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
        assert (fake.counts["file_upload"], fake.counts["batch_create"]) == (1, 1)
        (batch,) = fake.batches.values()
        assert batch.counts["total"] == 2 * LIMIT  # every uncached call of the sweep
        fake.polls_to_finish = batch.polls + 2  # ends on the rerun's second poll

        resumed = run_cli(["sweep", str(spec), *ARGS, "--batch", "--batch-poll", "0.05"], env,
                          tmp_path)  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert "resuming batch" in resumed.stderr
        assert (fake.counts["file_upload"], fake.counts["batch_create"]) == (1, 1), "paid twice"
        assert fake.counts["request"] == 2 * LIMIT and stub.requests == []  # no direct call
        batched = json.loads(resumed.stdout)
        assert batched["status"] == "complete"
        assert not list((tmp_path / "batch" / "cache" / "batches").glob("*.json"))
        # the batch's rows were model calls (at batch prices), not cache hits
        logged = trial_metrics(tmp_path / "batch")
        assert sum(m["model_calls"] for m in logged) == 2 * LIMIT
        assert sum(m["cache_hits"] for m in logged) == 0
        batch_cost = sum(m["cost"] for m in logged)

        # the same sweep without --batch, on a fresh cache and store: direct calls
        direct = run_cli(["sweep", str(spec), *ARGS], env_for(tmp_path / "direct", lb_dir, stub),
                         tmp_path)  # fmt: skip
        assert direct.returncode == 0, direct.stderr[-3000:]
        assert len(stub.requests) == 2 * LIMIT
        assert numbers(json.loads(direct.stdout)) == numbers(batched)
        direct_cost = sum(m["cost"] for m in trial_metrics(tmp_path / "direct"))
        assert batch_cost == pytest.approx(direct_cost / 2)  # gpt-4o-mini's batch prices

        # without --batch on the batch's cache (a new store): all cache hits, no call
        again = run_cli(
            ["sweep", str(spec), *ARGS],
            env_for(tmp_path / "again", lb_dir, stub, cache=tmp_path / "batch" / "cache"),
            tmp_path,
        )
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(stub.requests) == 2 * LIMIT, "the batch's answers were not under the keys"
        assert numbers(json.loads(again.stdout)) == numbers(batched)
        assert fake.counts["batch_create"] == 1


@pytest.mark.data
@pytest.mark.slow
def test_rows_a_batch_did_not_answer_are_failures_and_a_rerun_submits_only_them(
    lb_dir: Path, tmp_path: Path
) -> None:
    spec = spec_file(tmp_path)
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        fake = stub.batches
        fake.ending, fake.partial = "expired", 2 * LIMIT - 5
        env = env_for(tmp_path / "run", lb_dir, stub)
        cmd = ["sweep", str(spec), *ARGS, "--batch", "--batch-poll", "0.05"]
        first = run_cli(cmd, env, tmp_path)
        assert first.returncode == 1, first.stderr[-3000:]  # incomplete trials
        result = json.loads(first.stdout)
        assert sum(t["n_errors"] for t in result["incomplete"]) == 5
        assert all(c["p_value"] is None for c in result["comparisons"])  # no number from it
        assert "expired" in first.stderr
        assert stub.requests == []  # failed rows are states, never direct calls

        fake.ending = "completed"
        second = run_cli(cmd, env, tmp_path)
        assert second.returncode == 0, second.stderr[-3000:]
        assert fake.counts["batch_create"] == 2
        assert list(fake.batches.values())[-1].counts["total"] == 5  # only the failed rows
        assert json.loads(second.stdout)["status"] == "complete"


@pytest.mark.data
@pytest.mark.slow
def test_one_bad_line_in_a_batch_output_fails_one_row_and_a_rerun_submits_only_it(
    lb_dir: Path, tmp_path: Path
) -> None:
    # issue 30, defect 5: one unreadable line made the batch uncollectable (10 failed polls on
    # every rerun) and its paid answers were never used
    spec = spec_file(tmp_path)

    def one_bad_line(kind: str, data: bytes) -> bytes:
        lines = data.splitlines()
        entry = json.loads(lines[5])
        lines[5] = json.dumps({**entry, "response": "oops"}).encode()
        return b"\n".join(lines) + b"\n"

    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        fake = stub.batches
        fake.rewrite = one_bad_line
        env = env_for(tmp_path / "run", lb_dir, stub)
        cmd = ["sweep", str(spec), *ARGS, "--batch", "--batch-poll", "0.05"]
        first = run_cli(cmd, env, tmp_path)
        assert first.returncode == 1, first.stderr[-3000:]  # an incomplete trial
        assert "Traceback" not in first.stderr
        result = json.loads(first.stdout)
        assert [t["n_errors"] for t in result["incomplete"]] == [1]
        assert fake.counts["batch_retrieve"] == 1  # collected at once, not polled 10 times
        assert "23 of 24 requests answered" in first.stderr

        fake.rewrite = None
        second = run_cli(cmd, env, tmp_path)
        assert second.returncode == 0, second.stderr[-3000:]
        assert list(fake.batches.values())[-1].counts["total"] == 1  # only the failed row
        assert fake.counts["request"] == 2 * LIMIT + 1 and stub.requests == []
        assert json.loads(second.stdout)["status"] == "complete"


@pytest.mark.data
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model", "local/smollm2"], "local/smollm2 runs in this process and has no batch API"),
        (["--api-base", "http://127.0.0.1:9/v1"], "served at --api-base"),
        (["--no-cache"], "--no-cache turns off"),
        (["--executor", "ray"], "--executor ray has nothing to run"),
    ],
)
def test_batch_refusals_are_one_clear_line_before_anything_runs(
    lb_dir: Path, tmp_path: Path, extra: list[str], message: str
) -> None:
    spec = spec_file(tmp_path)
    with StubOpenAI() as stub:
        env = env_for(tmp_path / "run", lb_dir, stub)
        args = ["sweep", str(spec), "--model", MODEL, "--limit", "3", "--batch", *extra]
        r = run_cli(args, env, tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    errors = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], r.stderr
    assert stub.requests == [] and not stub.batches.counts
    assert not (tmp_path / "run" / "mlflow.db").exists()  # nothing logged


@pytest.mark.data
def test_dry_run_with_batch_prices_at_batch_prices_or_says_unknown(
    lb_dir: Path, tmp_path: Path
) -> None:
    spec = spec_file(tmp_path)
    with StubOpenAI() as stub:
        env = env_for(tmp_path / "run", lb_dir, stub)
        base = ["sweep", str(spec), "--limit", "5", "--dry-run", "--json"]
        direct = json.loads(run_cli([*base, "--model", MODEL], env, tmp_path).stdout)
        batched = json.loads(run_cli([*base, "--model", MODEL, "--batch"], env, tmp_path).stdout)
        unknown = run_cli(
            ["sweep", str(spec), "--limit", "5", "--dry-run", "--model", "openai/nope-xyz",
             "--batch"], env, tmp_path,
        )  # fmt: skip
    for d, b in zip(direct["trials"], batched["trials"], strict=True):
        assert b["price"] == "batch" and b["cost_est"] == pytest.approx(d["cost_est"] / 2)
    assert unknown.returncode == 0, unknown.stderr
    assert "(batch price unknown)" in unknown.stdout


@pytest.mark.data
def test_log_likelihood_scoring_through_batches_is_refused(lb_dir: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC + "scoring: loglik\n")
    with StubOpenAI() as stub:
        env = env_for(tmp_path / "run", lb_dir, stub)
        r = run_cli(["sweep", str(spec), "--model", MODEL, "--limit", "3", "--batch"], env,
                    tmp_path)  # fmt: skip
    assert r.returncode == 2, r.stderr[-2000:]
    errors = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and "log-likelihood scoring has no batch path" in errors[0], r.stderr
    assert "Traceback" not in r.stderr
    assert stub.requests == [] and not stub.batches.counts


@pytest.mark.data
@pytest.mark.slow
def test_a_batch_rerun_of_a_finished_sweep_sends_nothing_for_the_trials_it_reads_back(
    lb_dir: Path, tmp_path: Path
) -> None:
    # review finding: the trials read back from MLflow were batched (paid) when the cache
    # lacked their answers, and the cost line said 0 model calls, cost unknown
    spec = spec_file(tmp_path)
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        env = env_for(tmp_path / "run", lb_dir, stub)
        first = run_cli(["sweep", str(spec), *ARGS, "--no-cache"], env, tmp_path)
        assert first.returncode == 0, first.stderr[-3000:]
        again = run_cli(["sweep", str(spec), *ARGS, "--batch", "--batch-poll", "0.05"], env,
                        tmp_path)  # fmt: skip
        assert again.returncode == 0, again.stderr[-3000:]
        assert not stub.batches.counts, dict(stub.batches.counts)  # nothing uploaded or paid
        assert len(stub.requests) == 2 * LIMIT  # the first run's calls only
        cost = json.loads(again.stdout)["cost"]
        assert (cost["model_calls"], cost["cache_hits"]) == (0, 2 * LIMIT)
