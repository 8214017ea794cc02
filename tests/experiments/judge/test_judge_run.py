"""The judge (issue 33, point 3): prompts blind to the variant, replies parsed or kept as
unparsed, scores stored with their judge id, the cache reused, failures as states, and a
killed run that leaves nothing that reads as finished."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from experiments.judge.prompt import parse_grade
from experiments.judge.rubrics import load_rubrics
from experiments.judge.run import judge_trial
from experiments.judge.store import (
    JudgeStoreError,
    generation_sha256,
    judge_ids,
    load_judge_meta,
    load_judge_scores,
    meta_path,
    scores_path,
)
from experiments.llm.cache import ResponseCache
from experiments.llm.scripted import LMDefaults
from experiments.llm.types import Completion, Decoding
from experiments.trials.record import TrialStatus
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec
from experiments.trials.store import save_trial
from promptlib import Catalog, parse_spec

pytestmark = pytest.mark.data

LIMIT = 4


class AnswerLM(LMDefaults):
    """The model under test: an explanation naming its variant (which the judge must not see)."""

    name = "scripted/answer"
    mode = "completion"
    concurrency = 1

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        return Completion(" No, because the statement was made in court.", tokens_out=9)


class JudgeLM(LMDefaults):
    """A judge replying from a script: `reply(prompt)`; counts its calls; may raise."""

    name = "scripted/judge"
    mode = "chat"

    def __init__(self, reply: Any = None, raise_if: str | None = None, concurrency: int = 1):
        self.reply = reply or (lambda prompt: "1")
        self.raise_if = raise_if
        self.concurrency = concurrency
        self.calls = 0
        self.prompts: list[str] = []
        self._lock = threading.Lock()

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        with self._lock:
            self.calls += 1
            self.prompts.append(prompt)
        if self.raise_if is not None and self.raise_if in prompt:
            raise ConnectionError("the judge's server hung up")
        return Completion(self.reply(prompt), tokens_in=100, tokens_out=1, cost=0.001)

    def loglikelihood(self, prompt: str, continuations: list[str]) -> list[float]:
        with self._lock:
            self.calls += 1
        return (
            [-0.5, -1.5]
            if "analysis" in prompt.rsplit("The criterion", 1)[1][:30]
            else [-2.0, -0.1]
        )


@pytest.fixture
def trial_dir(catalog: Catalog, tmp_path: Path) -> Path:
    spec = TrialSpec(
        task="hearsay", variant=parse_spec("demos=none"), model=AnswerLM.name, limit=LIMIT
    )
    result = run_trial(spec, catalog, AnswerLM())
    assert result.complete
    return save_trial(result, tmp_path / "runs")


def test_parse_grade_reads_only_an_opening_grade() -> None:
    assert [parse_grade(r) for r in ("1", " 0\n", "Grade: 1", "**0**", "(1) because", "1.")] == [
        1,
        0,
        1,
        0,
        1,
        1,
    ]
    for reply in ("10", "1.5", "1/2", "The answer is wrong: 0", "", "yes", None):
        assert parse_grade(reply) is None, reply


def test_judges_every_row_and_criterion_and_stores_prompts(
    trial_dir: Path, catalog: Catalog, tmp_path: Path
) -> None:
    judge = JudgeLM(reply=lambda p: "0" if "criterion, analysis" in p else "1")
    run = judge_trial(
        trial_dir, judge, load_rubrics("hearsay"), cache=None, catalog=catalog, scoring="generate"
    )
    assert (run.n, run.n_errors, run.n_unparsed, run.status) == (LIMIT, 0, 0, TrialStatus.COMPLETE)
    assert run.means == {"correctness": 1.0, "analysis": 0.0}
    assert run.cost == pytest.approx(0.001 * 2 * LIMIT)
    scores = load_judge_scores(trial_dir, run.judge_id)
    assert len(scores) == 2 * LIMIT and judge_ids(trial_dir) == [run.judge_id]
    preds = [json.loads(x) for x in (trial_dir / "predictions.jsonl").read_text().splitlines()]
    for p in preds:
        s = scores[(p["index"], "correctness")]
        assert s.score == 1 and s.reply == "1" and s.judge_id == run.judge_id
        assert s.generation_sha256 == generation_sha256(p["generation"])
        assert p["generation"].strip() in s.prompt  # the answer graded
        assert f"\n{p['answer']}\n" in s.prompt  # the reference answer
    # blind to the variant: the judge prompt holds the task's question, not the variant's prompt
    for prompt in judge.prompts:
        assert "Is there hearsay?" in prompt and "demos" not in prompt and "Q:" not in prompt
    meta = load_judge_meta(trial_dir, run.judge_id)
    assert (
        meta is not None and meta.rubrics["analysis"]["sha256"] == run.rubrics["analysis"]["sha256"]
    )


def test_unparsed_replies_are_kept_and_counted_never_guessed(
    trial_dir: Path, catalog: Catalog
) -> None:
    judge = JudgeLM(reply=lambda p: "The answer is fine: 1" if "analysis" in p[-200:] else "0")
    run = judge_trial(
        trial_dir, judge, load_rubrics("hearsay"), catalog=catalog, scoring="generate"
    )
    assert run.n_unparsed == LIMIT and run.n_errors == 0
    assert run.means == {"correctness": 0.0, "analysis": None}
    scores = load_judge_scores(trial_dir, run.judge_id)
    unparsed = [s for s in scores.values() if s.criterion == "analysis"]
    assert all(s.score is None and s.unparsed and s.reply.endswith(": 1") for s in unparsed)


def test_a_second_run_makes_no_calls(trial_dir: Path, catalog: Catalog, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    first = JudgeLM()
    run1 = judge_trial(trial_dir, first, load_rubrics("hearsay"), cache=cache, catalog=catalog,
                       scoring="generate")  # fmt: skip
    assert first.calls == 2 * LIMIT
    text = scores_path(trial_dir, run1.judge_id).read_text()
    # finished and current: returned as it is, no call, not rewritten
    again = JudgeLM()
    run2 = judge_trial(trial_dir, again, load_rubrics("hearsay"), cache=cache, catalog=catalog,
                       scoring="generate")  # fmt: skip
    assert again.calls == 0 and run2.reused and run2.judge_id == run1.judge_id
    assert scores_path(trial_dir, run1.judge_id).read_text() == text
    # its files gone, the cache answers every call
    scores_path(trial_dir, run1.judge_id).unlink()
    third = JudgeLM()
    run3 = judge_trial(trial_dir, third, load_rubrics("hearsay"), cache=cache, catalog=catalog,
                       scoring="generate")  # fmt: skip
    assert third.calls == 0 and run3.cache_hits == 2 * LIMIT and not run3.reused
    assert load_judge_scores(trial_dir, run3.judge_id).keys() == {
        (s.index, s.criterion) for s in load_judge_scores(trial_dir, run1.judge_id).values()
    }


def test_failed_calls_are_states_and_a_rerun_retries_only_them(
    trial_dir: Path, catalog: Catalog, tmp_path: Path
) -> None:
    cache = ResponseCache(tmp_path / "cache")
    preds = [json.loads(x) for x in (trial_dir / "predictions.jsonl").read_text().splitlines()]
    rows = {r["index"]: r for r in catalog.task("hearsay").rows("test")}
    victim = rows[preds[0]["index"]]["text"]
    flaky = JudgeLM(raise_if=victim, concurrency=4)
    run = judge_trial(trial_dir, flaky, load_rubrics("hearsay"), cache=cache, catalog=catalog,
                      scoring="generate")  # fmt: skip
    assert run.n_errors == 2 and run.status == TrialStatus.INCOMPLETE
    failed = [s for s in load_judge_scores(trial_dir, run.judge_id).values() if s.error]
    assert {s.index for s in failed} == {preds[0]["index"]}
    assert all(s.score is None and "hung up" in (s.error or "") for s in failed)
    assert run.means["correctness"] == 1.0  # over the rows judged, never counting a failure
    fixed = JudgeLM()
    rerun = judge_trial(trial_dir, fixed, load_rubrics("hearsay"), cache=cache, catalog=catalog,
                        scoring="generate")  # fmt: skip
    assert fixed.calls == 2 and rerun.status == TrialStatus.COMPLETE and rerun.n_errors == 0


def test_identity_pins_judge_rubric_and_scoring(
    trial_dir: Path, catalog: Catalog, tmp_path: Path
) -> None:
    rubrics = load_rubrics("hearsay")
    base = judge_trial(trial_dir, JudgeLM(), rubrics, catalog=catalog, scoring="generate")
    edited_file = tmp_path / "hearsay.yaml"
    edited_file.write_text(
        _shipped("hearsay")
        .read_text()
        .replace("An answer with any one of them gets 0.", "Any one of them: 0.")
    )
    edited = load_rubrics("hearsay", edited_file)
    other_rubric = judge_trial(trial_dir, JudgeLM(), edited, catalog=catalog, scoring="generate")
    other_scoring = judge_trial(trial_dir, JudgeLM(), rubrics, catalog=catalog, scoring="loglik")
    one_criterion = judge_trial(
        trial_dir, JudgeLM(), rubrics, ["correctness"], catalog=catalog, scoring="generate"
    )
    ids = {base.judge_id, other_rubric.judge_id, other_scoring.judge_id, one_criterion.judge_id}
    assert len(ids) == 4 and sorted(judge_ids(trial_dir)) == sorted(ids)
    assert other_rubric.rubrics["analysis"] == base.rubrics["analysis"] | {"path": str(edited_file)}
    assert other_rubric.rubrics["correctness"]["sha256"] != base.rubrics["correctness"]["sha256"]


def test_loglik_scoring_always_parses(trial_dir: Path, catalog: Catalog) -> None:
    run = judge_trial(trial_dir, JudgeLM(), load_rubrics("hearsay"), catalog=catalog,
                      scoring="loglik")  # fmt: skip
    assert run.n_unparsed == 0 and run.means == {"correctness": 0.0, "analysis": 1.0}
    s = next(iter(load_judge_scores(trial_dir, run.judge_id).values()))
    assert json.loads(s.reply or "") in ({" 1": -2.0, " 0": -0.1}, {" 1": -0.5, " 0": -1.5})


def test_a_killed_run_leaves_nothing_that_reads_as_finished(
    trial_dir: Path, catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import experiments.judge.store as store

    cache = ResponseCache(tmp_path / "cache")
    real = store.atomic_write_text
    writes: list[Path] = []

    def killed_after_scores(path: Path, text: str) -> None:
        writes.append(path)
        if path.suffix == ".json":
            raise KeyboardInterrupt  # killed between the scores and their meta
        real(path, text)

    monkeypatch.setattr(store, "atomic_write_text", killed_after_scores)
    with pytest.raises(KeyboardInterrupt):
        judge_trial(trial_dir, JudgeLM(), load_rubrics("hearsay"), cache=cache, catalog=catalog,
                    scoring="generate")  # fmt: skip
    jid = writes[0].stem
    assert scores_path(trial_dir, jid).exists() and not meta_path(trial_dir, jid).exists()
    assert judge_ids(trial_dir) == []
    with pytest.raises(JudgeStoreError, match="unfinished"):
        load_judge_scores(trial_dir, jid)
    # no temporary file left behind either, and the rerun completes from the cache
    monkeypatch.setattr(store, "atomic_write_text", real)
    again = JudgeLM()
    run = judge_trial(trial_dir, again, load_rubrics("hearsay"), cache=cache, catalog=catalog,
                      scoring="generate")  # fmt: skip
    assert again.calls == 0 and run.complete and judge_ids(trial_dir) == [jid]
    assert sorted(p.name for p in (trial_dir / "judge").iterdir()) == [
        f"{jid}.json",
        f"{jid}.jsonl",
    ]


def _shipped(task: str) -> Path:
    from importlib import resources

    return Path(str(resources.files("experiments.judge").joinpath("rubrics", f"{task}.yaml")))


def test_only_rows_with_a_generation_are_judged(catalog: Catalog, tmp_path: Path) -> None:
    class Flaky(AnswerLM):
        def __init__(self) -> None:
            self.n = 0

        def complete(self, prompt: str, decoding: Decoding) -> Completion:
            self.n += 1
            if self.n == 2:
                return Completion(None, error="RateLimitError 429 after 5 attempt(s)")
            return super().complete(prompt, decoding)

    spec = TrialSpec(task="hearsay", variant=parse_spec("demos=none"), model=AnswerLM.name,
                     limit=LIMIT)  # fmt: skip
    result = run_trial(spec, catalog, Flaky())
    assert result.n_errors == 1
    trial_dir = save_trial(result, tmp_path / "runs")
    run = judge_trial(trial_dir, JudgeLM(), load_rubrics("hearsay"), catalog=catalog,
                      scoring="generate")  # fmt: skip
    assert run.n == LIMIT - 1 and run.complete
    failed = next(p.index for p in result.predictions if p.generation is None)
    assert {i for i, _ in load_judge_scores(trial_dir, run.judge_id)} == {
        p.index for p in result.predictions
    } - {failed}


def test_a_scale_echo_or_a_negative_number_is_no_grade() -> None:
    """'0 or 1' repeats the instructions and '-1' is no grade of 0/1: unparsed, never the
    first digit read as a grade (was: 0, 1, 1, 1)."""
    for reply in ("0 or 1", "1 - 0", "1-0", "0 to 1", "-1", "Grade: -1", "1:0"):
        assert parse_grade(reply) is None, reply
    assert [parse_grade(r) for r in ("1 - meets the criterion", "0: misstates the rule")] == [1, 0]
