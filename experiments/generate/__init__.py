"""Generated prompt texts (`workbench variants generate`): a generator model writes a rule
description, a paraphrased instruction or a plain / technical query template for a task,
from the task's own instruction and README, into the YAML file sweeps read, with its
provenance and `reviewed: false`.

Modules: `prompt` (the generation prompt, the kinds), `provenance` (the file: checks, YAML,
paths, atomic write), `run` (`generate`), `review` (the unreviewed files a sweep or run uses).

The names are imported on first use: every `workbench run` reads `review` (are its files
reviewed?), which must not pay for `run` and the tracking package it logs with (0.2 s of a
0.55 s cached rerun).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from promptlib.lazy import lazy_exports

if TYPE_CHECKING:
    from experiments.generate.prompt import KINDS, GenerateError
    from experiments.generate.review import files_in_sweep, files_in_variant, unreviewed
    from experiments.generate.run import GenerateRequest, Generation, generate

_HOMES = {
    "KINDS": "experiments.generate.prompt",
    "GenerateError": "experiments.generate.prompt",
    "GenerateRequest": "experiments.generate.run",
    "Generation": "experiments.generate.run",
    "files_in_sweep": "experiments.generate.review",
    "files_in_variant": "experiments.generate.review",
    "generate": "experiments.generate.run",
    "unreviewed": "experiments.generate.review",
}
"""Where each public name lives: imported from there on first use (`promptlib.lazy`)."""

__all__ = [
    "KINDS",
    "GenerateError",
    "GenerateRequest",
    "Generation",
    "files_in_sweep",
    "files_in_variant",
    "generate",
    "unreviewed",
]

__getattr__, __dir__ = lazy_exports(globals(), _HOMES)
