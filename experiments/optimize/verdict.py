"""The one look at held-out: the winner and the base prompt judged on the same rows."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from experiments.analysis import compare, decision
from experiments.analysis.clusters import task_clusters
from experiments.analysis.sequential import SEQUENCE, PairedSequence, row_order
from experiments.optimize.config import OptimizeConfig
from experiments.optimize.dev import DevHeldout
from experiments.optimize.errors import IncompleteEvaluation
from experiments.trials.record import TrialRecord
from experiments.trials.run import TrialResult, run_trial
from experiments.trials.spec import ResolvedTrial, TrialSpec, resolve_trial, select_rows
from promptlib.demos import bind
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
    seq: dict[str, Any] | None = None
    planned = len(judged)
    if cfg.heldout_design == "sequential":  # rows in batches until the verdict is clear
        cache = cache if cache is not None else MemoryCache()  # the arms' rows, once each
        seq, judged = _sequential(cfg, catalog, lm, best_variant, judged, rows, cache)
    best_res = _evaluate(cfg, catalog, lm, best_variant, judged, cache)
    base_res = _evaluate(cfg, catalog, lm, PromptVariant(), judged, cache)
    calls = (seq or {}).get("model_calls", 0) + best_res.model_calls + base_res.model_calls
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
    # the verdict's model calls against the fixed design's (both prompts on every judged row)
    payload["verdict_calls"] = {"model_calls": calls, "grid_calls": 2 * planned}
    if seq is not None:  # the sequence's verdict replaces the fixed test's p-value
        payload.update(
            p_value=None, test=seq["test"], sequential=seq, difference_ci_low=None,
            difference_ci_high=None, mde_80=None, mde_unreliable=None,  # the fixed test's
            heldout={**payload["heldout"], "ci_low": None, "ci_high": None, "ci_note": None,
                     "n": len(judged), **_sequential_units(payload["heldout"], seq)},
            base_heldout={**payload["base_heldout"], "ci_low": None, "ci_high": None,
                          "ci_note": None},  # no interval shown: no note on it
        )  # fmt: skip
    # the winner bound to the task (rerun with `run --variant-file`): in report.json, and
    # logged beside it as best_variant.json (`log_study_summary`)
    payload["best_variant_json"] = bind(best_variant, task).canonical_json()
    payload[decision.KEY] = decision.for_heldout(
        payload, best_variant.label, best_variant.id == PromptVariant().id
    ).to_dict()
    compiled = compile_prompt(best_variant, task, cfg.split)
    version = tracker.register_best(cfg.task, best_variant.label, compiled, "best")
    tracker.log_study_summary(parent, payload)
    payload["prompt_registry"] = f"prompts:/{version.name}@best" if version is not None else None
    return payload


class MemoryCache:
    """The sequential verdict's answers in memory when the run has no response cache: each
    row is sent once, in the loop, and the arms' final trials are read back from here."""

    def __init__(self) -> None:
        self._items: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        return self._items.get(key)

    def put(self, key: str, completion: Any) -> None:
        if completion.error is None and completion.text is not None:
            self._items[key] = completion


def _sequential(
    cfg: OptimizeConfig,
    catalog: Catalog,
    lm: Any,
    best_variant: PromptVariant,
    judged: tuple[str, ...],
    rows: dict[str, dict[str, str]],
    cache: Any,
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Best vs base on held-out, sequentially: the judged rows in a seeded order stratified by
    class (`row_order`), `cfg.heldout_batch` at a time on both prompts through the runner and
    cache, until the anytime-valid interval of best - base excludes 0 or the rows run out.

    Returns the verdict and the rows it used (those the arms' trials are then scored on).
    A failed row refuses the verdict, as the fixed design does (`IncompleteEvaluation`).
    """
    # rows given the same prompt (repeated texts) are one unit: together in the order, and
    # one bet of the sequence (`task_clusters`, as a sweep's sequential design)
    unordered = [_resolve(cfg, catalog, lm, v, judged) for v in (best_variant, PromptVariant())]
    cid = task_clusters(unordered)[cfg.task]
    order = row_order(
        [rows[i]["answer"] for i in judged], cfg.split_seed, [rows[i]["index"] for i in judged],
        [cid[rows[i]["index"]] for i in judged],
    )  # fmt: skip
    ordered = tuple(judged[k] for k in order)
    full = [_resolve(cfg, catalog, lm, v, ordered) for v in (best_variant, PromptVariant())]
    metric = full[0].metric
    clusters = [cid[r["index"]] for r in full[0].rows]
    seq = PairedSequence(metric, [r["answer"] for r in full[0].rows], alpha=0.05, clusters=clusters)
    hits: list[list[bool]] = [[], []]
    n, look, calls = 0, None, 0
    while n < len(ordered) and (look is None or look.decision == "continue"):
        hi = min(n + cfg.heldout_batch, len(ordered))
        for arm, rt in enumerate(full):
            res = run_trial(rt.window(n, hi), catalog, lm, cache=cache)
            calls += res.model_calls
            if not res.complete:
                raise IncompleteEvaluation(
                    f"held-out evaluation incomplete ({res.failure_reason()}); no verdict is "
                    "given on partial data. Rerun the same command: answered rows come from "
                    "the cache"
                )
            hits[arm] += [bool(p.correct) for p in res.predictions]
        look = seq.update(hits[0][n:hi], hits[1][n:hi])
        n = hi
    assert look is not None
    verdict = {
        "design": "sequential", "sequence": SEQUENCE, "metric": metric, "alpha": 0.05,
        "batch": cfg.heldout_batch, "looks": [lk.n_rows for lk in seq.looks], "n": look.n_rows,
        "planned": len(ordered), "decision": look.decision, "estimate": look.estimate,
        "ci_low": look.lower, "ci_high": look.upper, "model_calls": calls,
        "clustered_by": "prompt", "n_clusters": len(set(clusters[: look.n_rows])),
        "test": f"sequential ({SEQUENCE}), best - base, {metric}, anytime-valid 95% interval "
        f"[{look.lower:+.3f}, {look.upper:+.3f}] after {look.n_rows} of {len(ordered)} rows "
        f"({len(set(clusters[: look.n_rows]))} clusters of rows given the same prompt, bet on "
        f"as units; {len(seq.looks)} looks): {look.decision}",
    }  # fmt: skip
    return verdict, ordered[: look.n_rows]


def _resolve(
    cfg: OptimizeConfig, catalog: Catalog, lm: Any, variant: PromptVariant, rows: tuple[str, ...]
) -> ResolvedTrial:
    """The held-out trial of `variant` on `rows`, in their order (no model call)."""
    spec = TrialSpec(
        task=cfg.task, variant=variant, model=cfg.model, split=cfg.split,
        scoring=cfg.scoring, rows=rows,
    )  # fmt: skip
    return resolve_trial(spec, catalog, lm)


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
    ci = SimpleNamespace(low=row.ci_a_low, high=row.ci_a_high, note=row.ci_a_note)
    base_ci = SimpleNamespace(low=row.ci_b_low, high=row.ci_b_high, note=row.ci_b_note)
    how = "exact" if row.exact else f"{row.n_resamples} resamples"
    of = units(row.n_clusters, row.n, row.clustered_by)
    return {
        "heldout": {
            "score": best.score, "ci_low": ci.low, "ci_high": ci.high, "n": row.n,
            "ci_note": ci.note, "n_clusters": row.n_clusters,
            # the test's units, as the sweep table's `clus`: rows either prompt gave the same
            # rendered prompt (its hash) are one cluster, swapped and resampled whole
            "clustered_by": row.clustered_by, "cluster_note": row.cluster_note,
        },
        "base_heldout": {
            "score": base.score, "ci_low": base_ci.low, "ci_high": base_ci.high,
            "ci_note": base_ci.note,
        },
        "p_value": row.p_value,
        "statistic": row.statistic,
        # best - base: its interval and the MDE80 of the test, as a sweep's table shows them
        "difference_ci_low": row.ci_low, "difference_ci_high": row.ci_high,
        "mde_80": row.mde_80, "mde_unreliable": row.mde_unreliable,
        "metric": row.metric,
        "test": f"{row.test}, two-sided, {row.metric}, {how}, "
        f"{row.n_discordant} discordant of {of}",
        "n_dev": n_dev,
        "heldout_indices": list(split.heldout),
        # the rows behind the scores, CI and p-value (held-out, minus --heldout-limit's
        # sample and any row either prompt shows as a demonstration)
        "judged_indices": [p.index for p in best.predictions],
    }  # fmt: skip


def units(n_clusters: int | None, n: int | None, clustered_by: str | None) -> str:
    """The paired test's units in words, as the sweep table's `clus` column counts them."""
    if n_clusters is None:
        return f"{n} rows"
    if clustered_by == "prompt":
        return f"{n_clusters} clusters of rows given the same prompt ({n} rows)"
    if clustered_by == "rows":
        return f"{n} rows, each its own unit"
    return f"{n_clusters} clusters by {clustered_by} ({n} rows)"


def _sequential_units(heldout: dict[str, Any], seq: dict[str, Any]) -> dict[str, Any]:
    """The sequential verdict's units: clusters of rows given the same prompt, as the
    sequence bet on them (`_sequential`), counted on the rows it used."""
    return {"clustered_by": seq["clustered_by"], "n_clusters": seq["n_clusters"],
            "prompt_clusters": heldout["n_clusters"], "cluster_note": None}  # fmt: skip


def _arm(name: str, r: TrialResult) -> TrialRecord:
    """One prompt's held-out result as the comparison takes it."""
    return TrialRecord.from_result(r, variant=name)
