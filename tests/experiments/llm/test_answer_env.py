"""Everything that decides a model's answers is part of its identity (issue 30, defect 1).

`OPENAI_BASE_URL` pointed at server A, then at server B: B's run reported A's score from the
cache with 0 calls, under A's trial id and MLflow run. The environment variables litellm
reads for a model's server, API version, organisation or region are part of the model's
identity (`experiments.llm.answer_env`); keys never are.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli, workbench_env


@pytest.mark.data
@pytest.mark.slow
def test_another_server_through_openai_base_url_is_another_trial(
    lb_dir: Path, tmp_path: Path
) -> None:
    """The README's way to point `openai/` models at another endpoint: each server gets its
    own calls, trial id, score and MLflow run."""
    from experiments.testing.stub_server import StubOpenAI

    env = workbench_env(tmp_path, lb_dir, "env") | {
        "WORKBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "OPENAI_API_KEY": "sk-test-secret-never-logged",
    }
    for name in ("OPENAI_API_BASE", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env.pop(name, None)
    cmd = ["run", "hearsay", "--model", "openai/stub", "--limit", "6", "--json"]
    cmd += ["--retries", "0"]
    with StubOpenAI(reply="Yes") as a, StubOpenAI(reply="No") as b:
        first = run_cli(cmd, env | {"OPENAI_BASE_URL": a.url}, tmp_path)
        second = run_cli(cmd, env | {"OPENAI_BASE_URL": b.url}, tmp_path)
        again = run_cli(cmd, env | {"OPENAI_BASE_URL": b.url}, tmp_path)
    for r in (first, second, again):
        assert r.returncode == 0, r.stderr
    ra, rb, rb2 = (json.loads(r.stdout) for r in (first, second, again))
    assert a.counts["ok"] > 0 and b.counts["ok"] > 0, "B was never called"
    assert rb["model_calls"] > 0
    assert ra["trial_id"] != rb["trial_id"]
    assert rb["mlflow_run_id"] != ra["mlflow_run_id"] and rb["mlflow_reused"] is False
    assert {p for p in _generations(tmp_path, rb["trial_id"])} == {"No"}
    assert {p for p in _generations(tmp_path, ra["trial_id"])} == {"Yes"}
    # the same server again: its own trial, answered from the cache
    assert rb2["trial_id"] == rb["trial_id"] and rb2["model_calls"] == 0
    assert "sk-test-secret" not in "".join(r.stdout + r.stderr for r in (first, second, again))


def _generations(root: Path, trial_id: str) -> list[str]:
    lines = (root / "runs" / trial_id / "predictions.jsonl").read_text().splitlines()
    return [json.loads(x)["generation"] for x in lines]


ROOT = Path(__file__).resolve().parents[3]
REVIEWED = ROOT / "tests" / "data" / "litellm_env_reviewed.txt"


def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    from experiments.llm.answer_env import all_answer_names

    for name in all_answer_names():
        monkeypatch.delenv(name, raising=False)


def test_the_server_from_the_environment_is_in_the_identity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from experiments.llm.gateway import LiteLLMModel

    _clean(monkeypatch)
    plain = LiteLLMModel("openai/gpt-4o-mini").cache_identity()
    assert plain == {"model": "openai/gpt-4o-mini", "api_base": None, "mode": "chat"}
    monkeypatch.setenv("OPENAI_BASE_URL", "http://a.example/v1")
    a = LiteLLMModel("openai/gpt-4o-mini").cache_identity()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://b.example/v1")
    b = LiteLLMModel("openai/gpt-4o-mini").cache_identity()
    assert a["env"] == {"OPENAI_BASE_URL": "http://a.example/v1"}
    assert len({json.dumps(x, sort_keys=True) for x in (plain, a, b)}) == 3
    # an api_base given to the call wins over the variable: it is not part of that identity
    served = LiteLLMModel("openai/x", api_base="http://h/v1")
    assert "env" not in served.cache_identity()
    assert "env" not in served.loglik_identity()
    # another provider's server is not this model's
    assert "env" not in LiteLLMModel("anthropic/claude-x").cache_identity()


@pytest.mark.parametrize(
    ("model", "name", "value"),
    [
        ("openai/x", "OPENAI_API_BASE", "http://a.example/v1"),
        ("openai/x", "OPENAI_ORGANIZATION", "org-1"),
        ("openai/x", "OPENAI_CUSTOM_HEADERS", "X-Route: b"),
        ("anthropic/x", "ANTHROPIC_BASE_URL", "http://a.example"),
        ("ollama/x", "OLLAMA_API_BASE", "http://a.example:11434"),
        ("hosted_vllm/x", "HOSTED_VLLM_API_BASE", "http://a.example/v1"),
        ("azure/x", "AZURE_API_VERSION", "2024-02-01"),
        ("openai/x", "USE_LITELLM_PROXY", "True"),
    ],
)
def test_each_answer_variable_changes_the_identity(
    monkeypatch: pytest.MonkeyPatch, model: str, name: str, value: str
) -> None:
    from experiments.llm.gateway import LiteLLMModel

    _clean(monkeypatch)
    before = LiteLLMModel(model).cache_identity()
    monkeypatch.setenv(name, value)
    assert LiteLLMModel(model).cache_identity() == {**before, "env": {name: value}}


def test_no_key_and_no_password_enters_the_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    from experiments.llm.gateway import LiteLLMModel

    _clean(monkeypatch)
    before = LiteLLMModel("openai/x").cache_identity()
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.setenv(name, "sk-test-0123456789abcdefghijkl")
    assert LiteLLMModel("openai/x").cache_identity() == before  # a key decides no answer
    monkeypatch.setenv("OPENAI_BASE_URL", "https://user:hunter2secret@gw.example/v1?key=abc123")
    shown = json.dumps(LiteLLMModel("openai/x").cache_identity())
    assert "gw.example" in shown and "hunter2secret" not in shown and "abc123" not in shown


def test_a_ray_worker_with_another_server_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The identity a Ray worker computes for itself (`node_identity`) carries its server."""
    from experiments.llm.identity import node_identity

    _clean(monkeypatch)
    here = node_identity("openai/x")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://b.example/v1")
    assert node_identity("openai/x") != here


def _reviewed() -> set[str]:
    lines = REVIEWED.read_text().splitlines()
    return {x.strip() for x in lines if x.strip() and not x.startswith("#")}


@pytest.mark.slow
def test_every_variable_the_gateway_reads_is_classified(tmp_path: Path) -> None:
    """Records what litellm's import and each supported provider's model read from the
    environment (`env_probe`): each name is in the model's identity (`answer_names`), or
    known not to change an answer (`NOT_ANSWERS`, the reviewed list of litellm's settings).
    A name in none of them fails here: classify it in `experiments.llm.answer_env`."""
    import os
    import subprocess
    import sys

    from experiments.llm.answer_env import all_answer_names, answer_names, not_answers
    from experiments.testing.stub_server import StubOpenAI

    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        # every request that is not to the stub goes to a closed port: nothing leaves
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1",
        "WORKBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "PYTHONPATH": str(ROOT),
    }
    with StubOpenAI() as stub:
        probe = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("env_probe.py")), stub.url],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert probe.returncode == 0, probe.stderr[-3000:]
    reads = json.loads(probe.stdout)
    reviewed = _reviewed()
    assert len(reads["calls"]) >= 9, "a provider was not probed"

    def unclassified(names: list[str], answers: frozenset[str] | tuple[str, ...]) -> list[str]:
        return [n for n in names if n not in answers and n not in reviewed and not not_answers(n)]

    problems = {"import": unclassified(reads["import"], all_answer_names())}
    for case, names in reads["calls"].items():
        model = case.split(" ")[0]
        # with an api_base, the base-URL variables read are overruled by it (`BASE_SUFFIXES`)
        problems[case] = unclassified(names, answer_names(model))
    problems = {k: v for k, v in problems.items() if v}
    assert problems == {}, (
        "read from the environment but neither in the model's identity nor known to change "
        f"no answer: classify each in experiments/llm/answer_env.py or {REVIEWED}: {problems}"
    )
    # the probe sees what it must: the OpenAI base URL is read for an openai/ model
    assert "OPENAI_BASE_URL" in reads["calls"]["openai/x"]


def test_the_reviewed_list_names_no_answer_variable() -> None:
    from experiments.llm.answer_env import all_answer_names, not_answers

    reviewed = _reviewed()
    assert reviewed, REVIEWED
    assert not reviewed & all_answer_names()
    assert not [n for n in reviewed if not_answers(n)], "classified twice"
    lines = [x for x in REVIEWED.read_text().splitlines() if x and not x.startswith("#")]
    assert lines == sorted(set(lines)), "one name a line, sorted"


# ---- what the server says it serves ------------------------------------------------------------
LLAMA_A = {
    "id": "/models/a.gguf",
    "object": "model",
    "created": 1,
    "owned_by": "llamacpp",
    "meta": {"n_params": 134515008, "n_vocab": 49152, "size": 91832320},
}
LLAMA_B = {**LLAMA_A, "id": "/models/b.gguf", "meta": {**LLAMA_A["meta"], "n_params": 7}}


def test_what_the_server_serves_is_in_the_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server restarted with other weights under the same URL and name is another model;
    what changes on every reply (`created`) is not part of it, and a server that does not
    say adds nothing."""
    from experiments.llm import served_model
    from experiments.llm.gateway import LiteLLMModel
    from experiments.testing.stub_server import StubOpenAI

    _clean(monkeypatch)
    with StubOpenAI() as stub:  # no /v1/models: 404
        served_model.forget()
        lm = LiteLLMModel("openai/m", api_base=stub.url)
        silent = lm.cache_identity()
        assert silent == {"model": "openai/m", "api_base": stub.url, "mode": "chat"}
        stub.models = [LLAMA_A]
        served_model.forget()
        a = lm.cache_identity()
        stub.models = [{**LLAMA_A, "created": 2}]
        served_model.forget()
        assert lm.cache_identity() == a
        assert a["served_model"] == {
            k: v for k, v in LLAMA_A.items() if k not in ("created", "object")
        }
        assert lm.loglik_identity()["served_model"] == a["served_model"]
        stub.models = [LLAMA_B]
        served_model.forget()
        assert lm.cache_identity() != a
        # several models: the one named so, or none
        stub.models = [LLAMA_A, {**LLAMA_B, "id": "m"}]
        served_model.forget()
        assert lm.cache_identity()["served_model"]["id"] == "m"
        stub.models = [LLAMA_A, LLAMA_B]
        served_model.forget()
        assert lm.cache_identity() == silent
    # a base URL from the environment is asked the same way; a hosted API never is
    with StubOpenAI(models=[LLAMA_A]) as stub:
        served_model.forget()
        monkeypatch.setenv("OPENAI_BASE_URL", stub.url)
        assert LiteLLMModel("openai/m").cache_identity()["served_model"]["id"] == LLAMA_A["id"]
    monkeypatch.delenv("OPENAI_BASE_URL")
    served_model.forget()
    assert "served_model" not in LiteLLMModel("openai/gpt-4o-mini").cache_identity()


@pytest.mark.data
@pytest.mark.slow
def test_a_server_restarted_with_other_weights_is_another_trial(
    lb_dir: Path, tmp_path: Path
) -> None:
    """Same URL, same model name, other weights (as the server reports them): the second run
    calls the server and is a trial of its own, not the first one's cached answers."""
    from experiments.testing.stub_server import StubOpenAI

    env = workbench_env(tmp_path, lb_dir, "srv") | {
        "WORKBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "OPENAI_API_KEY": "sk-test",
    }
    with StubOpenAI(reply="Yes", models=[LLAMA_A]) as stub:
        cmd = ["run", "hearsay", "--model", "openai/m", "--api-base", stub.url, "--limit", "4"]
        cmd += ["--retries", "0", "--json"]
        first = run_cli(cmd, env, tmp_path)
        calls_a = stub.counts["ok"]
        stub.models, stub.reply = [LLAMA_B], "No"
        second = run_cli(cmd, env, tmp_path)
    for r in (first, second):
        assert r.returncode == 0, r.stderr
    ra, rb = json.loads(first.stdout), json.loads(second.stdout)
    assert calls_a > 0 and stub.counts["ok"] > calls_a and rb["model_calls"] > 0
    assert ra["trial_id"] != rb["trial_id"] and rb["mlflow_reused"] is False
    assert set(_generations(tmp_path, rb["trial_id"])) == {"No"}


def test_no_credential_in_custom_headers_enters_the_identity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OPENAI_CUSTOM_HEADERS routes (its headers decide answers) but may carry the key itself
    (the SDK takes an ``Authorization`` line from it; a gateway's ``X-...-Api-Key``): the
    identity, shown in the summary and MLflow, keeps the routing headers and hides those
    values, the same for any key (one identity, never the key's fingerprint)."""
    from experiments.llm.gateway import LiteLLMModel

    _clean(monkeypatch)
    shown = []
    for key in ("tok4SECRETabcd1234567", "tok9OTHERxyz98765432"):
        monkeypatch.setenv(
            "OPENAI_CUSTOM_HEADERS",
            f"Authorization: Bearer {key}\nX-Portkey-Api-Key: pk{key}\n"
            f"X-Auth-Token: {key[::-1]}\nX-Route: gpu-b",
        )
        identity = LiteLLMModel("openai/x").cache_identity()
        text = json.dumps(identity)
        assert key not in text and key[::-1] not in text
        assert "X-Route: gpu-b" in identity["env"]["OPENAI_CUSTOM_HEADERS"]
        shown.append(identity)
    assert shown[0] == shown[1]


_BASE_READ = (
    r'(?:get_secret(?:_str)?|os\.environ\.get|os\.getenv)\(\s*"([A-Z0-9_]+_(?:API_BASE|BASE_URL))"'
)


def test_every_providers_base_url_variable_is_in_its_identity() -> None:
    """litellm takes a provider's server from variables not always named after it:
    ``fireworks_ai/`` reads FIREWORKS_API_BASE, ``huggingface/`` HF_API_BASE, ``azure_ai/``
    AZURE_API_BASE. Every base-URL variable litellm's code for a provider reads (its folder
    under ``litellm/llms``) is in that provider's `answer_names`, or known to change no
    answer: pointing one at another server is another trial."""
    import re

    import litellm

    from experiments.llm.answer_env import answer_names, not_answers

    llms = Path(litellm.__file__).parent / "llms"
    missing = {}
    for folder in sorted(p for p in llms.iterdir() if p.is_dir()):
        read = {
            n for f in folder.rglob("*.py") for n in re.findall(_BASE_READ, f.read_text("utf-8"))
        }
        known = set(answer_names(f"{folder.name}/m"))
        if left := sorted(n for n in read if n not in known and not not_answers(n)):
            missing[folder.name] = left
    assert not missing, f"base-URL variables litellm reads, not in the identity: {missing}"


def test_a_base_url_alias_changes_the_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    from experiments.llm.answer_env import answer_env

    _clean(monkeypatch)
    monkeypatch.setenv("FIREWORKS_API_BASE", "http://a.example/v1")
    assert answer_env("fireworks_ai/x") == {"FIREWORKS_API_BASE": "http://a.example/v1"}
    assert answer_env("fireworks_ai/x", api_base="http://h/v1") == {}  # the api_base wins


def test_one_server_spelled_two_ways_is_one_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """``OPENAI_BASE_URL=http://h/v1`` and ``HTTP://H/v1/`` reach the same server: one trial
    and one cache, not a silent second run; another path or port is another server."""
    from experiments.llm.gateway import LiteLLMModel

    _clean(monkeypatch)
    seen = []
    for url in (
        "http://gw.example:8000/v1",
        "http://gw.example:8000/v1/",
        "HTTP://GW.example:8000/v1",
    ):
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        seen.append(LiteLLMModel("openai/x").cache_identity())
    assert seen[0] == seen[1] == seen[2]
    assert seen[0]["env"] == {"OPENAI_BASE_URL": "http://gw.example:8000/v1"}
    for other in ("http://gw.example:8000/v2", "http://gw.example:8001/v1"):
        monkeypatch.setenv("OPENAI_BASE_URL", other)
        assert LiteLLMModel("openai/x").cache_identity() != seen[0]
