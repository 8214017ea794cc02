"""What one optimisation is asked to do: its settings, the study-name rule, pruner constants."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from experiments import bounds
from experiments.llm.types import Scoring
from experiments.names import check_name
from experiments.optimize.instructions import InstructionFile, read_instruction_files
from promptlib.errors import WorkbenchError

StepProgress = Callable[[int, int, str], None]
"""Told (done, total, what) as the search advances (the CLI draws a progress bar)."""
PRUNERS = ("wilcoxon", "median", "none")
DEFAULT_PRUNER = "wilcoxon"
# WilcoxonPruner: prune once a one-sided signed-rank test says the trial is worse than the
# best one at p < WILCOXON_P, asked after each of WILCOXON_CHECKPOINTS batches of dev. 0.025
# is about the Pocock-corrected level of a one-sided 0.1 test repeated at 10 looks (Optuna's
# default, 0.1 at every look, prunes an equally good trial ~29% of the time); README has the
# measurement behind the choice.
WILCOXON_P = 0.025
WILCOXON_STARTUP = 2
WILCOXON_CHECKPOINTS = 10


def check_study_name(name: str) -> str:
    """`name` if it may name a study, else a one-line error (it becomes a folder name)."""
    # the rule of sweep names (`experiments.names.check_name`): one name, no path. It names the
    # study's MLflow experiment and its artifact folder.
    if not check_name(name):
        raise WorkbenchError(
            f"--study {name!r} must be letters, digits, '_', '-' or '.', starting with a "
            "letter or digit, at most 100 characters (it names an MLflow experiment and its "
            "artifact folder)"
        )
    return name


@dataclass
class OptimizeConfig:
    task: str
    model: str
    n_trials: int = 8
    method: str = "optuna"  # optuna | dspy-labeled | dspy-bootstrap | dspy-mipro
    sampler: str = "tpe"
    seed: int = 0
    storage: str | None = None
    study_name: str | None = None
    split: str = "test"
    heldout_fraction: float = 0.5
    split_seed: int = 0
    pruner: str = DEFAULT_PRUNER  # wilcoxon | median | none
    chunks: int | None = None  # checkpoints at which the pruner is asked; None: per pruner
    dev_limit: int | None = None
    heldout_limit: int | None = None
    n_resamples: int = 10_000
    scoring: Scoring = "generate"
    space: str = "base"  # base | extended (adds verbalizer, order, layout axes)
    # `--instruction-file`: each file an `instruction_file` level (a study of its own)
    instruction_files: tuple[str, ...] = ()
    files: tuple[InstructionFile, ...] = field(init=False, repr=False, default=())
    # the held-out verdict: fixed (every judged row, permutation test) or sequential (rows in
    # batches of `heldout_batch` until an anytime-valid interval decides; issue 22)
    heldout_design: str = "fixed"
    heldout_batch: int = 10

    def __post_init__(self) -> None:
        if self.study_name is not None:  # refused before a model or store is opened
            check_study_name(self.study_name)
        if self.space not in ("base", "extended"):  # `space.SPACES`; refused before any store
            raise WorkbenchError(f"--space must be base or extended, not {self.space!r}")
        if self.heldout_design not in ("fixed", "sequential"):
            raise WorkbenchError(
                f"--verdict must be fixed or sequential, not {self.heldout_design!r}"
            )
        for option, value, limits in (
            ("--trials", self.n_trials, bounds.TRIALS),
            ("--seed", self.seed, bounds.SEED),
            ("--split-seed", self.split_seed, bounds.SEED),
            ("--heldout", self.heldout_fraction, bounds.HELDOUT),
            ("--dev-limit", self.dev_limit, bounds.SPLIT_LIMIT),
            ("--heldout-limit", self.heldout_limit, bounds.SPLIT_LIMIT),
            ("--n-resamples", self.n_resamples, bounds.N_RESAMPLES),
            ("--verdict-batch", self.heldout_batch, bounds.VERDICT_BATCH),
            ("chunks", self.chunks, bounds.VERDICT_BATCH),
        ):  # the CLI checked its options as it parsed them; a caller of the API gets the same
            if value is not None:
                limits.check(value, option, WorkbenchError)
        if self.instruction_files and self.method != "optuna":
            raise WorkbenchError("--instruction-file is searched by --method optuna only")
        # read now: a missing or malformed file is refused before any store or model call
        self.files = read_instruction_files(tuple(self.instruction_files))


def checkpoints(cfg: OptimizeConfig, n_rows: int) -> int:
    """How many batches dev is evaluated in: the pruner is asked after each one."""
    if cfg.chunks is not None:
        n = cfg.chunks
    else:
        n = {"median": 3, "wilcoxon": WILCOXON_CHECKPOINTS, "none": 1}[cfg.pruner]
    return max(1, min(n, n_rows))
