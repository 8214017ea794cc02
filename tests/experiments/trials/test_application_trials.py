"""Application trials: the paper's decoding, and the rule-conclusion score of explanations."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

from experiments.llm.scripted import LMDefaults
from experiments.llm.types import Completion, Decoding
from experiments.metrics import balanced_accuracy, base_metric, is_rule_conclusion
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec, resolve_trial
from promptlib import Catalog, parse_spec
from promptlib.conclusions import NO_CONCLUSION
from promptlib.errors import WorkbenchError

pytestmark = pytest.mark.data

APPLICATION = parse_spec("instruction=application")


class ExplainingLM(LMDefaults):
    """Explains, then concludes: the row's truth for prompts of rows in `right`, the other
    label for rows in `wrong`, and no conclusion at all for the rest."""

    name = "scripted/explainer"
    mode = "completion"
    concurrency = 1

    def __init__(self, right: set[str], wrong: set[str], truth: dict[str, str]) -> None:
        self.right, self.wrong, self.truth = right, wrong, truth
        self.decodings: list[Decoding] = []
        self._lock = threading.Lock()

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        raise AssertionError("an explanation is generated, never scored by likelihood")

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        with self._lock:
            self.decodings.append(decoding)
        query = prompt.rsplit("Q:", 1)[-1]
        key = next(k for k in self.truth if k in query)
        answer = self.truth[key]
        said = answer if key in self.right else ("No" if answer == "Yes" else "Yes")
        claim = "it is hearsay" if said == "Yes" else "it is not hearsay"
        text = (
            " The statement was made out of court.\nIt is offered for what it shows.\n"
            f"Therefore, {claim}."
        )
        if key not in self.right | self.wrong:
            text = " The statement was made out of court.\nThe rule asks about its purpose."
        return Completion(text, tokens_in=len(prompt) // 4, tokens_out=40)


def _truth(catalog: Catalog, n: int) -> dict[str, str]:
    rows = catalog.task("hearsay").rows("test")[:n]
    return {r["text"]: r["answer"] for r in rows}


def test_application_trials_get_the_papers_decoding(catalog: Catalog) -> None:
    lm = ExplainingLM(set(), set(), {})
    for task, tokens in (("hearsay", 150), ("diversity_1", 150), ("diversity_6", 300)):
        for fmt in ("base", "claude"):
            variant = parse_spec(f"instruction=application,format={fmt}")
            rt = resolve_trial(TrialSpec(task=task, variant=variant, model=lm.name), catalog, lm)
            assert rt.decoding["max_tokens"] == tokens
            assert rt.decoding["stop"] == []  # no newline stop: an explanation has lines
            assert rt.metric == "rule_conclusion_balanced_accuracy"
    # the classification prompt keeps its short, newline-stopped decoding
    base = resolve_trial(
        TrialSpec(task="diversity_6", variant=parse_spec("base"), model=lm.name), catalog, lm
    )
    assert base.decoding["stop"] == ["\n"] and base.metric == "balanced_accuracy"


@pytest.mark.parametrize("scoring", ["loglik", "loglik-norm"])
def test_log_likelihood_scoring_of_an_explanation_is_refused(
    catalog: Catalog, scoring: str
) -> None:
    lm = ExplainingLM(set(), set(), {})
    spec = TrialSpec(task="hearsay", variant=APPLICATION, model=lm.name, scoring=scoring)  # type: ignore[arg-type]
    with pytest.raises(WorkbenchError, match=r"explanation.*generate"):
        resolve_trial(spec, catalog, lm)


def test_explanations_are_scored_on_their_conclusions(catalog: Catalog) -> None:
    truth = _truth(catalog, 12)
    texts = list(truth)
    right, wrong = set(texts[:6]), set(texts[6:9])  # the last 3 conclude nothing
    lm = ExplainingLM(right, wrong, truth)
    rows = catalog.task("hearsay").rows("test")[:12]
    spec = TrialSpec(
        task="hearsay", variant=APPLICATION, model=lm.name, rows=tuple(r["index"] for r in rows)
    )
    result = run_trial(spec, catalog, lm)
    assert result.complete and result.metric == "rule_conclusion_balanced_accuracy"
    assert is_rule_conclusion(result.metric) and base_metric(result.metric) == "balanced_accuracy"
    by_text = {r["index"]: r["text"] for r in rows}
    for p in result.predictions:
        text = by_text[p.index]
        assert p.generation is not None and "\n" in p.generation  # the explanation is kept
        if text in right:
            assert (p.parsed, p.correct) == (p.answer, True)
        elif text in wrong:
            assert p.parsed not in (None, p.answer) and p.correct is False
        else:
            assert p.parsed is None and p.scored == NO_CONCLUSION and p.correct is False
    assert result.report is not None and result.report.invalid_rate == pytest.approx(3 / 12)
    scored = [p.parsed or NO_CONCLUSION for p in result.predictions]
    expected = balanced_accuracy(scored, [p.answer for p in result.predictions])
    assert result.score == pytest.approx(expected)
    assert all(d.max_tokens == 150 and d.stop == () for d in lm.decodings)


@pytest.mark.model
def test_a_real_local_model_explains_and_is_scored_on_its_conclusion(catalog: Catalog) -> None:
    """smollm2 answers an application prompt with an explanation (more than one line or
    sentence), and the trial scores it with the rule-conclusion metric."""
    from experiments.llm.gateway import get_model

    lm = get_model("local/smollm2")
    spec = TrialSpec(task="hearsay", variant=APPLICATION, model="local/smollm2", limit=2)
    result = run_trial(spec, catalog, lm)
    assert result.complete, result.failure_reason()
    assert result.metric == "rule_conclusion_balanced_accuracy"
    assert result.decoding["max_tokens"] == 150 and result.decoding["stop"] == []
    gens = [p.generation or "" for p in result.predictions]
    assert max(p.tokens_out for p in result.predictions) > 20  # not cut at a newline
    assert any("\n" in g.strip() or g.count(". ") >= 1 for g in gens)
    assert result.score is not None and 0.0 <= result.score <= 1.0
    for p in result.predictions:
        assert p.correct is (p.parsed == p.answer)  # unparsed counts wrong
        assert p.scored == (p.parsed if p.parsed is not None else NO_CONCLUSION)


def test_the_conclusion_parser_version_is_part_of_an_application_trials_id(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    import experiments.trials.spec as trial_spec

    lm = ExplainingLM(set(), set(), {})
    app = TrialSpec(task="hearsay", variant=APPLICATION, model=lm.name, limit=3)
    base = TrialSpec(task="hearsay", variant=parse_spec("base"), model=lm.name, limit=3)
    before = resolve_trial(app, catalog, lm).id, resolve_trial(base, catalog, lm).id
    monkeypatch.setattr(trial_spec, "PARSER_VERSION", 999)
    after = resolve_trial(app, catalog, lm).id, resolve_trial(base, catalog, lm).id
    assert before[0] != after[0] and before[1] == after[1]
