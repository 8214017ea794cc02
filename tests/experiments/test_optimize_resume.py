"""Review rev3 (issue 19): a resumed study does not pay again for prompts it has completed.

A seeded sampler replays its proposals when the same command is run again, so a resumed
`--trials 3` used to evaluate the first run's three prompts a second time (and count them).
A proposal the study has completed now takes that trial's value (no model call, no MLflow
run, `reused_from` on the Optuna trial) and does not count: `--trials N` is N prompts this
invocation evaluates, and a space with fewer left says so in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import experiments.optimize.optimize as opt
from experiments.optimize.optimize import OptimizeConfig, SearchSpace, optimize
from promptlib import Catalog
from tests.experiments.test_optimize import SpyLM, tracker  # noqa: F401 (fixture)

pytestmark = pytest.mark.data


def _cfg(tmp_path: Path, n: int, pruner: str = "none") -> OptimizeConfig:
    return OptimizeConfig(
        task="hearsay", model="scripted/lm", n_trials=n, storage=f"sqlite:///{tmp_path}/o.db",
        sampler="random", seed=3, dev_limit=12, heldout_limit=10, pruner=pruner,
    )  # fmt: skip


def _trials(tmp_path: Path, name: str) -> list[Any]:
    import optuna

    return list(optuna.load_study(study_name=name, storage=f"sqlite:///{tmp_path}/o.db").trials)


def test_a_resumed_seeded_study_evaluates_new_prompts_only(
    catalog: Catalog,
    tracker: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    first = optimize(_cfg(tmp_path, 3), catalog, SpyLM(), tracker)
    lm = SpyLM()
    second = optimize(_cfg(tmp_path, 3), catalog, lm, tracker)
    trials = _trials(tmp_path, second.study)
    evaluated = [t for t in trials if opt.REUSED_ATTR not in t.user_attrs]
    reused = [t for t in trials if opt.REUSED_ATTR in t.user_attrs]
    # the seeded sampler replayed the first run's three proposals: each took its value back
    assert len(reused) == 3 and second.n_reused == 3
    for t in reused:
        earlier = trials[t.user_attrs[opt.REUSED_ATTR]]
        assert t.value == earlier.value and t.user_attrs[opt.CALLS_ATTR] == 0
        assert opt.variant_from_params(t.params).id == earlier.user_attrs[opt.VARIANT_ATTR]
    # six prompts evaluated, all different; n_trials counts them, not the replays
    assert len({t.user_attrs[opt.VARIANT_ATTR] for t in evaluated}) == 6
    assert first.n_trials == 3 and second.n_trials == 6
    # the second run paid for its three new prompts only: one MLflow trial run each
    exp = tracker.client.get_experiment_by_name(f"t/optimize/{second.study}")
    runs = tracker.client.search_runs([exp.experiment_id])
    assert len([r for r in runs if r.data.tags.get("workbench.kind") == "trial"]) == 6
    assert 0 < second.search_model_calls <= 3 * 12  # three prompts, 12 dev rows each


def _tiny(task: Any) -> SearchSpace:
    """Four distinct prompts: demos none/base x answer hint off/on."""
    return SearchSpace(["base"], ["default"], ["none", "base"], ["base"], [False, True])


def test_a_space_smaller_than_trials_stops_saying_so(
    catalog: Catalog,
    tracker: Any,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(opt, "search_space", _tiny)
    report = optimize(_cfg(tmp_path, 6), catalog, SpyLM(), tracker)
    assert report.n_trials == 4
    line = "search space: 4 distinct prompt(s) not yet completed in study"
    assert any(line in n and "evaluating 4, not --trials 6" in n for n in report.search_notes)
    # every prompt is done: a rerun evaluates nothing, says so, and still gives the verdict
    lm = SpyLM()
    again = optimize(_cfg(tmp_path, 2), catalog, lm, tracker)
    assert again.n_trials == 4 and again.search_model_calls == 0
    assert any("0 distinct prompt(s)" in n for n in again.search_notes)
    assert again.best_variant == report.best_variant and 0 < again.p_value <= 1


def test_a_sampler_stuck_on_done_prompts_stops_saying_so(
    catalog: Catalog,
    tracker: Any,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import optuna

    fixed = {"instruction": "base", "register": "default", "demos": "none", "demo_seed": 0,
             "format": "base", "answer_hint": False}  # fmt: skip

    def stuck(cfg: Any, space: Any) -> Any:
        return optuna.samplers.PartialFixedSampler(fixed, optuna.samplers.RandomSampler(seed=0))

    monkeypatch.setattr(opt, "search_space", _tiny)
    monkeypatch.setattr(opt, "_sampler", stuck)
    monkeypatch.setattr(opt, "MAX_REUSED_IN_A_ROW", 5)
    report = optimize(_cfg(tmp_path, 3), catalog, SpyLM(), tracker)
    assert report.n_trials == 1 and report.n_reused == 5
    assert any("search stopped after 1 of 3 new trial(s)" in n for n in report.search_notes)


def test_a_reused_trial_carries_the_per_row_values_the_pruner_compares(
    catalog: Catalog,
    tracker: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A reused trial may tie for `best_trial`; Wilcoxon compares later trials with its
    per-row values, so it gets the ones of the trial it reuses."""
    optimize(_cfg(tmp_path, 2, "wilcoxon"), catalog, SpyLM(), tracker)
    report = optimize(_cfg(tmp_path, 2, "wilcoxon"), catalog, SpyLM(), tracker)
    trials = _trials(tmp_path, report.study)
    reused = [t for t in trials if opt.REUSED_ATTR in t.user_attrs]
    assert reused  # trial 0 cannot be pruned (no best yet): its replay is reused
    for t in reused:
        earlier = trials[t.user_attrs[opt.REUSED_ATTR]]
        assert earlier.intermediate_values and t.intermediate_values == earlier.intermediate_values
