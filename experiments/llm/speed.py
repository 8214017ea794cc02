"""How fast this machine runs a local model: measured once, kept in the cache folder.

A plan's time estimate (`experiments.sweeps.estimate`) divides the tokens a study evaluates by
rates measured here, with a short real llama.cpp run of the model (`measure_speed`, a few
seconds): prompt tokens per second (a ~430-token passage evaluated in 64-token chunks, the
size of a prompt's new part after the part it shares with the previous row's, which llama.cpp
keeps) and generated tokens per second (single-token decodes after it). The median of three
runs each. The machine's load at that moment is in the numbers (its load average is kept
beside them): a measurement taken while other jobs ran is slow, as a run would be then
(`workbench plan --measure` takes it again).

Kept in ``<cache dir>/speed.json`` under a key of the CPU (model name and the threads llama.cpp
uses) and the model's identity (name, weights sha256, context size, load layout): another
machine, thread count or GGUF is measured anew, never read from another's entry.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from experiments import settings
from experiments.files import atomic_write_text
from experiments.llm import cpu, llama
from experiments.llm.backends import is_local, local_name
from experiments.llm.identity import local_identity
from experiments.llm.types import ModelError

SPEED_FILE = "speed.json"
_CHUNK = 64  # tokens per prompt evaluation: a row's new prompt text after the shared prefix
_DECODES = 16  # single-token decodes timed per run
_RUNS = 3  # runs of each; the median is kept
# A passage of the kind LegalBench prompts hold (varied words, so its tokens are typical;
# not repeated text, which tokenises unusually well). ~430 tokens.
PASSAGE = (
    "The plaintiff, a regional distributor of agricultural equipment, alleges that the "
    "defendant manufacturer terminated their dealership agreement without the ninety days' "
    "written notice required by section 14(b), and seeks damages for lost profits, the value "
    "of unsold inventory, and reimbursement of warranty work performed before termination. "
    "The manufacturer answers that the distributor materially breached the agreement first, "
    "by selling a competitor's tractors from the same showroom and by failing to maintain the "
    "minimum parts inventory, so that termination for cause was permitted without notice. "
    "Discovery showed that a regional manager knew of the competing line for at least two "
    "years and raised no objection, and that the parts shortfall arose during a supply "
    "disruption that affected every dealer in the territory. Under the governing statute, a "
    "supplier may not terminate a dealer except for good cause, and good cause requires a "
    "failure to comply with a requirement that is both essential and reasonable. Waiver may "
    "be found where a party, with knowledge of the facts, acts in a manner inconsistent with "
    "an intent to enforce its rights. Question: Did the manufacturer have good cause? "
    "A witness testified that the dealer's owner once said, out of court, that the company "
    "'would never survive another bad harvest'; the statement is offered to prove the "
    "dealer's financial condition. Is the statement hearsay? Consider whether it is an "
    "assertion offered for the truth of the matter asserted, whether it is an opposing "
    "party's statement, and whether any exception for statements against interest applies. "
    "Clause 7.2: Neither party shall be liable for indirect, incidental, consequential, "
    "special or punitive damages, including lost profits, arising out of this Agreement, "
    "except for breaches of confidentiality or indemnification obligations; the aggregate "
    "liability of either party shall not exceed the fees paid in the twelve months "
    "preceding the claim. Does the clause cap liability? Answer Yes or No. "
    "The court of appeals reversed, holding that the earlier decision, to the extent it "
    "required proof of actual confusion, is overruled; the standard is likelihood of "
    "confusion, assessed by the strength of the mark, the proximity of the goods, and the "
    "similarity of the marks in sight, sound and meaning."
)


@dataclass(frozen=True)
class Speed:
    """A local model's measured rates on this machine, and what they were measured on."""

    model: str
    cpu: str  # the CPU's model name and the threads llama.cpp ran with
    prompt_tok_s: float
    gen_tok_s: float
    measured_at: str  # UTC, ISO 8601, to the second
    # the 1-minute load average as the measurement began (None where the OS has none): a
    # busy machine measures slow, and so runs
    load: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def speed_path() -> Path:
    return settings.cache_dir() / SPEED_FILE


def cpu_description() -> str:
    """The CPU as the key names it: its model name and the threads llama.cpp uses."""
    info = cpu.read_cpu()
    return f"{info.model or info.arch or 'unknown CPU'}, {os.cpu_count() or 2} threads"


def speed_key(model: str) -> str:
    """The cache key of `model`'s rates here: the CPU and the model's identity (weights,
    context, load layout). Raises `ModelError` when the model is not installed."""
    ident = json.dumps(local_identity(model), sort_keys=True)
    return f"{cpu_description()} | {model} | {ident}"


def _read() -> dict[str, Any]:
    try:
        doc = json.loads(speed_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none yet, or unreadable: measured again when asked
        return {}
    return doc if isinstance(doc, dict) else {}


def cached_speed(model: str) -> Speed | None:
    """`model`'s stored rates on this machine, or None (not local, not installed, never
    measured here, or an entry that does not read as one)."""
    if not is_local(model):
        return None
    try:
        key = speed_key(model)
    except ModelError:
        return None
    entry = _read().get(key)
    try:
        speed = Speed(**entry) if isinstance(entry, dict) else None
    except TypeError:
        return None
    if speed is None or not (speed.prompt_tok_s > 0 and speed.gen_tok_s > 0):
        return None
    return speed


def store_speed(model: str, speed: Speed) -> None:
    """Keep `speed` as `model`'s rates on this machine (atomically; other entries kept)."""
    doc = _read()
    doc[speed_key(model)] = speed.to_dict()
    atomic_write_text(speed_path(), json.dumps(doc, indent=1, sort_keys=True) + "\n")


def measure_speed(model: str) -> Speed:
    """Run `model` (a local one) briefly and keep its rates (`store_speed`): a few seconds."""
    if not is_local(model):
        raise ModelError(f"{model}: only local models are measured (local/<name>)")
    llm = llama.load_local(local_name(model))
    load = _load_average()
    with llama._LOCK:
        tokens = llm.tokenize(PASSAGE.encode("utf-8"), add_bos=True, special=False)
        runs = [_rates(llm, tokens) for _ in range(_RUNS)]
        llm.reset()
    speed = Speed(
        model=model,
        cpu=cpu_description(),
        prompt_tok_s=round(statistics.median(r[0] for r in runs), 1),
        gen_tok_s=round(statistics.median(r[1] for r in runs), 1),
        measured_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        load=load,
    )
    store_speed(model, speed)
    return speed


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):  # not on this OS
        return None


def _rates(llm: Any, tokens: list[int]) -> tuple[float, float]:
    """One run from an empty cache: prompt tokens per second over the passage, evaluated in
    `_CHUNK`-token pieces, then generated tokens per second over `_DECODES` single-token
    decodes after it (the passage's own last tokens stand in for sampled ones)."""
    llm.reset()
    prompt, tail = tokens[:-_DECODES], tokens[-_DECODES:]
    start = time.perf_counter()
    for i in range(0, len(prompt), _CHUNK):
        llm.eval(prompt[i : i + _CHUNK])
    mid = time.perf_counter()
    for token in tail:
        llm.eval([token])
    end = time.perf_counter()
    return len(prompt) / max(mid - start, 1e-9), len(tail) / max(end - mid, 1e-9)
