"""inspect_ai eval logs (``.eval``, ``.json``) read with inspect_ai's own log API
(`inspect_ai.log.read_eval_log`): a trial per log, a row per sample, its score the correctness.

Several epochs are reduced as the log says (its ``reductions``: the task's epoch reducer, e.g.
``mean`` or ``mode``), or kept apart (``--epochs separate``: each sample id and epoch is a row,
paired by both). Samples the log's dataset lists but the log lacks (a cancelled or failed run)
are rows with status ``missing``; a sample that errored is a row with status ``error``; neither
is ever scored as wrong. inspect-ai is the optional extra ``interop``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.imports.identity import digest
from experiments.imports.records import (
    OK,
    WHAT,
    ImportedRow,
    ImportedTrial,
    ImportInputError,
    ReadOptions,
    check_source,
    check_version,
)
from experiments.imports.source_fields import call_text, named_by
from promptlib import inputs

TOOL = "inspect_ai"
LOG_VERSIONS = (1, 2)  # the log formats inspect_ai 0.3 writes; a newer one is refused
RELEASES = ("0.3", "0.4")  # inspect_ai releases [from, before) this reader was built and tested on
SUFFIXES = (".eval", ".json")
_NEWER_FORMAT = re.compile(r"Unable to read version (\d+) of log format")  # inspect_ai's words
# inspect_ai's score letters (inspect_ai.scorer CORRECT, INCORRECT, PARTIAL, NOANSWER)
_LETTERS = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
_WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}


def read_inspect(path: Path, opts: ReadOptions) -> list[ImportedTrial]:
    """One trial from an inspect_ai eval log; ``opts.scorer`` picks one of several scorers,
    ``opts.epochs`` ``"separate"`` keeps the epochs apart."""
    epochs, scorer = opts.epochs or "reduce", opts.scorer
    if epochs not in ("reduce", "separate"):
        raise ImportInputError(f"{path}: --epochs {epochs}: give 'reduce' or 'separate'")
    log = _read_log(path)
    version = _check_version(path, log)
    name = _scorer(path, log, scorer)
    n_epochs = int(log.eval.config.epochs or 1)
    if epochs == "reduce" and n_epochs > 1:
        rows, reducer = _reduced_rows(path, log, name)
        metric = f"{name} ({reducer} over {n_epochs} epochs)"
    else:
        rows, metric = _sample_rows(path, log, name, keep_epoch=epochs == "separate"), name
    header = _header(log)
    variant = _variant(path, header, opts)
    model = str(log.eval.model)
    if opts.model_from:
        model = named_by(path, [("the eval spec", header["eval"]), ("the log", header)],
                         opts.model_from, "--model-from")  # fmt: skip
    return [
        ImportedTrial(
            source_file=path,
            tool=TOOL,
            tool_version=version,
            task=opts.task,
            variant=variant,
            model=model,
            metric=metric,
            rows=tuple(rows),
        )
    ]


def _read_log(path: Path) -> Any:
    """The log, or a one-line error: not there, not a log, cut off, or no inspect-ai."""
    if path.suffix not in SUFFIXES:
        raise ImportInputError(
            f"{path}: an inspect_ai eval log ends in .eval or .json, not {path.suffix or '(none)'}"
            "; is it another tool's file? use that format's name"
        )
    check_source(path)  # a FIFO or device is refused, never handed to inspect_ai
    if path.stat().st_size > inputs.MAX_DATA_BYTES:
        inputs.read_bytes(path, WHAT, ImportInputError, inputs.MAX_DATA_BYTES)  # says so
    try:
        # optional: inspect-ai is the `interop` extra; the workbench starts without it
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise ImportInputError(
            f"{path}: reading inspect_ai logs needs inspect-ai: "
            "pip install 'legal-prompt-workbench[interop]'"
        ) from None
    try:
        return read_eval_log(str(path))
    except Exception as e:  # inspect_ai raises zip, JSON, pydantic and its own errors
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        if (newer := _NEWER_FORMAT.search(first)) is not None:
            raise ImportInputError(_unsupported_format(path, int(newer[1]), None)) from None
        raise ImportInputError(
            f"{path}: not a readable inspect_ai eval log ({type(e).__name__}: {first[:160]}); "
            "a truncated file (rerun, or take the log inspect_ai wrote whole), or another "
            "tool's results (use that format's name)?"
        ) from None


def _check_version(path: Path, log: Any) -> str | None:
    """The inspect_ai version that wrote the log; refuses log formats and releases this
    reader does not know, and a log of a run that never finished writing."""
    tool_version = (log.eval.packages or {}).get("inspect_ai")
    if log.version not in LOG_VERSIONS:
        raise ImportInputError(_unsupported_format(path, log.version, tool_version))
    check_version(path, TOOL, None if tool_version is None else str(tool_version), *RELEASES)
    if log.status == "started":
        raise ImportInputError(
            f"{path}: the eval was still running (status 'started') when this log was written; "
            "wait for it to finish, or rerun it"
        )
    return None if tool_version is None else str(tool_version)


def _unsupported_format(path: Path, version: int, tool_version: str | None) -> str:
    return (
        f"{path}: inspect_ai log format {version} (written by inspect_ai "
        f"{tool_version or 'unknown'}) is not supported; this reader reads formats "
        f"{', '.join(map(str, LOG_VERSIONS))} (inspect_ai {RELEASES[0]}.x): convert the log "
        "with that release (`inspect log convert`) or export its rows as jsonl"
    )


def _scorer(path: Path, log: Any, wanted: str | None) -> str:
    """The scorer whose score is the correctness: the one asked for, the only one, or the
    log's headline scorer."""
    names = _scorer_names(log)
    if wanted is not None:
        if wanted not in names:
            raise ImportInputError(
                f"{path}: no scorer {wanted!r} in this log; its scorers: "
                f"{', '.join(names) or '(none)'}"
            )
        return wanted
    if len(names) == 1:
        return names[0]
    headline = getattr(getattr(log, "results", None), "headline", None)
    if headline is not None and headline.scorer in names:
        return str(headline.scorer)
    raise ImportInputError(
        f"{path}: {'no scorer' if not names else 'several scorers: ' + ', '.join(names)}; "
        + ("score the eval first (`inspect score`)" if not names else "choose one (--scorer NAME)")
    )


def _scorer_names(log: Any) -> list[str]:
    names = [s.name for s in (log.eval.scorers or [])]
    for sample in log.samples or []:
        for key in sample.scores or {}:
            if key not in names:
                names.append(key)
    return names


def _sample_rows(path: Path, log: Any, scorer: str, keep_epoch: bool) -> list[ImportedRow]:
    """A row per sample (per sample and epoch with `keep_epoch`), and a ``missing`` row for
    each listed sample (and epoch) the log lacks."""
    rows, seen = [], set()
    for sample in log.samples or []:
        seen.add((str(sample.id), int(sample.epoch)))
        rows.append(_sample_row(path, sample, scorer, sample.epoch if keep_epoch else None))
    n_epochs = int(log.eval.config.epochs or 1)
    for sample_id in log.eval.dataset.sample_ids or []:
        for epoch in range(1, n_epochs + 1) if keep_epoch else (1,):
            if (str(sample_id), epoch) not in seen:
                epoch_field = epoch if keep_epoch else None
                rows.append(_missing_row(str(sample_id), epoch_field))
    return rows


def _sample_row(path: Path, sample: Any, scorer: str, epoch: int | None) -> ImportedRow:
    score = (sample.scores or {}).get(scorer)
    status, correct = OK, None
    if sample.error is not None:
        status = "error"
    elif score is None:
        status = "unscored"
    else:
        where = f"sample {sample.id!r} epoch {sample.epoch}"
        correct = score_value(path, score.value, scorer, where)
    extra: dict[str, Any] = {"epoch": sample.epoch}
    if sample.error is not None:
        extra["error"] = str(sample.error.message)[:500]
    if score is not None and score.answer is not None:
        extra["scored_answer"] = score.answer
    return ImportedRow(
        row_id=str(sample.id),
        correct=correct,
        prediction=_completion(sample),
        answer=_target(sample.target),
        epoch=epoch,
        status=status,
        extra=extra,
        prompt=sample_input(sample),
        input_text=input_text(sample),
        prompt_text=prompt_text(sample),
    )


def _missing_row(sample_id: str, epoch: int | None) -> ImportedRow:
    return ImportedRow(row_id=sample_id, correct=None, epoch=epoch, status="missing")


def _reduced_rows(path: Path, log: Any, scorer: str) -> tuple[list[ImportedRow], str]:
    """A row per sample with the score the log reduced over its epochs; samples the log
    lists without a reduced score (errors, never run) keep their failure state."""
    reductions = [r for r in log.reductions or [] if r.scorer == scorer]
    if not reductions:
        raise ImportInputError(
            f"{path}: {log.eval.config.epochs} epochs but no reduced scores for scorer "
            f"{scorer!r} in the log; import the epochs kept apart (--epochs separate)"
        )
    reduction = reductions[0]  # the task's first epoch reducer
    reducer = reduction.reducer or "mean"  # inspect_ai's default reducer
    by_sample: dict[str, list[Any]] = {}
    for sample in log.samples or []:
        by_sample.setdefault(str(sample.id), []).append(sample)
    rows, reduced = [], set()
    for s in reduction.samples:
        sample_id = str(s.sample_id)
        reduced.add(sample_id)
        epochs = by_sample.get(sample_id, [])
        predictions = [_completion(e) for e in epochs]
        where = f"sample {sample_id!r} ({reducer} over its epochs)"
        rows.append(
            ImportedRow(
                row_id=sample_id,
                correct=score_value(path, s.value, scorer, where),
                prediction=predictions[0] if len(set(predictions)) == 1 else None,
                answer=_target(epochs[0].target) if epochs else None,
                extra={"reducer": reducer, "epochs": len(epochs), "predictions": predictions},
                prompt=sample_input(epochs[0]) if epochs else None,
                input_text=input_text(epochs[0]) if epochs else None,
                prompt_text=prompt_text(epochs[0]) if epochs else None,
            )
        )
    listed = [str(i) for i in log.eval.dataset.sample_ids or []] or list(by_sample)
    for sample_id in listed:
        if sample_id not in reduced:
            errored = any(e.error is not None for e in by_sample.get(sample_id, []))
            status = "error" if errored else "missing"
            rows.append(ImportedRow(row_id=sample_id, correct=None, status=status))
    return rows, reducer


def score_value(path: Path, value: Any, scorer: str, where: str) -> float:
    """An inspect_ai score value as a number: its letters C/I/P/N as inspect_ai maps them
    (1, 0, 0.5, 0), booleans, numbers, numeric or yes/no strings; anything else is refused
    (inspect_ai's own `value_to_float` would warn and count it 0, a wrong number)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text in _LETTERS:
            return _LETTERS[text]
        if text.lower() in _WORDS:
            return _WORDS[text.lower()]
        try:
            return float(text)
        except ValueError:
            pass
    raise ImportInputError(
        f"{path}: {where}: scorer {scorer!r} gave {value!r}, not a correctness (C/I/P/N, a "
        "boolean or a number); choose a scorer with one value per sample (--scorer NAME)"
    )


def sample_input(sample: Any) -> str | None:
    """The sample's input as a prompt identity: a hash of its text, or of its messages' roles
    and contents (not their ids, which inspect_ai draws afresh for every message); a log's
    samples share its solver, so samples with the same input got the same prompt."""
    given = getattr(sample, "input", None)
    if isinstance(given, str):
        return digest(given)
    if not isinstance(given, list) or not given:
        return None
    messages = []
    for m in given:
        content = getattr(m, "content", None)
        if not isinstance(content, str):
            content = [_plain(part) for part in content or []]
        messages.append({"role": getattr(m, "role", None), "content": content})
    return digest(messages)


def _text(content: Any) -> str:
    """A message's content as text: a string, or its parts' texts (others named by type)."""
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        text = getattr(part, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(part, 'type', 'content')}]")
    return "\n".join(parts)


def input_text(sample: Any) -> str | None:
    """The sample's input as the report shows it: its text, or its messages' texts."""
    given = getattr(sample, "input", None)
    if isinstance(given, str):
        return given
    if not isinstance(given, list) or not given:
        return None
    return "\n\n".join(_text(getattr(m, "content", None)) for m in given)


def prompt_text(sample: Any) -> str | None:
    """What the model was sent: the sample's messages before its first reply (role: text),
    as the solver built them (a system prompt, the templated user message)."""
    messages = getattr(sample, "messages", None) or []
    sent = []
    for m in messages:
        if getattr(m, "role", None) == "assistant":
            break
        sent.append(f"{getattr(m, 'role', '?')}: {_text(getattr(m, 'content', None))}")
    return "\n\n".join(sent) or None


def _plain(part: Any) -> Any:
    """A content part (text, image, ...) as plain data, without its empty fields."""
    dump = getattr(part, "model_dump", None)
    data = dump(mode="json", exclude_none=True) if dump is not None else part
    return data if isinstance(data, dict | str | int | float | list) else str(data)


def _completion(sample: Any) -> str | None:
    output = getattr(sample, "output", None)
    text = getattr(output, "completion", None) if output is not None else None
    return text if isinstance(text, str) else None


def _target(target: Any) -> str | None:
    if isinstance(target, str):
        return target
    if isinstance(target, list) and len(target) == 1 and isinstance(target[0], str):
        return target[0]
    return None  # several targets: no single answer to rescore against


def _header(log: Any) -> dict[str, Any]:
    """The log's eval spec and plan as plain data, for --variant-from / --model-from."""
    return {
        "eval": log.eval.model_dump(mode="json"),
        "plan": log.plan.model_dump(mode="json") if log.plan is not None else {},
        "status": log.status,
    }


def _variant(path: Path, header: Mapping[str, Any], opts: ReadOptions) -> str:
    """`--variant-from` (a dotted field of the eval spec, e.g. ``task_args.prompt`` or
    ``metadata.variant``, or of the whole log header, e.g. ``plan.steps.0.params.template``),
    else the task's name with its arguments."""
    spec = header["eval"]
    if opts.variant_from:
        return named_by(
            path, [("the eval spec", spec), ("the log", header)], opts.variant_from,
            "--variant-from",
        )  # fmt: skip
    return call_text(str(spec.get("task")), spec.get("task_args") or {})
