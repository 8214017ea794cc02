"""The calibrated cell of one (task, model): each variant's PPI mean per criterion, each
planned pair's PPI paired difference per criterion, Holm-corrected over pairs x criteria
(a report: `corrected_cells`, over all its cells together; `cell` alone: within the cell),
with the hand-only and the judge-only intervals beside it and a decision line.

Why PPI: a judge biased toward one variant's style shifts the very difference being
tested, so judge scores alone give intervals that miss the truth; hand grades on a random
subset rectify them (`experiments.analysis.stats.ppi`), and the judge's scores on every row
buy back the precision (the effective sample size says how much).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from experiments.analysis import clusters as cl
from experiments.analysis.stats.multiplicity import holm
from experiments.calibrated import stats
from experiments.calibrated.frames import ArmFrame
from experiments.calibrated.records import (
    JUDGE_LABEL,
    Agreement,
    CalibratedCell,
    CalibratedComparison,
    CalibratedMean,
)

#: agreement on A and B differing at this two-sided level is flagged (Fisher's exact test
#: when every row is its own prompt; a cluster-robust z-test when rows share prompts)
AGREEMENT_ALPHA = 0.05
CORRECTION = "Holm"


def _clusters(frames: Sequence[ArmFrame]) -> cl.ClusterIds:
    """Rows linked when any of the frames gave them one prompt (`analysis.clusters`)."""
    per = [f.prompt_hashes for f in frames if any(f.prompt_hashes)]
    return cl.by_prompts(per).ids if per else cl.singletons(frames[0].n_rows).ids


def agreement(frame: ArmFrame, level: float = 0.95) -> Agreement:
    """The judge against the graders on the rows both scored (hand ties left out)."""
    judge = np.array([np.nan if s is None else s for s in frame.judge_raw], dtype=float)
    both = ~np.isnan(judge) & np.isin(frame.hand, (0.0, 1.0))
    n = int(both.sum())
    if n == 0:
        return Agreement(0, None, None, None, None, "no row graded by hand and the judge")
    j, h = judge[both], frame.hand[both]
    raw = float(np.mean(j == h))
    k = stats.kappa(j, h, level)
    return Agreement(n, raw, k.kappa, k.low, k.high, k.note)


def _judged(frame: ArmFrame) -> bool:
    """Whether the judge scored any row on the criterion (a run of other criteria did not):
    with none, there is no judge number, not one of 0.5s."""
    return any(s is not None for s in frame.judge_raw)


NO_JUDGE = stats.Plain(None, None, None, None, None)


def mean_of(frame: ArmFrame, level: float = 0.95) -> CalibratedMean:
    """The variant's PPI mean on the criterion, its judge-only mean, the judge's agreement."""
    ids = _clusters([frame])
    est = stats.mean(frame.judge, frame.hand, ids, level)
    judge = stats.judge_mean(frame.judge, ids, level) if _judged(frame) else NO_JUDGE
    return CalibratedMean(
        task=frame.arm.task,
        model=frame.arm.model,
        variant=frame.arm.variant,
        criterion=frame.criterion,
        trial_id=frame.arm.trial_id,
        level=level,
        n_rows=frame.n_rows,
        n_hand=frame.n_hand,
        estimate=est.estimate if est.valid else None,
        low=est.low if est.valid else None,
        high=est.high if est.valid else None,
        se=est.se if est.valid else None,
        lam=est.lam[0],
        effective_n=est.effective_n if est.valid else None,
        method=est.method,
        valid=est.valid,
        reason=est.reason,
        hand_needed=est.hand_needed,
        judge_mean=judge.estimate,
        judge_low=judge.low,
        judge_high=judge.high,
        n_unscored=frame.n_unscored,
        stale_judge=frame.stale_judge,
        stale_hand=frame.stale_hand,
        random_subset=frame.random_subset,
        subset_note=frame.subset_note,
        agreement=agreement(frame, level),
        n_unanswered=frame.n_unanswered,
    )


def _agreement_gap(a: ArmFrame, b: ArmFrame, ids: cl.ClusterIds) -> tuple[bool, str | None]:
    """Whether the judge agrees with the graders differently on A and B, and by how much.

    Rows (aligned) that share a prompt (`ids`) are not independent: with clusters the test
    is a cluster-robust z-test of the two agreement rates (a cluster one unit on both arms);
    when every row is its own cluster, Fisher's exact test of the agree/disagree counts."""
    agree = []
    for f in (a, b):
        judge = np.array([np.nan if s is None else s for s in f.judge_raw], dtype=float)
        both = ~np.isnan(judge) & np.isin(f.hand, (0.0, 1.0))
        agree.append(np.where(both, (judge == f.hand).astype(float), np.nan))
    counts = [(int(np.nansum(x)), int(np.sum(~np.isnan(x)) - np.nansum(x))) for x in agree]
    if min(sum(c) for c in counts) == 0:
        return False, None
    clustered = len(np.unique(ids)) < len(ids)
    if clustered:
        p = stats.clustered_rate_difference_p(agree[0], agree[1], ids)
        test = "cluster-robust z-test, rows of one prompt as one unit"
    else:
        p = stats.fisher_p(counts[0], counts[1])
        test = "Fisher's exact test, rows independent"
    ra, rb = (c[0] / sum(c) for c in counts)
    note = f"judge agrees with the graders on {ra:.0%} of A's graded rows, {rb:.0%} of B's"
    differs = p < AGREEMENT_ALPHA
    if differs:
        note += (
            f" ({test}: p = {p:.3g}): a judge biased between the variants; the calibrated "
            "interval corrects for it, the judge-only one does not"
        )
    return differs, note


def compare_pair(a: ArmFrame, b: ArmFrame, level: float = 0.95) -> CalibratedComparison:
    """A − B on `a.criterion`, rows paired by index (those both arms answered)."""
    return _pair(a, b, level)[0]


def _pair(a: ArmFrame, b: ArmFrame, level: float) -> tuple[CalibratedComparison, stats.Estimate]:
    common = [i for i in a.indices if i in set(b.indices)]
    a, b = a.take(common), b.take(common)
    ids = _clusters([a, b])
    d = stats.paired_difference(a.judge, a.hand, b.judge, b.hand, ids, level)
    hand = stats.hand_difference(a.hand, b.hand, ids, level)
    judged = _judged(a) and _judged(b)
    judge = stats.judge_difference(a.judge, b.judge, ids, level) if judged else NO_JUDGE
    width_ratio = None
    if d.valid and hand.low is not None and hand.high is not None and hand.high > hand.low:
        width_ratio = float((d.high - d.low) / (hand.high - hand.low))
    differs, agree_note = _agreement_gap(a, b, ids)
    notes = [n for n in (a.subset_note, b.subset_note) if n]
    record = CalibratedComparison(
        task=a.arm.task,
        model=a.arm.model,
        criterion=a.criterion,
        a=a.arm.variant,
        b=b.arm.variant,
        level=level,
        test=d.method,
        n_rows=len(common),
        n_hand_a=a.n_hand,
        n_hand_b=b.n_hand,
        n_hand_both=int(np.sum(~np.isnan(a.hand) & ~np.isnan(b.hand))),
        estimate=d.estimate if d.valid else None,
        low=d.low if d.valid else None,
        high=d.high if d.valid else None,
        p_value=d.p_value if d.valid else None,
        p_corrected=None,
        correction=None,
        family_size=None,
        se=d.se if d.valid else None,
        lam_a=d.lam[0],
        lam_b=d.lam[-1],
        effective_n=d.effective_n if d.valid else None,
        valid=d.valid,
        reason=d.reason,
        hand_needed=d.hand_needed,
        hand_estimate=hand.estimate,
        hand_low=hand.low,
        hand_high=hand.high,
        hand_method=hand.method,
        width_ratio=width_ratio,
        judge_estimate=judge.estimate,
        judge_low=judge.low,
        judge_high=judge.high,
        judge_p=judge.p_value,
        agreement_differs=differs,
        agreement_note=agree_note,
        random_subset=a.random_subset and b.random_subset,
        subset_note="; ".join(dict.fromkeys(notes)) or None,
    )
    return record, d


def corrected(
    rows: Sequence[CalibratedComparison], estimates: Sequence[stats.Estimate] | None = None
) -> list[CalibratedComparison]:
    """Holm over the valid comparisons (the cell's pairs x criteria), each with its
    decision line. With `estimates` (row by row), an undecided row's `hand_needed` is how
    many more grades would decide it after the correction: its interval at Holm's level for
    its place in the order (alpha / (m − rank + 1)) clear of 0 at the current estimate."""
    tested = [k for k, r in enumerate(rows) if r.p_value is not None]
    adjusted = holm([rows[k].p_value or 0.0 for k in tested]) if tested else []
    out = list(rows)
    ranked = sorted(tested, key=lambda k: rows[k].p_value or 0.0)
    divisor = {k: len(tested) - r for r, k in enumerate(ranked)}
    for k, p in zip(tested, adjusted, strict=True):
        out[k] = replace(out[k], p_corrected=p, correction=CORRECTION, family_size=len(tested))
        if estimates is not None and p >= 1 - out[k].level:
            need = estimates[k].grades_to_decide(divisor[k])
            out[k] = replace(out[k], hand_needed=need)
    return [replace(r, decision=decision(r)) for r in out]


def decision(r: CalibratedComparison) -> str:
    """Which variant is better on the criterion, or what to grade to decide."""
    head = f"{r.task} ({r.model}), {r.criterion}: {r.a} vs {r.b}: "
    caveat = "" if r.random_subset else " (graded rows not a random subset: see note)"
    if not r.valid:
        more = f"grade {r.hand_needed} more rows" if r.hand_needed else "grade more rows"
        if r.reason and r.reason.startswith("too few rows"):  # grading alone cannot do it
            more = "evaluate more rows"
        judged = ""
        if r.judge_estimate is not None:
            judged = f"; {JUDGE_LABEL} A − B = {r.judge_estimate:+.3f}, not a {r.criterion} result"
        return head + f"not decided: {more} ({r.reason}){judged}"
    alpha = 1 - r.level
    p = r.p_corrected if r.p_corrected is not None else r.p_value
    assert r.estimate is not None and p is not None
    if p < alpha:
        better = r.a if r.estimate > 0 else r.b
        return (
            head + f"{better} is better on {r.criterion} (A − B = {r.estimate:+.3f}, "
            f"p corr = {p:.4f}){caveat}"
        )
    more = f"grade about {r.hand_needed} more rows" if r.hand_needed else "grade more rows"
    after = f" after the {r.correction} correction" if r.correction else ""
    return head + f"not decided (p corr = {p:.4f}): {more} to resolve it{after}{caveat}"


def cell_parts(
    task: str,
    model: str,
    judge_id: str,
    frames: Mapping[tuple[str, str], ArmFrame],
    variants: Sequence[str],
    pairs: Sequence[tuple[str, str]],
    criteria: Sequence[str],
    *,
    pairs_note: str | None = None,
    level: float = 0.95,
) -> tuple[CalibratedCell, list[stats.Estimate]]:
    """One (task, model) (`frames` keyed by (variant, criterion)), its comparisons corrected
    within it, with their estimates in order (for `corrected_cells`)."""
    means = tuple(
        mean_of(frames[(v, c)], level) for c in criteria for v in variants if (v, c) in frames
    )
    done = [
        _pair(frames[(a, c)], frames[(b, c)], level)
        for c in criteria
        for a, b in pairs
        if (a, c) in frames and (b, c) in frames
    ]
    estimates = [e for _, e in done]
    rows = corrected([r for r, _ in done], estimates)
    built = CalibratedCell(task, model, judge_id, tuple(criteria), pairs_note, means, tuple(rows))
    return built, estimates


def cell(
    task: str,
    model: str,
    judge_id: str,
    frames: Mapping[tuple[str, str], ArmFrame],
    variants: Sequence[str],
    pairs: Sequence[tuple[str, str]],
    criteria: Sequence[str],
    *,
    pairs_note: str | None = None,
    level: float = 0.95,
) -> CalibratedCell:
    """One (task, model): `frames` keyed by (variant, criterion), Holm within it."""
    return cell_parts(
        task, model, judge_id, frames, variants, pairs, criteria,
        pairs_note=pairs_note, level=level,
    )[0]  # fmt: skip


def corrected_cells(
    parts: Sequence[tuple[CalibratedCell, Sequence[stats.Estimate]]],
) -> list[CalibratedCell]:
    """Holm over every valid comparison of every cell together (the report's family, as the
    sweep's comparison table corrects over all its tests): `parts` are cells as `cell` built
    them, each with its comparisons' estimates in order."""
    rows = [r for c, _ in parts for r in c.comparisons]
    estimates = [e for _, es in parts for e in es]
    fixed = corrected(rows, estimates)
    out, k = [], 0
    for c, _ in parts:
        n = len(c.comparisons)
        out.append(replace(c, comparisons=tuple(fixed[k : k + n])))
        k += n
    return out
