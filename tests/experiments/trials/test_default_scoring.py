"""Which scoring a sweep's trials get when the spec does not say (issue 10, point 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.sweeps.plan import plan_tasks, trial_plan
from experiments.sweeps.spec import load_spec
from promptlib import Catalog

pytestmark = pytest.mark.data

REPO = Path(__file__).resolve().parents[3]


def _scorings(
    spec_path: Path, catalog: Catalog, models: tuple[str, ...]
) -> dict[tuple[str, str], str]:
    spec = load_spec(spec_path)
    planned = plan_tasks(spec, catalog, only=spec.tasks[:1], limit=5)
    return {
        (pt.model, pt.variant.name): pt.spec.scoring for pt in trial_plan(spec, planned, models)
    }


def test_local_zero_shot_studies_default_to_loglik_remote_and_few_shot_generate(
    catalog: Catalog,
) -> None:
    zero_shot = _scorings(
        REPO / "ablations/reference_vs_description.yaml",
        catalog,
        ("local/smollm2", "openai/gpt-4o-mini"),
    )
    assert {s for (m, _), s in zero_shot.items() if m == "local/smollm2"} == {"loglik"}
    assert {s for (m, _), s in zero_shot.items() if m.startswith("openai/")} == {"generate"}
    few_shot = _scorings(REPO / "ablations/demo_resampling.yaml", catalog, ("local/smollm2",))
    assert set(few_shot.values()) == {"generate"}


def test_a_spec_that_sets_scoring_wins(catalog: Catalog, tmp_path: Path) -> None:
    text = (REPO / "ablations/reference_vs_description.yaml").read_text()
    spec = tmp_path / "spec.yaml"
    spec.write_text(text + "\nscoring: generate\n")
    assert set(_scorings(spec, catalog, ("local/smollm2",)).values()) == {"generate"}


def test_a_task_without_a_label_set_generates(catalog: Catalog, tmp_path: Path) -> None:
    # sara_numeric answers a number: no label set, so nothing to score by log-likelihood
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: t\ntasks: [sara_numeric]\naxes: {demos: [none, base]}\ncomparisons: all_pairs\n"
    )
    assert set(_scorings(spec, catalog, ("local/smollm2",)).values()) == {"generate"}


def test_one_scoring_per_task_and_model_when_the_spec_mixes_demos(
    catalog: Catalog, tmp_path: Path
) -> None:
    """A zero-shot arm scored by log-likelihood against a few-shot arm scored by generation
    would compare two scorings, not two prompts: the default applies to the whole spec."""
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: t\ntasks: [hearsay]\naxes: {demos: [none, base]}\n")
    assert set(_scorings(spec, catalog, ("local/smollm2",)).values()) == {"generate"}
