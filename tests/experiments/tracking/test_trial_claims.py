"""`Tracker.claim` yields a typed `Claim` (issue 32): the trial's FINISHED run to read back,
or none and this process runs it; None while a peer holds the trial. It was a string,
"done:<run id>" or "mine", that the sweep parsed by prefix."""

from __future__ import annotations

import pytest

from experiments import ids
from experiments.names import KIND, PARENT, TRIAL_ID
from experiments.tracking import Tracker, TrackingConfig
from experiments.tracking.parents import Claim

TRIAL = "12" + "0" * 62


@pytest.fixture(scope="module")
def tracker(tmp_path_factory: pytest.TempPathFactory) -> Tracker:
    """One store for the module (creating a SQLite store takes seconds); a parent per test."""
    tmp_path = tmp_path_factory.mktemp("claims")
    return Tracker(
        TrackingConfig(
            tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
            artifact_location=(tmp_path / "artifacts").as_uri(),
            experiment_prefix="claims",
            prompt_registry=False,
            source="test",
        )
    )


def _trial_run(tracker: Tracker, parent_id: str, status: str) -> str:
    experiment = tracker.client.get_run(parent_id).info.experiment_id
    run = tracker.client.create_run(
        experiment, tags={KIND: "trial", PARENT: parent_id, TRIAL_ID: TRIAL}
    )
    tracker.client.set_terminated(run.info.run_id, status=status)
    return str(run.info.run_id)


def test_a_trial_without_a_finished_run_is_this_process_to_run(
    tracker: Tracker, request: pytest.FixtureRequest
) -> None:
    parent = tracker.parent_run("demo", ids.short_sha(request.node.name) * 4, {})
    leftover = _trial_run(tracker, parent, "FAILED")  # a killed process's run
    with tracker.claim(parent, TRIAL, wait=True) as claim:
        assert claim == Claim(finished=None)
    assert tracker.client.get_run(leftover).info.lifecycle_stage == "deleted"


def test_a_finished_trial_names_its_run_to_read_back(
    tracker: Tracker, request: pytest.FixtureRequest
) -> None:
    parent = tracker.parent_run("demo", ids.short_sha(request.node.name) * 4, {})
    done = _trial_run(tracker, parent, "FINISHED")
    with tracker.claim(parent, TRIAL, wait=True) as claim:
        assert claim == Claim(finished=done)
    assert tracker.client.get_run(done).info.lifecycle_stage == "active"


def test_a_trial_a_peer_holds_is_none_without_waiting(
    tracker: Tracker, request: pytest.FixtureRequest
) -> None:
    parent = tracker.parent_run("demo", ids.short_sha(request.node.name) * 4, {})
    with tracker.claim(parent, TRIAL, wait=True) as mine:
        assert mine is not None
        with tracker.claim(parent, TRIAL, wait=False) as peer:
            assert peer is None
