"""Every id recipe of the workbench under one name each, so a stored id is never re-derived by hand.

Trials, sweeps, specs, Optuna studies and cached responses are found again by these ids (a
resumed sweep, a cached rerun, a reused MLflow run): each recipe here is kept byte for byte
as the code before it gave it (`tests/test_pinned_ids.py` pins the values). The recipes differ
on purpose (their `json.dumps` settings, how much of the digest is kept): unifying two of them
would change every id one of them ever stored.

Recipes (`json.dumps` settings; hex digits kept):
- `canonical_sha256` (trial id, rows fingerprint, cache key, variant id, import id, judge
  id): sorted keys, compact separators, non-ASCII kept; 64.
- `spec_id`: sorted keys, compact separators, non-ASCII escaped, `default=str`; 64.
- `sweep_id`: sorted keys only (default separators, non-ASCII escaped); 64.
- `study_key`: all defaults (a list: its order is the key); 64.
- `tag_sha` (predictions and grades hashes): sorted keys, non-ASCII kept, `default=str`,
  default separators; 32.
- `text_sha256`, `prompt_hash`, `short_sha`: a text, not JSON; 64, 16, 16.
- `seed_int`, `seed_uniform`: NUL-joined parts; an integer of 8 bytes, a number in [0, 1).

The variant id (`promptlib.variants.PromptVariant.id`) is `canonical_sha256(variant.to_dict())`;
it is computed in promptlib itself, which cannot import `experiments` (a test checks both agree).

This module imports nothing from the project, so every other module may use it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol


class _PredictionRow(Protocol):
    """What `predictions_sha` reads of a prediction (`trials.record.Prediction`)."""

    @property
    def index(self) -> str: ...
    @property
    def generation(self) -> str | None: ...
    @property
    def parsed(self) -> str | None: ...


# ---- canonical JSON (sorted keys, compact, UTF-8 as is) ---------------------------------------
def canonical_sha256(obj: Any) -> str:
    """sha256 of `obj` as canonical JSON: sorted keys, no spaces, non-ASCII kept as UTF-8."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def trial_id(identity: Mapping[str, Any]) -> str:
    """A trial's id from its identity (`trials.spec.ResolvedTrial.identity`)."""
    return canonical_sha256(identity)


def import_id(fmt: str, file_shas: Sequence[str], options: Mapping[str, Any]) -> str:
    """An import's id (`workbench import`): its format, its files' contents (sha256 each, in
    the order given) and its reading options; the same files read the same way are one import."""
    return canonical_sha256({"format": fmt, "files": list(file_shas), "options": dict(options)})


def rows_fingerprint(rows: Sequence[Mapping[str, str]]) -> str:
    """sha256 of the evaluated rows' whole content (every column), in evaluation order."""
    return canonical_sha256([sorted(r.items()) for r in rows])


def cache_key(identity: Mapping[str, Any], prompt: str, decoding: Mapping[str, Any]) -> str:
    """A response-cache key: the model's identity, the prompt and the decoding (as a dict,
    `llm.types.Decoding.to_dict()`)."""
    return canonical_sha256({"lm": identity, "prompt": prompt, "decoding": decoding})


def judge_id(
    judge: Mapping[str, Any],
    scoring: Mapping[str, Any],
    rubrics: Mapping[str, str],
    template: str,
) -> str:
    """A judge's id (`experiments.judge`): the judge model's identity (`LM.cache_identity`),
    how it scores (its decoding, or log-likelihood and its continuations), each criterion's
    rubric sha256 (criterion -> sha) and the judge prompt template's version. A judge score is
    found again only under the very judge that gave it."""
    return canonical_sha256(
        {
            "judge": dict(judge),
            "scoring": dict(scoring),
            "rubrics": dict(rubrics),
            "template": template,
        }
    )


def variant_id(variant: Mapping[str, Any]) -> str:
    """A prompt variant's id from `PromptVariant.to_dict()` (promptlib computes it itself)."""
    return canonical_sha256(variant)


# ---- the other JSON recipes -------------------------------------------------------------------
def spec_id(raw: Any) -> str:
    """A sweep spec's id from its YAML mapping (non-ASCII escaped, other values by `str`)."""
    blob = json.dumps(raw, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def sweep_id(
    spec_id: str,
    lm_identities: list[dict[str, Any]],
    tasks: list[str],
    limit: int | None,
    trial_ids: list[str],
) -> str:
    """A sweep's id (its parent run's resume key): spec, model identities, tasks, limit and
    the ids of its trials (in any order)."""
    blob = json.dumps(
        {
            "spec": spec_id,
            "models": lm_identities,
            "tasks": tasks,
            "limit": limit,
            "trials": sorted(trial_ids),
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def study_key(storage_shown: str, study_name: str, method: str) -> str:
    """An optimisation study's key: its storage URL without a password (`secrets.safe_url`),
    its name and its method."""
    blob = json.dumps([storage_shown, study_name, method])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def tag_sha(value: Any) -> str:
    """A short stable hash of JSON-able `value` (a tag value: MLflow caps tags, not this)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def predictions_sha(predictions: Iterable[_PredictionRow]) -> str:
    """What a run of a trial shows: each row's index, generation and parsed answer."""
    return tag_sha([[str(p.index), p.generation, p.parsed] for p in predictions])


def grades_sha(grades: Any) -> str:
    """The hash of a trial's hand grades (the `grades` list of its grades.json)."""
    return tag_sha(grades)


# ---- texts ------------------------------------------------------------------------------------
def text_sha256(text: str) -> str:
    """sha256 of a text as UTF-8 (a prompt template inside the trial identity)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prompt_hash(prompt: str) -> str:
    """A prediction's prompt hash: rows with equal hashes got the same prompt, so they form
    one cluster for the statistics (`experiments.analysis.clusters`)."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]


def short_sha(text: str) -> str:
    """16 hex digits of a text's sha256: a shortened metric name or param value, a lock folder."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# ---- seeds ------------------------------------------------------------------------------------
def seed_int(seed: int, *parts: str) -> int:
    """An RNG seed of 8 bytes from the user's seed and an identity (a sensitivity group's):
    no number depends on the order of anything else."""
    h = hashlib.sha256("\0".join((str(seed), *parts)).encode()).digest()
    return int.from_bytes(h[:8], "big")


def seed_uniform(seed: int, *parts: str) -> float:
    """`seed_int` as a number in [0, 1) (the simulated model of `testing.validation`)."""
    return seed_int(seed, *parts) / 2**64
