"""Comparisons between prompt variants: one module for sweeps and optimisation.

Every test runs on the metric the table reports: the trial's official metric (F1 for the
ssla tasks, LegalBench's own definitions for sara_numeric and the extraction tasks, balanced
accuracy otherwise), recomputed from the raw generations, so a test's statistic *is* the
reported score_a - score_b (this is checked, not assumed). Rows are paired by row index.
Which arm is A is defined once, in `experiments.analysis.contrast` (a declared pair as
written; all_pairs with the variant listed first as A); the pooled effects and every
table and figure read the same `a` and `b`.

- A fixed pair (A vs B, or every pair): the paired permutation test.
- best_vs_worst (k draws): the *range* permutation test. Choosing the best and worst draw
  after seeing the scores and testing that pair as if it were fixed in advance rejects far
  above the nominal rate (25-31% at alpha = 0.05 with 5 interchangeable draws); the range
  test permutes, within each row, which draw gave which answer, and tests max - min. The
  paper's post-selection pair test is reported beside it, labelled as anti-conservative.
- An arm with failed rows is never tested: its row says why and carries no p-value.
- Rows are not always independent: LegalBench repeats texts under several indices, and
  identical prompts get identical answers. Every test swaps, permutes and resamples whole
  clusters (`analysis.clusters`: rows some variant gave the same prompt, by default; or a
  data column, or none), the official metric is still computed over all rows, and each
  comparison says how many rows and clusters it had.
- Across tasks: one declared test per comparison (t, as in the paper; Wilcoxon; or a
  sign-flip permutation test); for best_vs_worst, Fisher's combination of the per-task range
  tests. Tasks without a score are listed, not dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from experiments.analysis import clusters, power, stats
from experiments.analysis.align import same_rows, stat_inputs
from experiments.analysis.clusters import Clustering
from experiments.analysis.contrast import Contrast, all_pairs
from experiments.analysis.intervals import metric_interval
from experiments.analysis.records import AcrossTaskTest, Adjustment, Comparison
from experiments.analysis.stats import AcrossTest as AcrossTest  # re-exported: home is stats
from experiments.metrics import base_metric
from experiments.trials.record import TrialRecord
from promptlib.errors import WorkbenchError

_TOLERANCE = 1e-9


ClusterBy = str  # "prompt" (default), "rows", or "column:<name>"


def clustering(
    arms: Sequence[TrialRecord],
    indices: Sequence[str],
    cluster_by: ClusterBy = "prompt",
    column: dict[str, str] | None = None,
) -> Clustering:
    """The clusters of `indices` (aligned rows) the tests swap and resample as units.

    "prompt": rows any arm gave the same prompt (its recorded prompt hash); rows without a
    hash stay singletons. "rows": every row its own cluster. "column:<name>": rows with the
    same value of that data column (`column` maps row index to the value).
    """
    per_arm = []
    for arm in arms:
        hashes = list(arm.prompt_hashes)  # one per row, or none (`TrialRecord` checks)
        by_index = dict(zip(map(str, arm.indices), hashes, strict=False))
        per_arm.append([by_index.get(i) for i in indices])
    try:
        return clusters.for_rows(per_arm, indices, cluster_by, column)
    except ValueError as e:
        raise WorkbenchError(str(e)) from None


def _cluster_fields(c: Clustering) -> dict[str, Any]:
    return {"n_clusters": c.n_clusters, "clustered_by": c.how, "cluster_note": c.note}


def _check(where: str, statistic: float, expected: float, what: str) -> None:
    if abs(statistic - expected) > _TOLERANCE:
        raise AssertionError(
            f"{where}: the tested statistic {statistic:+.6f} is not the reported {what} "
            f"{expected:+.6f}; refusing to report a test of another quantity"
        )


def untested(where: str, a: str, b: str, arms: Sequence[TrialRecord], test: str) -> Comparison:
    """A comparison not tested (an arm is incomplete): its status says why, no p-value."""
    return Comparison(
        a=a,
        b=b,
        status="; ".join(x.why_not() for x in arms if not x.complete),
        metric=arms[0].metric,
        test=test,
    )


def interval(
    y: Any, pa: Any, pb: Any | None, metric: str, c: Clustering, seed: int = 0
) -> stats.Interval:
    """The 95% interval every comparison reports: of one arm's score, or (with `pb`) of the
    paired difference (`experiments.analysis.intervals`: Bayesian per-class posteriors with clusters
    counted by their effective size, or the cluster bootstrap for F1; flagged from the
    measured coverage table)."""

    return metric_interval(y, pa, pb, metric=metric, clusters=c.ids, seed=seed)


def pair(
    a: TrialRecord,
    b: TrialRecord,
    *,
    n_resamples: int,
    seed: int = 0,
    where: str = "",
    cluster_by: ClusterBy = "prompt",
    column: dict[str, str] | None = None,
    intervals: bool = True,
    peers: Sequence[TrialRecord] = (),
    memo: dict[tuple[str, ...], Clustering] | None = None,
) -> Comparison:
    """Paired permutation test of A vs B on their official metric, swapping clusters, with
    the interval of the difference and of each arm's score (unless `intervals` is False,
    for simulations of the test alone).

    Clusters come from A, B and any `peers` (the other variants of the same task and model):
    a sweep passes all of them, so an arm gets the same clusters, hence the same interval,
    in every pair it is part of. With `memo` (one dict per set of peers) they are computed
    once per set of aligned rows, not once per pair: rows linked under any arm are linked
    whatever the arms' order, so every pair of the same peers gets the same clusters, and
    k variants' all_pairs cluster once, not k(k - 1)/2 times over all k arms (k^3)."""
    name = "paired permutation test"
    if not (a.complete and b.complete):
        row = untested(where, a.variant, b.variant, (a, b), name)
        # a score is shown only for an arm that is complete
        return replace(
            row,
            score_a=a.score if a.complete else None,
            score_b=b.score if b.complete else None,
        )
    if a.metric != b.metric:
        raise WorkbenchError(
            f"{where}: {a.variant} and {b.variant} are scored with different metrics"
        )
    answers, (ga, gb), indices = same_rows((a, b), where)
    others = [p for p in peers if p.variant not in (a.variant, b.variant)]
    if memo is None:
        c = clustering((a, b, *others), indices, cluster_by, column)
    else:
        key = tuple(indices)
        if key not in memo:
            memo[key] = clustering((a, b, *others), indices, cluster_by, column)
        c = memo[key]
    # the statistics key their methods on the official metric a name computes (a
    # rule-conclusion balanced accuracy is stratified by class like balanced accuracy)
    sm = base_metric(a.metric)
    y, (pa, pb) = stat_inputs(sm, answers, [ga, gb])
    res = stats.paired_permutation_test(
        y, pa, pb, metric=sm, n_resamples=n_resamples, seed=seed, clusters=c.ids
    )
    diff = Contrast(a.variant, b.variant).diff(a.score, b.score)
    assert diff is not None
    _check(where, res.statistic, diff, "score_a - score_b")
    row = Comparison(**_tested_row(a, b, res), **_cluster_fields(c))
    if not intervals:
        return row
    ci = interval(y, pa, pb, sm, c, seed)
    ci_a, ci_b = interval(y, pa, None, sm, c, seed), interval(y, pb, None, sm, c, seed)

    # simulated for the test as run (two-sided, its resamples, whole clusters swapped)
    mde = power.minimum_detectable_effect(
        y, pa, pb, metric=sm, clusters=c.ids, n_resamples=n_resamples, seed=seed,
        by_class=False,
    )  # fmt: skip
    return replace(
        row,
        **_ci_fields("ci", ci, _disagreement(res.p_value, ci.low, ci.high)),
        ci_method=ci.method,
        **_ci_fields("ci_a", ci_a),
        **_ci_fields("ci_b", ci_b),
        mde_80=mde.value,
        mde_note=mde.note,
        mde_method=mde.method,
        mde_unreliable=mde.unreliable,
    )


def _tested_row(a: TrialRecord, b: TrialRecord, res: stats.PermutationResult) -> dict[str, Any]:
    """The fields of a tested pair's row that the test alone gives (no interval, no MDE)."""
    return {
        "a": a.variant,
        "b": b.variant,
        "status": "tested",
        "metric": a.metric,
        "score_a": a.score,
        "score_b": b.score,
        "statistic": res.statistic,
        "p_value": res.p_value,
        "test": res.test,
        "exact": res.exact,
        "n_resamples": res.n_resamples,
        "n": res.n,
        "n_discordant": res.n_discordant,
    }


def _ci_fields(key: str, ci: stats.Interval, *more: str | None) -> dict[str, Any]:
    """`key`_low, `key`_high and `key`_note of an interval (`more`: further notes)."""
    note = "; ".join(x for x in (_ci_note(ci), *more) if x) or None
    return {f"{key}_low": ci.low, f"{key}_high": ci.high, f"{key}_note": note}


def _ci_note(ci: Any) -> str | None:
    notes = []
    if getattr(ci, "degenerate", False):
        notes.append("degenerate (zero width)")
    if getattr(ci, "unreliable", False):
        note = str(getattr(ci, "note", "") or "coverage below 93%")
        notes.append(note if note.startswith("unreliable") else "unreliable: " + note)
    return "; ".join(notes) or None


def _disagreement(p_value: float | None, low: float | None, high: float | None) -> str | None:
    """Says when the interval and the test point different ways at the 5% level: they are
    different procedures (an exact permutation test of the swap null, a posterior-shaped
    interval of the difference), so near the boundary one can reject and the other not."""
    if p_value is None or low is None or high is None:
        return None
    rejects, excludes = p_value < 0.05, (low > 0 or high < 0)
    if rejects == excludes:
        return None
    if rejects:
        return (
            "the test rejects (p < 0.05) but the 95% interval contains 0: the interval is the "
            "more conservative of the two here; the p-value is the test's verdict"
        )
    return "the 95% interval excludes 0 but the test does not reject (p >= 0.05): no verdict"


def best_vs_worst(
    arms: Sequence[TrialRecord],
    *,
    n_resamples: int,
    seed: int = 0,
    where: str = "",
    cluster_by: ClusterBy = "prompt",
    column: dict[str, str] | None = None,
    intervals: bool = True,
) -> Comparison:
    """Range permutation test over k draws (clusters permuted as units); the post-selection
    pair test beside it, and each draw's own interval (unless `intervals` is False)."""
    name = "range permutation test"
    if not all(x.complete for x in arms):
        return untested(where, "best", "worst", arms, name)
    if len({x.metric for x in arms}) != 1:
        raise WorkbenchError(f"{where}: the draws are scored with different metrics")
    metric = arms[0].metric
    sm = base_metric(metric)  # what the statistics key their methods on
    answers, gens, indices = same_rows(arms, where)
    c = clustering(arms, indices, cluster_by, column)
    y, preds = stat_inputs(sm, answers, gens)
    res = range_test(y, preds, sm, n_resamples, seed, c)
    best, worst = arms[res.best].variant, arms[res.worst].variant
    sb, sw = arms[res.best].score, arms[res.worst].score
    assert sb is not None and sw is not None
    _check(where, res.statistic, sb - sw, "best - worst")
    _check(where, max(res.scores) - min(res.scores), sb - sw, "range of the scores")
    post = stats.post_selection_pair_test(
        y, preds, metric=sm, n_resamples=n_resamples, seed=seed, clusters=c.ids
    )
    draw_ci: dict[str, list[float | None]] = {}
    draw_ci_note: dict[str, str | None] = {}
    for arm, pred in zip(arms, preds, strict=True) if intervals else ():
        ci = interval(y, pred, None, sm, c, seed)
        draw_ci[arm.variant] = [ci.low, ci.high]
        draw_ci_note[arm.variant] = _ci_note(ci)
    return Comparison(
        a=best,
        b=worst,
        status="tested",
        metric=metric,
        score_a=sb,
        score_b=sw,
        statistic=res.statistic,
        p_value=res.p_value,
        test=res.test,
        exact=False,
        n_resamples=res.n_resamples,
        n=res.n,
        n_discordant=None,
        k=len(arms),
        ci_low=None,  # an interval for a pair chosen after the fact would be biased
        ci_high=None,
        ci_note="no interval: best and worst are chosen after seeing the scores",
        draw_ci=draw_ci,
        draw_ci_note=draw_ci_note,
        # every draw's score: draws tied with the best (or worst) are named as such
        draw_scores={arm.variant: arm.score for arm in arms},
        mde_80=None,
        p_post_selection=post.p_value,
        post_selection_test="paired permutation test of the observed best vs worst draw: "
        "post-selection, anti-conservative (as in the paper)",
        **_cluster_fields(c),
    )


def range_test(
    y: Any, preds: Sequence[Any], metric: str, n_resamples: int, seed: int, c: Clustering
) -> stats.RangeResult:
    """The one range test of a (task, model)'s draws: the comparisons and the sensitivity
    report both call it, so one report never carries two p-values for it."""
    return stats.range_permutation_test(
        y, preds, metric=metric, n_resamples=n_resamples, seed=seed, clusters=c.ids
    )


def correct(rows: Sequence[Comparison], method: str) -> list[Comparison]:
    """`rows` with Holm and BH adjustments over the tested ones; untested rows get None (every
    row has every key: comparisons.csv takes its columns from the rows in order)."""
    tested = [i for i, r in enumerate(rows) if r.p_value is not None]
    ps = [float(rows[i].p_value or 0.0) for i in tested]
    holm = stats.holm(ps) if ps else []
    bh = stats.benjamini_hochberg(ps) if ps else []
    out = [replace(r, adjusted=Adjustment()) for r in rows]
    name = "Holm" if method == "holm" else "Benjamini-Hochberg"
    for i, ph, pb in zip(tested, holm, bh, strict=True):
        adjusted = Adjustment(ph, pb, ph if method == "holm" else pb, name, len(tested))
        out[i] = replace(rows[i], adjusted=adjusted)
    return out


def pairs_of(kind: str | Sequence[tuple[str, str]], names: Sequence[str]) -> list[tuple[str, str]]:
    """The (A, B) pairs to test: declared pairs as written; all_pairs with the variant listed
    first as A (`experiments.analysis.contrast`, the one rule of which arm is A)."""
    if kind == "all_pairs":
        return [(c.a, c.b) for c in all_pairs(names)]
    if isinstance(kind, str):
        raise ValueError(f"no fixed pairs for {kind!r}")
    return list(kind)


def across_tasks(
    table: Sequence[Comparison],
    *,
    kind: str,
    test: AcrossTest,
    all_tasks: Sequence[str],
) -> list[AcrossTaskTest]:
    """One declared across-task test per (model, comparison); missing tasks are listed."""
    out: list[AcrossTaskTest] = []
    models = sorted({str(r.model) for r in table})
    if kind == "best_vs_worst":
        for model in models:
            rows = [r for r in table if r.model == model]
            tested = [r for r in rows if r.p_value is not None]
            missing = sorted(set(all_tasks) - {str(r.task) for r in tested})
            res = _fisher([float(r.p_value) for r in tested if r.p_value is not None])
            names = [str(r.task) for r in tested]
            out.append(AcrossTaskTest(model, "best", "worst", *res, names, missing))
        return out
    keys = sorted({(str(r.model), r.a, r.b) for r in table})
    for model, a, b in keys:
        rows = [r for r in table if (r.model, r.a, r.b) == (model, a, b)]
        tested = [r for r in rows if r.status == "tested"]  # complete arms only
        missing = sorted(set(all_tasks) - {str(r.task) for r in tested})
        result = stats.across_tasks(test, [r.score_a for r in tested], [r.score_b for r in tested])
        metrics = sorted({str(r.metric) for r in tested})
        if len(metrics) > 1:
            result = stats.AcrossTasks(
                result.test, None, None, len(tested), None,
                f"the tasks are scored with different official metrics ({', '.join(metrics)}):"
                " a mean of their differences has no single meaning; declare a sweep per metric",
            )  # fmt: skip
        names = [str(r.task) for r in tested]
        out.append(
            AcrossTaskTest(
                model, a, b, result.test, result.statistic, result.p_value, result.n_tasks,
                result.mean_difference, result.note, names, missing,
            )
        )  # fmt: skip
    return out


def _fisher(
    p_values: list[float],
) -> tuple[str, float | None, float | None, int, float | None, str | None]:
    """Fisher's combination: test, statistic, p-value, tasks, mean difference (none), note."""
    from scipy.stats import combine_pvalues

    test = "Fisher's combination of per-task range permutation tests"
    if len(p_values) < 2:
        return test, None, None, len(p_values), None, "fewer than 2 tested tasks"
    r = combine_pvalues(p_values, method="fisher")
    return test, float(r.statistic), float(r.pvalue), len(p_values), None, None
