"""A sweep with failed rows names the first row's error (issue 31, point 6).

Before: "error: 2 trial(s) incomplete: hearsay · base · openai/gpt-4o-mini (failed: 4 of 4
rows failed). ... Rerun the same command to resume": a missing key or a server that is down
was only in the predictions files, and the rerun failed the same way.
"""

from __future__ import annotations

from experiments import output
from experiments.sweeps.driver import _incomplete_item
from experiments.trials.record import Prediction, TrialRecord, TrialStatus

ADVICE = "missing API key: set OPENAI_API_KEY (the key for openai/gpt-4o-mini) in the environment"


def _record(errors: list[str | None]) -> TrialRecord:
    rows = tuple(
        Prediction(str(i), "h", "Yes", None if e else "Yes", None if e else "Yes", None, error=e)
        for i, e in enumerate(errors)
    )
    failed = sum(e is not None for e in errors)
    return TrialRecord(
        task="hearsay",
        model="openai/gpt-4o-mini",
        variant="base",
        metric="balanced_accuracy",
        status=TrialStatus.of(len(rows), failed),
        score=None,
        rows=rows,
        trial_id="t1",
    )


def test_the_sweeps_error_line_gives_the_first_row_error() -> None:
    item = _incomplete_item(_record([None, ADVICE, "something else"]))
    assert item["first_error"] == ADVICE and item["n_errors"] == 2
    line = output.incomplete_trials_error([item])
    assert f"First error: {ADVICE}." in line
    assert line.startswith("error: 1 trial(s) incomplete: hearsay · base · openai/gpt-4o-mini")
    assert "\n" not in line


def test_a_long_first_error_is_clipped_after_its_advice() -> None:
    item = _incomplete_item(_record([ADVICE + " " + "provider text " * 100]))
    assert item["first_error"].startswith(ADVICE) and item["first_error"].endswith("…")
    assert len(item["first_error"]) <= 400
