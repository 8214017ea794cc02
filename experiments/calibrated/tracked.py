"""Hand grades, calibrated estimates and comparisons on a sweep's MLflow runs (issue 33, point 5).

Each trial's run (the sweep parent's child with the trial's id) gets, per criterion ``C``:

- ``hand_grade.C.mean`` and ``hand_grade.C.n``: the current hand grades (`current_grades`:
  each grader's latest grade of the generation the trial holds now, averaged over graders);
- ``calibrated.C.estimate``, ``.ci_low``, ``.ci_high``, ``.effective_n``, ``.n_hand``: the
  PPI mean (hand grades + judge scores), only where it is valid;
- ``judge_agreement.C.kappa`` (``.raw``, ``.n``): the judge against the hand grades;

and the tag ``calibrated.judge_id``. (The judge's own scores are ``judge_score.C.<judge>``,
logged by `experiments.judge.tracking`: judge scores, never the criterion.)

The sweep's parent run gets ``calibrated.json`` (the report's records) and, per comparison
``<task>.<model>.<a>_vs_<b>`` and criterion, ``calibrated.<comparison>.C.estimate``,
``.ci_low``, ``.ci_high``, ``.p_value``, ``.p_corrected``, ``.effective_n``, ``.n_hand``,
``.width_ratio`` and ``.judge_score_diff`` (the judge-only A − B, not calibrated); the
graders' agreement ``grader_kappa.C.<a>_vs_<b>`` (``.ci_low``, ``.ci_high``, ``.n``) where
two graders overlap on the sweep's rows; and ``judge_cost.total_usd`` (every judge run's
price on the sweep's trials, when known) with ``judge_cost.rows_judged``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from experiments import settings
from experiments.calibrated.records import CalibratedReport
from experiments.grading.agreement import grader_agreement
from experiments.grading.store import current_grades, load_grades
from experiments.names import comparison_parts

if TYPE_CHECKING:
    from experiments.tracking import Tracker

CALIBRATED_JSON = "calibrated.json"
JUDGE_FOLDER = "judge"


@dataclass(frozen=True)
class HandSummary:
    """One trial's current hand grades on one criterion: their mean and count."""

    trial_id: str
    criterion: str
    mean: float | None
    n: int


def hand_summaries(
    trial_ids: Sequence[str],
    criteria: Sequence[str],
    *,
    runs_root: Path | None = None,
    grades_root: Path | None = None,
) -> list[HandSummary]:
    """Each trial's hand-graded mean and count per criterion (stale grades left out)."""
    grades = load_grades(grades_root)
    out = []
    for tid in trial_ids:
        mine = [g for g in grades if g.trial_id == tid]
        now = current_grades(mine, tid, runs_root=runs_root) if mine else {}
        for c in criteria:
            values = [v for (_, crit), v in now.items() if crit == c]
            out.append(HandSummary(tid, c, float(np.mean(values)) if values else None, len(values)))
    return out


def trial_metrics(
    report: CalibratedReport, hands: Sequence[HandSummary]
) -> dict[str, dict[str, float]]:
    """trial id -> its run's metrics (see the module's docstring)."""
    out: dict[str, dict[str, float]] = {}
    for h in hands:
        m = out.setdefault(h.trial_id, {})
        m[f"hand_grade.{h.criterion}.n"] = float(h.n)
        if h.mean is not None:
            m[f"hand_grade.{h.criterion}.mean"] = h.mean
    for cell in report.cells:
        for mean in cell.means:
            m = out.setdefault(mean.trial_id, {})
            c = mean.criterion
            if mean.valid and mean.estimate is not None:
                m[f"calibrated.{c}.estimate"] = mean.estimate
                m[f"calibrated.{c}.ci_low"] = float(mean.low)  # type: ignore[arg-type]
                m[f"calibrated.{c}.ci_high"] = float(mean.high)  # type: ignore[arg-type]
                if mean.effective_n is not None:
                    m[f"calibrated.{c}.effective_n"] = float(mean.effective_n)
            m[f"calibrated.{c}.n_hand"] = float(mean.n_hand)
            ag = mean.agreement
            if ag is not None and ag.n:
                m[f"judge_agreement.{c}.n"] = float(ag.n)
                if ag.raw is not None:
                    m[f"judge_agreement.{c}.raw"] = ag.raw
                if ag.kappa is not None:
                    m[f"judge_agreement.{c}.kappa"] = ag.kappa
    return out


_COMPARISON_MEASURES = (
    ("estimate", "estimate"),
    ("ci_low", "low"),
    ("ci_high", "high"),
    ("p_value", "p_value"),
    ("p_corrected", "p_corrected"),
    ("effective_n", "effective_n"),
    ("width_ratio", "width_ratio"),
    ("judge_score_diff", "judge_estimate"),
)


def parent_metrics(
    report: CalibratedReport, trial_ids: Sequence[str], *, runs_root: Path | None = None,
    grades_root: Path | None = None,
) -> dict[str, float]:  # fmt: skip
    """The sweep parent's metrics (see the module's docstring)."""
    rows = [r.to_dict() for cell in report.cells for r in cell.comparisons]
    out: dict[str, float] = {}
    for row, part in zip(rows, comparison_parts(rows), strict=True):
        head = f"calibrated.{part}.{row['criterion']}"
        for name, key in _COMPARISON_MEASURES:
            if row.get(key) is not None:
                out[f"{head}.{name}"] = float(row[key])
        out[f"{head}.n_hand"] = float(row["n_hand_a"] + row["n_hand_b"])
    mine = set(trial_ids)
    graded = [g for g in load_grades(grades_root) if g.trial_id in mine]
    for pair in grader_agreement(graded):
        if pair.kappa.kappa is not None:  # the interval only where one is given
            head = f"grader_kappa.{pair.criterion}.{pair.grader_a}_vs_{pair.grader_b}"
            out[head] = float(pair.kappa.kappa)
            if pair.kappa.low is not None and pair.kappa.high is not None:
                out[f"{head}.ci_low"] = float(pair.kappa.low)
                out[f"{head}.ci_high"] = float(pair.kappa.high)
            out[f"{head}.n"] = float(pair.n)
    out.update(judge_cost(report, trial_ids, runs_root=runs_root))
    return out


def judge_cost(
    report: CalibratedReport, trial_ids: Sequence[str], *, runs_root: Path | None = None
) -> dict[str, float]:
    """``judge_cost.total_usd`` (when every judge run's price is known) and
    ``judge_cost.rows_judged``, over the report's judge runs on the trials."""
    root = runs_root or settings.runs_dir()
    judges = {c.judge_id for c in report.cells}
    total, known, rows = 0.0, True, 0
    for tid in trial_ids:
        for jid in judges:
            path = root / tid / JUDGE_FOLDER / f"{jid}.json"
            if not path.is_file():
                continue
            try:
                meta: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            rows += int(meta.get("n") or 0)
            if meta.get("cost") is None:
                known = False
            else:
                total += float(meta["cost"])
    out = {"judge_cost.rows_judged": float(rows)}
    if known and rows:
        out["judge_cost.total_usd"] = total
    return out


def log_calibrated(
    tracker: Tracker,
    parent_id: str,
    report: CalibratedReport,
    *,
    runs_root: Path | None = None,
    grades_root: Path | None = None,
) -> list[str]:
    """Put the report on the sweep's parent run and its trials' runs; the run ids written."""
    trial_ids = list(dict.fromkeys(m.trial_id for cell in report.cells for m in cell.means))
    criteria = list(dict.fromkeys(c for cell in report.cells for c in cell.criteria))
    hands = hand_summaries(trial_ids, criteria, runs_root=runs_root, grades_root=grades_root)
    written = []
    for tid, metrics in trial_metrics(report, hands).items():
        for run in tracker._children(parent_id, tid):
            run_id = str(run.info.run_id)
            tracker._log_metrics(run_id, metrics)
            tracker.client.set_tag(run_id, "calibrated.judge_id", report.judge_id)
            written.append(run_id)
    tracker._log_metrics(
        parent_id,
        parent_metrics(report, trial_ids, runs_root=runs_root, grades_root=grades_root),
    )
    tracker.client.log_dict(parent_id, report.to_dict(), CALIBRATED_JSON)
    tracker.client.set_tag(parent_id, "calibrated.judge_id", report.judge_id)
    return [parent_id, *written]


def log_hand_grades(
    tracker: Tracker,
    parent_id: str,
    trial_ids: Sequence[str],
    criteria: Sequence[str],
    *,
    runs_root: Path | None = None,
    grades_root: Path | None = None,
) -> list[str]:
    """Only the hand-graded means and counts on the trials' runs (a sweep with no judge run
    yet: nothing to calibrate); the run ids written."""
    hands = hand_summaries(trial_ids, criteria, runs_root=runs_root, grades_root=grades_root)
    empty = CalibratedReport("", "", ())
    written = []
    for tid, metrics in trial_metrics(empty, hands).items():
        for run in tracker._children(parent_id, tid):
            tracker._log_metrics(str(run.info.run_id), metrics)
            written.append(str(run.info.run_id))
    return written
