"""The allowed range of every number a user gives: CLI options and spec-file fields, in one table.

Why: a number out of any sane range got through to where it broke something far from the
option that set it: ``--n-resamples 1000000000000`` asked numpy for terabytes (a memory
traceback), ``--timeout 1e308`` overflowed the socket's timeout and every call failed as a
retried "InternalServerError 500". Each range here is checked where the number is read (the
CLI's options at parse time, `experiments.cli.options.bounded`; a spec file's fields when it is
loaded), and a number outside it, nan or infinite is one line naming the option or field and
its range, exit 2.

The upper ends are far above any real use and far below what breaks: a day per attempt, a
million resamples (p-values to 1e-6), ten million rows (LegalBench's largest task has under
ten thousand), seeds of 32 bits (Optuna's samplers and numpy's legacy generators take no more).

This module imports nothing from `experiments`, so every other module may use it.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

from promptlib.errors import WorkbenchError


class BoundsError(WorkbenchError):
    """A number outside its range (exit 2, bad input)."""


@dataclass(frozen=True)
class Bounds:
    """The range of one number: [low, high], either end excluded when it is open."""

    low: float
    high: float
    integer: bool = True
    low_open: bool = False
    high_open: bool = False
    unit: str = ""  # e.g. "seconds", said in the message

    def describe(self) -> str:
        """The range in words: ``an integer from 1 to 256``, ``a number of seconds > 0 and
        <= 86400``."""
        kind = "an integer" if self.integer else "a number"
        if self.unit:
            kind += f" of {self.unit}"
        low, high = _show(self.low), _show(self.high)
        if not (self.low_open or self.high_open):
            return f"{kind} from {low} to {high}"
        return (
            f"{kind} {'>' if self.low_open else '>='} {low} "
            f"and {'<' if self.high_open else '<='} {high}"
        )

    def contains(self, value: Any) -> bool:
        """Whether `value` is a number of this range (not a bool, finite, an int if integer)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def check(
        self, value: Any, name: str, error: type[Exception] = BoundsError, why: str = ""
    ) -> Any:
        """`value` if it is in range, else `error` naming `name` and the range (and `why`)."""
        if not self.contains(value):
            raise error(
                f"{name} must be {self.describe()}, not {value!r}" + (f" ({why})" if why else "")
            )
        return value

    def parse(self, raw: Any, name: str, error: type[Exception] = BoundsError) -> Any:
        """A number typed as text (``"60"``, ``"0.5"``; an integer as digits) checked against
        the range; a number (an option's default) is checked as it is."""
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return self.check(raw, name, error)
        text = str(raw).strip()
        value: Any = None
        with contextlib.suppress(ValueError):  # not a number: said below with the range
            value = int(text) if self.integer else float(text)
        if value is None or not self.contains(value):
            raise error(f"{name} must be {self.describe()}, not {text!r}")
        return value


def _show(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# ---- calls to a model -------------------------------------------------------------------------
TIMEOUT = Bounds(0, 86_400, integer=False, low_open=True, unit="seconds")
CONCURRENCY = Bounds(1, 256)
RETRIES = Bounds(0, 100)
BATCH_POLL = Bounds(0.01, 3_600, integer=False, unit="seconds")
GENERATOR_TEMPERATURE = Bounds(0, 2, integer=False)
GENERATOR_MAX_TOKENS = Bounds(16, 4_096)
CANDIDATES = Bounds(1, 20)
# a provider's token count for one call (usage.prompt_tokens, ...): no context is 10^8
# tokens; outside it (negative, 10^30) the count is unknown and so is the cost
TOKENS = Bounds(0, 100_000_000)

# ---- rows and samples -------------------------------------------------------------------------
MAX_ROWS = 10_000_000
LIMIT = Bounds(1, MAX_ROWS)
FIRST_ROWS = Bounds(0, MAX_ROWS)  # `workbench render --limit`: 0 renders none
SEED = Bounds(0, 2**32 - 1)
N_RESAMPLES = Bounds(100, 1_000_000)

# ---- optimisation -----------------------------------------------------------------------------
TRIALS = Bounds(1, 10_000)
HELDOUT = Bounds(0.05, 0.95, integer=False)
SPLIT_LIMIT = Bounds(2, MAX_ROWS)  # --dev-limit, --heldout-limit: a stratified sample
TRAIN_FRACTION = Bounds(0, 1, integer=False, low_open=True, high_open=True)  # task new
DEMOS = Bounds(0, 10_000)  # task new --demos (promptlib.variants.MAX_K)
VERDICT_BATCH = Bounds(1, 100_000)
# `workbench grade next`: the half-width to stop at (A − B lies in [-1, 1]), items to propose
HALF_WIDTH = Bounds(0, 1, integer=False, low_open=True)
PROPOSE = Bounds(1, MAX_ROWS)

# ---- sweep specs ------------------------------------------------------------------------------
FORMAT_DRAW = Bounds(1, 10_000)  # axes.format.draw: grammar points drawn
SEQUENTIAL_BATCH = Bounds(1, 100_000)  # sequential.batch: rows per look
SEQUENTIAL_MAX_ROWS = LIMIT  # sequential.max_rows
SEQUENTIAL_DELTA = Bounds(0, 1, integer=False, low_open=True, high_open=True)
SEQUENTIAL_ALPHA = Bounds(0, 0.5, integer=False, low_open=True)

# ---- plans (`workbench plan`: the MDE's stated assumption) -------------------------------------
PLAN_ACCURACY = Bounds(0.05, 0.95, integer=False)  # --accuracy: each arm's recall per class
# --correlation: of the arms' per-row hits (the latent model reaches 0.61-0.78, by accuracy)
PLAN_CORRELATION = Bounds(0, 0.6, integer=False)

# ---- tools and settings -----------------------------------------------------------------------
PORT = Bounds(1, 65_535)
LOCAL_N_CTX = Bounds(1, 262_144)  # WORKBENCH_LOCAL_N_CTX (and a multiple of 256)
RAY_START_TIMEOUT = Bounds(0, 86_400, integer=False, low_open=True, unit="seconds")
RAY_ACTORS = Bounds(1, 4_096)
