"""The work of `workbench run` as a function a test can call: one trial, saved and tracked.

The command (`cli.trial.run`) only turns its options into a `SingleRequest`, calls
`run_single`, prints the `SingleOutcome` and exits with its code. Every text comes from
`experiments.output`. A workbench error (bad variant, unknown task, unusable store) is raised
as before, for the command's `friendly` to print.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from experiments import output
from experiments.cli.options import CONCURRENCY, RETRIES, TIMEOUT, Setup
from experiments.llm.backends import DEFAULT_MODEL

if TYPE_CHECKING:
    from experiments.llm.types import LM, Scoring
    from experiments.metrics import Definition
    from experiments.tracking import TrackingError
    from experiments.trials.run import TrialResult
    from experiments.trials.spec import ResolvedTrial
    from promptlib.variants import PromptVariant


@dataclass(frozen=True)
class SingleRequest:
    """The options of `workbench run`, as plain values (the command's defaults)."""

    task: str
    model: str = DEFAULT_MODEL
    variant: str = "base"
    variant_file: str | None = None
    split: str = "test"
    limit: int | None = None
    seed: int = 0
    scoring: Scoring = "generate"
    mode: str | None = None
    api_base: str | None = None
    concurrency: int = CONCURRENCY
    retries: int = RETRIES
    timeout: float = TIMEOUT
    no_cache: bool = False
    no_track: bool = False
    definition: Definition = "code"
    data_dir: str | None = None
    hf: bool = False
    prompts_dir: str | None = None
    as_json: bool = False

    def setup(self) -> Setup:
        return Setup(
            data_dir=self.data_dir,
            hf=self.hf,
            prompts_dir=self.prompts_dir,
            api_base=self.api_base,
            concurrency=self.concurrency,
            retries=self.retries,
            timeout=self.timeout,
            mode=self.mode,
            no_cache=self.no_cache,
        )


@dataclass(frozen=True)
class SingleOutcome:
    """What `workbench run` prints and how it exits: `text` on stdout, then `error` (if any)
    on stderr, then exit `exit_code`."""

    text: str
    error: str | None
    exit_code: int
    summary: dict[str, Any]
    result: TrialResult


def chosen_variant(request: SingleRequest) -> PromptVariant:
    """The variant of --variant or --variant-file (not both), for the request's task."""
    # start-up time: the CLI imports a command's modules when it runs
    from promptlib.errors import VariantFileError
    from promptlib.variants import load_variant_file, parse_spec

    variant, variant_file, task = request.variant, request.variant_file, request.task
    if variant_file is not None and variant != "base":
        raise VariantFileError("give --variant or --variant-file, not both")
    chosen = load_variant_file(variant_file) if variant_file is not None else parse_spec(variant)
    if chosen.task not in (None, task):
        raise VariantFileError(
            f"variant file {variant_file} holds a variant of task {chosen.task!r}, not {task!r}"
        )
    return chosen


def run_single(
    request: SingleRequest, note: Callable[[str], None], lm: LM | None = None
) -> SingleOutcome:
    """Run, save and track one trial; `note` gets each stderr note line as soon as it is known.

    `lm`: the model to call instead of the one `request.model` names (a test's scripted model).
    """
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.files import check_writable
    from experiments.trials.grading import save_keeping_grades
    from experiments.trials.run import run_trial
    from experiments.trials.spec import TrialSpec, resolve_trial
    from experiments.trials.store import runs_dir

    task, model = request.task, request.model
    chosen = chosen_variant(request)
    texts, unchecked = _unreviewed(request, note)
    if request.scoring != "generate":
        # start-up time: the CLI imports a command's modules when it runs
        from experiments.llm.loglik import require_loglik_model

        # a remote model without a server that echoes prompt log-probabilities: one clear
        # line, before any work
        require_loglik_model(model, request.api_base)
    setup = request.setup()
    spec = TrialSpec(
        task=task,
        variant=chosen,
        model=model,
        split=request.split,
        limit=request.limit,
        seed=request.seed,
        scoring=request.scoring,
        definition=request.definition,
    )
    catalog = setup.catalog()
    catalog.task(task)  # unknown task -> clear error before loading any model
    lm = setup.lm(model) if lm is None else lm
    # bad variant/rows fail here, before calls; a hand-graded task (rule_qa) gets no score
    resolved = resolve_trial(spec, catalog, lm, hand_graded=True)
    for line in resolved.compiled.notes:  # the prompt works against its variant: say so
        note(f"note: {task}: {line}")
    outputs = [("trial results", runs_dir()), *setup.cache_outputs()]
    tracking = _Tracking(task, resolved.id, outputs) if not request.no_track else None
    check_writable(outputs)
    cache = setup.cache()
    with output.progress_bar(f"{task} · {spec.variant.label} · {model}") as bar:
        result = run_trial(resolved, catalog, lm, cache=cache, progress=bar)
    # on disk before tracking: a store failure loses nothing (hand grades carried over, a
    # complete trial never replaced by an unfinished rerun)
    out_dir, summary = save_keeping_grades(result)
    if summary.get("grades_dropped"):
        note(output.run_note(summary["grades_dropped"]))
    summary["predictions"] = str(out_dir / "predictions.jsonl")
    if result.redacted_rows:  # scored on the redacted text: say so with the trial
        note(
            f"note: {task}: {result.redacted_rows} of {len(result.predictions)} replies held a "
            "secret (a key, a bearer token, a URL password), hidden as *** before they were "
            f"scored and recorded; see 'redacted' in {summary['predictions']}"
        )
    track_error = None
    if tracking is not None:
        track_error = tracking.log(
            result, resolved, lambda: str(catalog.task(task).files.split_path(spec.split)), summary
        )
    if texts:
        summary["unreviewed"] = unchecked
        if tracking is not None and track_error is None and "mlflow_run_id" in summary:
            track_error = tracking.mark(summary["mlflow_run_id"], unchecked)
    text = output.as_json(summary) if request.as_json else output.trial_summary(summary)
    # an unfinished rerun of a better result is one line: what failed and what was kept
    kept = output.run_kept_notes(summary)
    if track_error is not None:
        for line in kept:
            note(output.run_note(line))
        error = output.run_untracked_error(str(out_dir), str(track_error))
        return SingleOutcome(text, error, track_error.exit_code, summary, result)
    if not result.complete:
        error = output.run_incomplete_error(
            result.status,
            result.failure_reason(),
            summary["predictions"],
            result.rerun_helps,
            kept,
        )
        return SingleOutcome(text, error, 1, summary, result)
    return SingleOutcome(text, None, 0, summary, result)


def _unreviewed(request: SingleRequest, note: Callable[[str], None]) -> tuple[bool, list[str]]:
    """Whether --variant names text files, and those generated and not yet reviewed (each
    said to `note` at once)."""
    # start-up time: the CLI imports a command's modules when it runs
    from experiments.generate.review import files_in_variant, unreviewed

    files = files_in_variant(request.variant) if request.variant_file is None else []
    unchecked = unreviewed(files)
    for path in unchecked:
        note(output.unreviewed_warning(path))
    return bool(files), unchecked


class _Tracking:
    """The MLflow side of one `workbench run`: opened (or found unneeded) before any call,
    written after the trial is saved."""

    def __init__(self, task: str, trial_id: str, outputs: list[Any]) -> None:
        # start-up time: the CLI imports a command's modules when it runs
        from experiments import tracking

        self.tracker: tracking.Tracker | None = None
        self.config = tracking.load_config()
        # A trial tracked before is most often a cached rerun that changes nothing: the store
        # was just read, so MLflow (1.5 s to open) waits until something must be written.
        if not tracking.tracked_before(self.config, task, trial_id):
            try:
                # an unusable store fails before any call
                self.tracker = tracking.Tracker(self.config)
            except tracking.TrackingError as e:
                raise tracking.TrackingError(
                    f"{e}; or pass --no-track to run without MLflow"
                ) from None
        artifacts = tracking.artifact_dir(self.config)
        if artifacts is not None:
            outputs.append(("MLflow artifacts", artifacts))

    def log(
        self,
        result: TrialResult,
        resolved: ResolvedTrial,
        source: Callable[[], str],
        summary: dict[str, Any],
    ) -> TrackingError | None:
        """Log the trial (or find its run); its run's fields go into `summary`. Returns the
        `TrackingError` that stopped it, or None."""
        # start-up time: the CLI imports a command's modules when it runs
        from experiments import tracking

        # a rerun that changes nothing is answered from the store without MLflow
        tracked = tracking.reusable_run(result, self.config) if self.tracker is None else None
        try:
            if tracked is None:
                self.tracker = self.tracker or tracking.Tracker(self.config)
                tracked = self.tracker.log_run(
                    result, resolved.compiled, resolved.rows, source=source()
                )
            summary.update(tracked)
        except tracking.TrackingError as e:
            return e
        return None

    def mark(self, run_id: str, unchecked: list[str]) -> TrackingError | None:
        """Tag the run with the unreviewed files it used, or clear the tag (`mark_unreviewed`)."""
        # start-up time: the CLI imports a command's modules when it runs
        from experiments import tracking
        from experiments.tracking.generations import mark_unreviewed

        try:
            self.tracker = self.tracker or tracking.Tracker(self.config)
            mark_unreviewed(self.tracker, run_id, unchecked)
        except tracking.TrackingError as e:
            return e
        return None
