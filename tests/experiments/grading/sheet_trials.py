"""Trials for the grading tests: hearsay run in-process through a scripted model, two variants
whose names and prompts differ, saved in a tmp runs/ folder (fast, no subprocess)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.llm.scripted import LMDefaults
from experiments.llm.types import Completion, Decoding
from experiments.trials.run import TrialResult, run_trial
from experiments.trials.spec import TrialSpec
from experiments.trials.store import save_trial
from promptlib import Catalog, parse_spec

VARIANTS = ("base", "format=claude")
MODEL = "scripted/explainer"
N_ROWS = 6


@dataclass
class ExplainLM(LMDefaults):
    """Answers each prompt with an explanation that names its prompt's length (so two
    variants' answers to the same row differ)."""

    name: str = MODEL
    mode: str = "completion"
    concurrency: int = 1

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        text = f" Yes. The statement is offered for its truth (reasoning {len(prompt)})."
        return Completion(text, tokens_in=len(prompt) // 4, tokens_out=12)


def make_trials(catalog: Catalog, runs: Path, lm: Any = None) -> list[TrialResult]:
    """One saved trial per variant of `VARIANTS` (hearsay, `N_ROWS` rows)."""
    out = []
    for v in VARIANTS:
        spec = TrialSpec(task="hearsay", variant=parse_spec(v), model=MODEL, limit=N_ROWS)
        result = run_trial(spec, catalog, lm or ExplainLM())
        save_trial(result, runs)
        out.append(result)
    return out
