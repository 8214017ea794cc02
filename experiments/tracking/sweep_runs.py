"""Which sweep run `workbench report REF` means: a sweep's name (its latest run), a sweep id
or a unique prefix of one, or an MLflow run id (the sweep's parent run, or one of its trial
runs).

Why: one spec run on two models is two sweep runs (two sweep ids, two parent runs) under one
name; the report of the first must stay reachable once the second ran. A name alone means
the run most recently run (the ``workbench.last_run`` tag), as before; the others are listed
(`SweepRunChoice.others`) so the report can say how to pick one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from experiments.names import (
    KIND,
    LAST_RUN,
    PARENT,
    SWEEP_ID,
    SWEEP_NAME,
    check_name,
    experiment_name,
)
from experiments.secrets import safe_url
from experiments.tracking.base import TrackerBase
from experiments.tracking.store import _store_op
from promptlib.errors import WorkbenchError, first_few

_HEX = re.compile(r"[0-9a-f]+")
SHORT_ID = 12  # hex digits of a sweep id shown in lists (any unique prefix is accepted)


class SweepNotFound(WorkbenchError):
    """`workbench report REF`: REF names no sweep run, or more than one (exit 2)."""


@dataclass(frozen=True)
class SweepRun:
    """One run of a sweep: its parent run in MLflow and what tells it from its siblings."""

    name: str
    sweep_id: str
    run_id: str
    status: str
    models: str  # the parent's `models` param, comma-separated
    last_run: float  # seconds since the epoch this sweep id was last run
    params: Mapping[str, str] = field(default_factory=dict)

    @property
    def short_id(self) -> str:
        return self.sweep_id[:SHORT_ID]

    def to_dict(self) -> dict[str, Any]:
        """As `workbench report --json` lists it (params left out: the chosen run has them)."""
        return {
            "sweep": self.name,
            "sweep_id": self.sweep_id,
            "run_id": self.run_id,
            "status": self.status,
            "models": self.models,
            "last_run": self.last_run,
        }

    def label(self) -> str:
        """'3f2a9c1e4b5d (models local/smollm2, FINISHED)': one run in a list of them."""
        return f"{self.short_id} (models {self.models or '?'}, {self.status})"


@dataclass(frozen=True)
class SweepRunChoice:
    """The run `workbench report REF` shows, and the other runs of its sweep (newest first)."""

    run: SweepRun
    others: tuple[SweepRun, ...]
    by_name: bool  # REF was the sweep's name (so the run is its latest)


def _run_of(run: Any) -> SweepRun:
    tags = run.data.tags
    return SweepRun(
        name=str(tags.get(SWEEP_NAME) or ""),
        sweep_id=str(tags.get(SWEEP_ID) or ""),
        run_id=str(run.info.run_id),
        status=str(run.info.status),
        models=str(run.data.params.get("models") or ""),
        last_run=float(tags.get(LAST_RUN) or 0) or (run.info.start_time or 0) / 1000,
        params=dict(run.data.params),
    )


def _newest_first(runs: Sequence[SweepRun]) -> list[SweepRun]:
    return sorted(runs, key=lambda r: (-r.last_run, r.sweep_id))


class SweepRuns(TrackerBase):
    """Finding a sweep's runs by name, sweep id or MLflow run id."""

    def _sweep_parents(self, experiment_ids: list[str], extra: str = "") -> list[SweepRun]:
        """Every active sweep parent run in these experiments, one per sweep id (the oldest,
        the one `Parents.parent_run` reuses), newest first."""
        if not experiment_ids:
            return []
        found = self.client.search_runs(
            experiment_ids,
            filter_string=f"tags.`{KIND}` = 'sweep'{extra}",
            order_by=["attributes.start_time ASC"],
            max_results=10_000,
        )
        first: dict[str, SweepRun] = {}
        for run in found:
            r = _run_of(run)
            if r.sweep_id and r.sweep_id not in first:
                first[r.sweep_id] = r
        return _newest_first(list(first.values()))

    def _sweep_experiments(self) -> list[str]:
        """The ids of this store's experiments under the configured prefix."""
        prefix = self.config.experiment_prefix
        # `_` and `%` are LIKE wildcards: filter the names here, not in the query
        exps = self.client.search_experiments(max_results=50_000)
        return [str(e.experiment_id) for e in exps if str(e.name).startswith(prefix + "/")]

    @_store_op("reading the sweep's runs")
    def sweep_runs(self, sweep_name: str) -> list[SweepRun]:
        """The runs (sweep ids) of the sweep named `sweep_name`, newest first."""
        exp = self.client.get_experiment_by_name(
            experiment_name(self.config.experiment_prefix, sweep_name)
        )
        return [] if exp is None else self._sweep_parents([str(exp.experiment_id)])

    @_store_op("finding the sweep run")
    def find_sweep(self, ref: str) -> SweepRunChoice:
        """The sweep run `ref` names: a sweep name (its latest run), a sweep id or a unique
        prefix of one, or an MLflow run id (a sweep's parent run or one of its trial runs).

        Raises `SweepNotFound` naming the candidates when `ref` matches no run, or runs of
        more than one sweep id."""
        ref = ref.strip()
        named = self.sweep_runs(ref) if check_name(ref) else []
        hex_ref = ref.lower() if _HEX.fullmatch(ref.lower()) else ""
        by_id = self._by_sweep_id(hex_ref) if hex_ref else []
        by_run = self._by_run_id(hex_ref) if hex_ref else None
        if named and not by_id and by_run is None:
            return SweepRunChoice(named[0], tuple(named[1:]), by_name=True)
        candidates = {r.sweep_id: r for r in [*named[:1], *by_id, *([by_run] if by_run else [])]}
        if len(candidates) == 1:
            (run,) = candidates.values()
            siblings = [r for r in self.sweep_runs(run.name) if r.sweep_id != run.sweep_id]
            return SweepRunChoice(run, tuple(siblings), by_name=False)
        if candidates:
            raise SweepNotFound(
                f"{ref!r} names {len(candidates)} sweep runs: "
                + "; ".join(
                    f"{r.name} {r.label()}" for r in _newest_first(list(candidates.values()))
                )
                + "; give more of the sweep id (workbench report <sweep id>)"
            )
        raise SweepNotFound(self._unknown(ref))

    def _by_sweep_id(self, prefix: str) -> list[SweepRun]:
        """The sweep runs whose sweep id starts with `prefix`, in every sweep experiment."""
        runs = self._sweep_parents(self._sweep_experiments())
        return [r for r in runs if r.sweep_id.startswith(prefix)]

    def _by_run_id(self, run_id: str) -> SweepRun | None:
        """The sweep run of the MLflow run `run_id` (its parent run, or a trial run's parent);
        None when no run has that id. A run of another kind (`workbench run`, a study) is an
        error that says what it is."""
        if len(run_id) != 32:  # MLflow's run ids: 32 hex digits
            return None
        # start-up time: mlflow is imported by the calls that use it
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException as e:
            if e.error_code == "RESOURCE_DOES_NOT_EXIST":
                return None
            raise
        if run.info.lifecycle_stage != "active":
            return None
        kind = run.data.tags.get(KIND)
        if kind == "trial" and run.data.tags.get(PARENT):
            parent = self.client.get_run(run.data.tags[PARENT])
            if parent.data.tags.get(KIND) == "sweep" and parent.info.lifecycle_stage == "active":
                return _run_of(parent)
        if kind == "sweep":
            return _run_of(run)
        raise SweepNotFound(
            f"MLflow run {run_id} is not a sweep's parent run or trial run (its {KIND} tag: "
            f"{kind or 'none'}); give a sweep's name, a sweep id, or the id of one of those runs"
        )

    def _unknown(self, ref: str) -> str:
        """The error for a `ref` that names nothing: what was looked for, and the sweeps."""
        names = sorted({r.name for r in self._sweep_parents(self._sweep_experiments()) if r.name})
        where = safe_url(self.config.tracking_uri)
        listed = f"sweeps there: {first_few(names, 10)}" if names else "no sweep has run there"
        return (
            f"no sweep named {ref!r} in {where} (nor a sweep id or MLflow run id starting "
            f"with it); {listed}; run 'workbench sweep ablations/<spec>.yaml' first"
        )
