"""promptfoo ``promptfoo eval -o results.json`` output, read as the JSON file it is (no Node
needed): the prompt is the variant, the provider the model, the test the row (its index in
the config's tests), and the assertion outcome the correctness.

A result promptfoo could not grade (a provider error: ``failureReason`` 2) is a row with
status ``error``, never a wrong answer; a test without assertions (promptfoo counts it a
success, with nothing graded) is a row with status ``ungraded``, never a right one."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.imports.identity import digest
from experiments.imports.records import (
    OK,
    ImportedRow,
    ImportedTrial,
    ImportInputError,
    ReadOptions,
    load_json,
    read_source,
)
from experiments.imports.source_fields import named_by, shown_input

TOOL = "promptfoo"
RESULTS_VERSIONS = (3,)  # the `results.version` of promptfoo's JSON output this reader knows
_ERROR = 2  # promptfoo's ResultFailureReason.ERROR (1 is ASSERT: a graded failure)
_ANSWER_ASSERTIONS = ("equals", "contains", "icontains", "starts-with")


def read_promptfoo(path: Path, opts: ReadOptions) -> list[ImportedTrial]:
    """A trial per (prompt, provider) of a promptfoo results file."""
    data = _load(path)
    version = _check_version(path, data)
    prompts = {i: p for i, p in enumerate(data["results"].get("prompts") or [])}
    groups: dict[tuple[str, str], list[ImportedRow]] = {}
    order: dict[tuple[str, str], tuple[int, int]] = {}  # trials in the config's prompt order
    for n, result in enumerate(data["results"]["results"]):
        if not isinstance(result, dict):
            raise ImportInputError(f"{path}: result {n} is not an object; a damaged file?")
        key = (_variant(path, result, prompts, opts), _model(path, result, opts))
        groups.setdefault(key, []).append(_row(path, n, result))
        order.setdefault(key, (_index(result.get("promptIdx")), n))
    if not groups:
        raise ImportInputError(f"{path}: no results; did the eval run? rerun promptfoo eval")
    return [
        ImportedTrial(
            source_file=path,
            tool=TOOL,
            tool_version=version,
            task=opts.task,
            variant=variant,
            model=model,
            metric="assertions passed",
            rows=tuple(sorted(rows, key=lambda r: int(r.row_id))),
        )
        for (variant, model), rows in sorted(groups.items(), key=lambda kv: order[kv[0]])
    ]


def _index(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 1 << 30


def _load(path: Path) -> dict[str, Any]:
    if path.suffix != ".json":
        raise ImportInputError(
            f"{path}: promptfoo results are read from its JSON output (`promptfoo eval -o "
            "results.json`), not a .csv/.html/.yaml export; rerun with -o results.json"
        )
    try:
        data = load_json(path, read_source(path))
    except json.JSONDecodeError as e:
        raise ImportInputError(
            f"{path}: not readable JSON ({type(e).__name__}); a truncated file? rerun "
            "`promptfoo eval -o results.json`"
        ) from None
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, dict) or not isinstance(results.get("results"), list):
        raise ImportInputError(
            f"{path}: not a promptfoo results file (no results.results list); is it another "
            "tool's file? use that format's name"
        )
    return dict(data)


def _check_version(path: Path, data: Mapping[str, Any]) -> str | None:
    """promptfoo's version (from the file's metadata); refuses an output format it does not know."""
    tool_version = (data.get("metadata") or {}).get("promptfooVersion")
    version = data["results"].get("version")
    if version not in RESULTS_VERSIONS:
        raise ImportInputError(
            f"{path}: promptfoo results format {version} (promptfoo "
            f"{tool_version or 'unknown'}) is not supported; this reader reads format "
            f"{', '.join(map(str, RESULTS_VERSIONS))} (promptfoo 0.121 writes it): export the "
            "rows as jsonl, or rerun with a promptfoo that writes it"
        )
    return None if tool_version is None else str(tool_version)


def _row(path: Path, n: int, result: Mapping[str, Any]) -> ImportedRow:
    test_idx = result.get("testIdx")
    if isinstance(test_idx, bool) or not isinstance(test_idx, int):
        raise ImportInputError(
            f"{path}: result {n} has no testIdx (the test it ran); rows are paired by test: "
            "rerun `promptfoo eval -o results.json`"
        )
    success = result.get("success")
    errored = result.get("failureReason") == _ERROR
    if not errored and not isinstance(success, bool):
        raise ImportInputError(f"{path}: result {n} has no success flag; a damaged file?")
    response = result.get("response") or {}
    output = response.get("output") if isinstance(response, dict) else None
    test = result.get("testCase") or {}
    # a test without assertions: promptfoo calls it a success (score 1) with nothing graded
    ungraded = not errored and not test.get("assert") and not result.get("gradingResult")
    variables = result.get("vars") or test.get("vars") or {}
    return ImportedRow(
        row_id=str(test_idx),
        correct=None if errored or ungraded else float(bool(success)),
        prediction=output if isinstance(output, str) else None,
        answer=_answer(test),
        status="error" if errored else "ungraded" if ungraded else OK,
        extra={
            "description": test.get("description"),
            "vars": variables,
            "score": result.get("score"),
            "error": result.get("error"),
        },
        # a prompt's tests differ by their vars only: the same vars, the same prompt (no vars
        # at all is no identity: such tests differ by what the file does not say)
        prompt=digest(variables) if isinstance(variables, dict) and variables else None,
        input_text=shown_input(variables),
        prompt_text=_raw_prompt(result.get("prompt")),
    )


def _raw_prompt(prompt: Any) -> str | None:
    """The rendered prompt promptfoo sent (``prompt.raw``)."""
    raw = prompt.get("raw") if isinstance(prompt, Mapping) else None
    return raw if isinstance(raw, str) else None


def _answer(test: Mapping[str, Any]) -> str | None:
    """The expected text of the test's first equality-type assertion, if any."""
    for assertion in test.get("assert") or []:
        if isinstance(assertion, dict) and assertion.get("type") in _ANSWER_ASSERTIONS:
            value = assertion.get("value")
            return value if isinstance(value, str) else None
    return None


def _variant(
    path: Path, result: Mapping[str, Any], prompts: Mapping[int, Any], opts: ReadOptions
) -> str:
    """--variant-from (a dotted field of the result, e.g. ``prompt.raw`` or ``vars.style``),
    else the prompt's label (promptfoo's display name: its id or raw text by default)."""
    if opts.variant_from:
        return named_by(path, [("the result", result)], opts.variant_from, "--variant-from")
    prompt = result.get("prompt") or prompts.get(result.get("promptIdx", -1)) or {}
    label = prompt.get("label") or prompt.get("raw") if isinstance(prompt, dict) else None
    if not isinstance(label, str) or not label.strip():
        raise ImportInputError(
            f"{path}: a result names no prompt; name the variant with --variant-from FIELD"
        )
    return label.strip()


def _model(path: Path, result: Mapping[str, Any], opts: ReadOptions) -> str:
    """--model-from (a dotted field of the result), else the provider's label or id."""
    if opts.model_from:
        return named_by(path, [("the result", result)], opts.model_from, "--model-from")
    provider = result.get("provider")
    if isinstance(provider, dict):
        provider = provider.get("label") or provider.get("id")
    if not isinstance(provider, str) or not provider.strip():
        raise ImportInputError(
            f"{path}: a result names no provider; name the model with --model-from FIELD"
        )
    return provider.strip()
