"""The whole prompt-sensitivity report of a sweep (`sensitivity_report`), its pooled effects,
its variance-shares artifact, and its MLflow metrics (`sensitivity_metrics`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from experiments.analysis.contrast import Contrast, LevelOrder
from experiments.analysis.sensitivity.across import meta_analysis, rank_stability
from experiments.analysis.sensitivity.groups import (
    CI_MEASURES,
    MEASURES,
    N_RESAMPLES,
    FloatArray,
    Group,
    _group,
    _group_seed,
    with_axes,
)
from experiments.analysis.sensitivity.measures import (
    _resample_counts,
    _variant_scores,
    task_measures,
)
from experiments.analysis.sensitivity.result import SensitivityReport
from experiments.analysis.sensitivity.variance import variance_shares
from experiments.names import metric_name
from experiments.trials.record import TrialRecord


# ---- the report ----------------------------------------------------------------------------
def sensitivity_report(
    records: Iterable[TrialRecord],
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    cluster_by: str = "prompt",
    columns: dict[str, dict[str, str]] | None = None,
    order: Sequence[str] = (),
    pairs: Sequence[tuple[str, str]] = (),
) -> SensitivityReport:
    """The sweep's sensitivity report (`to_dict`: its JSON section) from its trials'
    `TrialRecord`s.
    `cluster_by` and `columns` (task -> row index -> value of the column clustered by) are
    the sweep's, so its units are the comparisons' units. `order` (the sweep's variants, as
    listed; default: as the records come) and `pairs` (the comparisons it declares) orient
    each pooled effect as the comparisons table orients its rows (`analysis.contrast`)."""
    # a canonical order: the input order changes no number, except the order of a (task,
    # model)'s variants, which the range test takes as given (the sweep's plan order, as the
    # comparisons do): `_group` keeps it
    given = with_axes(records)
    listed = list(dict.fromkeys(order or [t.variant for t in given]))
    levels = LevelOrder.of(listed, pairs)
    rank = {(t.task, t.model, t.variant): i for i, t in enumerate(given)}
    trials = sorted(given, key=lambda t: (t.task, t.model, t.variant))
    notes: list[str] = []
    excluded = _excluded(trials, notes)
    by: dict[tuple[str, str], list[TrialRecord]] = {}
    for t in trials:
        if t.complete:
            by.setdefault((t.task, t.model), []).append(t)
    groups: list[Group] = []
    per_task: list[dict[str, Any]] = []
    boots: list[FloatArray] = []
    observed: list[FloatArray] = []
    for (task, model), mine in by.items():
        if len(mine) < 2:
            notes.append(f"{task} ({model}): fewer than 2 complete variants, no sensitivity")
            continue
        g = _group(
            sorted(mine, key=lambda t: rank[(t.task, t.model, t.variant)]),
            cluster_by,
            (columns or {}).get(task),
        )
        notes.extend(g.notes)
        if not g.indices:
            notes.append(f"{task} ({model}): the variants share no rows")
            continue
        gseed = _group_seed(seed, "measures", task, model, *g.variants)
        # the range test takes the user's seed, as the sweep's comparisons do
        measures, _, boot = task_measures(g, n_resamples=n_resamples, seed=gseed, test_seed=seed)
        groups.append(g)
        per_task.append(measures)
        boots.append(boot)
        observed.append(np.asarray(list(measures["scores"].values()), dtype=np.float64))
    models = list(dict.fromkeys(g.model for g in groups))
    shares = {
        m: variance_shares([g for g in groups if g.model == m], n_resamples=n_resamples, seed=seed)
        for m in models
    }
    meta = _pooled(models, groups, boots, observed, notes, levels)
    for m, v in shares.items():
        if v.get("note"):
            notes.append(f"variance shares ({m}): {v['note']}")
    report = SensitivityReport(
        per_task=per_task,
        variance_shares=shares,
        meta_analysis=meta,
        rank_stability=rank_stability(groups),
        excluded=excluded,
        notes=notes,
        n_resamples=n_resamples,
        # the study's order of variants: the figures list (and number) them in it
        variants=listed,
    )
    # refuse here, before anything is logged, if two (task, model)s would share a metric name
    sensitivity_metrics(report)
    return report


def _excluded(trials: Sequence[TrialRecord], notes: list[str]) -> list[dict[str, str]]:
    """The incomplete trials, left out of every measure (a note in `notes` names them)."""
    excluded = [
        {"task": t.task, "model": t.model, "variant": t.variant, "status": str(t.status)}
        for t in trials if not t.complete
    ]  # fmt: skip
    if excluded:
        notes.append(
            f"{len(excluded)} incomplete trial(s) excluded (not scored as wrong): "
            + "; ".join(
                f"{e['task']} {e['variant']} ({e['model']}): {e['status']}" for e in excluded
            )
        )
    return excluded


def _pooled(
    models: Sequence[str],
    groups: Sequence[Group],
    boots: Sequence[FloatArray],
    observed: Sequence[FloatArray],
    notes: list[str],
    levels: LevelOrder,
) -> list[dict[str, Any]]:
    """Each model's pooled effects (`meta_analysis` over its groups, oriented by `levels`);
    their notes, and one for an axis whose tasks use different metrics, go to `notes`."""
    meta = []
    for m in models:
        idx = [i for i, g in enumerate(groups) if g.model == m]
        for row in meta_analysis(
            [groups[i] for i in idx], [boots[i] for i in idx], [observed[i] for i in idx],
            order=levels,
        ):  # fmt: skip
            meta.append({"model": m, **row})
            label = Contrast(row["a"], row["b"]).label
            notes.extend(f"{m} {label}: {n}" for n in row["notes"])
    metrics_pooled: dict[tuple[str, str], set[str]] = {(r["model"], r["axis"]): set() for r in meta}
    for r in meta:
        metrics_pooled[(r["model"], r["axis"])].add(r["metric"])
    for (m, axis), ms in metrics_pooled.items():
        if len(ms) > 1:
            notes.append(
                f"{m} {axis}: tasks use different official metrics ({', '.join(sorted(ms))}); "
                "each metric's tasks are pooled separately"
            )
    return meta


def pooled_effects(
    records: Iterable[TrialRecord], *, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> list[dict[str, Any]]:
    """Only the meta-analysis of `sensitivity_report` (what a simulation of its coverage needs),
    each effect oriented by the order the records come in, as there."""
    given = with_axes(records)
    levels = LevelOrder.of(t.variant for t in given)
    by: dict[tuple[str, str], list[TrialRecord]] = {}
    for t in sorted(given, key=lambda t: (t.task, t.model, t.variant)):
        if t.complete:
            by.setdefault((t.model, t.task), []).append(t)
    out = []
    for model in dict.fromkeys(m for m, _ in by):
        groups = [_group(ts) for (m, _), ts in by.items() if m == model and len(ts) >= 2]
        boots, observed = [], []
        for g in groups:
            gseed = _group_seed(seed, "measures", g.task, g.model, *g.variants)
            rng = np.random.default_rng(gseed)
            counts, _ = _resample_counts(g, n_resamples, rng)
            boots.append(_variant_scores(g, counts))
            observed.append(_variant_scores(g, np.ones((1, len(g.indices))))[0])
        out += [{"model": model, **r} for r in meta_analysis(groups, boots, observed, order=levels)]
    return out


def variance_shares_artifact(report: SensitivityReport | Mapping[str, Any]) -> dict[str, Any]:
    """`variance_shares.json`: per model, {factor: share} (summing to 1) and a CI per factor,
    the variance components behind them (and the untruncated ones), rows and clusters per
    task; every share null with a note when there is no variance to share out."""
    keys = ("components", "components_raw", "truncated", "coverage", "n_rows", "n_clusters")
    shares = _section(report)["variance_shares"]
    return {
        m: {"shares": v["shares"], "ci": v["ci"], "method": v["method"],
            "unreliable": v.get("unreliable", False), "note": v.get("note"),
            **{k: v.get(k) for k in keys}}
        for m, v in shares.items()
    }  # fmt: skip


def sensitivity_metrics(report: SensitivityReport | Mapping[str, Any]) -> dict[str, float]:
    """The parent run's metrics: every measure, the CI bounds of those with a CI and the
    spread's p-value, per (task, model). Two different (task, model, measure) mapping to one
    name (``a.b`` + ``c`` vs ``a`` + ``b.c``, or a character MLflow refuses replaced by ``_``)
    is refused: one would silently overwrite the other."""
    out: dict[str, float] = {}
    owner: dict[str, tuple[str, str, str]] = {}

    def put(row: dict[str, Any], measure: str, value: float) -> None:
        name = metric_name(row["task"], row["model"], measure)
        key = (row["task"], row["model"], measure)
        if name in owner and owner[name] != key:
            raise ValueError(
                f"MLflow metric name {name!r} would hold both task {owner[name][0]!r} / model "
                f"{owner[name][1]!r} / {owner[name][2]} and task {key[0]!r} / model {key[1]!r} / "
                f"{key[2]}; rename a task or model alias so the names differ"
            )
        owner[name] = key
        out[name] = value

    for row in _section(report)["per_task"]:
        for m in MEASURES:
            put(row, m, row[m])
        for m in CI_MEASURES:
            lo, hi = row[f"{m}_ci"]
            put(row, f"{m}_ci_low", lo)
            put(row, f"{m}_ci_high", hi)
        if row["spread_p_value"] is not None:
            put(row, "spread_p_value", row["spread_p_value"])
    return out


def _section(report: SensitivityReport | Mapping[str, Any]) -> Mapping[str, Any]:
    """The report as its JSON section: a record's `to_dict`, or the section read back."""
    return report.to_dict() if isinstance(report, SensitivityReport) else report
