"""A failed call says what to do (issue 31, point 6): `experiments.llm.advice`.

Before: a missing OPENAI_API_KEY came back as "InternalServerError 500 after 1 attempt(s):
litellm.InternalServerError: ... Missing credentials. Please pass an `api_key`, ..." cut
before the variable's name, and "Run the same command again"; a server that was down as
"500 after 5 attempts ... Connection error." with no URL. Nothing here leaves the machine:
the key check is local (`litellm.validate_environment`), the servers are on loopback.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from experiments.llm import advice, calls, gateway
from experiments.llm.gateway import get_model
from experiments.llm.types import Decoding, clip
from experiments.secrets import secret_name
from experiments.testing.stub_server import StubOpenAI
from experiments.trials.record import Prediction
from experiments.trials.run import FIRST_ERROR_CHARS, TrialResult
from tests.conftest import REPO, run_cli

KEY = "sk-proj-q7Zsecretvalue9931abcdef"


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """No credential in the environment (the provider's own or another's)."""
    calls._litellm()  # its .env is loaded first: nothing set by it survives the clean-up
    for name in list(os.environ):
        if secret_name(name):
            monkeypatch.delenv(name)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Fails a test whose code sends a completion: the key check must come first."""
    litellm = calls._litellm()
    sent: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        sent.append(kwargs.get("model"))
        raise AssertionError("a call was sent")

    monkeypatch.setattr(litellm, "completion", refuse)
    monkeypatch.setattr(litellm, "text_completion", refuse)
    yield sent


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- a missing key ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("model", "variable"),
    [
        ("openai/gpt-4o-mini", "OPENAI_API_KEY"),
        ("anthropic/claude-3-5-haiku-latest", "ANTHROPIC_API_KEY"),
        ("groq/llama-3.1-8b-instant", "GROQ_API_KEY"),  # litellm would send it keyless
    ],
)
def test_a_missing_key_names_its_variable_and_sends_nothing(
    no_keys: None, no_network: list[Any], model: str, variable: str
) -> None:
    out = get_model(model, backoff=0.01).complete("Q: x\nA:", Decoding())
    assert out.text is None and out.error is not None
    assert out.error == f"missing API key: set {variable} (the key for {model}) in the environment"
    assert out.retryable is False and out.attempts == 0
    assert no_network == []


def test_a_served_openai_model_without_a_key_says_any_value_does(
    no_keys: None, no_network: list[Any]
) -> None:
    """The OpenAI client refuses to send without a key, even to a server that needs none."""
    out = get_model("openai/stub", api_base="http://127.0.0.1:9/v1").complete("x", Decoding())
    assert out.error == (
        "missing API key: set OPENAI_API_KEY (the key for openai/stub; any value if the server "
        "at http://127.0.0.1:9/v1 needs none) in the environment"
    )


@pytest.mark.parametrize(
    ("model", "set_as"),
    [
        ("together_ai/x", "TOGETHER_API_KEY"),  # litellm's table names TOGETHERAI_API_KEY
        ("huggingface/x", "HF_TOKEN"),
        ("openai/x", "OPENAI_ADMIN_KEY"),
    ],
)
def test_a_key_under_another_name_is_left_to_the_call(
    no_keys: None, monkeypatch: pytest.MonkeyPatch, model: str, set_as: str
) -> None:
    assert advice.missing_keys(model) != ()
    monkeypatch.setenv(set_as, "abc-not-a-real-key")
    assert advice.missing_keys(model) == ()


@pytest.mark.parametrize(
    "model", ["azure/x", "bedrock/anthropic.claude-3", "ollama/llama3", "hosted_vllm/x"]
)
def test_providers_that_sign_in_otherwise_are_not_checked(no_keys: None, model: str) -> None:
    """Azure's AD token, AWS roles, Ollama's default server, a vLLM without a key."""
    assert advice.missing_keys(model, None) == ()
    assert advice.missing_keys("local/smollm2") == ()


def test_a_missing_key_found_by_the_call_is_not_retried_and_names_it(
    no_keys: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the check before the call (a key litellm's table does not know of), the
    OpenAI client's own refusal (raised before it sends) is read: one attempt, the name."""
    monkeypatch.setattr(gateway, "missing_keys", lambda model, api_base=None: ())
    out = get_model("openai/gpt-4o-mini", backoff=0.01).complete("Q: x\nA:", Decoding())
    assert out.attempts == 1 and out.retryable is False
    assert out.error is not None and out.error.startswith(
        "missing API key: set OPENAI_API_KEY (the key for openai/gpt-4o-mini) in the environment"
    )


def test_a_refused_key_is_not_retried_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stub's 401 quotes the request's Authorization header, key and all."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with StubOpenAI(fault_rate=1.0, faults=("401",)) as stub:
        out = get_model("openai/stub", api_base=stub.url, backoff=0.01).complete("x", Decoding())
        assert stub.counts["401"] == 1, "not retried"
    assert out.error is not None and out.retryable is False and out.attempts == 1
    assert out.error.startswith("the provider refused the API key (401 Unauthorized): check ")
    assert KEY not in out.error and KEY[8:] not in out.error


# ---- a server that does not answer -----------------------------------------------------------
@pytest.mark.parametrize("model", ["openai/stub", "hosted_vllm/stub"])
def test_a_refused_connection_names_the_url_and_what_to_check(
    monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    lm = get_model(model, api_base=url, max_retries=1, backoff=0.01)
    out = lm.complete("Q: x\nA:", Decoding())
    assert out.text is None and out.attempts == 2 and out.retryable is True
    assert out.error is not None
    assert out.error.startswith(
        f"could not connect to {url} (the server for {model}) after 2 attempt(s): is the "
        f"server running? Check with `curl {url}/models` ("
    ), out.error
    assert "Connection refused" in out.error


def test_a_refused_connection_to_an_ollama_base_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No api_base: the URL the environment gives (an Ollama server has no /models)."""
    base = f"http://localhost:{_closed_port()}"
    monkeypatch.setenv("OLLAMA_API_BASE", base)
    out = get_model("ollama/llama3", max_retries=0).complete("x", Decoding())
    assert out.error is not None
    assert out.error.startswith(f"could not connect to {base} (the server for ollama/llama3)")
    assert f"Check with `curl {base}` (" in out.error


def test_advice_names_no_password_of_the_url() -> None:
    try:
        raise ConnectionRefusedError(111, "Connection refused")
    except ConnectionRefusedError as e:
        said = advice.advise(e, "openai/x", "http://user:hunter2pass@127.0.0.1:9/v1", 3)
    assert said is not None and said.retryable
    assert "hunter2pass" not in said.text and "127.0.0.1:9/v1" in said.text


# ---- a cut keeps the advice ------------------------------------------------------------------
def test_clip_cuts_at_a_word_and_says_so() -> None:
    assert clip("short", 10) == "short"
    cut = clip("word " * 100, 50)
    assert len(cut) <= 50 and cut.endswith("…") and not cut[:-1].endswith(" ")


def test_the_failure_reason_keeps_the_whole_advice() -> None:
    """A long URL and a long provider text after it: the curl line stays whole."""
    url = "http://gpu-node-17.cluster.internal.example.org:8000/some/long/prefix/v1"
    error = advice.advise(_refused(), "openai/stub", url, 5)
    assert error is not None
    text = error.text + " " + "provider noise " * 50
    rows = [Prediction("0", "h", "Yes", None, None, None, error=text)]
    reason = TrialResult.failure_reason(SimpleNamespace(predictions=rows))  # type: ignore[arg-type]
    assert f"`curl {url}/models`" in reason and len(reason) < FIRST_ERROR_CHARS + 60


def _refused() -> BaseException:
    try:
        raise ConnectionRefusedError(111, "Connection refused")
    except ConnectionRefusedError as e:
        return e


# ---- through the command line ----------------------------------------------------------------
def _env(tmp_path: Path, lb_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not secret_name(k)}
    return env | {
        "LEGALBENCH_DIR": str(lb_dir),
        "WORKBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "WORKBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "WORKBENCH_NO_TRACK": "1",
        "PYTHONPATH": str(REPO),
    }


@pytest.mark.data
def test_run_without_a_key_says_which_variable_to_set(lb_dir: Path, tmp_path: Path) -> None:
    args = ["run", "hearsay", "--model", "openai/gpt-4o-mini", "--limit", "2"]
    r = run_cli(args, _env(tmp_path, lb_dir), tmp_path)
    assert r.returncode == 1, r.stderr
    assert (
        "(first: missing API key: set OPENAI_API_KEY (the key for openai/gpt-4o-mini) in the "
        "environment)"
    ) in r.stderr
    assert "Run the same command again" not in r.stderr and "Traceback" not in r.stderr
    assert "fail the same way until that is fixed" in r.stderr


@pytest.mark.data
def test_run_against_a_closed_port_names_the_url(lb_dir: Path, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    env = _env(tmp_path, lb_dir) | {"OPENAI_API_KEY": "sk-dummy-key-for-the-local-stub"}
    args = ["run", "hearsay", "--model", "openai/stub", "--api-base", url, "--limit", "2"]
    r = run_cli([*args, "--retries", "1"], env, tmp_path)
    assert r.returncode == 1, r.stderr
    assert f"could not connect to {url} (the server for openai/stub) after 2 attempt(s)" in r.stderr
    assert f"is the server running? Check with `curl {url}/models`" in r.stderr
    assert "Run the same command again to retry only those rows." in r.stderr  # once it runs
