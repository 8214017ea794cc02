"""Experiments, the parent runs of sweeps and studies, and the claims that share a sweep's
trials between processes.

Run states: a sweep's parent is RUNNING while the sweep runs, FINISHED only when every trial
is complete and the comparisons are logged, FAILED otherwise; after a kill it stays RUNNING,
never FINISHED. A rerun that finds nothing to change leaves a FINISHED parent untouched.

Concurrency: trials are claimed with a lock file per (store, trial) before a child run is
created, so two invocations of one sweep on one machine share the work and never delete each
other's in-flight runs; at most one FINISHED run per trial is kept whatever runs at once.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.names import (
    BEST_VARIANT_FILE,
    KIND,
    LAST_RUN,
    PARENT,
    SEARCH_SPACE,
    STUDY,
    STUDY_NAME,
    SWEEP_ID,
    SWEEP_NAME,
    TRIAL_ID,
    _param,
    experiment_name,
    safe_name,
    study_suffix,
)
from experiments.tracking.base import TrackerBase
from experiments.tracking.store import (
    _file_lock,
    _lock_dir,
    _store_op,
    _versions,
    artifact_dir,
    store_errors,
)


@dataclass(frozen=True)
class Claim:
    """A trial whose lock this process holds (`Parents.claim`). `finished` is the run id of
    the trial's FINISHED run, to read back instead of running it; None: no run finished it,
    so this process runs the trial."""

    finished: str | None = None


class Parents(TrackerBase):
    """Experiments, parent runs (sweeps, studies), child-run listing and trial claims."""

    def experiment_id(self, name_suffix: str) -> str:
        name = experiment_name(self.config.experiment_prefix, name_suffix)
        exp = self.client.get_experiment_by_name(name)
        if exp is not None:
            return str(exp.experiment_id)
        try:
            return str(
                self.client.create_experiment(name, artifact_location=self._artifacts_for(name))
            )
        except Exception:  # a peer created it a moment ago
            exp = self.client.get_experiment_by_name(name)
            if exp is None:
                raise
            return str(exp.experiment_id)

    def _artifacts_for(self, name: str) -> str | None:
        if not self.config.artifact_location:
            return None
        return self.config.artifact_location.rstrip("/") + "/" + safe_name(name)

    def artifact_dir(self) -> Path | None:
        """The local artifact folder, when artifacts are stored on this machine."""
        return artifact_dir(self.config)

    def _create_run(
        self, experiment_id: str, name: str, tags: dict[str, str], params: dict[str, Any]
    ) -> str:
        from mlflow.entities import Param

        run = self.client.create_run(experiment_id, run_name=name, tags=tags)
        run_id = str(run.info.run_id)
        if params:
            self.client.log_batch(run_id, params=[Param(k, _param(v)) for k, v in params.items()])
        return run_id

    @contextlib.contextmanager
    def _find_or_create_parent(
        self,
        experiment: str,
        lock: str,
        kind: str,
        key_tag: str,
        key: str,
        name: str,
        tags: dict[str, str],
        params: dict[str, Any],
    ) -> Iterator[tuple[str, bool]]:
        """Under the parent's lock file: (run id, found) of the oldest `kind` run whose
        `key_tag` is `key`, else of a new run named `name` with those tags, `tags`, the git
        commit and the package versions. The caller's block runs under the same lock."""
        with _file_lock(_lock_dir(self.config) / lock):
            found = self.client.search_runs(
                [experiment],
                filter_string=f"tags.`{key_tag}` = '{key}' and tags.`{KIND}` = '{kind}'",
                order_by=["attributes.start_time ASC"],
                max_results=1,
            )
            if found:
                yield str(found[0].info.run_id), True
                return
            run_id = self._create_run(
                experiment,
                name,
                {KIND: kind, key_tag: key, **tags, "git.commit": self.commit, **_versions()},
                params,
            )
            yield run_id, False

    @_store_op("finding the sweep's parent run")
    def parent_run(self, sweep_name: str, sweep_id: str, params: dict[str, Any]) -> str:
        """The sweep's parent run: reused if this sweep ran before (resume), else new, RUNNING.

        A reused parent keeps its state (`run_status`): the caller marks it RUNNING
        (`mark_running`) only once it has something to change, so a rerun that finds
        nothing to do, interrupted or not, leaves a FINISHED sweep FINISHED.
        """
        exp = self.experiment_id(sweep_name)
        lock = f"sweep-{sweep_id[:32]}.parent.lock"
        tags = {SWEEP_NAME: sweep_name}
        with self._find_or_create_parent(
            exp, lock, "sweep", SWEEP_ID, sweep_id, sweep_name, tags, params
        ) as (run_id, _):
            # `workbench report` shows the sweep run most recently, not the one created last
            self.client.set_tag(run_id, LAST_RUN, f"{time.time():.6f}")
            return run_id

    @_store_op("reading the sweep's parent run")
    def run_status(self, run_id: str) -> str:
        """RUNNING, FINISHED, FAILED or KILLED."""
        return str(self.client.get_run(run_id).info.status)

    @_store_op("marking the sweep's parent run RUNNING")
    def mark_running(self, run_id: str) -> None:
        self.client.update_run(run_id, status="RUNNING")

    def study_parent(self, study_name: str, study_key: str, params: dict[str, Any]) -> str:
        """The optimisation study's parent run in this store: found by its key, else new.
        A found one is RUNNING while the rerun runs; one found FINISHED ends FINISHED
        whatever the rerun does (`finish`): a rerun never demotes a finished verdict."""
        exp = self.experiment_id(study_suffix(study_name))
        lock = f"study-{study_key[:32]}.lock"
        tags = {STUDY_NAME: study_name}
        with self._find_or_create_parent(
            exp, lock, "study", STUDY, study_key, study_name, tags, params
        ) as (run_id, found):
            if found:
                if self.run_status(run_id) == "FINISHED":
                    self._was_finished.add(run_id)
                self.client.update_run(run_id, status="RUNNING")
            return run_id

    def log_search_space(self, parent_id: str, space: dict[str, Any]) -> None:
        """The study's axes, levels and left-out notes on its parent run (search_space.json)."""
        self.client.log_dict(parent_id, space, SEARCH_SPACE)

    def log_study_summary(self, parent_id: str, report: dict[str, Any]) -> None:
        """The held-out verdict on the study's parent run (metrics + report.json), and the
        winner's variant file beside it (best_variant.json: `run --variant-file` reads it,
        as it reads report.json's best_variant_json)."""
        self.client.log_dict(parent_id, report, "report.json")
        if report.get("best_variant_json"):
            self.client.log_text(parent_id, report["best_variant_json"], BEST_VARIANT_FILE)
        metrics = {
            "dev_score": report.get("dev_score"),
            "heldout_score": report["heldout"]["score"],
            "heldout_ci_low": report["heldout"]["ci_low"],
            "heldout_ci_high": report["heldout"]["ci_high"],
            "base_heldout_score": report["base_heldout"]["score"],
            "p_value.best_vs_base": report["p_value"],
        }
        self._log_metrics(parent_id, metrics)

    def finish(self, run_id: str, ok: bool) -> None:
        """End a run in the state that tells the truth: FINISHED only when all went well, or
        when it is a study parent that was FINISHED before this rerun (its verdict stands;
        the rerun's error says what failed)."""
        ok = ok or run_id in self._was_finished
        self.client.set_terminated(run_id, status="FINISHED" if ok else "FAILED")

    def _children(self, parent_id: str, trial_id: str | None = None) -> list[Any]:
        parent = self.client.get_run(parent_id)
        flt = f"tags.`{PARENT}` = '{parent_id}'"
        if trial_id is not None:
            flt += f" and tags.`{TRIAL_ID}` = '{trial_id}'"
        return list(
            self.client.search_runs(
                [parent.info.experiment_id],
                filter_string=flt,
                order_by=["attributes.start_time ASC"],
                max_results=50_000,
            )
        )

    @_store_op("listing the sweep's finished trials")
    def finished_in_sweep(self, sweep_name: str, sweep_id: str) -> set[str]:
        """The trial ids with a FINISHED run under this sweep id's parent (the one
        `parent_run` finds), read only: nothing is created. What a rerun reads back."""
        name = experiment_name(self.config.experiment_prefix, sweep_name)
        exp = self.client.get_experiment_by_name(name)
        if exp is None:
            return set()
        found = self.client.search_runs(
            [exp.experiment_id],
            filter_string=f"tags.`{SWEEP_ID}` = '{sweep_id}' and tags.`{KIND}` = 'sweep'",
            order_by=["attributes.start_time ASC"],
            max_results=1,
        )
        return set(self.finished_trials(str(found[0].info.run_id))) if found else set()

    @_store_op("listing the sweep's trial runs")
    def finished_trials(self, parent_id: str) -> dict[str, str]:
        """trial id -> run id of the FINISHED child runs (other runs are left alone here)."""
        done: dict[str, str] = {}
        for run in self._children(parent_id):
            tid = run.data.tags.get(TRIAL_ID)
            if run.info.status == "FINISHED" and tid and tid not in done:
                done[tid] = str(run.info.run_id)
        return done

    @contextlib.contextmanager
    def claim(self, parent_id: str, trial_id: str, wait: bool) -> Iterator[Claim | None]:
        """Claim a trial under a parent, for this process only.

        Yields a `Claim` once this process holds the trial's lock: naming the trial's FINISHED
        run when it has one, else none, and this process must run it (any unfinished run of
        it is then a leftover of a killed process and is deleted, as are FINISHED
        duplicates); or None when a peer holds it right now and `wait` is False.
        """
        lock = _lock_dir(self.config) / f"trial-{trial_id[:40]}-{parent_id[:16]}.lock"
        with _file_lock(lock, timeout=-1 if wait else 0) as got:
            if not got:
                yield None
                return
            with store_errors(self.config, f"claiming trial {trial_id[:12]}"):
                runs = self._children(parent_id, trial_id)
                finished = [r for r in runs if r.info.status == "FINISHED"]
                for run in runs:
                    if finished and run.info.run_id == finished[0].info.run_id:
                        continue
                    self.client.delete_run(run.info.run_id)
            yield Claim(str(finished[0].info.run_id) if finished else None)

    @_store_op("deleting a trial run whose artifacts are gone")
    def discard_run(self, run_id: str) -> None:
        """Delete a run that cannot be used (its predictions vanished): its trial reruns."""
        self.client.delete_run(run_id)
