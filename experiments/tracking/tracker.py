"""The `Tracker`: sweep, study and trial tracking in MLflow through one client, composed of one
mixin per job so each job reads on its own.

One parent run per sweep, one child run per trial. The parent run holds the comparisons
table, one `p_value…` metric per comparison, and the figures.
"""

from __future__ import annotations

from experiments.tracking.parents import Parents
from experiments.tracking.registry import Registry
from experiments.tracking.reports import Reports
from experiments.tracking.single_runs import SingleRuns
from experiments.tracking.trial_runs import TrialRuns

__all__ = ["Tracker"]


class Tracker(SingleRuns, TrialRuns, Reports, Parents, Registry):
    """Sweep and study tracking in MLflow through one client: find-or-create, resume, log.

    Jobs: `Parents` (experiments, parent runs, claims), `TrialRuns` (a trial's run and reading
    it back), `SingleRuns` (`workbench run` runs and hand grades), `Reports` (a sweep's trials,
    comparisons and sensitivity), `Registry` (the Prompt Registry); `TrackerBase` holds the
    client and the metric logging they share.
    """
