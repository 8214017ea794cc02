"""Review findings on the sequential loop (issue 22), against a scripted in-process runner:
each number of a comparison's row is on the rows the row says."""

from __future__ import annotations

import dataclasses
import random
from types import SimpleNamespace
from typing import Any

import pytest

from experiments.metrics import official_metric, score
from experiments.sweeps import sequential as seqmod
from experiments.sweeps.cost import Cost
from experiments.sweeps.design import SequentialDesign
from experiments.trials.record import Prediction

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
            model_calls=len(preds), cache_hits=0, predictions=preds, cost=None, complete=True
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
    a, b, n = row["a"], row["b"], row["n"]
    assert (a, b) == ("good", "bad")
    assert row["rows_per_arm"][a] > n == row["rows_per_arm"][b]  # the case probed
    assert row["score_a"] == pytest.approx(_score_on(hits[a], n))
    assert row["score_b"] == pytest.approx(_score_on(hits[b], n))
