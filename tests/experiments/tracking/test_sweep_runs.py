"""`workbench report REF` finds a sweep run by name (its latest), sweep id or prefix, or MLflow
run id (issue 31, point 3); an ambiguous or unknown REF is one error naming the candidates.

`workbench report <run id>` used to say "no sweep named …": only names were looked up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.names import KIND, PARENT, SWEEP_ID
from experiments.tracking import Tracker, TrackingConfig
from experiments.tracking.sweep_runs import SweepNotFound
from tests.conftest import mlflow_store

A1, A2, B = "ab1" + "0" * 61, "ab2" + "0" * 61, "cd" + "0" * 62


@pytest.fixture
def tracker(tmp_path: Path) -> Tracker:
    return Tracker(
        TrackingConfig(
            tracking_uri=mlflow_store(tmp_path),
            artifact_location=(tmp_path / "artifacts").as_uri(),
            experiment_prefix="refs",
            prompt_registry=False,
            source="test",
        )
    )


def parents(tracker: Tracker) -> dict[str, str]:
    """Sweep 'demo' run on two models (A1, then A2: the latest), sweep 'other' once (B)."""
    return {
        A1: tracker.parent_run("demo", A1, {"models": "openai/one"}),
        B: tracker.parent_run("other", B, {"models": "openai/one"}),
        A2: tracker.parent_run("demo", A2, {"models": "openai/two"}),
    }


def test_a_name_gives_its_latest_run_and_lists_the_others(tracker: Tracker) -> None:
    ids = parents(tracker)
    choice = tracker.find_sweep("demo")
    assert (choice.run.sweep_id, choice.run.run_id, choice.by_name) == (A2, ids[A2], True)
    assert [o.sweep_id for o in choice.others] == [A1]
    assert choice.others[0].models == "openai/one"
    tracker.parent_run("demo", A1, {"models": "openai/one"})  # A1 resumed: now the latest
    assert tracker.find_sweep("demo").run.sweep_id == A1


def test_a_sweep_id_or_unique_prefix_gives_that_run(tracker: Tracker) -> None:
    ids = parents(tracker)
    for ref in (A1, "ab1", "AB1"):
        choice = tracker.find_sweep(ref)
        assert (choice.run.sweep_id, choice.run.run_id, choice.by_name) == (A1, ids[A1], False)
        assert [o.sweep_id for o in choice.others] == [A2]  # its sweep's other runs
    assert tracker.find_sweep("cd").run.name == "other"


def test_a_parent_or_trial_run_id_gives_its_sweep_run(tracker: Tracker) -> None:
    ids = parents(tracker)
    assert tracker.find_sweep(ids[A1]).run.sweep_id == A1
    parent = tracker.client.get_run(ids[A1])
    trial = tracker.client.create_run(
        parent.info.experiment_id, tags={KIND: "trial", PARENT: ids[A1], SWEEP_ID: A1}
    )
    assert tracker.find_sweep(trial.info.run_id).run.run_id == ids[A1]
    single = tracker.client.create_run(parent.info.experiment_id, tags={KIND: "run"})
    with pytest.raises(SweepNotFound, match=r"not a sweep's parent run or trial run .*: run\)"):
        tracker.find_sweep(single.info.run_id)


def test_an_ambiguous_or_unknown_ref_names_the_candidates(tracker: Tracker) -> None:
    parents(tracker)
    with pytest.raises(SweepNotFound) as ambiguous:
        tracker.find_sweep("ab")
    text = str(ambiguous.value)
    assert "'ab' names 2 sweep runs" in text and A1[:12] in text and A2[:12] in text
    assert "openai/one" in text and "openai/two" in text
    with pytest.raises(SweepNotFound) as unknown:
        tracker.find_sweep("no_such_sweep")
    text = str(unknown.value)
    assert "no sweep named 'no_such_sweep'" in text and "sweeps there: demo and other" in text
    with pytest.raises(SweepNotFound, match="no sweep named 'ef'"):
        tracker.find_sweep("ef")
