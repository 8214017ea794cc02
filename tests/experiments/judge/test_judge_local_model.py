"""The judge with a real embedded model (issue 33): SmolLM2 judges 3 rows of a real hearsay
trial it generated, by log-likelihood (always parses) and by generation (its replies kept,
parsed or counted as unparsed), and through `workbench judge`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from experiments.judge.rubrics import load_rubrics
from experiments.judge.run import judge_trial
from experiments.judge.store import judge_ids, load_judge_scores
from experiments.llm.cache import ResponseCache
from experiments.llm.gateway import get_model
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec
from experiments.trials.store import save_trial
from promptlib import Catalog, parse_spec

pytestmark = [pytest.mark.model, pytest.mark.data]


@pytest.fixture(scope="module")
def trial_dir(catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = TrialSpec(
        task="hearsay", variant=parse_spec("base"), model="local/smollm2", limit=3,
        scoring="generate",
    )  # fmt: skip
    result = run_trial(spec, catalog, get_model("local/smollm2"))
    assert sum(p.generation is not None for p in result.predictions) == 3
    return save_trial(result, tmp_path_factory.mktemp("judged") / "runs")


@pytest.mark.parametrize("scoring", ["loglik", "generate"])
def test_smollm2_judges_a_real_trial(
    trial_dir: Path, catalog: Catalog, tmp_path: Path, scoring: str
) -> None:
    lm = get_model("local/smollm2")
    cache = ResponseCache(tmp_path / "cache")
    run = judge_trial(trial_dir, lm, load_rubrics("hearsay"), cache=cache, catalog=catalog,
                      scoring=scoring)  # type: ignore[arg-type]  # fmt: skip
    assert run.n == 3 and run.n_errors == 0 and run.model_calls == 6
    scores = load_judge_scores(trial_dir, run.judge_id)
    assert len(scores) == 6
    for s in scores.values():
        assert s.reply is not None and s.prompt.endswith("Grade:")
        if scoring == "loglik":
            sums = json.loads(s.reply)
            assert s.score == (1 if sums[" 1"] > sums[" 0"] else 0)
        else:  # a grade only where the reply opens with one
            assert s.score in (0, 1, None)
    if scoring == "loglik":
        assert run.n_unparsed == 0
    again = judge_trial(trial_dir, lm, load_rubrics("hearsay"), cache=cache, catalog=catalog,
                        scoring=scoring)  # type: ignore[arg-type]  # fmt: skip
    assert again.reused and again.model_calls == 0


def test_workbench_judge_prints_the_runs_and_the_caveat(
    trial_dir: Path, tmp_path: Path, lb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from experiments.cli import app

    monkeypatch.setenv("WORKBENCH_RUNS_DIR", str(trial_dir.parent))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LEGALBENCH_DIR", str(lb_dir))
    args = ["judge", trial_dir.name[:10], "--model", "local/smollm2", "--criteria",
            "correctness", "--no-track"]  # fmt: skip
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    assert "3 rows judged" in out.output and "loglik" in out.output
    assert "judge scores are not correctness until calibrated" in out.output
    shown = CliRunner().invoke(app, [*args, "--json"])
    doc = json.loads(shown.stdout)
    (record,) = doc["judged"]
    assert record["reused"] and record["judge_id"] in judge_ids(trial_dir)
    assert record["mean_judge_score"].keys() == {"correctness"}
