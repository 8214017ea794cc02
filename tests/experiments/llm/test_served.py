"""Served models as first-class citizens (issue 12, point 5).

- Fast: the echo/logprobs parsing and the errors, against the stub server (no model).
- Real (markers model + slow): llama.cpp's own OpenAI-compatible server
  (``python -m llama_cpp.server`` through ``experiments.llm.llama_server``, the ``server``
  extra) on loopback, serving the GGUF of
  ``local/smollm2`` with its settings, gives the same predictions as ``local/smollm2`` by
  generation, and its misaligned prompt log-probabilities are refused; served with the BOS
  the server assumes, log-likelihood scoring picks the labels local scoring picks.
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
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from experiments.llm.gateway import get_model
from experiments.llm.served import (
    SERVED_ALIGNMENT_CHECK,
    EchoedContinuation,
    MisalignedPromptLogprobs,
    NoPromptLogprobs,
    echoed_continuation,
    served_label_logprobs,
)
from experiments.llm.types import ModelError
from experiments.llm.weights import local_model_path
from experiments.testing.stub_server import (
    STUB_TOP,
    StubOpenAI,
    stub_context_shift,
    stub_logprobs,
    stub_token_logprob,
    stub_top_key,
    stub_top_logprob,
)
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec, resolve_trial
from promptlib import Catalog, parse_spec
from tests.support.served import continuation_logprob


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


_SECTION = "Text: Under § 2 the statement was hearsay.\nAnswer:"  # "§" is 2 bytes in UTF-8


def test_byte_offsets_are_located_by_the_tokens_text() -> None:
    """Offsets in UTF-8 bytes put ':' at the label's character offset; the tokens spell
    the text, so their own lengths place them and only ' Yes' is summed."""
    chars = stub_logprobs(_SECTION, " Yes No")
    in_bytes = stub_logprobs(_SECTION, " Yes No", offsets="bytes")
    assert in_bytes["text_offset"] != chars["text_offset"]  # the reviewer's case
    got = continuation_logprob(in_bytes, _SECTION, " Yes", "http://s")
    assert got == continuation_logprob(chars, _SECTION, " Yes", "http://s")
    assert got == stub_token_logprob(" Yes")


def test_offsets_that_do_not_match_the_text_are_refused() -> None:
    """A rendered BOS token keeps the tokens from spelling the text, so the server's byte
    offsets are used as given: ':' lands at the label's offset and is refused, not summed."""
    lp = stub_logprobs(_SECTION, " No", offsets="bytes")
    lp = {
        "tokens": ["<s>", *lp["tokens"]],
        "token_logprobs": [None, *lp["token_logprobs"]],
        "text_offset": [0, *lp["text_offset"]],
    }
    with pytest.raises(NoPromptLogprobs, match=r"offsets count bytes.*--scoring generate"):
        continuation_logprob(lp, _SECTION, " Yes", "http://s")


def test_label_tokens_must_spell_the_label() -> None:
    """A last label token that runs into the generated text: its value is not the label's."""
    lp = {
        "tokens": ["A", ":", " Ye", "s,"],
        "token_logprobs": [None, -1.0, -2.0, -3.0],
        "text_offset": [0, 1, 2, 5],
    }
    with pytest.raises(NoPromptLogprobs, match=r"'s,' is not at text offset 5.*runs past"):
        continuation_logprob(lp, "A:", " Yes", "http://s")
    assert continuation_logprob(lp, "A:", " Ye", "http://s") == -2.0
    gap = {"tokens": ["A", ":", " Y", "s"], "token_logprobs": [None, -1.0, -2.0, -3.0]}
    with pytest.raises(NoPromptLogprobs, match=r"\[' Y', 's'\] do not spell ' Yes'"):
        continuation_logprob({**gap, "text_offset": [0, 1, 2, 5]}, "A:", " Yes", "http://s")
    late = {"tokens": ["A", ":", "Yes"], "token_logprobs": [None, -1.0, -2.0]}
    with pytest.raises(NoPromptLogprobs, match="first token starts at 3, not 2"):
        continuation_logprob({**late, "text_offset": [0, 1, 3]}, "A:", " Yes", "http://s")


def test_echo_reports_the_top_logprobs_before_the_label() -> None:
    aligned = echoed_continuation(stub_logprobs("Q: x\nA: Yes", top_k=3), "Q: x\nA:", " Yes", "s")
    assert aligned.prompt_tokens == ("Q:", " x", "\nA:")
    assert aligned.first_tops is not None
    tops = dict(aligned.first_tops)
    assert tops[STUB_TOP] == stub_top_logprob("Q: x\nA:")
    assert tops[stub_top_key(2)] == stub_top_logprob("Q: x\nA:", 2)
    assert tops[" Yes"] == stub_token_logprob(" Yes")  # the token's own, as llama.cpp adds it
    shifted = stub_logprobs("Q: x\nA: Yes", shifted=True)
    got = echoed_continuation(shifted, "Q: x\nA:", " Yes", "s")
    assert got.first_tops is not None
    assert dict(got.first_tops)[STUB_TOP] == stub_top_logprob("Q: x\nA: Yes")
    no_tops = {**shifted, "top_logprobs": None}
    assert echoed_continuation(no_tops, "Q: x\nA:", " Yes", "s").first_tops is None


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
    assert body["echo"] is True and body["logprobs"] == 5 and body["max_tokens"] == 1
    assert body["prompt"].endswith("A: Yes") and stub.requests[1]["prompt"].endswith("A: No")
    best = "Yes" if stub_token_logprob(" Yes") > stub_token_logprob(" No") else "No"
    assert [p.parsed for p in res.predictions] == [best] * 4
    assert res.lm_identity["api_base"] == stub.url
    assert elsewhere.id != res.trial_id  # another server is another model


def test_served_byte_offsets_score_like_char_offsets() -> None:
    """Through litellm and HTTP: a server counting offsets in bytes gives the same sums."""
    sums = {}
    for unit in ("chars", "bytes"):
        with StubOpenAI(echo_logprobs=True, logprob_offsets=unit) as stub:
            lm = get_model("openai/stub", api_base=stub.url, mode="completion")
            sums[unit] = served_label_logprobs(lm, _SECTION, [" Yes", " No"])
    assert sums["bytes"] == sums["chars"]
    shift = stub_context_shift(_SECTION)  # the stub's scores depend on the prompt too
    assert sums["chars"] == [stub_token_logprob(" Yes") + shift, stub_token_logprob(" No") + shift]


def test_a_shifted_server_is_refused() -> None:
    """llama-cpp-python's off-by-one: the top log-probability at the label's position
    depends on the label, which an aligned server cannot do."""
    with StubOpenAI(echo_logprobs=True, shifted_logprobs=True) as stub:
        lm = get_model("openai/stub", api_base=stub.url, mode="completion")
        with pytest.raises(MisalignedPromptLogprobs) as err:
            served_label_logprobs(lm, "Q: Is the sky blue?\nA:", [" Yes", " No"])
    message = str(err.value)
    assert stub.url in message and "misaligned" in message and "--scoring generate" in message
    assert len(stub.requests) == 2  # refused after both labels, before any sum is used
    with StubOpenAI(echo_logprobs=True) as stub:  # the same prompts, aligned: accepted
        lm = get_model("openai/stub", api_base=stub.url, mode="completion")
        got = served_label_logprobs(lm, "Q: Is the sky blue?\nA:", [" Yes", " No"])
    shift = stub_context_shift("Q: Is the sky blue?\nA:")
    assert got == [stub_token_logprob(" Yes") + shift, stub_token_logprob(" No") + shift]


def _echoes(conts: list[str], prompt: str = "Q: x\nA:", **kw: Any) -> list[EchoedContinuation]:
    return [
        echoed_continuation(stub_logprobs(prompt, c, **kw), prompt, c, "http://s") for c in conts
    ]


def test_a_shift_whose_most_likely_value_agrees_is_still_refused() -> None:
    """What let 3 of 40 hearsay rows of llama.cpp's shifted server through a check of the
    most likely token alone: its value happened to agree after both labels. The next ones
    do not."""
    from experiments.llm.served import check_alignment

    prompt, conts = "Q: x\nA:", [" Yes", " No"]
    lps = [stub_logprobs(prompt, c, shifted=True, top_k=5) for c in conts]
    for lp in lps:  # the shifted distributions' most likely token agrees by chance
        lp["top_logprobs"][-1][STUB_TOP] = -0.25
    echoes = [
        echoed_continuation(lp, prompt, c, "http://s") for lp, c in zip(lps, conts, strict=True)
    ]
    with pytest.raises(MisalignedPromptLogprobs, match="'<top"):
        check_alignment(echoes, conts, "http://s")
    check_alignment(_echoes(conts, top_k=5), conts, "http://s")  # aligned: accepted


def test_alignment_that_cannot_be_checked_is_refused() -> None:
    """No top_logprobs, or lists sharing no token (a server listing only each token
    itself): nothing shows the sums are aligned, so none is used."""
    from experiments.llm.served import check_alignment

    conts = [" Yes", " No"]
    no_tops = [
        EchoedContinuation(e.logprob, e.prompt_tokens, None) for e in _echoes(conts, top_k=5)
    ]
    with pytest.raises(NoPromptLogprobs, match="no top_logprobs") as err:
        check_alignment(no_tops, conts, "http://s")
    assert not isinstance(err.value, MisalignedPromptLogprobs)
    own_only = _echoes(conts, top_k=0)  # each list holds the label's own token alone
    assert all(e.first_tops is not None and len(e.first_tops) == 1 for e in own_only)
    with pytest.raises(NoPromptLogprobs, match="no common token"):
        check_alignment(own_only, conts, "http://s")
    check_alignment(_echoes(conts, top_k=1), conts, "http://s")  # one shared token suffices
    # a pair that proves a shift wins over a pair that cannot be checked
    three = [" Yes", " No", " Maybe"]
    mixed = _echoes(three, top_k=5, shifted=True)
    mixed[1] = EchoedContinuation(mixed[1].logprob, mixed[1].prompt_tokens, (("x", -1.0),))
    with pytest.raises(MisalignedPromptLogprobs, match="' Maybe'"):
        check_alignment(mixed, three, "http://s")


@pytest.mark.data
def test_no_served_row_is_cached_before_the_whole_trial_passed(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trial refused at its third row caches nothing: rows one and two may have passed the
    check by chance, and would be reused unchecked once the server is fixed."""
    from experiments.llm.cache import ResponseCache

    calls = {"n": 0}

    def refused_at_row_three(lm: Any, prompt: str, conts: list[str]) -> list[float]:
        calls["n"] += 1
        if calls["n"] == 3:
            raise MisalignedPromptLogprobs("misaligned at row 3")
        return served_label_logprobs(lm, prompt, conts)

    cache = ResponseCache(tmp_path / "cache")
    with StubOpenAI(echo_logprobs=True) as stub:
        lm = get_model("openai/stub", api_base=stub.url, mode="completion")
        monkeypatch.setattr("experiments.llm.served.served_label_logprobs", refused_at_row_three)
        with pytest.raises(MisalignedPromptLogprobs):
            run_trial(_loglik_spec("openai/stub", limit=4), catalog, lm, cache=cache)
        monkeypatch.setattr("experiments.llm.served.served_label_logprobs", served_label_logprobs)
        fixed = run_trial(_loglik_spec("openai/stub", limit=4), catalog, lm, cache=cache)
        again = run_trial(_loglik_spec("openai/stub", limit=4), catalog, lm, cache=cache)
    assert fixed.complete and fixed.cache_hits == 0 and fixed.model_calls == 4
    assert again.cache_hits == 4  # a trial that passed is cached whole
    assert fixed.lm_identity["alignment_check"] == SERVED_ALIGNMENT_CHECK  # in its trial id


@pytest.mark.data
def test_an_interrupted_served_trial_keeps_the_rows_it_checked(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C is not a refusal: the rows checked before it stay cached for the rerun."""
    from experiments.llm.cache import ResponseCache

    calls = {"n": 0}

    def interrupted_at_row_three(lm: Any, prompt: str, conts: list[str]) -> list[float]:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return served_label_logprobs(lm, prompt, conts)

    cache = ResponseCache(tmp_path / "cache")
    with StubOpenAI(echo_logprobs=True) as stub:
        lm = get_model("openai/stub", api_base=stub.url, mode="completion")
        monkeypatch.setattr(
            "experiments.llm.served.served_label_logprobs", interrupted_at_row_three
        )
        with pytest.raises(KeyboardInterrupt):
            run_trial(_loglik_spec("openai/stub", limit=4), catalog, lm, cache=cache)
        monkeypatch.setattr("experiments.llm.served.served_label_logprobs", served_label_logprobs)
        rerun = run_trial(_loglik_spec("openai/stub", limit=4), catalog, lm, cache=cache)
    assert rerun.complete and rerun.cache_hits == 2 and rerun.model_calls == 2


@pytest.mark.data
def test_a_shifted_server_refuses_the_trial(catalog: Catalog) -> None:
    with StubOpenAI(echo_logprobs=True, shifted_logprobs=True) as stub:
        lm = get_model("openai/stub", api_base=stub.url, mode="completion")
        with pytest.raises(MisalignedPromptLogprobs, match="--scoring generate"):
            run_trial(_loglik_spec("openai/stub", limit=2), catalog, lm)


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


# SmolLM2's GGUF asks for no BOS token. llama-cpp-python 0.3.36's server then shifts echoed
# prompt log-probabilities by one token (it assumes a leading BOS when it lines up prompt
# tokens with logits). Overriding the GGUF's add_bos flag gives the server the BOS it
# assumes: the same weights, aligned log-probabilities. Local scoring then loads the GGUF
# with the same override, so both sides score the same token sequences.
BOS_OVERRIDE = {"tokenizer.ggml.add_bos_token": True}


@contextmanager
def _serve(tmp_path_factory: pytest.TempPathFactory, *extra: str) -> Iterator[str]:
    """llama.cpp's server on a free loopback port, serving local/smollm2's GGUF alike."""
    missing = [m for m in _SERVER_EXTRA if importlib.util.find_spec(m) is None]
    if missing or importlib.util.find_spec("llama_cpp") is None:
        pytest.skip(
            f"llama-cpp-python's server extra is not installed ({', '.join(missing)}): "
            "pip install -e '.[local,server]'"
        )
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    # llama_cpp.server with load_local's extra-buffer-type decision (the stock server
    # segfaults on AMX CPUs in its first multi-token decode)
    cmd = [sys.executable, "-m", "experiments.llm.llama_server"]
    cmd += ["--model", local_model_path("smollm2")]
    cmd += ["--model_alias", "smollm2", "--host", "127.0.0.1", "--port", str(port)]
    # the settings of experiments.llm.llama.load_local; logits_all for prompt log-probabilities
    cmd += ["--n_ctx", os.environ.get("WORKBENCH_LOCAL_N_CTX", "4096")]
    cmd += ["--n_threads", str(os.cpu_count() or 2), "--seed", "0"]
    cmd += ["--logits_all", "true", "--verbose", "false", *extra]
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


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The GGUF as it ships."""
    with _serve(tmp_path_factory) as url:
        yield url


def _bos_smollm2() -> Any:
    """local/smollm2's model as load_local builds it, with BOS_OVERRIDE."""
    from experiments.llm.llama import build_local

    return build_local("smollm2", kv_overrides=BOS_OVERRIDE)


@pytest.fixture(scope="module")
def llama_server_bos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The GGUF with BOS_OVERRIDE."""
    ((key, value),) = BOS_OVERRIDE.items()
    with _serve(tmp_path_factory, "--kv_overrides", f"{key}=bool:{str(value).lower()}") as url:
        yield url


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
def test_served_loglik_refuses_the_misaligned_llama_cpp_server(
    llama_server: str, catalog: Catalog
) -> None:
    """llama-cpp-python 0.3.36's server shifts echoed prompt log-probabilities by one token
    for models without a BOS token (SmolLM2): ' Yes' after 'Q: Is the sky blue?\nA:' gets
    -11.2047 (log P(' Yes' | '...A: Yes')) instead of local scoring's -2.8225. The served
    sums would be wrong, so the trial is refused with the way out, not scored. Once upstream
    is fixed this fails, and the test should compare the sums with local ones instead."""
    served_lm = get_model("openai/smollm2", api_base=llama_server, mode="completion", timeout=900.0)
    with pytest.raises(MisalignedPromptLogprobs) as err:
        run_trial(_loglik_spec("openai/smollm2", 2, "demos=none"), catalog, served_lm)
    message = str(err.value)
    assert llama_server in message and "misaligned" in message
    assert "--scoring generate" in message
    key, value = next(iter(BOS_OVERRIDE.items()))
    assert f"--kv_overrides {key}=bool:{str(value).lower()}" in message  # the other way out


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.data
def test_served_loglik_picks_the_labels_local_loglik_picks(
    llama_server_bos: str, catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12, point 5: `--scoring loglik` against a real server that echoes prompt
    log-probabilities picks the labels local log-likelihood scoring picks, row by row, with
    the same sums. Both sides run SmolLM2's GGUF with BOS_OVERRIDE (the stock GGUF meets the
    server's misalignment, refused above)."""
    from experiments.llm import llama, loglik

    rows = 4  # each echoed request costs seconds: the server sorts the vocabulary per token
    served_lm = get_model(
        "openai/smollm2", api_base=llama_server_bos, mode="completion", timeout=900.0
    )
    seen: list[tuple[str, list[str], list[float]]] = []  # the server's sums, as the runner saw them

    def recorded(lm: Any, prompt: str, conts: list[str]) -> list[float]:
        sums = served_label_logprobs(lm, prompt, conts)
        seen.append((prompt, conts, sums))
        return sums

    monkeypatch.setattr("experiments.llm.served.served_label_logprobs", recorded)
    served = run_trial(_loglik_spec("openai/smollm2", rows, "demos=none"), catalog, served_lm)
    monkeypatch.setitem(llama._LOADED, "smollm2", llm := _bos_smollm2())
    try:
        local = run_trial(
            _loglik_spec("local/smollm2", rows, "demos=none"), catalog, get_model("local/smollm2")
        )
        # the sums behind the picks: same tokens, same weights; only llama.cpp's batching
        # differs (prompt and label in one batch on the server, the prompt then the label here)
        local_sums = [loglik.label_logprobs("local/smollm2", p, c) for p, c, _ in seen]
    finally:
        llm.close()
    assert served.complete and local.complete and len(served.predictions) == rows
    assert [p.index for p in served.predictions] == [p.index for p in local.predictions]
    assert [p.parsed for p in served.predictions] == [p.parsed for p in local.predictions]
    assert len(seen) == rows
    for (_, conts, sums), mine in zip(seen, local_sums, strict=True):
        assert sums == pytest.approx(mine, abs=0.02), (conts, sums, mine)
    # the labels' sums differ on every row: the picks are not ties broken alike
    assert all(abs(sums[0] - sums[1]) > 1e-3 for _, _, sums in seen)
