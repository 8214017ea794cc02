"""The one look at held-out: the winner and the base prompt judged on the same rows."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from experiments.analysis import compare
from experiments.optimize.config import OptimizeConfig
from experiments.optimize.dev import DevHeldout
from experiments.optimize.errors import IncompleteEvaluation
from experiments.trials.record import TrialRecord
from experiments.trials.run import TrialResult, run_trial
from experiments.trials.spec import TrialSpec, select_rows
from promptlib.leakage import evaluation_rows
from promptlib.render import compile_prompt
from promptlib.tasks import Catalog, Task
from promptlib.variants import PromptVariant


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

    arms = [_arm(name, r) for name, r in (("best", best), ("base", base))]
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


def _arm(name: str, r: TrialResult) -> TrialRecord:
    """One prompt's held-out result as the comparison takes it."""
    return TrialRecord.from_result(r, variant=name)
