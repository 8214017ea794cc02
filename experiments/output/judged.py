"""`workbench sweep` with a ``judge:`` key: the judge step's section, after the sweep's tables.

With hand grades: the calibrated table (`calibrated_table`). With none yet: the judge's
scores alone, under "judge score (not calibrated)", never a criterion's name, with how many
hand grades a valid interval needs and the commands to run next.
"""

from __future__ import annotations

from typing import Any

from experiments.output.calibrated import JUDGE, _ci, calibrated_table
from experiments.output.common import _f

# `experiments.sweeps.judging.SweepJudging` (a layer above) is read by its fields
Judging = Any


def judge_section(j: Judging, sweep: str) -> str:
    """The judge step: what it judged, then the calibrated or the judge-only numbers."""
    n_unparsed = sum(r.n_unparsed for r in j.runs)
    n_errors = sum(r.n_errors for r in j.runs)
    lines = [
        f"judge {j.model} ({j.scoring}) on {len(j.runs)} generate trial(s), criteria "
        f"{', '.join(j.criteria)}: {n_unparsed} unparsed, {n_errors} failed judge calls"
        + ("; scores on the trials' MLflow runs" if j.tracked else "")
    ]
    lines += [
        f"  judge skipped {s['task']} · {s['variant']} · {s['model']}: {s['reason']}"
        for s in j.skipped
    ]
    lines += [
        f"  judge failed {s['task']} · {s['variant']} · {s['model']}: {s['error']}"
        for s in j.failed
    ]
    if j.report is None:
        lines.append(f"no calibrated comparison: {j.error}")
        return "\n".join(lines)
    if j.n_hand:
        lines.append("calibrated comparisons (hand grades + judge scores):")
        lines.append(calibrated_table(j.report))
    else:
        lines += judge_only_lines(j.report)
        lines += next_commands(j.report, sweep)
    if j.figures:
        lines.append(f"figures: {', '.join(j.figures)}")
    return "\n".join(lines)


def judge_only_lines(report: Any) -> list[str]:
    """Each variant's and each pair's judge score, labelled as such, and the hand grades a
    valid interval needs."""
    out = [f"no hand grades yet: every number below is a {JUDGE}, not correctness or analysis"]
    for c in report.cells:
        arm = max([10, *(len(m.variant) for m in c.means)])
        out.append(f"{c.task} ({c.model}), judge {c.judge_id[:12]}:")
        out.append(
            f"  {'variant':<{arm}} {'criterion':<12} {'judge score':>11} {'95% CI':>15} "
            f"{'hand grades needed':>18}"
        )
        for m in c.means:
            out.append(
                f"  {m.variant:<{arm}} {m.criterion:<12} {_f(m.judge_mean, '.3f'):>11} "
                f"{_ci(m.judge_low, m.judge_high, False):>15} {_f(m.hand_needed, 'd'):>18}"
            )
        for r in c.comparisons:
            ci = _ci(r.judge_low, r.judge_high)
            ci = "(no interval: no spread in the judge's scores)" if ci == "-" else ci
            out.append(
                f"  {r.criterion}: {r.a} vs {r.b}: {JUDGE} A − B = "
                f"{_f(r.judge_estimate, '+.3f')} {ci}; a calibrated interval needs "
                f"{_f(r.hand_needed, 'd')} more hand-graded rows"
            )
    return out


def next_commands(report: Any, sweep: str) -> list[str]:
    """What to run next: a blind sheet per task, then add the grades and report."""
    tasks = list(dict.fromkeys(c.task for c in report.cells))
    out = ["next: grade a blind sheet of each task (grade it top to bottom: its order is random)"]
    out += [f"  workbench grade sheet {sweep} --task {t} --out sheet_{t}.csv" for t in tasks]
    out.append(
        f"  then: workbench grade add sheet_<task>.csv --grader YOUR_NAME; "
        f"workbench grade report {sweep}"
    )
    return out
