"""The extended search space: verbalizer, order and layout axes, as new param names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest

from experiments.optimize.config import OptimizeConfig
from experiments.optimize.optimize import optimize
from experiments.optimize.space import invalid, search_space, space_variants, variant_from_params
from experiments.optimize.study import _study_name
from promptlib.errors import WorkbenchError
from promptlib.tasks import Catalog


def test_base_space_has_no_new_axes(catalog: Catalog) -> None:
    space = search_space(catalog.task("abercrombie"))
    assert space.extra_axes() == {}
    assert set(space.grid()) == {
        "instruction", "register", "demos", "demo_seed", "format", "answer_hint"
    }  # fmt: skip


def test_extended_space_lists_new_axes_and_leaves_out_what_cannot_apply(catalog: Catalog) -> None:
    space = search_space(catalog.task("abercrombie"), "extended")  # multi-class, 5 labels
    axes = space.extra_axes()
    assert axes["verbalizer"][0] == "official" and "letters" in axes["verbalizer"]
    assert "true_false" not in axes["verbalizer"]
    assert any(n.startswith("verbalizer: true_false left out") for n in space.notes)
    assert axes["order"] == ["drawn", "1", "2", "3"]
    assert axes["layout"][0] == "none" and len(axes["layout"]) == 5
    assert space.to_dict()["axes"]["layout"] == axes["layout"]


def test_extended_params_make_variants_and_invalid_combinations(catalog: Catalog) -> None:
    base = {"instruction": "base", "register": "default", "demos": "base", "demo_seed": 0,
            "format": "base", "answer_hint": False}  # fmt: skip
    v = variant_from_params({**base, "verbalizer": "letters", "order": "2", "layout": "none"})
    assert v.verbalizer == "letters" and v.order == 2
    # official/drawn/none levels are the base prompt: its id unchanged
    same = variant_from_params({**base, "verbalizer": "official", "order": "drawn",
                                "layout": "none"})  # fmt: skip
    assert same.id == variant_from_params(base).id
    assert invalid({**base, "demos": "none", "order": "1"})
    assert invalid({**base, "format": "claude", "layout": "sep:colon_newline"})
    assert not invalid({**base, "order": "1", "layout": "none"})


@pytest.mark.slow
def test_extended_space_counts_more_prompts(catalog: Catalog) -> None:
    task = catalog.task("abercrombie")
    base, ext = search_space(task), search_space(task, "extended")
    assert len(space_variants(ext)) > len(space_variants(base))


def test_extended_is_a_new_study_and_base_name_unchanged() -> None:
    cfg = OptimizeConfig(task="abercrombie", model="m")
    assert _study_name(cfg) == "abercrombie.m.optuna"
    ext = OptimizeConfig(task="abercrombie", model="m", space="extended")
    assert _study_name(ext) == "abercrombie.m.optuna.extended"
    with pytest.raises(WorkbenchError, match="--space"):
        OptimizeConfig(task="abercrombie", model="m", space="huge")


@pytest.mark.slow
def test_extended_study_proposes_new_levels_and_logs_its_space(
    catalog: Catalog, tmp_path: Path
) -> None:
    from tests.experiments.optimize.test_optimize import AlwaysNo, NoTracker

    logged: list[dict[str, Any]] = []

    class Recording(NoTracker):
        def log_search_space(self, parent: str, space: dict[str, Any]) -> None:
            logged.append(space)

    cfg = OptimizeConfig(
        task="hearsay", model="scripted/no", n_trials=8, storage=f"sqlite:///{tmp_path}/o.db",
        sampler="random", pruner="none", heldout_limit=10, space="extended",
    )  # fmt: skip
    report = optimize(cfg, catalog, AlwaysNo(), Recording())
    assert report.study == "hearsay.scripted_no.optuna.extended"
    assert logged == [search_space(catalog.task("hearsay"), "extended").to_dict()]
    study = optuna.load_study(study_name=report.study, storage=str(cfg.storage))
    names = {k for t in study.trials for k in t.params}
    assert {"verbalizer", "order", "layout"} <= names
    assert report.to_dict()["heldout"]["score"] is not None


@pytest.mark.slow
def test_a_named_extended_study_is_not_resumed_with_the_base_space(
    catalog: Catalog, tmp_path: Path
) -> None:
    """`--study NAME` keeps one name for both spaces: resumed with --space base, the study's
    extended trials could win, outside the base space printed and logged as searched."""
    from tests.experiments.optimize.test_optimize import AlwaysNo, NoTracker

    def cfg(space: str, n: int) -> OptimizeConfig:
        return OptimizeConfig(
            task="hearsay", model="scripted/no", n_trials=n, study_name="mine", space=space,
            storage=f"sqlite:///{tmp_path}/o.db", sampler="random", pruner="none",
            dev_limit=8, heldout_limit=8,
        )  # fmt: skip

    optimize(cfg("base", 2), catalog, AlwaysNo(), NoTracker())
    report = optimize(cfg("extended", 6), catalog, AlwaysNo(), NoTracker())  # a superset: kept
    assert report.study == "mine"
    lm = AlwaysNo()
    with pytest.raises(WorkbenchError, match="searched layout, order, verbalizer") as e:
        optimize(cfg("base", 1), catalog, lm, NoTracker())
    assert "--space" in str(e.value) and "\n" not in str(e.value) and lm.calls == 0
