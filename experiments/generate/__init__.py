"""Generated prompt texts (`workbench variants generate`): a generator model writes a rule
description, a paraphrased instruction or a plain / technical query template for a task,
from the task's own instruction and README, into the YAML file sweeps read, with its
provenance and `reviewed: false`.

Modules: `prompt` (the generation prompt, the kinds), `provenance` (the file: checks, YAML,
paths, atomic write), `run` (`generate`), `review` (the unreviewed files a sweep or run uses).
"""

from experiments.generate.prompt import KINDS, GenerateError
from experiments.generate.review import files_in_sweep, files_in_variant, unreviewed
from experiments.generate.run import GenerateRequest, Generation, generate

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
