"""Review findings on the sequential loop (issue 22), against a scripted in-process runner:
each number of a comparison's row is on the rows the row says."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from experiments.metrics import official_metric, score
from experiments.sweeps import sequential as seqmod
from experiments.sweeps.cost import Cost
from experiments.sweeps.design import SequentialDesign
from experiments.sweeps.spec import load_spec
from experiments.testing.sequential_sim import prepare
from experiments.testing.stub_server import StubOpenAI
from experiments.trials.record import Prediction
from experiments.trials.run import run_trial
from promptlib import Catalog
from tests.experiments.sweeps.test_sequential_sweeps import SEQ, _first_row, _reply, _sweep, write

N = 400
ANSWERS = ["Yes" if i % 2 else "No" for i in range(N)]
ROWS = [{"index": str(i), "answer": a} for i, a in enumerate(ANSWERS)]


@dataclasses.dataclass
class Scripted:
    """Stands for an arm's `ResolvedTrial`: its rows, and where a window starts."""

    variant: str
    rows: list[dict[str, str]]
    start: int = 0
    metric: str = official_metric("hearsay")

    @property
    def spec(self) -> Any:
        return SimpleNamespace(task="hearsay", definition="code")

    def window(self, a: int, b: int) -> Scripted:
        return dataclasses.replace(self, rows=self.rows[a:b], start=self.start + a)


def _runner(hits: dict[str, list[bool]]) -> Any:
    def run_trial(rt: Scripted, catalog: Any, lm: Any, cache: Any = None) -> Any:
        preds = []
        for k, r in enumerate(rt.rows):
            ok = hits[rt.variant][rt.start + k]
            gen = r["answer"] if ok else ("No" if r["answer"] == "Yes" else "Yes")
            preds.append(Prediction(r["index"], "h", r["answer"], gen, gen, ok))
        return SimpleNamespace(
            model_calls=len(preds),
            cache_hits=0,
            predictions=preds,
            cost=None,
            spent=None,
            complete=True,
            spec=SimpleNamespace(scoring="generate"),  # the cost counts a generated row's tokens
        )

    return run_trial


def _score_on(hits: list[bool], n: int) -> float:
    gens = [a if h else ("No" if a == "Yes" else "Yes") for a, h in zip(ANSWERS, hits, strict=True)]
    return score("hearsay", gens[:n], ANSWERS[:n])


def test_best_vs_worst_scores_are_on_the_rows_of_the_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worst arm is eliminated early and the best goes on: both scores must be on the
    `n` rows shown (those the best-vs-worst interval is over), not each arm's own rows."""
    rng = random.Random(0)
    acc = {"good": 0.95, "mid": 0.7, "bad": 0.05}
    hits = {v: [rng.random() < a for _ in range(N)] for v, a in acc.items()}
    monkeypatch.setattr(seqmod, "run_trial", _runner(hits))
    planned = SimpleNamespace(model="m", planned=SimpleNamespace(task="hearsay"))
    arms = {v: seqmod.Arm(v, planned, Scripted(v, ROWS)) for v in acc}  # type: ignore[arg-type]
    group = seqmod.Group(SequentialDesign(batch=10), arms, 0.05, None, None, None, Cost())  # type: ignore[arg-type]
    row = seqmod.run_group(group, "best_vs_worst").comparisons[0]
    a, b, n = row.a, row.b, row.n
    assert (a, b) == ("good", "bad")
    assert a is not None and b is not None
    assert row.rows_per_arm[a] > n == row.rows_per_arm[b]  # the case probed
    assert row.score_a == pytest.approx(_score_on(hits[a], n))
    assert row.score_b == pytest.approx(_score_on(hits[b], n))


@pytest.mark.data
@pytest.mark.slow
def test_a_row_failing_once_in_the_loop_leaves_the_sweep_incomplete(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transient failure stops the comparison in the loop; the logging pass then answers
    the row, but the comparison has no verdict: the sweep must not say it is complete."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")
    spec_path = write(tmp_path, SEQ.format(name="once", limit=100, more=", max_rows: 40"))
    model = _reply(spec_path, catalog, {}, seed=2)
    resolved = prepare(spec_path, catalog).resolved[0]
    doomed = resolved.compiled.render(resolved.rows[14])
    failures: list[str] = []

    def fail_once(prompt: str) -> bool:
        if prompt == doomed and not failures:
            failures.append(prompt)
            return True
        return False

    with StubOpenAI(reply_fn=model.reply, fail_fn=fail_once) as stub:
        first = _sweep(tmp_path, spec_path, catalog, stub, retries=0)
        row = _first_row(first)
        assert failures and row.decision is None and row.status.startswith("incomplete")
        assert first.status == "incomplete" and len(first.incomplete) == 1
        assert first.incomplete[0]["n_errors"] == 1
        second = _sweep(tmp_path, spec_path, catalog, stub, retries=0)  # resumes the loop
    assert second.status == "complete" and _first_row(second).decision is not None


def test_workbench_report_shows_a_sequential_sweeps_comparisons() -> None:
    """`workbench report` of a sequential sweep printed "no comparisons (nothing to
    compare)": its decided comparisons are in the document's ``sequential`` rows."""
    from experiments.output import sweep_report

    row = {"model": "m", "task": "t", "a": "v1", "b": "v2", "score_a": 0.9, "score_b": 0.6,
           "estimate": 0.3, "ci_low": 0.1, "ci_high": 0.5, "n": 200, "budget": 1000,
           "looks": [10, 20], "decision": "A", "batch": 10, "delta": None, "sequence": "s",
           "alpha": 0.05, "family_alpha": 0.05, "status": "decided (A) after 200 of 1000 rows"}  # fmt: skip
    doc = {"comparisons": [], "across_tasks": [], "incomplete": [], "sequential": [row],
           "sensitivity": {"per_task": [], "notes": ["n"]}}  # fmt: skip
    text = sweep_report("s", {"run_id": "r", "status": "FINISHED"}, doc, [])
    assert "nothing to compare" not in text
    assert "[+0.100,+0.500]" in text and "design: sequential" in text


class _RemoteExecutor:
    """Stands for a Ray executor whose workers have no access to the loop's cache."""

    def __init__(self) -> None:
        self.jobs = 0

    def start(self, lms: Any, cache: Any) -> None:
        pass

    def map_trials(self, jobs: Any, catalog: Any, cache: Any) -> Any:
        for job in jobs:
            self.jobs += 1
            yield job, run_trial(job.resolved, catalog, job.lm, cache=None)

    def close(self) -> None:
        pass


@pytest.mark.data
@pytest.mark.slow
def test_the_arms_trials_are_logged_from_the_loops_answers_whatever_the_executor(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `--executor ray` the logging pass ran on workers without the loop's cache: every
    row was sent again (twice the calls) and the logged answers were not the sequences'."""
    from experiments.llm.cache import ResponseCache
    from experiments.llm.gateway import LiteLLMModel
    from experiments.sweeps.driver import run_sweep
    from tests.experiments.sweeps.test_sequential_sweeps import _tracker

    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")
    spec_path = write(tmp_path, SEQ.format(name="ray", limit=100, more=", max_rows: 20"))
    model = _reply(spec_path, catalog, {}, seed=2)
    remote = _RemoteExecutor()
    with StubOpenAI(reply_fn=model.reply) as stub:
        lm = LiteLLMModel("openai/stub", api_base=stub.url, concurrency=1, max_retries=0)
        result = run_sweep(
            load_spec(spec_path), catalog, models=(lm.name,), tracker=_tracker(tmp_path),
            lm_factory=lambda _name: lm, cache=ResponseCache(tmp_path / "cache"),
            reports_dir=tmp_path / "reports", executor=remote,
        )  # fmt: skip
        sent = len(stub.requests)
    assert result.status == "complete" and remote.jobs == 0
    assert sent == result.cost["model_calls"] <= 40
