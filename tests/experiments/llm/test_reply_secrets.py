"""A model's reply is recorded only with its secrets hidden: a server echoing the request's
``Authorization: Bearer <key>`` (issue 30, defect 6), a key of a known shape, a bearer token,
a credential's parameter or a URL password in a reply is ``***`` before the reply is scored,
cached or recorded (predictions in runs/ and MLflow), and the row says how many were hidden
(``redacted``). Afterwards the key is in no file of the run folder, the MLflow store (its
sqlite database and artifacts) or the response cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.generate.prompt import TaskBrief
from experiments.generate.provenance import refusal
from experiments.llm.batch_results import parse_line
from experiments.llm.cache import ResponseCache, cache_key
from experiments.llm.gateway import get_model
from experiments.llm.scripted import LMDefaults
from experiments.llm.types import MAX_REPLY_BYTES, Completion, Decoding, kept_reply
from experiments.testing.stub_server import StubOpenAI
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec
from promptlib import Catalog, parse_spec
from tests.conftest import run_cli, workbench_env
from tests.secret_sinks import leaks

KEY = "sk-echoed-key-0123456789abcdefXYZ"  # the key litellm sends, from OPENAI_API_KEY
FOREIGN = "sk-proj-Foreign0123456789abcdef"  # a key of a known shape in no variable
UNSHAPED = "zq81unshapedtokenvalue42"  # a token of no known shape, in no variable


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


@pytest.mark.data
def test_defect_6_an_echoed_authorization_header_is_stored_nowhere(
    tmp_path: Path, lb_dir: Path
) -> None:
    """`workbench run` against a server that echoes ``Authorization: Bearer <key>`` into its
    reply: the rows say ``Bearer ***`` and ``redacted: 1``, and the key is in no file under
    runs/, the MLflow store or the cache, after the run and after a rerun from the cache."""
    env = workbench_env(tmp_path, lb_dir, "sec") | {
        "WORKBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "OPENAI_API_KEY": KEY,
    }
    with StubOpenAI(echo_headers=("Authorization",)) as stub:
        cmd = ["run", "hearsay", "--model", "openai/stub", "--api-base", stub.url]
        cmd += ["--limit", "3", "--concurrency", "1", "--json"]
        first = run_cli(cmd, env, tmp_path)
        again = run_cli(cmd, env, tmp_path)
    sent = [v for h in stub.headers_seen for k, v in h.items() if k.lower() == "authorization"]
    assert sent and all(v == f"Bearer {KEY}" for v in sent)  # the key went out, and came back
    for out in (first, again):
        assert out.returncode == 0, out.stderr
        assert KEY not in out.stdout + out.stderr
    summary = json.loads(again.stdout)
    assert summary["cache_hits"] == 3 and summary["model_calls"] == 0
    rows = [
        json.loads(line) for line in Path(tmp_path, summary["predictions"]).read_text().splitlines()
    ]
    assert [r["generation"] for r in rows] == ["Yes Authorization: Bearer ***"] * 3
    assert [r["redacted"] for r in rows] == [1, 1, 1]
    assert (tmp_path / "mlflow.db").is_file() and any((tmp_path / "artifacts").rglob("*.jsonl"))
    assert any((tmp_path / "cache").iterdir())
    assert leaks(tmp_path, KEY) == []


REPLIES = [
    ("the key sent, echoed", f"Yes Authorization: Bearer {KEY}", "Yes Authorization: Bearer ***"),
    ("another key of a known shape", f"No, try {FOREIGN}", "No, try ***"),
    ("a bearer token of no known shape", f"Yes (Bearer {UNSHAPED})", "Yes (Bearer ***)"),
    ("a credential's parameter", f"Yes /v1?api_key={UNSHAPED}&n=1", "Yes /v1?api_key=***&n=1"),
    ("a URL's password", f"No: postgresql://u:{UNSHAPED}@db/x", "No: postgresql://u:***@db/x"),
    ("a JSON credential field", f'Yes {{"apiKey": "{UNSHAPED}"}}', 'Yes {"apiKey": "***"}'),
]
SECRETS = (KEY, FOREIGN, UNSHAPED)


@pytest.mark.data
@pytest.mark.parametrize(("case", "reply", "kept"), REPLIES, ids=[c[0] for c in REPLIES])
def test_a_secret_in_a_reply_is_hidden_before_it_is_scored_or_cached(
    tmp_path: Path, catalog: Catalog, case: str, reply: str, kept: str
) -> None:
    """Through the gateway: the reply is ``***`` where the secret was and nothing else
    changes (an ordinary query value, ``n=1``, stays); the cache holds no secret, and the
    row read back from it says the same."""
    cache = ResponseCache(tmp_path / "cache")
    spec = TrialSpec(task="hearsay", variant=parse_spec("base"), model="openai/stub", limit=2)
    with StubOpenAI(reply=reply) as stub:
        lm = get_model("openai/stub", api_base=stub.url, concurrency=1)
        fresh = run_trial(spec, catalog, lm, cache=cache)
        cached = run_trial(spec, catalog, lm, cache=cache)
    assert cached.cache_hits == 2
    for result in (fresh, cached):
        assert [p.generation for p in result.predictions] == [kept, kept], case
        assert [p.redacted for p in result.predictions] == [1, 1]
        assert all(p.to_dict()["redacted"] == 1 for p in result.predictions)
    cache.close()
    for secret in SECRETS:
        assert leaks(tmp_path, secret) == [], (case, secret)


def test_a_clean_reply_is_recorded_as_it_was() -> None:
    """Nothing hidden: the text is the model's, and the row carries no ``redacted`` field
    (rows of trials without secrets are stored byte for byte as before)."""
    text = "Yes. See https://example.com/a?id=3 (payable to Bearer bonds); Authorization: No"
    assert kept_reply(text) == (text, None, 0)


@pytest.mark.data
def test_any_model_s_reply_is_hidden_even_past_the_gateway(
    tmp_path: Path, catalog: Catalog
) -> None:
    """A model that is not the gateway (a test double, a future backend) and a cache entry
    written before replies were redacted: the trial's rows hide the key all the same."""

    class Echo(LMDefaults):
        name, concurrency = "echo/m", 1

        def complete(self, prompt: str, decoding: Decoding) -> Completion:
            return Completion(f"Yes {FOREIGN}")

        def cache_identity(self) -> dict[str, str]:
            return {"model": "echo/m"}

        def loglikelihood(self, prompt: str, continuations: object) -> list[float]:
            raise NotImplementedError

    spec = TrialSpec(task="hearsay", variant=parse_spec("base"), model="echo/m", limit=2)
    result = run_trial(spec, catalog, Echo())
    assert [p.generation for p in result.predictions] == ["Yes ***"] * 2
    cache = ResponseCache(tmp_path / "cache")
    key = cache_key({"model": "old"}, "p", Decoding())
    cache._cache.set(key, {"text": f"No {KEY}", "tokens_in": 1, "tokens_out": 1, "cost": None})
    old = cache.get(key)
    assert old is not None and old.text == "No ***" and old.redacted == 1


def test_a_batch_reply_is_hidden_as_it_is_read() -> None:
    body = {"choices": [{"message": {"content": f"Yes Bearer {KEY}"}, "finish_reason": "stop"}]}
    entry = {"response": {"status_code": 200, "body": body}}
    out = parse_line(entry, "batch_1", lambda tokens_in, tokens_out: 0.0)
    assert out.text == "Yes Bearer ***" and out.redacted == 1


@pytest.mark.parametrize(
    "at", [MAX_REPLY_BYTES - 10, MAX_REPLY_BYTES + 4096 - 12, 10 * MAX_REPLY_BYTES]
)
def test_a_key_across_the_reply_cap_is_hidden_whole(at: int) -> None:
    """A reply longer than `MAX_REPLY_BYTES` (a server ignoring max_tokens) is cut after its
    secrets are hidden: a key the cut halves leaves no part of itself in what is kept."""
    text = "x" * at + " " + FOREIGN + " " + "y" * (2 * MAX_REPLY_BYTES)
    kept, truncated, _ = kept_reply(text)
    assert truncated == f"reply of {len(text)} bytes truncated at {MAX_REPLY_BYTES} bytes"
    assert len(kept.encode()) <= MAX_REPLY_BYTES
    assert not any(FOREIGN[i : i + 6] in kept for i in range(3, len(FOREIGN) - 5))


def test_a_generated_text_that_held_a_key_is_not_written() -> None:
    """`variants generate`: a reply whose key was hidden (``***``) is still refused, as it was
    when the key reached the check."""
    brief = TaskBrief("hearsay", "Answer.", "{{text}}", ("Yes", "No"), "", ("text",))
    assert refusal(brief, "instruction_file", "Decide. ***", redacted=1) is not None
    assert refusal(brief, "instruction_file", "Decide.", redacted=0) is None


def test_an_error_echoing_the_authorization_header_is_shown_without_it() -> None:
    """Errors (`redact`, shown and recorded as a row's error) hide bearer tokens and keys of
    the known shapes too, not only the environment's values and sk- keys."""
    from experiments.secrets import redact

    hf = "hf_" + "a1B2c3D4e5" * 4
    text = f"401 from server: Authorization: Bearer {UNSHAPED}; x-api-key: {UNSHAPED}; {hf}"
    shown = redact(text)
    assert UNSHAPED not in shown and hf[9:] not in shown, shown
    assert "Bearer ***" in shown and "x-api-key: ***" in shown


def test_a_number_is_a_secret_only_under_a_credentials_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``DEFAULT_MAX_TOKENS=4096`` names TOKEN but holds a setting: its value is no secret,
    so a reply saying 4096 keeps it (a numeric answer would be scored as ``***``) and an
    import whose config says ``"max_tokens": "4096"`` is not refused. A number under a
    credential's name (``DB_PASSWORD=20261202``) is still hidden."""
    from experiments.imports.secret_scan import check_bytes
    from experiments.secrets import redact, redact_reply

    monkeypatch.setenv("DEFAULT_MAX_TOKENS", "4096")
    monkeypatch.setenv("MAX_TOKENS_TO_SAMPLE", "1.5e3")
    assert redact_reply("The total is 4096, or 1.5e3") == ("The total is 4096, or 1.5e3", 0)
    assert redact("limit 4096") == "limit 4096"
    assert check_bytes(b'{"generate_config": {"max_tokens": "4096"}}') is None
    monkeypatch.setenv("DB_PASSWORD", "20261202")
    assert redact_reply("pin 20261202") == ("pin ***", 1)
    assert check_bytes(b'{"note": "20261202"}') is not None


@pytest.mark.data
def test_a_trial_whose_replies_were_redacted_says_so(tmp_path: Path, lb_dir: Path) -> None:
    """A reply is scored on its redacted text, which may parse to another label: the trial
    says how many replies held a secret (summary ``redacted_rows``, one ``note:`` line),
    not only each row; a trial without any keeps its summary as before (no such key)."""
    env = workbench_env(tmp_path, lb_dir, "sec") | {
        "WORKBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "OPENAI_API_KEY": KEY,
    }
    cmd = ["run", "hearsay", "--limit", "3", "--concurrency", "1", "--json", "--no-track"]
    with StubOpenAI(echo_headers=("Authorization",)) as echo, StubOpenAI() as plain:
        hidden = run_cli([*cmd, "--model", "openai/a", "--api-base", echo.url], env, tmp_path)
        clean = run_cli([*cmd, "--model", "openai/b", "--api-base", plain.url], env, tmp_path)
    assert hidden.returncode == 0 and clean.returncode == 0, hidden.stderr + clean.stderr
    assert json.loads(hidden.stdout).get("redacted_rows") == 3, hidden.stdout[-600:]
    assert "note: hearsay: 3 of 3 replies held a secret" in hidden.stderr
    assert "redacted_rows" not in json.loads(clean.stdout) and "secret" not in clean.stderr
