"""A rerun never demotes or clutters a finished sweep (issue 30, defect 15, for sweeps).

A FINISHED sweep rerun so that rows fail (a sequential sweep's loop run again with
``--no-cache`` against a server that fails half the rows; a trial whose FINISHED run lost its
predictions, rebuilt against that server) used to log FAILED trial runs beside the FINISHED
ones and end the parent FAILED. Now the store, the parent and ``reports/`` are exactly as the
finished sweep left them, the rerun is one ``error:`` line on stderr and exit 1, and a rerun
against a healthy server completes as before."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from experiments.testing.stub_server import StubOpenAI, hashed_yes_no
from tests.conftest import run_cli, workbench_env

pytestmark = [pytest.mark.data, pytest.mark.slow]

SPEC = """
name: kept
tasks: [hearsay]
fixed: {demos: none}
axes:
  instruction: [reference, description]
comparisons: [[instruction=reference, instruction=description]]
n_resamples: 200
"""
SEQUENTIAL = "design: sequential\nsequential: {batch: 4, max_rows: 12}\n"


def half(prompt: str) -> bool:
    return hashlib.sha256(prompt.encode()).digest()[0] % 2 == 0


def snapshot(root: Path) -> list[tuple[Any, ...]]:
    """Every run of the sweep's experiment, deleted ones included: what a rerun may change."""
    import mlflow
    from mlflow.entities import ViewType

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    exp = client.get_experiment_by_name("t/kept")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], run_view_type=ViewType.ALL)
    return sorted(
        (
            r.info.run_id,
            r.info.lifecycle_stage,
            r.info.status,
            r.info.end_time,
            r.data.tags.get("workbench.kind"),
            json.dumps(r.data.metrics, sort_keys=True),
        )
        for r in runs
    )


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def one_error_line(stderr: str) -> str:
    lines = [x for x in stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr[-3000:]
    assert "Traceback" not in stderr
    return lines[0]


def sweep(tmp_path: Path, lb_dir: Path, text: str) -> tuple[Path, list[str], dict[str, str]]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    root = tmp_path / "store"
    root.mkdir()
    env = {**workbench_env(root, lb_dir, "t"), "OPENAI_API_KEY": "sk-dummy-key-for-the-stub"}
    return root, ["sweep", str(spec), "--limit", "12", "--retries", "0", "--json"], env


def test_a_sequential_rerun_without_cache_that_fails_changes_nothing(
    lb_dir: Path, tmp_path: Path
) -> None:
    root, args, env = sweep(tmp_path, lb_dir, SPEC + SEQUENTIAL)
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        cmd = [*args, "--model", "openai/stub", "--api-base", stub.url]
        done = run_cli(cmd, env, root)
        assert done.returncode == 0, done.stderr[-3000:]
        before, reports = snapshot(root), files(root / "reports")
        assert [s[2] for s in before] == ["FINISHED"] * 3  # the parent and two arms

        stub.fail_fn = half
        bad = run_cli([*cmd, "--no-cache"], env, root)
        assert bad.returncode == 1, bad.stderr[-3000:]
        assert snapshot(root) == before  # no FAILED run, the parent still FINISHED
        assert files(root / "reports") == reports
        line = one_error_line(bad.stderr)
        assert "this rerun of sweep 'kept' is incomplete" in line and "unchanged" in line
        assert bad.stdout == ""  # no partial table passed off as the sweep's result

        stub.fail_fn = None
        again = run_cli(cmd, env, root)  # the cache answers: the finished sweep, read back
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["sequential"] == json.loads(done.stdout)["sequential"]
    assert snapshot(root) == before


def test_a_lost_trial_run_rebuilt_against_a_failing_server_stays_as_it_was(
    lb_dir: Path, tmp_path: Path
) -> None:
    root, args, env = sweep(tmp_path, lb_dir, SPEC)
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        cmd = [*args, "--model", "openai/stub", "--api-base", stub.url]
        done = run_cli(cmd, env, root)
        assert done.returncode == 0, done.stderr[-3000:]
        (lost,) = [p.parent for p in (root / "artifacts").rglob("predictions.jsonl")][:1]
        shutil.rmtree(lost)  # one trial run's artifacts are gone
        before, reports = snapshot(root), files(root / "reports")

        stub.fail_fn = half
        bad = run_cli([*cmd, "--no-cache"], env, root)
        assert bad.returncode == 1, bad.stderr[-3000:]
        assert snapshot(root) == before  # its FINISHED run kept, no FAILED one, parent FINISHED
        assert files(root / "reports") == reports
        assert "this rerun of sweep 'kept' is incomplete" in one_error_line(bad.stderr)

        stub.fail_fn = None
        again = run_cli(cmd, env, root)  # answers from the cache: rebuilt and logged anew
    assert again.returncode == 0, again.stderr[-3000:]
    result = json.loads(again.stdout)
    assert len(result["rebuilt"]) == 1 and result["status"] == "complete"
    statuses = [(s[1], s[2]) for s in snapshot(root)]
    assert (
        statuses.count(("active", "FINISHED")) == 3 and statuses.count(("deleted", "FINISHED")) == 1
    )
