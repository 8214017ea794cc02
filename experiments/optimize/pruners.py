"""The pruners a study may use, asked about evaluated trials only (a reused one never counts)."""

from __future__ import annotations

from typing import Any

from experiments.optimize.config import PRUNERS, WILCOXON_P, WILCOXON_STARTUP, OptimizeConfig
from experiments.optimize.space import REUSED_ATTR
from promptlib.errors import WorkbenchError


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
