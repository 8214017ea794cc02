"""The `make demo` study (ablations/demo.yaml) is a valid sweep of the size the README claims.

Its run on the real models (table with p-values, figures, the MLflow UI) is checked in
test_studies.py, which runs it once in the store it shares with the paper's studies.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from experiments.sweeps.plan import plan_tasks, trial_plan
from experiments.sweeps.spec import load_spec
from promptlib import Catalog

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "ablations" / "demo.yaml"
EMBEDDED = ("local/smollm2", "local/gemma3-270m")


def test_demo_spec_is_a_small_loglik_study_on_both_embedded_models() -> None:
    spec = load_spec(DEMO)
    assert spec.name == "demo"
    assert spec.models == EMBEDDED  # cross-model rows in the report
    assert spec.scoring == "loglik"  # tiny models always give a valid answer
    assert spec.limit == 40
    assert [v.name for v in spec.variants] == [
        "instruction=reference",
        "instruction=description",
    ]
    assert spec.comparisons == (("instruction=reference", "instruction=description"),)


def test_make_demo_runs_this_spec_and_offers_the_ui() -> None:
    makefile = (REPO / "Makefile").read_text()
    recipe = re.search(r"^demo: setup\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe is not None
    assert "workbench sweep ablations/demo.yaml" in recipe.group(1)
    assert re.search(r"^ui: setup\n\t\$\(BIN\)/workbench ui --port", makefile, re.M)


@pytest.mark.data
def test_demo_plans_twelve_trials_of_forty_shared_rows(catalog: Catalog) -> None:
    spec = load_spec(DEMO)
    planned = plan_tasks(spec, catalog)
    assert [p.task for p in planned] == list(spec.tasks)
    assert all(p.skipped is None and len(p.rows) == 40 for p in planned)
    trials = trial_plan(spec, planned, spec.models)
    assert len(trials) == 12  # 3 tasks x 2 variants x 2 models
    # both variants of a task are scored on the same rows, so the paired test applies
    assert all(t.spec.rows == next(p for p in planned if p.task == t.planned.task).rows
               for t in trials)  # fmt: skip
