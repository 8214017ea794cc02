"""`workbench variants generate` end to end against the stub server: the file and its MLflow
run, a sweep and a run that use it marked unreviewed until `reviewed: true`, bad inputs, and
(slow) the same command on the embedded local/smollm2."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from experiments.testing.stub_server import StubOpenAI, hashed_yes_no
from promptlib.yamlsafe import safe_yaml_load
from tests.conftest import REPO, run_cli, workbench_env

pytestmark = pytest.mark.data

DESCRIPTION = (
    "Hearsay is a statement made out of court and offered to prove its truth.\nAnswer Yes or No."
)
GENERATION = "You write prompts for the LegalBench task"


def _reply(prompt: str) -> str:
    if GENERATION not in prompt:
        return hashed_yes_no(prompt)  # a trial's row
    if "Query template:" in prompt:
        return "Facts: the case\nIs this hearsay?\nA:"  # drops {{text}}
    return DESCRIPTION


@pytest.fixture
def stub() -> Iterator[StubOpenAI]:
    server = StubOpenAI(reply_fn=_reply).start()
    yield server
    server.stop()


@pytest.fixture
def env(tmp_path: Path, lb_dir: Path) -> dict[str, str]:
    return {
        **workbench_env(tmp_path, lb_dir, "gen"),
        "OPENAI_API_KEY": "sk-dummy-key-for-the-local-stub-0123456789",
    }


def _client(root: Path) -> Any:
    import mlflow

    return mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")


def _runs(root: Path, experiment: str, kind: str) -> list[Any]:
    client = _client(root)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, experiment
    return list(
        client.search_runs([exp.experiment_id], filter_string=f"tags.`workbench.kind` = '{kind}'")
    )


def _generate(stub: StubOpenAI, env: dict[str, str], root: Path, *extra: str) -> Any:
    args = ["variants", "generate", "hearsay", "--generator", "openai/stub"]
    return run_cli([*args, "--api-base", stub.url, *extra], env, root)


def test_generate_then_sweep_marks_unreviewed_until_reviewed(
    stub: StubOpenAI, env: dict[str, str], tmp_path: Path
) -> None:
    r = _generate(stub, env, tmp_path, "--kind", "description", "--temperature", "0")
    assert r.returncode == 0, r.stderr
    sha = hashlib.sha256(DESCRIPTION.encode()).hexdigest()
    rel = f"ablations/generated/hearsay/description-{sha[:8]}.yaml"
    assert f"wrote {rel} (description of hearsay by openai/stub" in r.stdout
    path = tmp_path / rel
    doc = safe_yaml_load(path.read_text(), str(path))
    assert doc["text"] == DESCRIPTION and doc["text_sha256"] == sha and doc["reviewed"] is False
    assert doc["generator"]["model"] == "openai/stub"
    assert doc["generator"]["identity"] == {
        "model": "openai/stub",
        "api_base": stub.url,
        "mode": "chat",
    }
    assert doc["decoding"] == {"temperature": 0.0, "max_tokens": 400, "stop": [], "mode": "chat"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc["generated_at"])
    assert doc["prompt"].startswith(GENERATION) and "Q: {{text}} Is there hearsay?" in doc["prompt"]
    assert doc["prompt_sha256"] == hashlib.sha256(doc["prompt"].encode()).hexdigest()
    # the generation is an MLflow run like a trial: params, the texts as artifacts, no key
    (run,) = _runs(tmp_path, "gen/generate/hearsay", "generation")
    assert run.info.run_id == doc["mlflow_run_id"] and run.info.status == "FINISHED"
    assert {k: run.data.params[k] for k in ("task", "kind", "generator", "temperature")} == {
        "task": "hearsay", "kind": "description", "generator": "openai/stub", "temperature": "0.0"
    }  # fmt: skip
    assert json.loads(run.data.params["decoding"])["max_tokens"] == 400
    assert run.data.tags["workbench.generation_kind"] == "description"
    assert run.data.metrics["n_written"] == 1.0 and run.data.metrics["n_refused"] == 0.0
    client = _client(tmp_path)
    local = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path / "dl")))
    assert (local / "generated" / "candidate-1.yaml").read_text() == path.read_text()
    assert (local / "prompts" / "candidate-1.txt").read_text() == doc["prompt"]
    logged = "".join(p.read_text() for p in local.rglob("*") if p.is_file())
    assert env["OPENAI_API_KEY"] not in logged + json.dumps(run.data.params)

    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: generated_check\ntasks: [hearsay]\nfixed: {demos: none}\n"
        f"axes:\n  instruction_file: [{rel}, {REPO}/ablations/instructions/hearsay_three_questions.yaml]\n"
        "n_resamples: 200\n"
    )
    sweep = ["sweep", str(spec), "--model", "openai/stub", "--api-base", stub.url, "--limit", "10"]
    r = run_cli([*sweep, "--json"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    warning = f"warning: {rel} is generated text not yet reviewed (reviewed: false): read it, then set reviewed: true"
    assert [line for line in r.stderr.splitlines() if "not yet reviewed" in line] == [
        line for line in r.stderr.splitlines() if line.startswith(warning)
    ] and warning in r.stderr  # one line, this file only (the hand-written one is not flagged)
    assert json.loads(r.stdout)["unreviewed"] == [rel]
    (parent,) = _runs(tmp_path, "gen/generated_check", "sweep")
    assert parent.data.tags["workbench.unreviewed"] == rel

    path.write_text(path.read_text().replace("reviewed: false", "reviewed: true"))
    r = run_cli([*sweep, "--json"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "not yet reviewed" not in r.stderr and json.loads(r.stdout)["unreviewed"] == []
    (again,) = _runs(tmp_path, "gen/generated_check", "sweep")  # the same parent, resumed
    assert again.info.run_id == parent.info.run_id and "workbench.unreviewed" not in again.data.tags


def test_run_with_an_unreviewed_file_says_so_and_tags_its_run(
    stub: StubOpenAI, env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "desc.yaml"
    assert _generate(stub, env, tmp_path, "--kind", "paraphrase", "-o", str(out)).returncode == 0
    run = ["run", "hearsay", "--model", "openai/stub", "--api-base", stub.url, "--limit", "5"]
    variant = ["--variant", f"instruction_file={out},demos=none", "--json"]
    r = run_cli([*run, *variant], env, tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"warning: {out} is generated text not yet reviewed" in r.stderr
    summary = json.loads(r.stdout)
    assert summary["unreviewed"] == [str(out)]
    tags = _client(tmp_path).get_run(summary["mlflow_run_id"]).data.tags
    assert tags["workbench.unreviewed"] == str(out)
    out.write_text(out.read_text().replace("reviewed: false", "reviewed: true"))
    r = run_cli([*run, *variant], env, tmp_path)
    assert r.returncode == 0 and "not yet reviewed" not in r.stderr
    again = json.loads(r.stdout)
    assert again["mlflow_run_id"] == summary["mlflow_run_id"] and again["unreviewed"] == []
    assert "workbench.unreviewed" not in _client(tmp_path).get_run(again["mlflow_run_id"]).data.tags


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["--kind", "description", "--task-typo"], "No such option", 2),
        (["--kind", "technicl"], "unknown --kind 'technicl' — did you mean 'technical'", 2),
        (["--kind", "plain"], "candidate 1 refused, not written: the register text drops {{text}}", 1),
        (["--kind", "description", "-o", "missing/dir/f.yaml"], "folder missing/dir does not exist", 2),
        (["--kind", "description", "-o", "exists.yaml"], "exists.yaml already exists; choose another path or pass --force", 2),
    ],
)  # fmt: skip
def test_bad_inputs_one_line_nothing_written(
    stub: StubOpenAI, env: dict[str, str], tmp_path: Path, args: list[str], message: str, code: int
) -> None:
    (tmp_path / "exists.yaml").write_text("text: mine\n")
    store = ("mlflow.db", "cache", "artifacts")  # the MLflow store and the response cache

    def files() -> list[str]:
        return sorted(
            p.name for p in tmp_path.iterdir() if p.name not in store and p.name[0] != "."
        )

    before = files()
    r = _generate(stub, env, tmp_path, *args)
    assert r.returncode == code and message in r.stderr, r.stderr
    if "option" not in message:
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "ablations").exists() and files() == before
    assert (tmp_path / "exists.yaml").read_text() == "text: mine\n"
    if code == 1:  # the model was asked: its generation is tracked, FAILED, with the reply
        (run,) = _runs(tmp_path, "gen/generate/hearsay", "generation")
        assert run.info.status == "FAILED" and run.data.metrics["n_refused"] == 1.0


def test_unknown_task_one_line(env: dict[str, str], tmp_path: Path) -> None:
    args = ["variants", "generate", "hearsy", "--kind", "plain", "--generator", "openai/x"]
    r = run_cli(args, env, tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (
        "error: unknown task 'hearsy' — did you mean 'hearsay'? (run 'workbench tasks' for the "
        "162 known tasks)"
    )


@pytest.mark.slow
@pytest.mark.model
def test_local_smollm2_end_to_end(env: dict[str, str], tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    args = [
        "variants",
        "generate",
        "hearsay",
        "--kind",
        "description",
        "--generator",
        "local/smollm2",
    ]
    r = run_cli([*args, "--max-tokens", "80", "--json"], env, tmp_path)
    assert r.returncode in (0, 1), r.stderr  # 1: the tiny model's reply was refused (empty)
    doc = json.loads(r.stdout)
    (c,) = doc["candidates"]
    if c["status"] == "written":
        written = safe_yaml_load((tmp_path / c["path"]).read_text(), c["path"])
        assert written["reviewed"] is False and written["generator"]["model"] == "local/smollm2"
        assert written["generator"]["identity"]["weights_sha256"]
        assert hashlib.sha256(written["text"].encode()).hexdigest() == written["text_sha256"]
    else:
        assert "refused" in r.stderr
    (run,) = _runs(tmp_path, "gen/generate/hearsay", "generation")
    assert run.data.params["generator"] == "local/smollm2"
