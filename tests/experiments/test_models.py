"""The litellm path against a real local OpenAI-compatible server: retries, Retry-After,
failures as row states, concurrency, and API keys that never leak."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.models import Decoding, get_model, redact
from experiments.runner import TrialSpec, run_trial
from experiments.stub_server import StubOpenAI
from promptlib import Catalog, parse_spec

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


def test_backoff_without_retry_after_is_short_and_exponential() -> None:
    with StubOpenAI(script=["500", "500", "ok"]) as stub:
        lm = get_model("openai/stub", api_base=stub.url, backoff=0.05)
        out = lm.complete("Q: x\nA:", Decoding())
        assert out.error is None and out.attempts == 3
        g1, g2 = stub.times[1] - stub.times[0], stub.times[2] - stub.times[1]
        assert 0.04 <= g1 < 0.5 and g2 >= 0.09  # 0.05 then 0.1


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
    assert out.text is None and out.attempts == 1
    assert out.error is not None and "OPENAI_API_KEY" in out.error


@pytest.mark.data
def test_trial_survives_injected_faults(catalog: Catalog) -> None:
    with StubOpenAI(fault_rate=0.2, retry_after=0.01, stall=1.0, seed=7) as stub:
        lm = get_model(
            "openai/stub", api_base=stub.url, concurrency=8, backoff=0.01, timeout=0.5,
            max_retries=1,
        )  # fmt: skip
        res = run_trial(TrialSpec("hearsay", parse_spec("base"), "openai/stub"), catalog, lm)
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
