"""`workbench variants generate` as a function: ask a generator model (the trials' gateway,
cache and retries) for N candidate texts, refuse the unusable ones, write the rest with their
provenance, and track the generation in MLflow like a trial."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments import ids
from experiments.generate import provenance as prov
from experiments.generate.prompt import (
    GenerateError,
    TaskBrief,
    check_kind,
    generation_prompt,
)
from experiments.llm.cache import ResponseCache, cache_key
from experiments.llm.types import LM, Completion, Decoding, is_hit
from experiments.settings import generated_dir
from experiments.tracking.generations import finish_generation, start_generation
from promptlib.tasks import Catalog

if TYPE_CHECKING:
    from experiments.tracking import Tracker


@dataclass(frozen=True)
class GenerateRequest:
    """The options of `workbench variants generate`, as plain values."""

    task: str
    kind: str
    generator: str
    n: int = 1
    out: Path | None = None
    force: bool = False
    temperature: float = 0.7
    max_tokens: int = 400


@dataclass
class Candidate:
    """One candidate text: written, unchanged (the same file is there), a duplicate of an
    earlier candidate, or refused (with the reason)."""

    number: int
    prompt: str
    completion: Completion
    cache_hit: bool
    text: str = ""
    status: str = "refused"
    reason: str | None = None
    path: Path | None = None
    sha256: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "candidate": self.number,
            "status": self.status,
            "reason": self.reason,
            "path": str(self.path) if self.path else None,
            "text_sha256": self.sha256,
            "cache_hit": self.cache_hit,
        }


@dataclass
class Generation:
    """What a generation did: its candidates and the MLflow run (None untracked)."""

    request: GenerateRequest
    key: str
    candidates: list[Candidate] = field(default_factory=list)
    mlflow_run_id: str | None = None

    @property
    def ok(self) -> bool:
        return all(c.status != "refused" for c in self.candidates)

    def to_dict(self) -> dict[str, Any]:
        r = self.request
        return {
            "task": r.task,
            "kind": r.kind,
            "generator": r.generator,
            "variant_key": self.key,
            "mlflow_run_id": self.mlflow_run_id,
            "candidates": [c.to_dict() for c in self.candidates],
        }


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def generate(
    request: GenerateRequest,
    catalog: Catalog,
    lm: LM,
    *,
    cache: ResponseCache | None = None,
    tracker: Tracker | None = None,
    now: Callable[[], str] = _now,
) -> Generation:
    """Generate, check and write the candidates; bad inputs fail before any model call."""
    key = check_kind(request.kind)
    brief = TaskBrief.of(catalog.task(request.task))  # unknown task -> did you mean
    paths = prov.planned_paths(request.out, request.n, request.force)
    decoding = Decoding(
        temperature=request.temperature,
        max_tokens=request.max_tokens,
        stop=(),
        mode=getattr(lm, "mode", "chat"),
    )
    gen = Generation(request, key)
    identity = lm.cache_identity()
    for i in range(1, request.n + 1):
        prompt = generation_prompt(brief, request.kind, i, request.n)
        completion, hit = _complete(lm, cache, identity, prompt, decoding)
        gen.candidates.append(_checked(brief, key, i, prompt, completion, hit))
    if tracker is not None:
        gen.mlflow_run_id = start_generation(
            tracker, request.task, request.kind, request.generator, _params(request, decoding)
        )
    generated_at = now()
    docs: dict[str, str] = {}
    for c in gen.candidates:
        if c.status == "refused":
            continue
        fields = prov.provenance(
            kind=request.kind,
            key=key,
            task=request.task,
            generator=request.generator,
            identity=identity,
            decoding=decoding.to_dict(),
            prompt=c.prompt,
            text=c.text,
            generated_at=generated_at,
            candidate=c.number,
            n=request.n,
            mlflow_run_id=gen.mlflow_run_id,
        )
        docs[f"candidate-{c.number}.yaml"] = _place(gen, c, paths, prov.document(c.text, fields))
    if tracker is not None and gen.mlflow_run_id is not None:
        finish_generation(tracker, gen.mlflow_run_id, _artifacts(gen, docs), _metrics(gen), gen.ok)
    return gen


def _complete(
    lm: LM, cache: ResponseCache | None, identity: dict[str, Any], prompt: str, decoding: Decoding
) -> tuple[Completion, bool]:
    """The generator's answer from the response cache, else from the model (then cached)."""
    k = cache_key(identity, prompt, decoding)
    if cache is not None:
        cached = cache.get(k)
        if cached is not None:
            return cached, True
    completion = lm.complete(prompt, decoding)
    if cache is not None:
        cache.put(k, completion)
    return completion, is_hit(False, completion)


def _checked(
    brief: TaskBrief, key: str, number: int, prompt: str, completion: Completion, hit: bool
) -> Candidate:
    c = Candidate(number, prompt, completion, hit)
    if completion.error is not None or completion.text is None:
        c.reason = f"the generator call failed: {completion.error or 'no text'}"
        return c
    c.text = prov.clean_reply(completion.text)
    c.reason = prov.refusal(brief, key, c.text, completion.redacted)
    if c.reason is None:
        c.status, c.sha256 = "written", ids.text_sha256(c.text)
    return c


def _place(gen: Generation, c: Candidate, paths: list[Path] | None, doc: str) -> str:
    """Write candidate `c`'s file (to its -o path, else to its default path) and say how."""
    earlier = next(
        (o for o in gen.candidates if o.number < c.number and o.sha256 == c.sha256), None
    )
    if paths is None and earlier is not None:
        c.status, c.path = "duplicate", earlier.path
        c.reason = f"same text as candidate {earlier.number}"
        return doc
    path = paths[c.number - 1] if paths is not None else None
    if path is None:
        path = prov.default_path(generated_dir(), gen.request.task, gen.request.kind, c.text)
        if prov.existing_text(path) == c.text:
            # generated before: the file (and a `reviewed: true` set since) is kept as it is
            c.status, c.path = "unchanged", path
            return doc
        if path.exists() and not gen.request.force:
            raise GenerateError(
                f"{path} already exists with another text; pass --force or -o (no file written)"
            )
    prov.write(path, doc)
    c.path = path
    return doc


def _params(request: GenerateRequest, decoding: Decoding) -> dict[str, Any]:
    return {
        "task": request.task,
        "kind": request.kind,
        "generator": request.generator,
        "n": request.n,
        "decoding": json.dumps(decoding.to_dict(), sort_keys=True),
        "temperature": decoding.temperature,
        "max_tokens": decoding.max_tokens,
    }


def _artifacts(gen: Generation, docs: dict[str, str]) -> dict[str, str]:
    out = {f"generated/{name}": doc for name, doc in docs.items()}
    for c in gen.candidates:
        out[f"prompts/candidate-{c.number}.txt"] = c.prompt
        if c.status == "refused":
            out[f"refused/candidate-{c.number}.txt"] = f"{c.reason}\n\n{c.completion.text or ''}"
    out["candidates.json"] = json.dumps(gen.to_dict(), indent=2)
    return out


def _metrics(gen: Generation) -> dict[str, float]:
    cs = gen.candidates
    return {
        "n_written": sum(c.status in ("written", "unchanged", "duplicate") for c in cs),
        "n_refused": sum(c.status == "refused" for c in cs),
        "cache_hits": sum(c.cache_hit for c in cs),
        "tokens_in": sum(c.completion.tokens_in for c in cs),
        "tokens_out": sum(c.completion.tokens_out for c in cs),
        "latency_s": sum(c.completion.latency for c in cs),
    }
