"""The trial runner with a scripted LM: caching, failures as states, ids, saving."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from experiments.cache import ResponseCache
from experiments.models import Completion, Decoding
from experiments.runner import TrialSpec, run_trial, save_trial
from promptlib import Catalog, parse_spec

pytestmark = pytest.mark.data


class ScriptedLM:
    """Answers 'Yes' to prompts containing `yes_if`, else 'No'; fails prompts with `fail_if`."""

    name = "scripted/lm"
    mode = "completion"

    def __init__(self, yes_if: str = "", fail_if: str | None = None, concurrency: int = 1):
        self.yes_if = yes_if
        self.fail_if = fail_if
        self.concurrency = concurrency
        self.calls = 0
        self._lock = threading.Lock()

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        with self._lock:
            self.calls += 1
        query = prompt.rsplit("Q:", 1)[-1]
        if self.fail_if is not None and self.fail_if in query:
            return Completion(None, error="RateLimitError 429 after 5 attempt(s): slow down")
        text = " Yes" if self.yes_if and self.yes_if in query else " No"
        return Completion(text, tokens_in=len(prompt) // 4, tokens_out=1)


def test_trial_scores_caches_and_reports_calls(catalog: Catalog, tmp_path: Path) -> None:
    spec = TrialSpec("hearsay", parse_spec("base"), "scripted/lm")
    cache = ResponseCache(tmp_path / "cache")
    lm = ScriptedLM()
    first = run_trial(spec, catalog, lm, cache=cache)
    assert first.complete and len(first.predictions) == 95
    assert (first.model_calls, first.cache_hits) == (95, 0)
    # always "No": recall(No)=1, recall(Yes)=0 -> balanced accuracy 0.5
    assert first.score == pytest.approx(0.5)
    assert first.report is not None and first.report.invalid_rate == 0.0
    again = run_trial(spec, catalog, lm, cache=cache)
    assert (again.model_calls, again.cache_hits) == (0, 95)
    assert lm.calls == 95
    assert again.score == first.score


def test_failed_rows_make_the_trial_incomplete_and_are_not_cached(
    catalog: Catalog, tmp_path: Path
) -> None:
    spec = TrialSpec("hearsay", parse_spec("base"), "scripted/lm", limit=30, seed=1)
    cache = ResponseCache(tmp_path / "cache")
    flaky = ScriptedLM(fail_if="the fact that")
    res = run_trial(spec, catalog, flaky, cache=cache)
    failed = [p for p in res.predictions if p.error]
    assert failed and not res.complete
    assert res.score is None and res.score_on_answered is not None
    assert all(p.generation is None and "429" in (p.error or "") for p in failed)
    assert len(res.predictions) == 30  # nothing dropped
    # the rerun retries exactly the failed rows; the rest come from the cache
    healthy = ScriptedLM()
    rerun = run_trial(spec, catalog, healthy, cache=cache)
    assert rerun.complete and healthy.calls == len(failed)
    assert rerun.cache_hits == 30 - len(failed)


def test_concurrent_path_matches_sequential(catalog: Catalog, tmp_path: Path) -> None:
    spec = TrialSpec("hearsay", parse_spec("demos=none"), "scripted/lm")
    seq = run_trial(spec, catalog, ScriptedLM(yes_if="told"))
    par = run_trial(spec, catalog, ScriptedLM(yes_if="told", concurrency=8))
    assert [p.generation for p in seq.predictions] == [p.generation for p in par.predictions]
    assert seq.score == par.score > 0.5


def test_trial_id_covers_every_field() -> None:
    base = TrialSpec("hearsay", parse_spec("base"), "local/smollm2")
    variants = [
        TrialSpec("abercrombie", parse_spec("base"), "local/smollm2"),
        TrialSpec("hearsay", parse_spec("demos=none"), "local/smollm2"),
        TrialSpec("hearsay", parse_spec("base"), "openai/gpt-4o-mini"),
        TrialSpec("hearsay", parse_spec("base"), "local/smollm2", split="train"),
        TrialSpec("hearsay", parse_spec("base"), "local/smollm2", limit=10),
        TrialSpec("hearsay", parse_spec("base"), "local/smollm2", seed=1),
        TrialSpec("hearsay", parse_spec("base"), "local/smollm2", scoring="loglik"),
    ]
    ids = {base.id} | {v.id for v in variants}
    assert len(ids) == 8
    assert base.id == TrialSpec("hearsay", parse_spec("base"), "local/smollm2").id


def test_limit_is_a_seeded_sample(catalog: Catalog) -> None:
    a = run_trial(
        TrialSpec("hearsay", parse_spec("base"), "s", limit=10, seed=3), catalog, ScriptedLM()
    )
    b = run_trial(
        TrialSpec("hearsay", parse_spec("base"), "s", limit=10, seed=3), catalog, ScriptedLM()
    )
    c = run_trial(
        TrialSpec("hearsay", parse_spec("base"), "s", limit=10, seed=4), catalog, ScriptedLM()
    )
    idx = [p.index for p in a.predictions]
    assert idx == [p.index for p in b.predictions] != [p.index for p in c.predictions]
    assert len(idx) == 10


def test_resampled_demo_rows_are_never_evaluated(catalog: Catalog) -> None:
    spec = TrialSpec("hearsay", parse_spec("demos=4,seed=2,pool=train+test"), "s")
    res = run_trial(spec, catalog, ScriptedLM())
    assert len(res.excluded_rows) == len([r for r in res.excluded_rows])
    assert not set(res.excluded_rows) & {p.index for p in res.predictions}
    assert len(res.predictions) + len(res.excluded_rows) == 95


def test_saved_predictions_table(catalog: Catalog, tmp_path: Path) -> None:
    spec = TrialSpec("hearsay", parse_spec("base"), "s", limit=5)
    res = run_trial(spec, catalog, ScriptedLM())
    out = save_trial(res, tmp_path)
    rows = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 5
    assert set(rows[0]) >= {
        "index", "prompt_hash", "generation", "parsed", "correct", "tokens_in",
        "tokens_out", "latency", "cache_hit", "error",
    }  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trial_id"] == spec.id and summary["n"] == 5
    assert not list(out.glob(".*"))  # no temporary files left behind
