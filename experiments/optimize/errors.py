"""The errors of an optimisation, apart so `dspy_programs` raises them without importing
`optimize` (which imports it)."""

from __future__ import annotations

import signal

from promptlib.errors import WorkbenchError


class TrialIncomplete(Exception):
    """Raised inside the objective so Optuna records the trial as FAIL (not as a score)."""


class IncompleteEvaluation(WorkbenchError):
    """The held-out evaluation has failed rows: no verdict is given. Rerunning retries them."""

    exit_code = 1


class StudyInterrupted(WorkbenchError):
    """SIGTERM or Ctrl-C stopped the study; it was left resumable (see `optimize`).

    The exit code is the shell's for the signal (130 for SIGINT, 143 for SIGTERM).
    """

    def __init__(self, message: str, signum: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.exit_code = 128 + int(signum)
