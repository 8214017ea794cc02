"""The Optuna study: its name, key, storage and parent run, and the check that workers agree."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from experiments import ids, settings
from experiments.optimize.config import OptimizeConfig, check_study_name, checkpoints
from experiments.optimize.dev import DevHeldout
from experiments.optimize.instructions import files_digest
from experiments.optimize.pruners import _pruner
from experiments.optimize.space import REUSED_ATTR, VARIANT_ATTR, SearchSpace, variant_from_params
from experiments.secrets import redact, safe_url
from experiments.trials.spec import rows_fingerprint
from promptlib.errors import WorkbenchError
from promptlib.tasks import Task

SPLIT_ATTR = "heldout_indices"
EVALUATION_ATTR = "evaluation"
FAILURE_ATTR = "failure"
CALLS_ATTR = "model_calls"


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


def _study_name(cfg: OptimizeConfig) -> str:
    if cfg.study_name is not None:
        return check_study_name(cfg.study_name)
    name = f"{cfg.task}.{cfg.model.replace('/', '_')}.{cfg.method}"
    # the extended space is a new study: Optuna refuses changed choices on a resume
    name = name if cfg.space == "base" else f"{name}.{cfg.space}"
    # so are instruction files, by their labels and texts: other files, another study
    return f"{name}.files-{files_digest(cfg.files)}" if cfg.files else name


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
    url = cfg.storage or settings.default_optuna_storage()
    if not cfg.storage and url.startswith("sqlite:///"):
        # the user default's folder may not exist yet; if it cannot be made, opening says so
        db = Path(url.removeprefix("sqlite:///").split("?", 1)[0])
        with contextlib.suppress(OSError):
            db.parent.mkdir(parents=True, exist_ok=True)
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
        keys = [*evaluation, *(k for k in recorded if k not in evaluation)]  # e.g. files
        what = [k for k in keys if recorded.get(k) != evaluation.get(k)]
        raise WorkbenchError(
            f"study {name!r} evaluates trials with another {' and '.join(what)} "
            f"(pruner {recorded.get('pruner')}, {len(recorded.get('dev', []))} dev rows); "
            "trials are only comparable on the same rows, model and scoring: use the same "
            "--pruner, --dev-limit, --model/--api-base/--mode, --scoring and --instruction-file "
            "files, or a new --study name"
        )
    _check_axes(study, space, name)  # after the evaluation: files are named there
    return study


def _check_axes(study: Any, space: SearchSpace, name: str) -> None:
    """A study named by `--study` whose trials searched axes this space lacks (an extended
    space's, or --instruction-file's) is refused: its winner would lie outside the space
    printed and logged as searched."""
    axes = set(space.grid()) | {"demo_seed"}
    extra = {k for t in study.get_trials(deepcopy=False) for k in t.params} - axes
    if extra:
        raise WorkbenchError(
            f"study {name!r} searched {', '.join(sorted(extra))}, which this search space "
            "lacks; use the same --space and --instruction-file files, or a new --study name"
        )


def _setup(cfg: OptimizeConfig, lm: Any, task: Task, dev: list[str]) -> dict[str, Any]:
    """What decides a trial's answers besides its variant, as stored on the study."""

    identity = dict(lm.cache_identity())
    if isinstance(identity.get("api_base"), str):
        identity["api_base"] = safe_url(identity["api_base"])
    by_index = {r["index"]: r for r in task.rows(cfg.split)}
    setup: dict[str, Any] = {
        "model": identity,
        "scoring": cfg.scoring,
        "rows": rows_fingerprint([by_index[i] for i in dev]),
    }
    if cfg.files:  # a study named by --study with other files is refused, not mixed
        setup["instruction_files"] = [[f.label, f.sha256] for f in cfg.files]
    return setup


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
                "storage": safe_url(cfg.storage or settings.default_optuna_storage()),
            },
        )
    )


def _study_key(cfg: OptimizeConfig) -> str:
    """The study's key (`ids.study_key`): the default storage by its absolute path, so two
    folders' default studies have two keys."""
    storage = cfg.storage or settings.resolved_optuna_storage()
    return ids.study_key(safe_url(storage), _study_name(cfg), cfg.method)


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
