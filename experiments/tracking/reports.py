"""What a sweep's parent run reports: its trials' rows, the comparisons table with one p-value
metric per comparison, the figures, and the prompt sensitivity."""

from __future__ import annotations

import json
from typing import Any

from experiments.analysis.records import Comparison
from experiments.names import (
    COST_FIELDS,
    GRADED,
    GRADES_PENDING,
    GRADES_SHA,
    SEQUENTIAL_MEASURES,
    TRIAL_ID,
    TRIAL_STATUS,
    _param,
    comparison_parts,
    cost_metric_name,
    p_value_names,
    sequential_metric_name,
)
from experiments.reports.files import COMPARISONS_CSV, COMPARISONS_JSON, comparisons_csv
from experiments.reports.folders import INDEX as REPORT_HTML
from experiments.tracking.parents import Parents
from experiments.tracking.store import SweepIncomplete, _store_op, store_errors
from experiments.tracking.sweep_runs import SweepRuns


class Reports(Parents, SweepRuns):
    """Reading a sweep's trials and comparisons; logging its comparisons and sensitivity."""

    @_store_op("reading the sweep's trial runs")
    def sweep_trials(self, parent_id: str) -> list[dict[str, Any]]:
        """One row per trial of a sweep (its FINISHED or latest run): task, model, variant,
        status, score and invalid_rate, from the child runs' params and metrics.

        A hand-graded run's score counts only once its grades are complete (`_score_of`);
        otherwise `score` is None and `score_note` says why.
        """
        rows: dict[str, dict[str, Any]] = {}
        for run in self._children(parent_id):
            tid = run.data.tags.get(TRIAL_ID)
            if not tid or (tid in rows and rows[tid]["run_status"] == "FINISHED"):
                continue
            p, m = run.data.params, run.data.metrics
            score, note = _score_of(run)
            rows[tid] = {
                "trial_id": tid,
                "task": p.get("task"),
                "model": p.get("model"),
                "variant": p.get("variant"),
                "status": run.data.tags.get(TRIAL_STATUS),
                "run_status": run.info.status,
                "score": score,
                "score_note": note,
                "invalid_rate": m.get("invalid_rate"),
                "n": m.get("n"),
            }
        return list(rows.values())

    @_store_op("reading the sweep's trial runs")
    def sweep_trial_runs(self, parent_id: str) -> list[dict[str, Any]]:
        """One row per trial of a sweep with a FINISHED run (its first): trial id, run id,
        task, model, variant, metric, split, status and score, from the run's params, tags
        and metrics: what `workbench report --by` needs to read each trial's predictions."""
        rows: dict[str, dict[str, Any]] = {}
        for run in self._children(parent_id):
            tid = run.data.tags.get(TRIAL_ID)
            if not tid or tid in rows or run.info.status != "FINISHED":
                continue
            p = run.data.params
            score, _ = _score_of(run)
            rows[tid] = {
                "trial_id": tid,
                "run_id": str(run.info.run_id),
                "task": p.get("task"),
                "model": p.get("model"),
                "variant": p.get("variant"),
                "metric": p.get("metric"),
                "split": p.get("split"),
                "status": run.data.tags.get(TRIAL_STATUS),
                "score": score,
            }
        return list(rows.values())

    # ---- the parent's comparisons -------------------------------------------------------
    @_store_op("logging the sweep's comparisons")
    def log_comparisons(
        self,
        parent_id: str,
        doc: dict[str, Any],
        figures: dict[str, Any],
    ) -> None:
        """comparisons.json/.csv and one p_value metric per tested comparison."""
        table = doc["comparisons"]
        self.client.log_dict(parent_id, doc, COMPARISONS_JSON)
        self.client.log_text(parent_id, comparisons_csv(table), COMPARISONS_CSV)
        metrics: dict[str, Any] = {}
        # named among all the rows, tested or not, so a comparison keeps its name on a rerun
        # (the names from the stored rows, as `names` reads every kind of row)
        for row, part in zip(table, comparison_parts(table), strict=True):
            c = Comparison.from_dict(row)
            if c.p_value is None:
                continue  # untested (an incomplete trial): no number to log
            # full names here; `_log_metrics` makes them MLflow names (`metric_key`)
            key, corrected = p_value_names(row, part)
            metrics[key] = c.p_value
            metrics[corrected] = c.p_corrected
        self._log_metrics(parent_id, metrics)
        for filename, fig in figures.items():
            self.client.log_figure(parent_id, fig, filename)

    @_store_op("logging the sweep's HTML report")
    def log_report_html(self, run_id: str, page: str) -> None:
        """The HTML report (`reports.html`) as the run's index.html artifact: MLflow's
        artifact view shows it as a page (it is self-contained, so it works there)."""
        self.client.log_text(run_id, page, REPORT_HTML)

    @_store_op("reading the run's artifacts")
    def has_report_html(self, run_id: str) -> bool:
        """Whether the run holds an HTML report already (a sweep run before it existed has
        none: its rerun adds one)."""
        return REPORT_HTML in {a.path for a in self.client.list_artifacts(run_id)}

    @_store_op("logging the sweep's cost")
    def log_cost(
        self, parent_id: str, cost: dict[str, Any], sequential: list[dict[str, Any]]
    ) -> None:
        """A sweep's cost (``cost.<field>`` metrics, `COST_FIELDS`; the last invocation's
        calls) and each sequential comparison's numbers (``sequential.<task>.<model>.<a>_vs_
        <b>.<measure>``: rows at the stop, estimate, interval, looks; its decision as a tag
        on the same name, since MLflow metrics are numbers). A best-of-k row also gets the
        tags ``...best_identified`` ("true" / "false") and ``...in_contention`` (the arms
        not told apart), and its decision tag reads "best (not identified: in contention
        X, Y)" when more than one arm is left (`sequential_decision`)."""
        metrics: dict[str, Any] = {
            cost_metric_name(k): cost.get(k) for k in COST_FIELDS if cost.get(k) is not None
        }
        tags: dict[str, str] = {}  # full names; `_keys` makes them MLflow names
        for row, part in zip(sequential, comparison_parts(sequential), strict=True):
            values = {**row, "n_looks": len(row.get("looks") or ())}
            for measure in SEQUENTIAL_MEASURES:
                metrics[sequential_metric_name(row, measure, part)] = values.get(measure)
            for gone in row.get("eliminated") or ():  # rows it had when eliminated
                gone_name = sequential_metric_name(row, f"eliminated.{gone['variant']}", part)
                metrics[gone_name] = gone["rows"]
            tags[sequential_metric_name(row, "decision", part)] = sequential_decision(row)[:5000]
            if "best_identified" in row:  # best-of-k: is A the best arm, or one of several?
                identified = bool(row.get("best_identified"))
                tags[sequential_metric_name(row, "best_identified", part)] = str(identified).lower()
                tags[sequential_metric_name(row, "in_contention", part)] = ", ".join(
                    map(str, row.get("in_contention") or ())
                )[:5000]
        self._log_metrics(parent_id, metrics)
        keys = self._keys(parent_id, list(tags))
        for name, value in tags.items():
            self.client.set_tag(parent_id, keys[name], _param(value))

    @_store_op("reading the sweep's comparisons")
    def logged_comparisons(self, parent_id: str, figures: list[str]) -> dict[str, Any] | None:
        """The comparisons document on a parent run, if it and every named figure are there."""
        listed = {a.path for a in self.client.list_artifacts(parent_id)}
        if "comparisons.json" not in listed or not set(figures) <= listed:
            return None
        try:
            return dict(json.loads(self._artifact_text(parent_id, "comparisons.json")))
        except (OSError, ValueError, TypeError):
            return None

    @_store_op("reading the sweep's runs")
    def sweep_report(self, ref: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The sweep run `ref` names (`SweepRuns.find_sweep`: a name gives its latest run, a
        sweep id or prefix, or an MLflow run id) and its comparisons document.

        The run's `info` has its run id, status, params, sweep name and id, and ``others``:
        the sweep's other runs, newest first (`SweepRun.to_dict`)."""
        choice = self.find_sweep(ref)
        run = choice.run
        try:
            doc = json.loads(self._artifact_text(run.run_id, "comparisons.json"))
        except Exception as e:
            status = run.status
            why = (
                "it is still running, or was stopped before its comparisons"
                if status == "RUNNING"
                else "its artifacts are missing"
                if status == "FINISHED"
                else "it did not finish"
            )
            raise SweepIncomplete(
                f"sweep {run.name!r} (sweep id {run.short_id}, parent run {run.run_id}, "
                f"{status}) has no comparisons yet: {why}; run the sweep again to resume it"
            ) from e
        info = {
            "run_id": run.run_id,
            "status": run.status,
            "params": dict(run.params),
            "sweep": run.name,
            "sweep_id": run.sweep_id,
            "by_name": choice.by_name,
            "others": [o.to_dict() for o in choice.others],
        }
        return info, dict(doc)

    def log_sensitivity(
        self, parent_run_id: str, report: dict[str, Any], figures: dict[str, Any]
    ) -> None:
        """A sweep's prompt sensitivity on its parent run (see `experiments.analysis.sensitivity`).

        Metrics ``sensitivity.<task>.<model>.<measure>`` (spread, maxp, avgp, sensitiscore,
        share_prompt_dependent, ``_ci_low``/``_ci_high`` for avgp, sensitiscore and
        share_prompt_dependent only (a bootstrap of a max does not cover), and
        ``spread_p_value``; characters MLflow refuses in a name become ``_``, and names that
        would collide are refused before anything is logged), the
        artifacts ``variance_shares.json`` ({model: {shares: {factor: share}, ci: ...}}) and
        ``sensitivity.json`` (the whole report), and the figures.
        """

        # start-up time: a `workbench run` logging one trial never reads the sensitivity statistics
        from experiments.analysis.sensitivity import sensitivity_metrics, variance_shares_artifact

        metrics = sensitivity_metrics(report)
        with store_errors(self.config, "logging the sweep's prompt sensitivity"):
            self.client.log_dict(
                parent_run_id, variance_shares_artifact(report), "variance_shares.json"
            )
            self.client.log_dict(parent_run_id, report, "sensitivity.json")
            self._log_metrics(parent_run_id, metrics)
            for filename, fig in figures.items():
                self.client.log_figure(parent_run_id, fig, filename)


def _score_of(run: Any) -> tuple[float | None, str | None]:
    """A run's score and, when it has none to show, why (None when the score stands).

    Why: hand grades reach a run in several writes (`Tracker._put_grades`): the `score`
    metric is there while `grades_sha` still says `pending:`, and a grade import cut short
    leaves it so. Such a score is not the trial's (its folder is ungraded) and is not shown;
    nor is any score on a run marked graded "false".
    """
    tags = run.data.tags
    sha = tags.get(GRADES_SHA, "")
    if sha.startswith(GRADES_PENDING):
        return None, (
            "hand grades half-written on this run (grades_sha pending): no score until "
            f"'workbench grade import' of trial {tags.get(TRIAL_ID, '?')[:12]} completes"
        )
    if tags.get(GRADED) == "false":
        return None, "graded by hand and not graded yet: no score"
    return run.data.metrics.get("score"), None


def sequential_decision(row: dict[str, Any]) -> str:
    """A sequential comparison's decision as its parent run's tag says it: the decision (or
    why there is none); a best-of-k "best" whose best arm is not identified says so and names
    the arms still in contention, as the table does (`output.sequential_table`), so the tag
    never reads as if A were the best arm when it is only one of several."""
    decision = str(row.get("decision") or row.get("status"))
    if row.get("decision") == "best" and row.get("best_identified") is False:
        tied = ", ".join(map(str, row.get("in_contention") or ()))
        decision = f"best (not identified: in contention {tied})"
    return decision


def log_sensitivity(
    tracker: Reports, parent_run_id: str, report: dict[str, Any], figures: dict[str, Any]
) -> None:
    """`tracker.log_sensitivity(...)`, for callers that hold the tracker as an argument."""
    tracker.log_sensitivity(parent_run_id, report, figures)
