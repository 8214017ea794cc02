"""lm-evaluation-harness ``--log_samples`` output: a trial per task (and filter), a row per
``doc_id``, its per-sample metric the correctness; the results file beside the samples gives the
task and model (``results_<date>.json`` next to ``samples_<task>_<date>.jsonl``).

The source's metric is carried as `ImportedTrial.metric` (lm-eval's legalbench tasks score
``exact_match`` on the filtered response, not LegalBench's balanced accuracy); every per-sample
metric and the filtered response are kept. Plain JSON: the lm-eval package is not needed."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from experiments.imports.records import (
    OK,
    ImportedRow,
    ImportedTrial,
    ImportInputError,
    ReadOptions,
    check_source,
    check_version,
    load_json,
    read_source,
)
from experiments.imports.source_fields import named_by, shown_input
from experiments.secrets import redact

TOOL = "lm-evaluation-harness"
RELEASES = ("0.4.3", "0.5")  # lm-eval releases [from, before) this reader knows (0.4.13 tested)
LEGALBENCH_DATASET = "nguha/legalbench"  # lm-eval's legalbench tasks: dataset_name is the task
_SAMPLES = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[\d.\-]+)\.jsonl$")
_RESULTS = re.compile(r"^results_(?P<date>\d{4}-\d{2}-\d{2}T[\d.\-]+)\.json$")


def read_lmeval(path: Path, opts: ReadOptions) -> list[ImportedTrial]:
    """The trials of a samples file, or of every task of a results file."""
    if (m := _SAMPLES.match(path.name)) is not None:
        results_path = path.with_name(f"results_{m['date']}.json")
        if results_path.exists():
            check_source(results_path)
        if not results_path.is_file():
            raise ImportInputError(
                f"{path}: no results file {results_path.name} beside it (it names the task's "
                "model and lm-eval version); import the samples where lm-eval wrote them"
            )
        try:
            results = _results(results_path)
        except ImportInputError as e:  # name the file given, then the one at fault
            raise ImportInputError(f"{path}: its results file {e}") from None
        return _task_trials(path, results, m["task"], opts, results_path)
    if (m := _RESULTS.match(path.name)) is not None:
        results = _results(path)
        trials = []
        for task in _tasks(path, results):
            samples = path.with_name(f"samples_{task}_{m['date']}.jsonl")
            if samples.exists():
                check_source(samples)
            if not samples.is_file():
                raise ImportInputError(
                    f"{path}: no samples file {samples.name} for task {task!r}; rerun lm-eval "
                    "with --log_samples"
                )
            trials += _task_trials(samples, results, task, opts, path)
        return trials
    raise ImportInputError(
        f"{path}: not an lm-eval output file name (samples_<task>_<date>.jsonl, written by "
        "--log_samples, or results_<date>.json); is it another tool's file?"
    )


def _results(path: Path) -> dict[str, Any]:
    """The results file, checked: JSON, lm-eval's, of a release this reader knows."""
    try:
        data = load_json(path, read_source(path))
    except json.JSONDecodeError as e:
        raise ImportInputError(
            f"{path}: not a readable lm-eval results file ({type(e).__name__}); a truncated "
            "file? rerun lm-eval"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("configs"), dict):
        raise ImportInputError(
            f"{path}: not an lm-eval results file (no 'configs'); is it another tool's file?"
        )
    version = data.get("lm_eval_version")  # written since lm-eval 0.4.3
    check_version(path, "lm-eval", version if isinstance(version, str) else None, *RELEASES)
    return data


def _tasks(path: Path, results: Mapping[str, Any]) -> list[str]:
    tasks = [t for t in results["configs"] if t in (results.get("results") or {})]
    if not tasks:
        raise ImportInputError(f"{path}: names no task with results; a run cut short?")
    return tasks


def _task_trials(
    samples_path: Path,
    results: Mapping[str, Any],
    task: str,
    opts: ReadOptions,
    results_path: Path,
) -> list[ImportedTrial]:
    """A trial per filter of `task` (lm-eval logs each doc once per filter); both files are
    its companions (tracked with the sources, whichever of them was given)."""
    config = results["configs"].get(task)
    if not isinstance(config, dict):
        raise ImportInputError(
            f"{samples_path}: task {task!r} is not in its results file; were the files of "
            "two runs mixed? import the samples with the results file of their run"
        )
    by_filter: dict[str, list[ImportedRow]] = {}
    metric: dict[str, str] = {}
    for n, sample in _lines(samples_path):
        name = str(sample.get("filter") or "none")
        metric.setdefault(name, _metric(samples_path, n, sample, config, opts.scorer))
        by_filter.setdefault(name, []).append(_row(samples_path, n, sample, metric[name]))
    if not by_filter:
        raise ImportInputError(f"{samples_path}: no samples; a run cut short? rerun lm-eval")
    _check_count(samples_path, results, task, by_filter)
    variant = _variant(samples_path, results, config, task, opts)
    return [
        ImportedTrial(
            source_file=samples_path,
            tool=TOOL,
            tool_version=str(results["lm_eval_version"]),
            task=_legalbench_task(samples_path, config, opts),
            variant=variant if len(by_filter) == 1 else f"{variant} [filter {name}]",
            model=_model(samples_path, results, config, opts),
            metric=metric[name],
            rows=tuple(rows),
            companions=(results_path, samples_path),
        )
        for name, rows in by_filter.items()
    ]


def _check_count(
    path: Path, results: Mapping[str, Any], task: str, by_filter: Mapping[str, list[ImportedRow]]
) -> None:
    """Each filter has as many docs as the results file says were evaluated (a samples file
    cut at a line's end parses, but lacks rows)."""
    expected = ((results.get("n-samples") or {}).get(task) or {}).get("effective")
    if not isinstance(expected, int):
        return
    for name, rows in by_filter.items():
        if len(rows) != expected:
            raise ImportInputError(
                f"{path}: {len(rows)} samples (filter {name}) but the results file says "
                f"{expected} were evaluated; a truncated or mixed file? take lm-eval's files whole"
            )


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    lines = read_source(path).splitlines()
    last = max((n for n, line in enumerate(lines, 1) if line.strip()), default=0)
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = load_json(path, line, n)
        except json.JSONDecodeError:
            cut = " (the last: a truncated file?)" if n == last else ""
            raise ImportInputError(
                f"{path}: line {n}{cut} is not JSON; rerun lm-eval with --log_samples"
            ) from None
        if not isinstance(obj, dict) or "doc_id" not in obj:
            raise ImportInputError(
                f"{path}: line {n} has no doc_id; not an lm-eval --log_samples line (each "
                "row needs its doc_id)"
            )
        yield n, obj


def _metric(
    path: Path, n: int, sample: Mapping[str, Any], config: Mapping[str, Any], wanted: str | None
) -> str:
    """The per-sample metric that is the correctness: `wanted` (--scorer), else the task's
    first listed metric."""
    listed = [str(m) for m in sample.get("metrics") or []]
    listed += [str(m.get("metric")) for m in config.get("metric_list") or [] if isinstance(m, dict)]
    if wanted is not None:
        if isinstance(sample.get(wanted), int | float):
            return wanted
        raise ImportInputError(
            f"{path}: line {n} has no per-sample metric {wanted!r} (--scorer); its metrics: "
            f"{', '.join(dict.fromkeys(listed)) or '(none)'}"
        )
    for name in listed:
        if isinstance(sample.get(name), int | float):
            return name
    raise ImportInputError(
        f"{path}: line {n} has no numeric per-sample metric (looked for "
        f"{', '.join(listed) or 'the task metric_list'}); not a --log_samples file of a scored run?"
    )


def _row(path: Path, n: int, sample: Mapping[str, Any], metric: str) -> ImportedRow:
    value = sample.get(metric)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ImportInputError(
            f"{path}: line {n} (doc_id {sample.get('doc_id')}) has no {metric} value; "
            "every sample of a task needs its metric"
        )
    metrics = {m: sample[m] for m in sample.get("metrics") or [] if m in sample}
    filtered = sample.get("filtered_resps")
    prediction = filtered[0] if isinstance(filtered, list) and filtered else filtered
    target = sample.get("target")
    prompt = sample.get("prompt_hash")  # lm-eval's hash of the prompt it sent (its context)
    return ImportedRow(
        row_id=str(sample["doc_id"]),
        correct=float(value),
        prediction=prediction if isinstance(prediction, str) else None,
        answer=target if isinstance(target, str) else None,
        status=OK,
        extra={
            "metrics": metrics,
            "filtered_resps": filtered,
            "filter": sample.get("filter"),
            "target": target,
            "doc_hash": sample.get("doc_hash"),
            "prompt_hash": sample.get("prompt_hash"),
        },
        prompt=prompt if isinstance(prompt, str) and prompt.strip() else None,
        input_text=shown_input(sample.get("doc")),
        prompt_text=_context(sample.get("arguments")),
    )


def _context(arguments: Any) -> str | None:
    """The prompt lm-eval sent: the first request's context (``gen_args_0.arg_0``)."""
    if not isinstance(arguments, Mapping):
        return None
    first = arguments.get("gen_args_0")
    text = first.get("arg_0") if isinstance(first, Mapping) else None
    return text if isinstance(text, str) else None


def _legalbench_task(path: Path, config: Mapping[str, Any], opts: ReadOptions) -> str | None:
    """--task, else the LegalBench task of one of lm-eval's legalbench tasks."""
    own = config.get("dataset_name") if config.get("dataset_path") == LEGALBENCH_DATASET else None
    if own and opts.task and opts.task != own:
        raise ImportInputError(
            f"{path}: lm-eval task {config.get('task')!r} is LegalBench's {own!r} but --task "
            f"{opts.task}; drop --task or import the files of {opts.task}"
        )
    return opts.task or (str(own) if own else None)


def _sources(results: Mapping[str, Any], config: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [("the task's config", config), ("the results file", results)]


def _variant(
    path: Path, results: Mapping[str, Any], config: Mapping[str, Any], task: str, opts: ReadOptions
) -> str:
    """--variant-from (a dotted field of the task's config, e.g. ``doc_to_text``, or of the
    results file, e.g. ``system_instruction``), else the lm-eval task's name."""
    if opts.variant_from:
        return named_by(path, _sources(results, config), opts.variant_from, "--variant-from")
    return task


def _model(
    path: Path, results: Mapping[str, Any], config: Mapping[str, Any], opts: ReadOptions
) -> str:
    """--model-from, else the results file's ``model_name`` (or its model type and args)."""
    if opts.model_from:
        return named_by(path, _sources(results, config), opts.model_from, "--model-from")
    name = results.get("model_name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    run = results.get("config") or {}
    # model_args can carry a key (api_key=...): redacted before it names anything
    return redact(f"{run.get('model', 'unknown')}({run.get('model_args', '')})")
