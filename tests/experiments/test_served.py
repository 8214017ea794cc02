"""Served models as first-class citizens (issue 12, point 5).

- Fast: the echo/logprobs parsing and the errors, against the stub server (no model).
- Real (markers model + slow): llama.cpp's own OpenAI-compatible server
  (``python -m llama_cpp.server``, the ``server`` extra) on loopback, serving the GGUF of
  ``local/smollm2`` with its settings, gives the same predictions as ``local/smollm2``, by
  generation and by log-likelihood.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from experiments.models import (
    ModelError,
    NoPromptLogprobs,
    continuation_logprob,
    get_model,
    local_model_path,
)
from experiments.runner import TrialSpec, resolve_trial, run_trial
from experiments.stub_server import StubOpenAI, stub_logprobs, stub_token_logprob
from promptlib import Catalog, parse_spec


@pytest.fixture(autouse=True)
def _dummy_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The OpenAI client refuses to send a request without some key."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-key-for-a-local-server")


# ---- parsing (no server) -----------------------------------------------------------------
def test_continuation_logprob_sums_the_label_tokens_only() -> None:
    prompt, cont = "Q: x\nA:", " Yes"
    lp = stub_logprobs(prompt + cont + " extra")  # a generated token after the label
    assert continuation_logprob(lp, prompt, cont, "http://s") == stub_token_logprob(" Yes")
    two = stub_logprobs(prompt + " not at all")
    want = stub_token_logprob(" not") + stub_token_logprob(" at") + stub_token_logprob(" all")
    assert continuation_logprob(two, prompt, " not at all", "http://s") == pytest.approx(want)


def test_continuation_logprob_refuses_what_it_cannot_score() -> None:
    with pytest.raises(NoPromptLogprobs, match="--scoring generate"):
        continuation_logprob(None, "A:", " Yes", "http://s")
    no_echo = {"tokens": [","], "token_logprobs": [-1.0], "text_offset": [6]}
    with pytest.raises(NoPromptLogprobs, match="not echoed"):
        continuation_logprob(no_echo, "A:", " Yes", "http://s")
    merged = {"tokens": ["A", ": Yes"], "token_logprobs": [None, -1.0], "text_offset": [0, 1]}
    with pytest.raises(ModelError, match="tokenizes the end of the prompt together"):
        continuation_logprob(merged, "A:", " Yes", "http://s")


# ---- the stub server ----------------------------------------------------------------------
def _loglik_spec(model: str, limit: int = 4, variant: str = "base") -> TrialSpec:
    return TrialSpec(
        task="hearsay", variant=parse_spec(variant), model=model, limit=limit, scoring="loglik"
    )


@pytest.mark.data
def test_served_loglik_through_the_stub(catalog: Catalog) -> None:
    with StubOpenAI(echo_logprobs=True) as stub:
        lm = get_model("openai/stub", api_base=stub.url, mode="completion")
        res = run_trial(_loglik_spec("openai/stub"), catalog, lm)
        other = StubOpenAI(echo_logprobs=True).start()
        try:
            elsewhere = resolve_trial(
                _loglik_spec("openai/stub"),
                catalog,
                get_model("openai/stub", api_base=other.url, mode="completion"),
            )
        finally:
            other.stop()
    assert res.complete and len(stub.requests) == 4 * 2  # one call per row and label
    body = stub.requests[0]
    assert body["echo"] is True and body["logprobs"] == 1 and body["max_tokens"] == 1
    assert body["prompt"].endswith("A: Yes") and stub.requests[1]["prompt"].endswith("A: No")
    best = "Yes" if stub_token_logprob(" Yes") > stub_token_logprob(" No") else "No"
    assert [p.parsed for p in res.predictions] == [best] * 4
    assert res.lm_identity["api_base"] == stub.url
    assert elsewhere.id != res.trial_id  # another server is another model


@pytest.mark.data
def test_a_server_without_prompt_logprobs_is_a_clear_error(catalog: Catalog) -> None:
    with StubOpenAI() as stub:  # answers echo+logprobs with logprobs: null
        lm = get_model("openai/stub", api_base=stub.url, mode="completion")
        with pytest.raises(NoPromptLogprobs) as err:
            run_trial(_loglik_spec("openai/stub", limit=2), catalog, lm)
    message = str(err.value)
    assert stub.url in message and "--scoring generate" in message
    assert "prompt log-probabilities" in message


@pytest.mark.data
def test_a_failing_server_makes_row_errors_not_scores(catalog: Catalog) -> None:
    with StubOpenAI(echo_logprobs=True, script=["500"]) as stub:
        lm = get_model("openai/stub", api_base=stub.url, mode="completion", max_retries=0)
        res = run_trial(_loglik_spec("openai/stub", limit=3), catalog, lm)
    assert res.n_errors == 1 and res.score is None and str(res.status) == "incomplete"
    assert "500" in (res.predictions[0].error or "")


# ---- the real llama.cpp server -----------------------------------------------------------
_SERVER_EXTRA = ("fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama.cpp's server on a free loopback port, serving local/smollm2's GGUF alike."""
    missing = [m for m in _SERVER_EXTRA if importlib.util.find_spec(m) is None]
    if missing or importlib.util.find_spec("llama_cpp") is None:
        pytest.skip(
            f"llama-cpp-python's server extra is not installed ({', '.join(missing)}): "
            "pip install -e '.[local,server]'"
        )
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", local_model_path("smollm2")]
    cmd += ["--model_alias", "smollm2", "--host", "127.0.0.1", "--port", str(port)]
    # the settings of experiments.models.load_local; logits_all for prompt log-probabilities
    cmd += ["--n_ctx", os.environ.get("WORKBENCH_LOCAL_N_CTX", "4096")]
    cmd += ["--n_threads", str(os.cpu_count() or 2), "--seed", "0"]
    cmd += ["--logits_all", "true", "--verbose", "false"]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}: {log.read_text()}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server not up after 120 s: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.data
def test_served_generation_equals_local_row_by_row(
    llama_server: str, lb_dir: Path, tmp_path: Path
) -> None:
    """`workbench run ... --model openai/smollm2 --api-base URL --mode completion`."""
    from tests.conftest import workbench_env

    env = {**workbench_env(tmp_path, lb_dir, "served"), "WORKBENCH_RUNS_DIR": str(tmp_path / "r")}
    rows = {}
    for name, extra in (
        ("served", ["--model", "openai/smollm2", "--api-base", llama_server, "--timeout", "600"]),
        ("local", ["--model", "local/smollm2"]),
    ):
        cmd = [sys.executable, "-m", "experiments.cli", "run", "hearsay", "--limit", "10"]
        cmd += [*extra, "--mode", "completion", "--json"]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stderr
        summary = json.loads(out.stdout)
        assert summary["status"] == "complete" and summary["n"] == 10
        preds = (tmp_path / "r" / summary["trial_id"] / "predictions.jsonl").read_text()
        rows[name] = [json.loads(line) for line in preds.splitlines()]
    served, local = rows["served"], rows["local"]
    assert [r["index"] for r in served] == [r["index"] for r in local]
    assert [r["generation"] for r in served] == [r["generation"] for r in local]
    assert [r["tokens_in"] for r in served] == [r["tokens_in"] for r in local]


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.data
@pytest.mark.xfail(
    strict=True,
    reason=(
        "llama-cpp-python 0.3.36's server shifts echoed prompt logprobs by one token for "
        "models without a BOS token (SmolLM2): it reports log P(t_k | t_<=k) for t_k "
        "(measured: ' Yes' after 'Q: Is the sky blue?\nA:' gets -11.2047, which local "
        "scoring gives for ' Yes' after '...A: Yes'; the right value is -2.8225). "
        "Strict: this fails loudly once upstream is fixed."
    ),
)
def test_served_loglik_picks_the_local_labels(llama_server: str, catalog: Catalog) -> None:
    """Zero-shot prompts (short: llama.cpp's server sorts the vocabulary for every token)."""
    served_lm = get_model("openai/smollm2", api_base=llama_server, mode="completion", timeout=900.0)
    served = run_trial(_loglik_spec("openai/smollm2", 4, "demos=none"), catalog, served_lm)
    local = run_trial(
        _loglik_spec("local/smollm2", 4, "demos=none"), catalog, get_model("local/smollm2")
    )
    assert served.complete and local.complete
    assert [p.parsed for p in served.predictions] == [p.parsed for p in local.predictions]
    for s, loc in zip(served.predictions, local.predictions, strict=True):
        assert s.index == loc.index
    assert served.trial_id != local.trial_id
