"""`workbench grade report` and `workbench grade next`: the calibrated table per (task,
model), its three-line legend or its `--explain` method text, the decision lines.

Judge-only numbers are always printed under "judge score (not calibrated)", never under a
criterion's name: a judge's score is not correctness.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.output.common import _f

# the records (`experiments.calibrated.records`, a layer above) are read by their fields:
# CalibratedReport (cells), CalibratedCell, CalibratedMean, CalibratedComparison, NextItems
Report = Any
Cell = Any
Row = Any

JUDGE = "judge score (not calibrated)"


def _ci(low: float | None, high: float | None, signed: bool = True) -> str:
    # NaN: no interval (a judge that gave every row one score has no spread to make one)
    if low is None or high is None or low != low or high != high:
        return "-"
    spec = "+.3f" if signed else ".3f"
    return f"[{low:{spec}},{high:{spec}}]"


def _mean_lines(means: Sequence[Row], arm: int) -> list[str]:
    head = (
        f"  {'variant':<{arm}} {'criterion':<12} {'PPI mean':>8} {'95% CI':>15} {'hand':>9} "
        f"{'judge score':>11} {'judge 95% CI':>15} {'agree':>6} {'kappa':>6} {'kappa CI':>15}"
    )
    out = [head]
    for m in means:
        ag = m.agreement
        left = (
            f"  {m.variant:<{arm}} {m.criterion:<12} "
            f"{_f(m.estimate, '.3f'):>8} {_ci(m.low, m.high, False):>15} "
            f"{f'{m.n_hand}/{m.n_rows}':>9} {_f(m.judge_mean, '.3f'):>11} "
            f"{_ci(m.judge_low, m.judge_high, False):>15} "
            f"{_f(ag.raw if ag else None, '.2f'):>6} {_f(ag.kappa if ag else None, '.2f'):>6} "
            f"{_ci(ag.kappa_low if ag else None, ag.kappa_high if ag else None):>15}"
        )
        if not m.valid:
            left += f"  no calibrated mean: {m.reason}; grade {_f(m.hand_needed, 'd')} more"
        out.append(left + ("  *" if not m.random_subset else ""))
    return out


def _comparison_lines(rows: Sequence[Row], arm: int) -> list[str]:
    head = (
        f"  {'criterion':<12} {'A':<{arm}} {'B':<{arm}} {'A − B':>7} {'95% CI':>17} "
        f"{'p':>7} {'p corr':>7} {'n':>5} {'hand A/B/both':>14} {'eff n':>6} "
        f"{'hand-only 95% CI':>17} {'ratio':>5} {'judge A − B':>11} {'judge 95% CI':>17}"
    )
    out = [head]
    for r in rows:
        hand = f"{r.n_hand_a}/{r.n_hand_b}/{r.n_hand_both}"
        left = f"  {r.criterion:<12} {r.a:<{arm}} {r.b:<{arm}} "
        judge = f"{_f(r.judge_estimate, '+.3f'):>11} {_ci(r.judge_low, r.judge_high):>17}"
        flags = ("  !" if r.agreement_differs else "") + ("  *" if not r.random_subset else "")
        if not r.valid:
            out.append(
                left + f"{'-':>7} {'-':>17} {'-':>7} {'-':>7} {r.n_rows:>5} {hand:>14} "
                f"{'-':>6} {_ci(r.hand_low, r.hand_high):>17} {'-':>5} {judge}{flags}"
                f"  not calibrated: {r.reason}"
            )
            continue
        out.append(
            left + f"{_f(r.estimate, '+.3f'):>7} {_ci(r.low, r.high):>17} "
            f"{_f(r.p_value, '.4f'):>7} {_f(r.p_corrected, '.4f'):>7} {r.n_rows:>5} {hand:>14} "
            f"{_f(r.effective_n, '.0f'):>6} {_ci(r.hand_low, r.hand_high):>17} "
            f"{_f(r.width_ratio, '.2f'):>5} {judge}{flags}"
        )
    return out


def _legend(c: Cell) -> list[str]:
    tested = [r for r in c.comparisons if r.p_corrected is not None]
    family = tested[0].family_size if tested else 0
    test = tested[0].test if tested else "PPI++ paired difference"
    return [
        f"A − B: share of rows passing the criterion, hand grades + judge scores by {test}; 95% CI",
        (
            f"p corr: Holm over the report's {family} comparisons"
            if family
            else "p corr: none (no valid comparison yet)"
        )
        + "; hand: graded rows; "
        "eff n: hand-only rows of equal variance; ratio: CI width / hand-only width",
        f"judge: the {JUDGE}, never correctness or analysis; ! judge agrees differently "
        "on A and B; * graded rows not a random subset; full method: --explain",
    ]


def _explain(c: Cell) -> str:
    tested = [r for r in c.comparisons if r.p_corrected is not None]
    parts = [
        "criteria: the paper's correctness and analysis, each graded 0/1 per row by hand "
        "(grades/grades.jsonl: the mean over graders of each one's latest grade of the "
        "generation the trial holds now) and by the judge "
        + (
            "(no judge run: hand grades alone, lambda 0)"
            if c.judge_id == "none"
            else f"(judge run {c.judge_id[:12]}: its model, decoding and rubric hashes)"
        ),
        "estimate: prediction-powered inference, PPI++ power-tuned (lambda in the JSON): the "
        "judge's mean over every row, rectified by the hand-minus-judge gap on the "
        "hand-graded rows, so a biased judge does not bias it; intervals use Student t "
        "quantiles (graded clusters - 2 degrees of freedom, none below 10 graded clusters "
        "per variant), cluster-robust by prompt (rows given the same prompt are one unit, as the "
        "comparison table's tests resample them)",
        "A − B: rows paired by index (both variants answered the same rows); A and B may be "
        "hand-graded on different rows; the PPI interval assumes the graded rows are a "
        "random subset: the first rows of a sheet's shuffled order ('*' where they are not)",
        "eff n: the number of hand-graded rows that alone would give the same variance "
        "(what the judge bought); ratio: the calibrated interval's width over the hand-only "
        "one's (below 1: the judge helped)",
        f"p corr: {tested[0].correction if tested else 'Holm'} over the "
        f"{tested[0].family_size if tested else 0} valid comparisons (pairs x criteria) of "
        "the whole report (every task and model in it, as the sweep's table corrects over all "
        "its tests); 'grade about N more' aims at the corrected decision: the "
        "interval at Holm's level for the comparison's place clear of 0 at the current "
        "estimate (a plan, not a promise)",
        f"{JUDGE}: the judge's scores alone, with a cluster-robust interval; it is what the "
        "judge says, not correctness or analysis: a judge that favours one variant's style "
        "moves it, which is why it is never used for the decision",
        "agree/kappa: the judge against the hand grades on rows graded both ways (Cohen's "
        "kappa with its interval); '!': the agreement differs between A and B (p < 0.05: "
        "Fisher's exact test when every row has its own prompt, else a cluster-robust z-test "
        "with the rows of one prompt as one unit), the bias that flips judge-only comparisons",
        "a row the judge gave no score (unparsed, failed) counts as 0.5 in the judge column: "
        "PPI stays unbiased, only less precise",
    ]
    return "method:\n" + "\n".join(f"  {p}." for p in parts)


def calibrated_table(report: Report, explain: bool = False) -> str:
    """Each (task, model)'s means and comparisons, its legend (or method), its notes."""
    if not report.cells:
        return "no calibrated comparison (no trials)"
    out: list[str] = []
    for c in report.cells:
        names = [m.variant for m in c.means] + [n for r in c.comparisons for n in (r.a, r.b)]
        arm = max([10, *map(len, names)])
        judge = (
            "no judge run: hand grades alone"
            if c.judge_id == "none"
            else f"judge {c.judge_id[:12]}"
        )
        out.append(f"{c.task} ({c.model}), {judge}:")
        out += _mean_lines(c.means, arm)
        if c.comparisons:
            out += _comparison_lines(c.comparisons, arm)
            out += ["  " + line for line in (_explain(c).splitlines() if explain else _legend(c))]
        notes = _notes(c)
        out += [f"  note: {n}" for n in notes]
        out.append("")
    out += decision_lines(report)
    return "\n".join(out).rstrip()


def _notes(c: Cell) -> list[str]:
    notes = [c.pairs_note] if c.pairs_note else []
    for m in c.means:
        where = f"{m.variant}, {m.criterion}"
        if not m.random_subset and m.subset_note:
            notes.append(f"NOT A RANDOM SUBSET ({where}): {m.subset_note}")
        if m.stale_hand or m.stale_judge:
            notes.append(
                f"{where}: dropped {m.stale_hand} hand grade(s) and {m.stale_judge} judge "
                "score(s) of a generation that has changed since"
            )
        if m.n_unanswered:
            notes.append(
                f"{where}: {m.n_unanswered} row(s) unanswered (the call failed): left out of "
                "its numbers and of its pairs; rerun the trial to answer them"
            )
        if m.n_unscored:
            notes.append(f"{where}: {m.n_unscored} row(s) with no judge score (counted 0.5)")
        if m.n_hand == 0 and m.judge_mean is None:
            notes.append(
                f"{where}: no hand grades and no judge score (the judge run did not score "
                f"{m.criterion}): grade {_f(m.hand_needed, 'd')} rows for a valid interval"
            )
        elif m.n_hand == 0:
            notes.append(
                f"{where}: no hand grades: only the {JUDGE} is known; grade "
                f"{_f(m.hand_needed, 'd')} rows for a valid interval"
            )
    notes += [r.agreement_note for r in c.comparisons if r.agreement_differs and r.agreement_note]
    return list(dict.fromkeys(n for n in notes if n))


def decision_lines(report: Report) -> list[str]:
    """What the calibrated comparisons decide, one line each, printed last."""
    return [r.decision for c in report.cells for r in c.comparisons]


def next_items(found: Any, explain: bool = False) -> str:
    """`workbench grade next`: the sheet written, or that the interval is narrow enough;
    `explain`: how the rows were chosen, and why that way."""
    lines = [found.line]
    if found.sheet_csv:
        lines.append(f"sheet: {found.sheet_csv} ({found.n_items} items; guide: {found.guide})")
    if explain:
        lines += [
            "method:",
            f"  sampling: {found.sampling_note}.",
            "  the new sheet is blind (no trial, variant or model shown) and keeps the rows in "
            "the first sheet's order; graded top to bottom, its rows and that sheet's graded "
            "prefix stay a random subset, which the calibrated interval assumes.",
            "  grades needed: from the PPI++ interval's variance at the current grades "
            "(power-tuned lambda, cluster-robust by prompt), a plan, not a promise.",
        ]
    return "\n".join(lines)


def grade_report_pointer(sweep: str, judged: int, graded: int) -> str:
    """The one line `workbench report` adds when a sweep has judge runs or hand grades."""
    what = ", ".join(
        x
        for x in (
            f"{judged} trial(s) judged" if judged else "",
            f"{graded} hand grade(s)" if graded else "",
        )
        if x
    )
    return (
        f"open-ended answers ({what}): 'workbench grade report {sweep}' compares the variants "
        "on correctness and analysis (hand grades + judge scores)"
    )
