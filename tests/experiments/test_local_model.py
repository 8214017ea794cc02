"""The embedded model, for real: SmolLM2-135M through litellm's custom provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.models import Decoding, get_model, label_logprobs, load_local
from experiments.runner import TrialSpec, run_trial
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
