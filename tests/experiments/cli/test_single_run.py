"""`workbench run`'s work in process: `cli.single.run_single` with a scripted model.

The subprocess tests (test_cli, test_run_tracking, test_score_cli) guard the command's
output and exit codes; these call the function the command wraps, with no model and no
MLflow, and check what it returns for the command to print.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from experiments import output
from experiments.cli.single import SingleRequest, run_single
from experiments.llm.scripted import LMDefaults
from experiments.llm.types import Completion, Decoding
from promptlib.errors import VariantFileError, WorkbenchError


@dataclass
class ScriptedLM(LMDefaults):
    """Answers every hearsay prompt with `answer`; prompts containing `fail_on` get an error."""

    answer: str = " Yes"
    fail_on: str | None = None
    name: str = "scripted/lm"
    mode: str = "completion"
    concurrency: int = 1
    prompts: list[str] = field(default_factory=list)

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name, "answer": self.answer, "fail_on": self.fail_on}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        self.prompts.append(prompt)
        if self.fail_on is not None and self.fail_on in prompt:
            return Completion(None, error="scripted failure")
        return Completion(self.answer, tokens_in=len(prompt) // 4, tokens_out=1)


@pytest.fixture
def request_(lb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SingleRequest:
    monkeypatch.setenv("WORKBENCH_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return SingleRequest(
        task="hearsay",
        model="scripted/lm",
        limit=4,
        no_cache=True,
        no_track=True,
        data_dir=str(lb_dir),
    )


@pytest.mark.data
def test_a_complete_trial_prints_its_summary_and_exits_0(request_: SingleRequest) -> None:
    notes: list[str] = []
    lm = ScriptedLM()
    outcome = run_single(request_, notes.append, lm=lm)
    assert len(lm.prompts) == 4
    assert outcome.exit_code == 0 and outcome.error is None and notes == []
    assert outcome.result.complete
    assert outcome.text == output.trial_summary(outcome.summary)
    predictions = Path(outcome.summary["predictions"])
    assert predictions.is_file() and predictions.parent.name == outcome.result.trial_id
    assert predictions.parent.parent == Path(os.environ["WORKBENCH_RUNS_DIR"])
    assert "mlflow_run_id" not in outcome.summary  # --no-track

    as_json = run_single(replace(request_, as_json=True), notes.append, lm=lm)
    assert as_json.text == output.as_json(as_json.summary)
    assert as_json.result.trial_id == outcome.result.trial_id


@pytest.mark.data
def test_failed_rows_give_the_incomplete_error_and_exit_1(request_: SingleRequest) -> None:
    lm = ScriptedLM(fail_on="")  # every prompt fails
    outcome = run_single(request_, lambda _line: None, lm=lm)
    assert not outcome.result.complete
    assert outcome.exit_code == 1
    assert outcome.error == output.run_incomplete_error(
        outcome.result.status,
        outcome.result.failure_reason(),
        outcome.summary["predictions"],
        outcome.result.rerun_helps,
    )
    assert outcome.error.startswith("error: trial failed: 4 of 4 rows failed")
    assert outcome.error.endswith("Run the same command again to retry only those rows.")


@pytest.mark.data
def test_bad_requests_raise_before_any_call(request_: SingleRequest) -> None:
    lm = ScriptedLM()
    both = replace(request_, variant="demos=none", variant_file="x")
    with pytest.raises(VariantFileError, match="give --variant or --variant-file, not both"):
        run_single(both, lambda _line: None, lm=lm)
    with pytest.raises(WorkbenchError, match="hearsy"):
        run_single(replace(request_, task="hearsy"), print, lm=lm)
    assert lm.prompts == []


def test_the_lines_left_in_other_cli_modules_are_built_alike() -> None:
    """The texts cli/options.py:216 and cli/studies.py:150-154, :324-328 still build inline,
    copied here, so the switch to `output` is byte for byte."""
    assert output.command_error("x: é") == f"error: {'x: é'}"
    n = 3
    assert output.sweep_rebuilt_note(n) == (
        f"note: {n} trial run(s) had lost their MLflow artifacts; "
        "they were run again (answers from the response cache) and logged anew"
    )
    sweep_name, status = "demo", "RUNNING"
    assert output.sweep_not_complete_error(sweep_name, status) == (
        f"error: sweep {sweep_name!r} is not complete (parent run {status}); "
        "its table is partial. Rerun the sweep to resume it"
    )
