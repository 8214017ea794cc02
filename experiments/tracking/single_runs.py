"""`workbench run` runs: at most one FINISHED run per trial, reused when it shows the trial's
predictions and hand grades and never joined by a FAILED one (an incomplete rerun of a
finished trial is not logged), the grades put on it, and the cached rerun that reads a
SQLite store without opening MLflow."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from experiments import ids
from experiments.names import (
    GRADED,
    GRADES_PENDING,
    GRADES_SHA,
    KIND,
    PREDICTIONS_SHA,
    TRIAL_ID,
    experiment_name,
    predictions_sha,
    run_suffix,
)
from experiments.tracking.store import (
    TrackingConfig,
    _file_lock,
    _lock_dir,
    _schema_version,
    _sqlite_path,
    _store_error,
)
from experiments.tracking.trial_runs import TrialRuns
from experiments.trials.grading import current_grades, grade_metrics
from promptlib.errors import WorkbenchError

if TYPE_CHECKING:
    from experiments.trials.run import TrialResult
    from promptlib.render import CompiledPrompt


class SingleRuns(TrialRuns):
    """The runs of `workbench run` and the hand grades put on them."""

    def run_experiment(self, task: str) -> tuple[str, str]:
        """The experiment of a task's single runs: '<prefix>/run/<task>' (name, id)."""
        suffix = run_suffix(task)
        return experiment_name(self.config.experiment_prefix, suffix), self.experiment_id(suffix)

    def _trial_runs(self, experiment_id: str, trial_id: str) -> list[Any]:
        return list(
            self.client.search_runs(
                [experiment_id],
                filter_string=f"tags.`{TRIAL_ID}` = '{trial_id}' and tags.`{KIND}` = 'run'",
                order_by=["attributes.start_time ASC"],
                max_results=1000,
            )
        )

    def log_run(
        self,
        result: TrialResult,
        compiled: CompiledPrompt,
        rows: list[dict[str, str]],
        source: str | None = None,
    ) -> dict[str, Any]:
        """Track a `workbench run` trial: at most one FINISHED run per trial id, and it shows
        the trial's current predictions and grades.

        A FINISHED run is reused (`mlflow_reused` true) only when its predictions (hash of
        every row's generation and parsed answer) and its hand grades are the ones of this
        result and the grades saved with it; otherwise the result is logged as a new run
        (with the saved grades, if they grade these generations) and the stale runs are
        deleted, as are unfinished or FAILED ones (a rerun after failed rows, a killed
        process). An incomplete result of a trial that has a FINISHED run is not logged at
        all: that run stays the trial's one record (`mlflow_kept_run_id`, no FAILED run
        beside it); without one it is logged FAILED. The same lock file as sweeps' claims
        serialises two processes running one trial. Store failures raise `TrackingError`;
        the caller has saved the trial on disk before.
        """

        grades, want = _wanted_tags(result)
        try:
            name, exp = self.run_experiment(result.spec.task)
            lock = _lock_dir(self.config) / f"run-{result.trial_id[:40]}-{exp[:16]}.lock"
            with _file_lock(lock):
                runs = self._trial_runs(exp, result.trial_id)
                finished = [r for r in runs if r.info.status == "FINISHED"]
                same = [
                    r for r in finished if all(r.data.tags.get(k, "") == v for k, v in want.items())
                ]
                if result.complete and same:
                    run_id, reused = str(same[0].info.run_id), True
                elif finished and not result.complete:
                    # a rerun never demotes a finished trial nor clutters it: nothing logged
                    kept = str(finished[-1].info.run_id)
                    for run in runs:
                        if run.info.status != "FINISHED":  # leftovers of killed or old runs
                            self.client.delete_run(run.info.run_id)
                    return {"mlflow_kept_run_id": kept, "mlflow_experiment": name}
                else:
                    run_id = self.log_trial(
                        None,
                        result,
                        compiled,
                        rows,
                        result.spec.variant.label,
                        # the --limit sample's seed ('seed' is the variant's demo draw)
                        {"sample_seed": result.spec.seed, "variant_id": result.variant_id},
                        source=source,
                        experiment_id=exp,
                        extra_tags={PREDICTIONS_SHA: want[PREDICTIONS_SHA]},  # in its one batch
                    )
                    reused = False
                    if grades is not None:
                        self._put_grades(run_id, result.spec.task, grade_metrics(grades), grades)
                for run in runs:
                    if str(run.info.run_id) != run_id:
                        self.client.delete_run(run.info.run_id)
        except WorkbenchError:
            raise
        except Exception as e:  # the store went away or refused a write mid-way
            raise _store_error(self.config, e) from None
        return {"mlflow_run_id": run_id, "mlflow_experiment": name, "mlflow_reused": reused}

    def _put_grades(
        self, run_id: str, task: str, metrics: dict[str, float], grades: dict[str, Any]
    ) -> None:
        """Put hand grades on a run so that a write cut short is visible and repaired.

        Why the order: the metrics, the artifact and the tags are separate store writes, and
        a store failing between them used to leave grade metrics on a run whose GRADES_SHA
        still said "ungraded", which `log_run` and `reusable_run` then reused as matching the
        ungraded folder (a stray score disagreeing with disk, for good). Now GRADES_SHA is
        set to `GRADES_PENDING` + sha *first*, and to the sha (with GRADED "true", one
        batch) only *last*: a run left in between matches no trial folder (neither "" nor a
        sha), so the next `workbench run` of the trial logs it afresh and deletes it, and
        `workbench grade import` run again rewrites every part and ends with the sha.
        The grade metrics are logged under their names and under ``<task>/`` names, as a
        trial's scores are (`task_metrics`).
        """
        from mlflow.entities import RunTag

        sha = ids.grades_sha(grades["grades"])
        self.client.set_tag(run_id, GRADES_SHA, GRADES_PENDING + sha)
        self._log_metrics(run_id, metrics | {f"{task}/{k}": v for k, v in metrics.items()})
        self.client.log_dict(run_id, grades, "grades.json")
        self.client.log_batch(run_id, tags=[RunTag(GRADED, "true"), RunTag(GRADES_SHA, sha)])

    def log_grades(
        self, task: str, trial_id: str, metrics: dict[str, float], grades: dict[str, Any]
    ) -> str | None:
        """Put hand grades on the trial's FINISHED run; None when the trial was not tracked.

        Only a run that recorded the graded generations gets them (others are stale: the
        next `workbench run` of the trial replaces them).
        """
        name = experiment_name(self.config.experiment_prefix, run_suffix(task))
        exp = self.client.get_experiment_by_name(name)
        if exp is None:
            return None
        # a hand-graded task has no parsed answers
        want = ids.tag_sha([[str(g["index"]), g["generation"], None] for g in grades["grades"]])
        runs = [
            r
            for r in self._trial_runs(str(exp.experiment_id), trial_id)
            if r.info.status == "FINISHED" and r.data.tags.get(PREDICTIONS_SHA, want) == want
        ]
        if not runs:
            return None
        run_id = str(runs[0].info.run_id)
        self._put_grades(run_id, task, metrics, grades)
        return run_id


def _wanted_tags(result: TrialResult) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The saved hand grades of `result` (or None) and the tags a run that shows it carries."""

    grades = current_grades(result) if result.metric == "manual" else None
    return grades, {
        PREDICTIONS_SHA: predictions_sha(result),
        GRADES_SHA: ids.grades_sha(grades["grades"]) if grades is not None else "",
    }


# ---- a cached rerun without MLflow ---------------------------------------------------------
# A rerun whose answers all come from the cache changes nothing in the store, yet opening it
# through MLflow costs ~1.5 s (imports, migrations check). For a SQLite store the same
# question `Tracker.log_run` asks is answered by one read-only query of MLflow's tables. The
# store itself is what is read, so nothing can be stale: a deleted run, a replaced store, other
# predictions or grades, or a second run of the trial (which log_run would delete) all make
# the answer None, and the caller goes the full way. Any surprise (no such table or column, a
# locked or damaged file) is None too, never an error. It is only trusted on a store that
# MLflow itself opened at the same schema revision (`_stamp_schema`), in the default
# workspace, and that this process could write to: otherwise MLflow must see it first.
_TRIAL_RUNS_SQL = """
SELECT r.run_uuid, r.status FROM runs r JOIN experiments e ON e.experiment_id = r.experiment_id
WHERE e.name = ? AND e.lifecycle_stage = 'active' AND r.lifecycle_stage = 'active'
  AND EXISTS (SELECT 1 FROM tags t WHERE t.run_uuid = r.run_uuid AND t.key = ? AND t.value = ?)
  AND EXISTS (SELECT 1 FROM tags t WHERE t.run_uuid = r.run_uuid AND t.key = ? AND t.value = ?)
"""


def _sqlite_trial_runs(
    config: TrackingConfig, task: str, trial_id: str
) -> tuple[str, list[tuple[str, str, dict[str, str]]]] | None:
    """The experiment name and the active `workbench run` runs of a trial in a SQLite store:
    (run id, status, tags) each; None when the store is not SQLite or cannot be read so."""
    import sqlite3

    db = _sqlite_path(config)
    if db is None or not db.is_file() or os.environ.get("MLFLOW_ENABLE_WORKSPACES"):
        return None
    try:
        opened = (_lock_dir(config) / "schema-opened").read_text(encoding="utf-8")
    except OSError:
        return None  # MLflow has not opened this store since the stamp existed
    if _schema_version(db) != opened:
        return None  # another MLflow migrated it, or the store was replaced
    name = experiment_name(config.experiment_prefix, run_suffix(task))
    try:
        con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
        try:
            columns = {row[1] for row in con.execute("PRAGMA table_info(experiments)")}
            if (
                "workspace" in columns
                and con.execute(
                    "SELECT 1 FROM experiments WHERE workspace != 'default' LIMIT 1"
                ).fetchone()
            ):
                return None  # workspaces in use: MLflow decides what this process sees
            found = con.execute(_TRIAL_RUNS_SQL, (name, TRIAL_ID, trial_id, KIND, "run")).fetchall()
            runs = []
            for run_id, status in found:
                tags = dict(
                    con.execute("SELECT key, value FROM tags WHERE run_uuid = ?", (run_id,))
                )
                runs.append((str(run_id), str(status), tags))
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return name, runs


def tracked_before(config: TrackingConfig, task: str, trial_id: str) -> bool:
    """Whether a SQLite store readable without MLflow holds a FINISHED run of this trial,
    and could be written if the rerun turns out to change something (the file, its folder
    and the lock folder are writable): only then may opening MLflow wait until the end."""
    db = _sqlite_path(config)
    locks = _lock_dir(config)
    if db is None or not all(os.access(p, os.W_OK) for p in (db, db.parent, locks)):
        return False
    found = _sqlite_trial_runs(config, task, trial_id)
    return found is not None and any(status == "FINISHED" for _, status, _ in found[1])


def reusable_run(result: TrialResult, config: TrackingConfig) -> dict[str, Any] | None:
    """What `Tracker.log_run(result, ...)` would return when it would write nothing: the
    trial is complete and its one run in the store is FINISHED with these predictions and
    grades. None whenever log_run has something to do or the store cannot be read directly.
    """
    if not result.complete:
        return None
    found = _sqlite_trial_runs(config, result.spec.task, result.trial_id)
    if found is None:
        return None
    name, runs = found
    _, want = _wanted_tags(result)
    if len(runs) != 1:  # none to reuse, or others that log_run would delete
        return None
    run_id, status, tags = runs[0]
    if status != "FINISHED" or any(tags.get(k, "") != v for k, v in want.items()):
        return None
    return {"mlflow_run_id": run_id, "mlflow_experiment": name, "mlflow_reused": True}
