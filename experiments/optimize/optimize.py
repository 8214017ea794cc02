"""Per-task prompt optimisation with Optuna (and DSPy), honest on held-out data.

The task's evaluation rows are split, stratified and seeded, into *dev* (the search may use
it) and *held-out* (it must not: the whole search runs inside `heldout_guard`, so rendering a
held-out row raises). Demonstrations come from train, never from held-out. The best variant
found on dev is evaluated once on held-out and compared with the base prompt there with the
paired permutation test; the report states both, with a bootstrap CI.

The Optuna search space covers instruction, register, number of demonstrations and their
seed, format and an answer hint — each only where the task supports it (the log says which
axes are left out and why). Dev rows are evaluated in one fixed order shared by every trial
of a study: shuffled (seeded) within each answer class and interleaved, so every prefix keeps
the class balance of the whole of dev (LegalBench files are sorted by label). Trials are
evaluated in batches along that order and a pruner (`--pruner`: Wilcoxon signed-rank on the
per-row values by default, median of running scores, or none) stops a trial that is worse
than the best one, so a hopeless prompt stops calling the model. Storage is a SQLite file by
default; a PostgreSQL URL lets several processes share one study.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

from experiments.analysis import compare
from experiments.llm.types import Completion, Scoring
from experiments.metrics import normalize, scorable_metric
from experiments.optimize.dspy_programs import compile_dspy
from experiments.optimize.errors import IncompleteEvaluation, StudyInterrupted, TrialIncomplete
from experiments.output import optimize_report
from experiments.secrets import redact, safe_url
from experiments.trials.record import TrialRecord
from experiments.trials.run import TrialResult, run_trial
from experiments.trials.spec import TrialSpec, rows_fingerprint, select_rows
from promptlib.demos import bind
from promptlib.errors import WorkbenchError
from promptlib.leakage import content_key, evaluation_rows, heldout_guard, query_columns
from promptlib.render import compile_prompt
from promptlib.tasks import Catalog, Task
from promptlib.variants import INSTRUCTION_FILES, REGISTER_FILES, PromptVariant

if TYPE_CHECKING:
    from experiments.llm.cache import ResponseCache

log = logging.getLogger("workbench.optimize")
StepProgress = Callable[[int, int, str], None]
"""Told (done, total, what) as the search advances (the CLI draws a progress bar)."""
SPLIT_ATTR = "heldout_indices"
EVALUATION_ATTR = "evaluation"
FAILURE_ATTR = "failure"
CALLS_ATTR = "model_calls"
WORKER_ATTR = "worker"  # host, pid and process start of the process running the trial
VARIANT_ATTR = "variant_id"  # the trial's PromptVariant id: what makes two trials the same
REUSED_ATTR = "reused_from"  # a proposal already completed: the trial whose value it took
# a proposal of levels no LegalBench prompt combines (PRUNED at once, never evaluated)
INVALID_ATTR = "invalid_combination"
NO_PROMPT = "no LegalBench prompt combines these levels"
# The sampler proposing only configurations the study has completed (or that no prompt
# combines) this many times in a row ends the search (a converged TPE, or a random sampler
# near the end of a small space).
MAX_REUSED_IN_A_ROW = 100
INTERRUPTED = "interrupted"  # FAILURE_ATTR of a trial whose process was stopped mid-way
# A RUNNING trial or child run that carries no worker (made by code before WORKER_ATTR, or a
# process killed in the instant between creating it and naming itself) is left to its
# process for this long before it counts as abandoned.
STALE_AFTER = 600.0
# parent run id -> when this process began logging a trial's child run under it (until done)
_LOGGING: dict[str, float] = {}
# Study names follow the rule of sweep names (`sweeps._NAME`): one name, no path. It names
# the study's MLflow experiment and its artifact folder.
_STUDY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
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
    if not _STUDY_NAME.fullmatch(name) or ".." in name:
        raise WorkbenchError(
            f"--study {name!r} must be letters, digits, '_', '-' or '.', starting with a "
            "letter or digit, at most 100 characters (it names an MLflow experiment and its "
            "artifact folder)"
        )
    return name


@dataclass(frozen=True)
class DevHeldout:
    dev: tuple[str, ...]
    heldout: tuple[str, ...]
    seed: int
    fraction: float


def split_dev_heldout(
    task: Task, split: str = "test", heldout_fraction: float = 0.5, seed: int = 0
) -> DevHeldout:
    """Stratified (by answer), seeded split of a task's rows into dev and held-out.

    Rows that show the model the same content (LegalBench repeats some clauses under other
    indices) are kept on the same side: the split is made over groups of identical content,
    so no held-out text can be seen during the search under another index.
    """
    from sklearn.model_selection import train_test_split

    rows = task.rows(split)
    if len(rows) < 4:
        raise WorkbenchError(
            f"task {task.name!r} has {len(rows)} {split} rows; optimisation needs at least 4 "
            "(dev and held-out each need some)"
        )
    cols = query_columns(PromptVariant(), task)
    groups: dict[tuple[tuple[str, str], ...], list[dict[str, str]]] = {}
    for r in rows:
        groups.setdefault(content_key(r, cols), []).append(r)
    keys = list(groups)
    answers = [groups[k][0]["answer"] for k in keys]
    counts = {a: answers.count(a) for a in set(answers)}
    stratify = answers if min(counts.values()) >= 2 else None
    dev_keys, held_keys = train_test_split(
        keys, test_size=heldout_fraction, random_state=seed, stratify=stratify
    )
    held_set = {i for k in held_keys for i in (r["index"] for r in groups[k])}
    dev_set = {i for k in dev_keys for i in (r["index"] for r in groups[k])}
    return DevHeldout(
        tuple(r["index"] for r in rows if r["index"] in dev_set),
        tuple(r["index"] for r in rows if r["index"] in held_set),
        seed,
        heldout_fraction,
    )


def dev_order(
    task: Task, split: DevHeldout, split_name: str = "test", limit: int | None = None
) -> list[str]:
    """Dev rows in the search's evaluation order: stratified by answer, shuffled, seeded.

    LegalBench files are sorted by label (hearsay's first 16 dev rows are all "No"), so
    taking dev in file order would prune on one class. Here each class is shuffled with the
    split's seed and the classes are interleaved by largest deficit: after any t rows, each
    class has within one row of its share of dev times t. Every prefix — the batches a
    pruner sees, and the sample `limit` takes (`--dev-limit`) — keeps dev's class balance.
    The order depends only on the split (rows and seed), so every trial and every worker of
    a study evaluates the same rows in the same order.
    """
    import numpy as np

    answers = {r["index"]: normalize(r["answer"]) for r in task.rows(split_name)}
    rng = np.random.default_rng(split.seed)
    by_class: dict[str, list[str]] = {}
    for i in split.dev:
        by_class.setdefault(answers[i], []).append(i)
    classes = sorted(by_class)
    rank = {c: int(r) for c, r in zip(classes, rng.permutation(len(classes)), strict=True)}
    for c in classes:
        members = by_class[c]
        by_class[c] = [members[int(j)] for j in rng.permutation(len(members))]
    n = len(split.dev)
    taken = dict.fromkeys(classes, 0)
    order: list[str] = []
    for t in range(1, n + 1):
        open_classes = [c for c in classes if taken[c] < len(by_class[c])]
        # the class furthest below its quota len(c) * t / n; ties by a seeded class rank
        pick = max(open_classes, key=lambda c: (len(by_class[c]) * t - taken[c] * n, -rank[c]))
        order.append(by_class[pick][taken[pick]])
        taken[pick] += 1
    return order[:limit] if limit else order


@dataclass
class SearchSpace:
    instruction: list[str]
    register: list[str]
    demos: list[str]  # "base", "none", "k2", "k4", ...
    formats: list[str]
    answer_hint: list[bool]
    demo_seeds: int = 10
    notes: list[str] = field(default_factory=list)

    def grid(self) -> dict[str, list[Any]]:
        return {
            "instruction": self.instruction,
            "register": self.register,
            "demos": self.demos,
            "demo_seed": [0],
            "format": self.formats,
            "answer_hint": self.answer_hint,
        }


def search_space(task: Task) -> SearchSpace:
    """The axes this task supports; the notes say what was left out and why."""
    files = set(task.spec.prompt_files)
    notes = []
    instruction = ["base"] + [k for k, f in INSTRUCTION_FILES.items() if f in files]
    if len(instruction) == 1:
        notes.append("instruction: only base (no rule_reference/description prompt files)")
    register = ["default"] + [k for k, f in REGISTER_FILES.items() if f in files]
    if len(register) == 1:
        notes.append("register: only default (no zero_shot_simple/jargon prompt files)")
    labels = task.spec.labels or ()
    demos = ["none"] + (["base"] if "base_prompt.txt" in files else [])
    train = task.rows("train") if task.has_split("train") else []
    if labels and task.spec.task_type in ("binary", "multi-class"):
        per_class = {label: sum(r["answer"] == label for r in train) for label in labels}
        most = min(per_class.values()) if per_class else 0
        ks = [len(labels) * m for m in range(1, most + 1)]
        demos += [f"k{k}" for k in ks]
        if not ks:
            notes.append("demos: no resampled k (train has a class with no row)")
    else:
        notes.append("demos: no resampled k (class-balanced draws need a label set)")
    notes.append("pool: train only (train+test would draw held-out rows)")
    formats = ["base", "claude"] if labels else ["base"]
    hints = [False, True] if labels else [False]
    if not labels:
        notes.append("format/answer_hint: left out (no label set)")
    return SearchSpace(instruction, register, demos, formats, hints, notes=notes)


def variant_from_params(params: dict[str, Any]) -> PromptVariant:
    demos = str(params.get("demos", "base"))
    v = PromptVariant(
        instruction=str(params.get("instruction", "base")),
        register=str(params.get("register", "default")),
        format=str(params.get("format", "base")),
        answer_hint=bool(params.get("answer_hint", False)),
    )
    if demos.startswith("k"):
        return v.with_demos(int(demos[1:]), seed=int(params.get("demo_seed", 0)), pool="train")
    return v.with_demos(demos)


def space_variants(space: SearchSpace, sampler: str = "tpe") -> set[str]:
    """The ids of the distinct prompts the search can propose (what `--trials` can count).

    Combinations LegalBench has no prompt for (a non-base instruction with a non-default
    register) are left out; the demonstration seed only matters for resampled demos, and the
    grid sampler fixes it at 0.
    """
    import itertools

    seeds = [0] if sampler == "grid" else list(range(space.demo_seeds))
    ids: set[str] = set()
    axes = (space.instruction, space.register, space.demos, space.formats, space.answer_hint)
    for ins, reg, demos, fmt, hint in itertools.product(*axes):
        if ins != "base" and reg != "default":
            continue
        for seed in seeds if demos.startswith("k") else [0]:
            params = {"instruction": ins, "register": reg, "demos": demos, "demo_seed": seed,
                      "format": fmt, "answer_hint": hint}  # fmt: skip
            ids.add(variant_from_params(params).id)
    return ids


def _trial_variant(trial: Any) -> str | None:
    """The variant id a finished trial evaluated (recorded, or rebuilt from its params)."""
    recorded = trial.user_attrs.get(VARIANT_ATTR)
    if isinstance(recorded, str):
        return recorded
    try:
        return variant_from_params(trial.params).id
    except Exception:  # params from another version of the search space
        return None


def completed_variants(study: Any) -> dict[str, Any]:
    """variant id -> the first COMPLETE trial that evaluated it (a reused one never counts)."""
    from optuna.trial import TrialState

    done: dict[str, Any] = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        key = _trial_variant(t)
        if key is not None and key not in done and REUSED_ATTR not in t.user_attrs:
            done[key] = t
    return done


# ---- the study -----------------------------------------------------------------------------
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

    def __post_init__(self) -> None:
        if self.study_name is not None:  # refused before a model or store is opened
            check_study_name(self.study_name)


def checkpoints(cfg: OptimizeConfig, n_rows: int) -> int:
    """How many batches dev is evaluated in: the pruner is asked after each one."""
    if cfg.chunks is not None:
        n = cfg.chunks
    else:
        n = {"median": 3, "wilcoxon": WILCOXON_CHECKPOINTS, "none": 1}[cfg.pruner]
    return max(1, min(n, n_rows))


def _pruner(cfg: OptimizeConfig) -> Any:
    import warnings

    import optuna

    if cfg.pruner == "wilcoxon":
        with warnings.catch_warnings():  # experimental in Optuna (since 3.6), stable API
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return _evaluated_only(
                optuna.pruners.WilcoxonPruner(
                    p_threshold=WILCOXON_P, n_startup_steps=WILCOXON_STARTUP
                )
            )
    if cfg.pruner == "median":
        return _evaluated_only(optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0))
    if cfg.pruner == "none":
        return optuna.pruners.NopPruner()
    raise WorkbenchError(f"--pruner must be one of {', '.join(PRUNERS)}, not {cfg.pruner!r}")


class _EvaluatedStudy:
    """A study as a pruner must see it: only the trials that evaluated their prompt.

    Why: a reused trial (`REUSED_ATTR`) is a second COMPLETE trial of a prompt already
    evaluated. Counted, one prompt would fill two of MedianPruner's startup trials and be
    the whole "median" of a later trial's curve. Reused trials report no per-row values;
    when one ties for `best_trial` (which Wilcoxon compares every trial with), the trial
    it reused is the best instead: the same prompt and value, with its per-row values.
    Everything else is the study's own.
    """

    def __init__(self, study: Any) -> None:
        self._study = study

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    def get_trials(self, deepcopy: bool = True, states: Any = None) -> list[Any]:
        trials = self._study.get_trials(deepcopy=deepcopy, states=states)
        return [t for t in trials if REUSED_ATTR not in t.user_attrs]

    @property
    def trials(self) -> list[Any]:
        return self.get_trials()

    @property
    def best_trial(self) -> Any:
        best = self._study.best_trial  # ValueError when nothing completed, as Optuna's
        source = best.user_attrs.get(REUSED_ATTR)
        if source is None:
            return best
        from optuna.trial import TrialState

        done = self.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        same = [t for t in done if t.number == source and t.value == best.value]
        if same:
            return same[0]
        # not the trial it names (a store edited by hand): the best evaluated trial
        sign = 1.0 if self._study.direction.name == "MAXIMIZE" else -1.0
        return max(done, key=lambda t: (sign * float(t.value), -t.number))


def _evaluated_only(inner: Any) -> Any:
    """`inner` asked with `_EvaluatedStudy`: reused trials never count for pruning."""
    import optuna

    class EvaluatedOnly(optuna.pruners.BasePruner):
        def __init__(self, pruner: Any) -> None:
            self.inner = pruner

        def prune(self, study: Any, trial: Any) -> bool:
            return bool(self.inner.prune(_EvaluatedStudy(study), trial))

    return EvaluatedOnly(inner)


def _study_name(cfg: OptimizeConfig) -> str:
    if cfg.study_name is not None:
        return check_study_name(cfg.study_name)
    return f"{cfg.task}.{cfg.model.replace('/', '_')}.{cfg.method}"


def _sampler(cfg: OptimizeConfig, space: SearchSpace) -> Any:
    import optuna

    if cfg.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=cfg.seed, n_startup_trials=4)
    if cfg.sampler == "random":
        return optuna.samplers.RandomSampler(seed=cfg.seed)
    if cfg.sampler == "grid":
        return optuna.samplers.GridSampler(space.grid(), seed=cfg.seed)
    raise WorkbenchError(f"--sampler must be tpe, random or grid, not {cfg.sampler!r}")


def _open_study(
    cfg: OptimizeConfig,
    space: SearchSpace,
    tracker: Any,
    split: DevHeldout,
    dev: list[str],
    setup: dict[str, Any] | None = None,
) -> Any:
    """Create the study once (later workers load it); check it evaluates as this worker would.

    The study records its held-out split and how trials are evaluated (pruner, checkpoints,
    the dev rows in order): a worker that would evaluate otherwise is refused, since its
    values could not be compared with the study's.
    """
    import optuna

    # ERROR: a FAIL trial is reported by the workbench; Optuna would print its traceback
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    url = cfg.storage or "sqlite:///optuna.db"
    storage = _rdb_storage(url)
    name = _study_name(cfg)
    pruner = _pruner(cfg)
    evaluation = {
        "pruner": cfg.pruner,
        "checkpoints": checkpoints(cfg, len(dev)),
        "dev": dev,
        # what answers the rows: the model's identity (api_base without its password, mode),
        # the scoring and the dev rows' content — a worker on another server or data would
        # otherwise be scored against this study's trials
        **(setup or {}),
    }
    try:
        study = optuna.create_study(
            study_name=name,
            storage=storage,
            direction="maximize",
            sampler=_sampler(cfg, space),
            pruner=pruner,
        )
        study.set_user_attr(EVALUATION_ATTR, evaluation)  # before the split: workers wait on it
        study.set_user_attr(SPLIT_ATTR, list(split.heldout))
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(
            study_name=name, storage=storage, sampler=_sampler(cfg, space), pruner=pruner
        )
    deadline = time.time() + 120
    while SPLIT_ATTR not in study.user_attrs:  # another worker is creating it right now
        if time.time() > deadline:
            raise WorkbenchError(f"study {name!r} has no held-out split recorded after 120 s")
        time.sleep(0.5)
        study = optuna.load_study(
            study_name=name, storage=storage, sampler=_sampler(cfg, space), pruner=pruner
        )
    if list(study.user_attrs.get(SPLIT_ATTR, [])) != list(split.heldout):
        raise WorkbenchError(
            f"study {name!r} was created with another held-out split; use the same "
            "--split-seed and fraction, or a new --study name"
        )
    recorded = study.user_attrs.get(EVALUATION_ATTR)
    if recorded is None:  # a study from before the attribute existed
        study.set_user_attr(EVALUATION_ATTR, evaluation)
    elif recorded != evaluation:
        what = [k for k in evaluation if recorded.get(k) != evaluation[k]]
        raise WorkbenchError(
            f"study {name!r} evaluates trials with another {' and '.join(what)} "
            f"(pruner {recorded.get('pruner')}, {len(recorded.get('dev', []))} dev rows); "
            "trials are only comparable on the same rows, model and scoring: use the same "
            "--pruner, --dev-limit, --model/--api-base/--mode and --scoring, or a new --study name"
        )
    return study


def _setup(cfg: OptimizeConfig, lm: Any, task: Task, dev: list[str]) -> dict[str, Any]:
    """What decides a trial's answers besides its variant, as stored on the study."""

    identity = dict(lm.cache_identity())
    if isinstance(identity.get("api_base"), str):
        identity["api_base"] = safe_url(identity["api_base"])
    by_index = {r["index"]: r for r in task.rows(cfg.split)}
    return {
        "model": identity,
        "scoring": cfg.scoring,
        "rows": rows_fingerprint([by_index[i] for i in dev]),
    }


def _study_parent(cfg: OptimizeConfig, tracker: Any, study_key: str) -> str:
    """The study's parent run in the *current* MLflow store (found by key, else created).

    Keyed by the study's storage and name, so a study resumed against another MLflow store
    gets its own parent there instead of pointing at a run that store lacks.
    """
    return str(
        tracker.study_parent(
            _study_name(cfg),
            study_key,
            {
                "task": cfg.task,
                "model": cfg.model,
                "method": cfg.method,
                "storage": safe_url(cfg.storage or "sqlite:///optuna.db"),
            },
        )
    )


def _study_key(cfg: OptimizeConfig) -> str:
    import hashlib

    storage = cfg.storage or f"sqlite:///{Path('optuna.db').resolve()}"
    blob = json.dumps([safe_url(storage), _study_name(cfg), cfg.method])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _rdb_storage(url: str) -> Any:
    """Optuna's RDB storage; tolerates workers racing to create the schema of a fresh DB."""
    import optuna

    for attempt in range(6):
        try:
            return optuna.storages.RDBStorage(url)
        except Exception as e:  # bad URL, server down, driver missing, or a schema race
            text = str(e)
            racing = "already exists" in text or "UniqueViolation" in text
            if racing and attempt < 5:
                time.sleep(0.5 * (attempt + 1))
                continue
            first = redact(text).strip().splitlines()
            raise WorkbenchError(
                f"cannot open Optuna storage {safe_url(url)!r} "
                f"({first[0][:300] if first else type(e).__name__}); check --storage "
                "(server running, credentials, driver: pip install -e '.[postgres]')"
            ) from None
    raise AssertionError("unreachable")


@dataclass
class OptimizeReport:
    task: str
    model: str
    method: str
    study: str
    n_trials: int
    n_pruned: int
    n_failed: int
    best_variant: str
    best_variant_id: str
    best_variant_json: str  # the winner bound to the task: rerun with run --variant-file
    best_params: dict[str, Any]
    dev_score: float | None
    heldout: dict[str, Any]
    base_heldout: dict[str, Any]
    p_value: float
    test: str
    heldout_indices: list[str]
    n_dev: int
    search_notes: list[str]
    prompt_registry: str | None = None
    pruner: str | None = None  # optuna only
    search_model_calls: int = 0  # model calls of this invocation's search (cache hits apart)
    n_reused: int = 0  # proposals answered from a trial that had evaluated the same prompt
    n_invalid: int = 0  # proposals of levels no LegalBench prompt combines (not evaluated)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def optimize(
    cfg: OptimizeConfig,
    catalog: Catalog,
    lm: Any,
    tracker: Any,
    *,
    cache: Any = None,
    progress: StepProgress | None = None,
) -> OptimizeReport:
    """Search on dev inside the held-out guard, then evaluate the winner on held-out.

    `progress(done, total, what)` is told after each finished Optuna trial (whatever its
    state), once around a DSPy compile, and before the held-out verdict.
    """
    task = catalog.task(cfg.task)
    if not task.spec.is_classification:
        raise WorkbenchError(
            f"optimisation supports classification tasks; {cfg.task!r} is {task.spec.task_type}"
        )
    if cfg.pruner not in PRUNERS:
        raise WorkbenchError(f"--pruner must be one of {', '.join(PRUNERS)}, not {cfg.pruner!r}")
    split = split_dev_heldout(task, cfg.split, cfg.heldout_fraction, cfg.split_seed)
    # stratified, seeded order; --dev-limit takes its prefix, itself a stratified sample
    dev = dev_order(task, split, cfg.split, cfg.dev_limit)
    space = search_space(task)
    for note in space.notes:
        log.info("search space: %s", note)
    rows = {r["index"]: r for r in task.rows(cfg.split)}
    heldout_rows = [rows[i] for i in split.heldout]

    with _signals_interrupt() as guard:
        try:
            return _optimize(
                cfg, catalog, lm, tracker, cache, progress, task, split, dev, space, rows,
                heldout_rows, guard,
            )  # fmt: skip
        except BaseException as e:
            # a signal may surface as another error (Optuna's own bookkeeping, interrupted
            # mid-way, raises UnboundLocalError): whatever ends the study after one is the
            # interrupt
            if not isinstance(e, KeyboardInterrupt) and not guard.received:
                raise
            signum = guard.received[-1] if guard.received else signal.SIGINT
            raise StudyInterrupted(
                f"study {_study_name(cfg)!r} interrupted ({signal.Signals(signum).name}); its "
                "finished trials are kept and the one running is marked FAIL. Rerun the same "
                "command to resume: answered calls come from the response cache",
                signum,
            ) from None


def _optimize(
    cfg: OptimizeConfig,
    catalog: Catalog,
    lm: Any,
    tracker: Any,
    cache: Any,
    progress: StepProgress | None,
    task: Task,
    split: DevHeldout,
    dev: list[str],
    space: SearchSpace,
    rows: dict[str, dict[str, str]],
    heldout_rows: list[dict[str, str]],
    guard: _Interrupts,
) -> OptimizeReport:
    """`optimize` once the split is made; an interrupt leaves the study resumable.

    On SIGTERM or Ctrl-C the trial this process was running is marked FAIL in Optuna (it
    counts as no result: `n_trials` more are run by the next invocation as by this one) and
    its unfinished MLflow child run is deleted, as a sweep's claim deletes a killed trial's
    run; the parent run ends FAILED and `StudyInterrupted` says how to resume. A process
    killed outright (SIGKILL) is cleaned up the same way by the next invocation.
    """
    parent = _study_parent(cfg, tracker, _study_key(cfg))
    ok = False
    study: Any = None
    try:
        if cfg.method == "optuna":
            study = _open_study(cfg, space, tracker, split, dev, _setup(cfg, lm, task, dev))
            _clean_up(study, tracker, parent, mine=False)  # what killed workers left behind
            with heldout_guard(cfg.task, heldout_rows):
                calls = _run_optuna(
                    cfg, study, space, catalog, lm, tracker, parent, dev, cache, progress, guard
                )
            evaluated = [t for t in study.trials if not _not_evaluated(t)]
            states = [t.state.name for t in evaluated]
            n_trials, n_pruned, n_failed = len(states), states.count("PRUNED"), states.count("FAIL")
            n_reused = sum(REUSED_ATTR in t.user_attrs for t in study.trials)
            n_invalid = sum(INVALID_ATTR in t.user_attrs for t in study.trials)
            if "COMPLETE" not in states:
                reasons = [t.user_attrs.get(FAILURE_ATTR) for t in study.trials]
                first = next((r for r in reasons if r), "every trial was pruned")
                raise IncompleteEvaluation(
                    f"study {study.study_name!r}: no trial completed ({n_failed} failed, "
                    f"{n_pruned} pruned; {first}); no winner to judge. Rerun the same command "
                    "to retry the failed rows"
                )
            best = study.best_trial
            best_variant = variant_from_params(best.params)
            dev_score = float(best.value) if best.value is not None else None
            best_params = dict(best.params)
            study_name = study.study_name
        else:
            if progress:
                progress(0, 1, f"compiling with {cfg.method}")
            with heldout_guard(cfg.task, heldout_rows):
                compiled = compile_dspy(cfg, task, dev, lm, seed=cfg.seed, cache=cache)
                best_variant = compiled.variant
                # scored by the workbench runner, like an Optuna trial: on dev rows that are
                # not the program's own demonstrations (nor show the same text as one)
                dev_res = _evaluate(cfg, catalog, lm, best_variant, tuple(dev), cache)
            if not dev_res.complete:
                raise IncompleteEvaluation(
                    f"{cfg.method}: the dev evaluation of the compiled program is incomplete "
                    f"({dev_res.failure_reason()}); no dev score on partial data. Rerun the "
                    "same command: answered calls come from the response cache"
                )
            dev_score = dev_res.score
            calls = compiled.model_calls + dev_res.model_calls
            notes = [
                *compiled.notes,
                f"dev score: {dev_res.metric} on {len(dev_res.predictions)} of {len(dev)} dev "
                f"rows (the {len(dev) - len(dev_res.predictions)} left out are the program's "
                "demonstrations or show the same text as one)",
            ]
            space.notes.extend(notes)
            n_trials, n_pruned, n_failed, best_params = 1, 0, 0, {"method": cfg.method}
            n_reused = n_invalid = 0
            study_name = _study_name(cfg)
        if progress:
            progress(n_trials, n_trials, "held-out verdict")
        report = _verdict(cfg, catalog, lm, tracker, parent, task, split, rows, dev, cache,
                          best_variant, dev_score, best_params)  # fmt: skip
        ok = True
    except BaseException:
        guard.critical = False  # a second signal may stop the clean-up (the next run does it)
        if study is not None:
            _clean_up(study, tracker, parent, mine=True)
        raise
    finally:
        tracker.finish(parent, ok)
    return OptimizeReport(
        task=cfg.task,
        model=cfg.model,
        method=cfg.method,
        study=study_name,
        n_trials=n_trials,
        n_pruned=n_pruned,
        n_failed=n_failed,
        n_reused=n_reused,
        n_invalid=n_invalid,
        best_variant=best_variant.label,
        best_variant_id=best_variant.id,
        best_variant_json=bind(best_variant, task).canonical_json(),
        best_params=best_params,
        dev_score=dev_score,
        heldout=report["heldout"],
        base_heldout=report["base_heldout"],
        p_value=report["p_value"],
        test=report["test"],
        heldout_indices=list(split.heldout),
        n_dev=len(dev),
        search_notes=space.notes,
        prompt_registry=report["prompt_registry"],
        pruner=cfg.pruner if cfg.method == "optuna" else None,
        search_model_calls=calls,
    )


def _verdict(
    cfg: OptimizeConfig,
    catalog: Catalog,
    lm: Any,
    tracker: Any,
    parent: str,
    task: Task,
    split: DevHeldout,
    rows: dict[str, dict[str, str]],
    dev: list[str],
    cache: Any,
    best_variant: PromptVariant,
    dev_score: float | None,
    best_params: dict[str, Any],
) -> dict[str, Any]:
    """The one look at held-out; refused (IncompleteEvaluation) if any held-out row failed."""

    judged = split.heldout
    if cfg.heldout_limit and cfg.heldout_limit < len(judged):
        sample = select_rows([rows[i] for i in judged], cfg.heldout_limit, cfg.split_seed)
        judged = tuple(r["index"] for r in sample)
    # Both prompts are judged on the same rows: those neither shows as a demonstration.

    allowed = set(judged)
    for v in (best_variant, PromptVariant()):
        bound = compile_prompt(v, task, cfg.split).variant
        allowed &= {r["index"] for r in evaluation_rows(bound, task, cfg.split)[0]}
    judged = tuple(i for i in judged if i in allowed)
    best_res = _evaluate(cfg, catalog, lm, best_variant, judged, cache)
    base_res = _evaluate(cfg, catalog, lm, PromptVariant(), judged, cache)
    failed = [(name, r) for name, r in (("best", best_res), ("base", base_res)) if not r.complete]
    if failed:
        what = "; ".join(f"{name} prompt: {r.failure_reason()}" for name, r in failed)
        raise IncompleteEvaluation(
            f"held-out evaluation incomplete ({what}); no verdict is given on partial data. "
            "Rerun the same command: only the failed rows are sent again"
        )
    payload = {
        "best_variant": best_variant.label,
        "best_params": best_params,
        "dev_score": dev_score,
        **_compare(cfg, best_res, base_res, split, dev_score, len(dev)),
    }
    compiled = compile_prompt(best_variant, task, cfg.split)
    version = tracker.register_best(cfg.task, best_variant.label, compiled, "best")
    tracker.log_study_summary(parent, payload)
    payload["prompt_registry"] = f"prompts:/{version.name}@best" if version is not None else None
    return payload


def _batches(rows: list[str], n: int) -> list[list[str]]:
    """`rows` cut into `n` consecutive batches of (nearly) equal size, in order."""
    n = max(1, min(n, len(rows)))
    bounds = [round(len(rows) * i / n) for i in range(n + 1)]
    return [rows[bounds[i] : bounds[i + 1]] for i in range(n)]


def instance_weights(task: Task, split: str, dev: list[str]) -> dict[str, float]:
    """Per-row weights such that the mean over dev of weight x correct is the dev score.

    For balanced accuracy (every classification task's official metric) a row of class c
    weighs n / (K * n_c): K classes, n_c rows of class c among the n dev rows. The Wilcoxon
    pruner compares trials on these per-row values, so it tests the metric the search
    maximises, and the objective (balanced accuracy on dev) is their mean.
    """

    answers = {r["index"]: normalize(r["answer"]) for r in task.rows(split)}
    if scorable_metric(task.name) != "balanced_accuracy":
        return dict.fromkeys(dev, 1.0)
    counts: dict[str, int] = {}
    for i in dev:
        counts[answers[i]] = counts.get(answers[i], 0) + 1
    return {i: len(dev) / (len(counts) * counts[answers[i]]) for i in dev}


class _TrialReplay:
    """The answers one trial has had, in front of the response cache.

    A trial is evaluated in batches; its whole result (logged, and the objective value) is
    then assembled by running the runner on every row evaluated so far, answered from here
    without calling the model again — failed rows too (the response cache never keeps
    those), so a FAIL trial's run shows its errors without retrying them.
    """

    def __init__(self, cache: ResponseCache | None) -> None:
        self.cache = cache
        self.seen: dict[str, Completion] = {}

    def get(self, key: str) -> Completion | None:
        if key in self.seen:
            return self.seen[key]
        return self.cache.get(key) if self.cache is not None else None

    def put(self, key: str, completion: Completion) -> None:
        self.seen[key] = completion
        if self.cache is not None:
            self.cache.put(key, completion)


def _run_optuna(
    cfg: OptimizeConfig,
    study: Any,
    space: SearchSpace,
    catalog: Catalog,
    lm: Any,
    tracker: Any,
    parent: str,
    dev: list[str],
    cache: Any,
    progress: StepProgress | None = None,
    guard: _Interrupts | None = None,
) -> int:
    """Run this worker's trials; returns the model calls they made (cache hits apart).

    Each trial evaluates dev in `checkpoints` batches along the study's fixed order and asks
    the pruner after each: Wilcoxon gets every row's value (`instance_weights` x correct)
    reported at the row's position in that order, so trials are paired row by row; median
    gets the running score on the rows so far. Failed rows end the trial as FAIL (Optuna
    `catch`), whichever the pruner.
    """
    import dataclasses

    import optuna

    task = catalog.task(cfg.task)
    position = {i: n for n, i in enumerate(dev)}
    weight = instance_weights(task, cfg.split, dev)
    n_checks = checkpoints(cfg, len(dev))
    total_calls = 0

    guard = guard or _Interrupts()

    def objective(trial: optuna.Trial) -> float:
        trial.set_user_attr(WORKER_ATTR, _worker())  # a later run can tell it was abandoned
        try:
            guard.open()  # a signal that came while Optuna wrote is raised here
            return evaluate(trial)
        except KeyboardInterrupt:  # Optuna records FAIL; say why, and `_clean_up` its run
            with contextlib.suppress(Exception):
                trial.set_user_attr(FAILURE_ATTR, INTERRUPTED)
            raise
        finally:
            guard.critical = True  # Optuna now records the trial's state: not torn mid-way

    def evaluate(trial: optuna.Trial) -> float:
        nonlocal total_calls
        params = {
            "instruction": trial.suggest_categorical("instruction", space.instruction),
            "register": trial.suggest_categorical("register", space.register),
            "demos": trial.suggest_categorical("demos", space.demos),
            "demo_seed": trial.suggest_int("demo_seed", 0, space.demo_seeds - 1)
            if cfg.sampler != "grid"
            else trial.suggest_categorical("demo_seed", [0]),
            "format": trial.suggest_categorical("format", space.formats),
            "answer_hint": trial.suggest_categorical("answer_hint", space.answer_hint),
        }
        if params["instruction"] != "base" and params["register"] != "default":
            trial.set_user_attr(INVALID_ATTR, True)  # not a prompt: `tell` does not count it
            raise optuna.TrialPruned(NO_PROMPT)
        variant = variant_from_params(params)
        earlier = completed_variants(trial.study).get(variant.id)
        if earlier is not None:  # evaluated before (a resumed seeded sampler replays): reuse
            trial.set_user_attr(REUSED_ATTR, earlier.number)
            trial.set_user_attr(CALLS_ATTR, 0)
            # no per-row values: the pruners see evaluated trials only (`_EvaluatedStudy`,
            # which also answers `best_trial` with `earlier` when this one ties for it)
            return float(earlier.value)
        trial.set_user_attr(VARIANT_ATTR, variant.id)
        # dev rows showing the same text as one of this variant's demonstrations are left out
        bound = compile_prompt(variant, task, cfg.split).variant
        allowed = {r["index"] for r in evaluation_rows(bound, task, cfg.split)[0]}
        rows = [i for i in dev if i in allowed]
        replay = _TrialReplay(cache)
        calls = hits = 0
        done: list[str] = []

        def spec(indices: list[str]) -> TrialSpec:
            return TrialSpec(
                task=cfg.task,
                variant=variant,
                model=cfg.model,
                split=cfg.split,
                scoring=cfg.scoring,
                rows=tuple(indices),
            )

        def so_far() -> TrialResult:
            whole = run_trial(spec(done), catalog, lm, cache=cast("ResponseCache", replay))
            return dataclasses.replace(whole, model_calls=calls, cache_hits=hits)

        for step, batch in enumerate(_batches(rows, n_checks)):
            part = run_trial(spec(batch), catalog, lm, cache=cast("ResponseCache", replay))
            calls, hits = calls + part.model_calls, hits + part.cache_hits
            total_calls += part.model_calls
            trial.set_user_attr(CALLS_ATTR, calls)
            done += batch
            if not part.complete:
                # Provider errors are not a bad prompt: the trial FAILs with the reason.
                result = so_far()
                reason = f"{result.status}: {result.failure_reason()}"
                trial.set_user_attr(FAILURE_ATTR, reason)
                _log(tracker, parent, result, variant, task, trial, "FAIL", step)
                raise TrialIncomplete(reason)
            if cfg.pruner == "wilcoxon":
                for p in part.predictions:
                    trial.report(weight[p.index] * float(bool(p.correct)), position[p.index])
            elif cfg.pruner == "median":
                running = so_far().score
                assert running is not None
                trial.report(running, step)
            if cfg.pruner != "none" and trial.should_prune():
                _log(tracker, parent, so_far(), variant, task, trial, "PRUNED", step)
                raise optuna.TrialPruned()
        result = so_far()
        assert result.score is not None
        _log(tracker, parent, result, variant, task, trial, "COMPLETE", n_checks - 1)
        return result.score

    # `--trials N`: N prompts evaluated by this worker. A proposal the study has completed
    # already takes that trial's value (no model call, no MLflow run) and does not count,
    # nor does one of levels no prompt combines (`left` counts real prompts only).
    left = len(space_variants(space, cfg.sampler) - set(completed_variants(study)))
    target = min(cfg.n_trials, left)
    if target < cfg.n_trials:
        _note(
            space,
            f"search space: {left} distinct prompt(s) not yet completed in study "
            f"{study.study_name!r}; evaluating {target}, not --trials {cfg.n_trials}",
        )
    if target == 0:
        return total_calls
    finished = reused_in_a_row = 0

    def tell(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        nonlocal finished, reused_in_a_row
        if _not_evaluated(trial):
            reused_in_a_row += 1
            if reused_in_a_row >= MAX_REUSED_IN_A_ROW:
                _note(
                    space,
                    f"search stopped after {finished} of {target} new trial(s): the sampler "
                    f"proposed only prompts study {study.study_name!r} had already evaluated "
                    f"(or levels no LegalBench prompt combines), {MAX_REUSED_IN_A_ROW} times "
                    "in a row",
                )
                study.stop()
            return
        reused_in_a_row = 0
        finished += 1
        if progress:
            progress(finished, target, f"trial {trial.number} {trial.state.name.lower()}")
        if finished >= target:
            study.stop()

    if progress:
        progress(0, target, "searching")
    guard.critical = True  # Optuna's ask/tell between trials; only evaluation is interrupted
    try:
        study.optimize(objective, n_trials=None, catch=(TrialIncomplete,), callbacks=[tell])
    finally:
        guard.critical = False
    guard.open()  # a signal during the last trial's bookkeeping ends the study here
    return total_calls


def _not_evaluated(trial: Any) -> bool:
    """A trial that evaluated no prompt: a reuse, or levels no prompt combines."""
    return REUSED_ATTR in trial.user_attrs or INVALID_ATTR in trial.user_attrs


def _note(space: SearchSpace, text: str) -> None:
    """A line for stderr now and for the report's notes."""
    log.warning("%s", text)
    space.notes.append(text)


class _Interrupts:
    """The signals `_signals_interrupt` took, and whether one may interrupt right now.

    While `critical` (Optuna writing a trial's state between evaluations), a signal is only
    noted and `open()` raises it once that is done, so a trial is never left half-told.
    """

    def __init__(self) -> None:
        self.received: list[int] = []
        self.critical = False
        self.pending = False

    def signalled(self, signum: int) -> None:
        self.received.append(signum)
        if self.critical:
            self.pending = True
            return
        raise KeyboardInterrupt

    def open(self) -> None:
        """Leave the critical section, raising a signal noted in it."""
        self.critical = False
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[_Interrupts]:
    """Within: SIGTERM raises KeyboardInterrupt as Ctrl-C does, so the study is cleaned up.

    Without it SIGTERM ends the process at once: the running Optuna trial stays RUNNING and
    its half-logged MLflow run keeps a score. Only in the main thread (the only one Python
    delivers signals to), and only where the signal still has its default handler.
    """
    guard = _Interrupts()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return

    def interrupt(signum: int, frame: Any) -> None:
        guard.signalled(signum)

    defaults = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}
    previous = {sig: signal.getsignal(sig) for sig in defaults}
    mine = [sig for sig, default in defaults.items() if previous[sig] is default]
    for sig in mine:
        signal.signal(sig, interrupt)
    try:
        yield guard
    finally:
        for sig in mine:
            signal.signal(sig, previous[sig])


def _process_start(pid: int) -> str | None:
    """When process `pid` started (Linux: clock ticks since boot), to tell a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def _pid_namespace() -> str | None:
    """Which pid namespace this process sees (containers on one host share its name)."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _worker() -> dict[str, Any]:
    """This process, as recorded on the trials it runs."""
    return {
        "host": socket.gethostname(),
        "pids": _pid_namespace(),
        "pid": os.getpid(),
        "start": _process_start(os.getpid()),
    }


def _abandoned(trial: Any, mine: bool) -> bool:
    """A RUNNING trial that no live process will finish.

    With `mine`: a trial of this process (an interrupt stopped it). Otherwise: a trial of
    a process on this host and pid namespace that is gone (or whose pid now names another
    process), or one with no worker recorded that has run for over STALE_AFTER. A trial of
    another host or container is left alone: its process cannot be checked from here.
    """
    worker = trial.user_attrs.get(WORKER_ATTR)
    if not isinstance(worker, dict):
        if mine:
            return False
        started = trial.datetime_start.timestamp() if trial.datetime_start else time.time()
        return time.time() - started > STALE_AFTER
    me = _worker()
    if worker.get("host") != me["host"] or worker.get("pids") != me["pids"]:
        return False  # another machine or container: its pids mean nothing here
    if mine:
        return bool(worker.get("pid") == me["pid"] and worker.get("start") == me["start"])
    pid = worker.get("pid")
    if not isinstance(pid, int) or (pid == me["pid"] and worker.get("start") == me["start"]):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass  # alive, another user's
    return _process_start(pid) != worker.get("start")


def _clean_up(study: Any, tracker: Any, parent: str, mine: bool) -> None:
    """Leave the study as if the abandoned trials had failed before logging anything.

    Abandoned RUNNING trials (`_abandoned`) are marked FAIL with FAILURE_ATTR
    "interrupted"; the MLflow child runs of interrupted trials are deleted (a FINISHED one
    too: its trial counts as no result), as are unfinished child runs whose trial has ended
    and unfinished ones naming no trial that are older than STALE_AFTER. Best effort: a
    store that fails here is cleaned up by the next invocation.
    """
    from optuna.trial import Trial, TrialState

    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if _abandoned(t, mine):
            with contextlib.suppress(Exception):  # a peer may be failing it too
                Trial(study, t._trial_id).set_user_attr(FAILURE_ATTR, INTERRUPTED)
                study.tell(t.number, state=TrialState.FAIL)
    client = getattr(tracker, "client", None)
    if client is None:  # not tracked in MLflow
        return
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    try:
        exp = client.get_run(parent).info.experiment_id
        children = client.search_runs(
            [exp], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'", max_results=50_000
        )
        for run in children:
            number = run.data.params.get("optuna.trial")
            trial = trials.get(int(number)) if number and number.isdigit() else None
            unfinished = run.info.status not in ("FINISHED", "FAILED")
            if trial is None:  # killed before it named its trial (or not a trial's run)
                started = run.info.start_time / 1000
                ours = mine and started >= _LOGGING.get(parent, float("inf")) - 1.0
                doomed = (
                    unfinished and number is None and (ours or time.time() - started > STALE_AFTER)
                )
            elif trial.state == TrialState.FAIL:
                doomed = unfinished or trial.user_attrs.get(FAILURE_ATTR) == INTERRUPTED
            else:
                doomed = unfinished and trial.state != TrialState.RUNNING
            if doomed:
                client.delete_run(run.info.run_id)
    except Exception as e:  # the store went away: the next invocation cleans up
        log.warning("could not clean up the study's MLflow runs: %s", redact(str(e))[:200])
    finally:
        if mine:
            _LOGGING.pop(parent, None)


def _log(
    tracker: Any,
    parent: str,
    result: TrialResult,
    variant: PromptVariant,
    task: Task,
    trial: Any,
    state: str,
    step: int,
) -> None:
    compiled = compile_prompt(variant, task, result.spec.split)
    rows = {r["index"]: r for r in task.rows(result.spec.split)}
    _LOGGING[parent] = time.time()  # a run created from now on, naming no trial yet, is ours
    tracker.log_trial(
        parent,
        result,
        compiled,
        [rows[p.index] for p in result.predictions],
        variant.label,
        {
            "optuna.trial": trial.number,
            "optuna.state": state,
            "optuna.step": step,
            "answer_hint": variant.answer_hint,
        },
        source=str(task.files.split_path(result.spec.split)),
    )
    _LOGGING.pop(parent, None)


def _evaluate(
    cfg: OptimizeConfig,
    catalog: Catalog,
    lm: Any,
    variant: PromptVariant,
    rows: tuple[str, ...],
    cache: Any,
) -> TrialResult:
    task = catalog.task(cfg.task)
    compiled = compile_prompt(variant, task, cfg.split)
    allowed = {r["index"] for r in evaluation_rows(compiled.variant, task, cfg.split)[0]}
    keep = tuple(i for i in rows if i in allowed)
    spec = TrialSpec(
        task=cfg.task,
        variant=variant,
        model=cfg.model,
        split=cfg.split,
        scoring=cfg.scoring,
        rows=keep,
    )
    return run_trial(spec, catalog, lm, cache=cache)


def _compare(
    cfg: OptimizeConfig,
    best: TrialResult,
    base: TrialResult,
    split: DevHeldout,
    dev_score: float | None,
    n_dev: int,
) -> dict[str, Any]:
    """Best vs base on held-out, on the task's official metric (experiments.analysis.compare)."""

    arms = [
        TrialRecord.from_result(r, variant=name) for name, r in (("best", best), ("base", base))
    ]
    row = compare.pair(arms[0], arms[1], n_resamples=cfg.n_resamples, where=f"{cfg.task} held-out")
    # each arm's interval as the comparison computed it (clusters resampled); none for an arm
    # the comparison could not test
    ci = SimpleNamespace(low=row["ci_a_low"], high=row["ci_a_high"], note=row["ci_a_note"])
    base_ci = SimpleNamespace(low=row["ci_b_low"], high=row["ci_b_high"], note=row["ci_b_note"])
    how = "exact" if row["exact"] else f"{row['n_resamples']} resamples"
    return {
        "heldout": {
            "score": best.score, "ci_low": ci.low, "ci_high": ci.high, "n": row["n"],
            "ci_note": ci.note, "n_clusters": row["n_clusters"],
        },
        "base_heldout": {
            "score": base.score, "ci_low": base_ci.low, "ci_high": base_ci.high,
            "ci_note": base_ci.note,
        },
        "p_value": row["p_value"],
        "statistic": row["statistic"],
        "metric": row["metric"],
        "test": f"{row['test']}, two-sided, {row['metric']}, {how}, "
        f"{row['n_discordant']} discordant of {row['n_clusters']} clusters ({row['n']} rows)",
        "n_dev": n_dev,
        "heldout_indices": list(split.heldout),
        # the rows behind the scores, CI and p-value (held-out, minus --heldout-limit's
        # sample and any row either prompt shows as a demonstration)
        "judged_indices": [p.index for p in best.predictions],
    }  # fmt: skip


def report_text(r: OptimizeReport) -> str:
    """The report as the CLI prints it (built in `experiments.output`)."""

    return optimize_report(r.to_dict())


def dumps(report: OptimizeReport) -> str:
    return json.dumps(report.to_dict(), default=str)
