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
import experiments.optimize.search as opt_search
import experiments.optimize.study as opt_study
from experiments.llm.scripted import LMDefaults
from experiments.optimize.config import OptimizeConfig
from experiments.optimize.optimize import optimize
from experiments.optimize.pruners import _EvaluatedStudy, _pruner
from experiments.optimize.space import (
    INVALID_ATTR,
    REUSED_ATTR,
    VARIANT_ATTR,
    SearchSpace,
    variant_from_params,
)
from experiments.optimize.study import CALLS_ATTR
from promptlib import Catalog
from tests.experiments.optimize.test_optimize import SpyLM, tracker  # noqa: F401 (fixture)

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
    evaluated = [t for t in trials if REUSED_ATTR not in t.user_attrs]
    reused = [t for t in trials if REUSED_ATTR in t.user_attrs]
    # the seeded sampler replayed the first run's three proposals: each took its value back
    assert len(reused) == 3 and second.n_reused == 3
    for t in reused:
        earlier = trials[t.user_attrs[REUSED_ATTR]]
        assert t.value == earlier.value and t.user_attrs[CALLS_ATTR] == 0
        assert variant_from_params(t.params).id == earlier.user_attrs[VARIANT_ATTR]
    # six prompts evaluated, all different; n_trials counts them, not the replays
    assert len({t.user_attrs[VARIANT_ATTR] for t in evaluated}) == 6
    assert first.n_trials == 3 and second.n_trials == 6
    # the second run paid for its three new prompts only: one MLflow trial run each
    exp = tracker.client.get_experiment_by_name(f"t/optimize/{second.study}")
    runs = tracker.client.search_runs([exp.experiment_id])
    assert len([r for r in runs if r.data.tags.get("workbench.kind") == "trial"]) == 6
    assert 0 < second.search_model_calls <= 3 * 12  # three prompts, 12 dev rows each


def _tiny(task: Any, space: str = "base", files: Any = ()) -> SearchSpace:
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
    monkeypatch.setattr(opt_study, "_sampler", stuck)
    monkeypatch.setattr(opt_search, "MAX_REUSED_IN_A_ROW", 5)
    report = optimize(_cfg(tmp_path, 3), catalog, SpyLM(), tracker)
    assert report.n_trials == 1 and report.n_reused == 5
    assert any("search stopped after 1 of 3 new trial(s)" in n for n in report.search_notes)


def _scripted(plan: list[dict[str, Any]]) -> Any:
    """A sampler proposing `plan[n]` as trial n (the last entry from then on)."""
    import optuna

    class Scripted(optuna.samplers.BaseSampler):
        def infer_relative_search_space(self, study: Any, trial: Any) -> dict[str, Any]:
            return {}

        def sample_relative(self, study: Any, trial: Any, space: Any) -> dict[str, Any]:
            return {}

        def sample_independent(self, study: Any, trial: Any, name: str, dist: Any) -> Any:
            return plan[min(trial.number, len(plan) - 1)][name]

    return Scripted()


def _prompt(**levels: Any) -> dict[str, Any]:
    base = {"instruction": "base", "register": "default", "demos": "none", "demo_seed": 0,
            "format": "base", "answer_hint": False}  # fmt: skip
    return base | levels


class HintKnows(LMDefaults):
    """Right on every row when the prompt carries the answer hint, else always "No"
    (balanced accuracy 0.5 on every class-balanced batch)."""

    name = "scripted/lm"
    mode = "completion"
    concurrency = 1

    def __init__(self, task: Any) -> None:
        self.gold = {r["text"].strip(): r["answer"] for r in task.rows("test")}

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Any) -> Any:
        from experiments.llm.types import Completion

        if "Answer with one of" not in prompt:
            return Completion(" No")
        query = prompt.rsplit("Q:", 1)[-1]
        return Completion(" " + next(a for t, a in self.gold.items() if t in query))


def test_a_reused_trial_does_not_count_for_the_median_pruner(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review rev4: the reuse used to copy the earlier trial's curve, so one evaluated prompt
    and its copy met MedianPruner's two startup trials and the "median" was that one curve:
    the next prompt was pruned on the strength of a single trial."""
    from tests.experiments.optimize.test_optimize import NoTracker

    hint, plain, plain_demos = _prompt(answer_hint=True), _prompt(), _prompt(demos="base")
    monkeypatch.setattr(opt, "search_space", _tiny)
    # trial 0 evaluates `hint`; resumed, the sampler replays it (1, reused), then `plain` (2)
    monkeypatch.setattr(opt_study, "_sampler", lambda cfg, space: _scripted([hint, hint, plain]))
    lm = HintKnows(catalog.task("hearsay"))
    optimize(_cfg(tmp_path, 1, "median"), catalog, lm, NoTracker())
    report = optimize(_cfg(tmp_path, 1, "median"), catalog, lm, NoTracker())
    first, copy, second = _trials(tmp_path, report.study)
    # one evaluated trial before it: below MedianPruner's two startup trials, not pruned
    assert second.state.name == "COMPLETE" and second.value == pytest.approx(0.5)
    assert first.intermediate_values == {0: 1.0, 1: 1.0, 2: 1.0}
    assert copy.user_attrs[REUSED_ATTR] == 0 and copy.intermediate_values == {}
    assert report.n_trials == 2 and report.n_pruned == 0 and report.n_reused == 1
    # two evaluated trials: the pruner works, on them (median 0.75 > 0.5 at the first batch)
    monkeypatch.setattr(opt_study, "_sampler", lambda cfg, space: _scripted([plain_demos]))
    report = optimize(_cfg(tmp_path, 1, "median"), catalog, lm, NoTracker())
    third = _trials(tmp_path, report.study)[-1]
    assert third.state.name == "PRUNED" and list(third.intermediate_values) == [0]


def test_a_reused_trial_reports_no_per_row_values_and_wilcoxon_reads_its_source(
    catalog: Catalog,
    tracker: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A reused trial carries no per-row values (the pruners see evaluated trials only);
    the best trial the Wilcoxon pruner compares with is always an evaluated one."""
    import optuna

    optimize(_cfg(tmp_path, 2, "wilcoxon"), catalog, SpyLM(), tracker)
    report = optimize(_cfg(tmp_path, 2, "wilcoxon"), catalog, SpyLM(), tracker)
    trials = _trials(tmp_path, report.study)
    reused = [t for t in trials if REUSED_ATTR in t.user_attrs]
    assert reused  # trial 0 cannot be pruned (no best yet): its replay is reused
    for t in reused:
        earlier = trials[t.user_attrs[REUSED_ATTR]]
        assert earlier.intermediate_values and t.intermediate_values == {}
    study = optuna.load_study(study_name=report.study, storage=f"sqlite:///{tmp_path}/o.db")
    best = _EvaluatedStudy(study).best_trial
    assert REUSED_ATTR not in best.user_attrs and best.value == study.best_value
    assert len(best.intermediate_values) == report.n_dev


def test_wilcoxon_compares_with_the_trial_a_tied_best_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store may answer `best_trial` with the reused copy on a tie (SQLite's order among
    equal values is unspecified); the pruner then compares with the trial it reused."""
    import optuna
    from optuna.distributions import BaseDistribution, FloatDistribution
    from optuna.trial import TrialState, create_trial

    cfg = OptimizeConfig(task="hearsay", model="scripted/lm", pruner="wilcoxon")
    study = optuna.create_study(direction="maximize", pruner=_pruner(cfg))
    dist: dict[str, BaseDistribution] = {"x": FloatDistribution(0, 1)}
    rows = dict.fromkeys(range(20), 1.0)
    study.add_trial(create_trial(params={"x": 0.5}, distributions=dist, value=1.0,
                                 intermediate_values=rows))  # fmt: skip
    study.add_trial(create_trial(params={"x": 0.5}, distributions=dist, value=1.0,
                                 user_attrs={REUSED_ATTR: 0}))  # fmt: skip
    copy = study.trials[1]
    monkeypatch.setattr(optuna.study.Study, "best_trial", property(lambda self: copy))
    worse = study.ask()
    for step in range(20):
        worse.report(0.0, step)
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))[0]
    assert study.pruner.prune(study, running)  # 20 rows right vs 20 wrong: p < 0.025
    assert _EvaluatedStudy(study).best_trial.number == 0


def test_levels_no_prompt_combines_do_not_count_as_trials(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review rev4: a proposal of a non-base instruction with a non-default register is
    pruned at once; it was counted against `--trials`, so near the end of the space the
    budget went on combinations no prompt has and fewer prompts were evaluated."""
    from tests.experiments.optimize.test_optimize import NoTracker

    def space(
        task: Any, name: str = "base", files: Any = ()
    ) -> SearchSpace:  # 3 prompts: (reference, plain) is not one
        return SearchSpace(["base", "reference"], ["default", "plain"], ["none"], ["base"],
                           [False])  # fmt: skip

    plan = [_prompt(instruction="reference", register="plain"), _prompt(),
            _prompt(instruction="reference")]  # fmt: skip
    monkeypatch.setattr(opt, "search_space", space)
    monkeypatch.setattr(opt_study, "_sampler", lambda cfg, space: _scripted(plan))
    report = optimize(_cfg(tmp_path, 2), catalog, SpyLM(), NoTracker())
    invalid, *rest = _trials(tmp_path, report.study)
    assert len({t.user_attrs[VARIANT_ATTR] for t in rest}) == 2  # both prompts evaluated
    assert report.n_trials == 2 and report.n_pruned == 0 and report.n_invalid == 1
    assert invalid.state.name == "PRUNED" and invalid.user_attrs[INVALID_ATTR]
