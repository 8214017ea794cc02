"""What every part of the `Tracker` shares: the client on the configured store, the commit and
the metric logging that keeps over-long names explained (`metric_names.json`).

Everything goes through an `MlflowClient` bound to the configured store: runs are created
with their parent tag, logged with `log_batch` (a trial: one batch and one artifact upload,
`batch`), and ended with `set_terminated` in the state that tells the truth. There is no
fluent `start_run`, so no process-global active run and no context exit that marks a parent
FINISHED behind our back.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.names import METRIC_NAMES, hashed_key, is_spelled_out, metric_key, safe_name
from experiments.tracking.batch import RunFiles, batches
from experiments.tracking.store import (
    TrackingConfig,
    _git_commit,
    _quiet_mlflow,
    load_config,
    open_client,
)


class TrackerBase:
    """The client and the shared writes; the jobs are mixins on top (`tracker.Tracker`)."""

    def __init__(self, config: TrackingConfig | None = None) -> None:
        self.config = config or load_config()
        self.client = open_client(self.config)
        self.mlflow = _quiet_mlflow()
        self.commit = _git_commit()
        self._renamed: dict[str, dict[str, str]] = {}  # run id -> {short metric name: full}
        # sweep parent run id -> (its experiment id, its sweep id): read once, not per trial
        self._parents: dict[str, tuple[str, str]] = {}
        # study parents found FINISHED: a rerun that fails leaves them so (`Parents.finish`)
        self._was_finished: set[str] = set()

    def _log_metrics(self, run_id: str, metrics: dict[str, Any]) -> None:
        """Log metrics; a name MLflow would refuse (over 250 characters, or read as a path:
        `//`, `..`) is logged as `metric_key(name)`, and names whose keys would coincide
        (`safe_name` maps `a b` and `a_b`, or two non-Latin names, to one) as
        `hashed_key(name)`, so no value overwrites another; the run's `metric_names.json`
        maps every such short name to its full name."""
        keys = self._keys(run_id, [n for n, v in metrics.items() if v is not None])
        self._log_batches(
            run_id, metrics={keys[n]: float(v) for n, v in metrics.items() if v is not None}
        )

    def _log_batches(
        self,
        run_id: str,
        params: dict[str, str] | None = None,
        metrics: dict[str, float] | None = None,
        tags: dict[str, str] | None = None,
    ) -> None:
        """Params, metrics and tags in one `log_batch` (more only past MLflow's limits)."""
        from mlflow.entities import Metric, Param, RunTag

        now = int(time.time() * 1000)
        for b in batches(params or {}, metrics or {}, tags or {}):
            self.client.log_batch(
                run_id,
                metrics=[Metric(k, v, now, 0) for k, v in b.metrics],
                params=[Param(k, v) for k, v in b.params],
                tags=[RunTag(k, v) for k, v in b.tags],
            )

    def _keys(
        self, run_id: str, names: Sequence[str], files: RunFiles | None = None
    ) -> dict[str, str]:
        """Each name's MLflow key (metric or tag) on the run, distinct within `names`; a key
        that is not the name's `safe_name` is explained in `metric_names.json` before it is
        used, so a name is never logged unexplained: written now, or into `files` when the
        run's artifacts go up (`RunFiles`) before its metrics."""
        keys = {name: metric_key(name) for name in names}
        shared = Counter(keys.values())
        renamed = self._renamed.setdefault(run_id, {})
        before = dict(renamed)
        for name, key in keys.items():
            if shared[key] > 1 or is_spelled_out(name):  # two names, one key: each its own
                keys[name] = key = hashed_key(name)
            if key != safe_name(name):  # shortened: say what it stands for
                renamed[key] = name
        if renamed != before:
            explained = dict(sorted(renamed.items()))
            if files is not None:
                files.json_dict(METRIC_NAMES, explained)
            else:
                self.client.log_dict(run_id, explained, METRIC_NAMES)
        return keys

    def _artifact_text(self, run_id: str, path: str) -> str:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="workbench-artifact-") as tmp:
            local = self.client.download_artifacts(run_id, path, tmp)
            return Path(local).read_text(encoding="utf-8")
