"""Prompt variants, one module per concept, behind the names `promptlib.variants` always had:

- `promptlib.variants.variant`: the `PromptVariant` type (its levels, checks, id and
  transformations) and `DemoRef`;
- `promptlib.variants.axes`: the one table of prompt axes (each spec key, the field it sets,
  whether sweeps vary it, how the optimiser searches it, its MLflow param);
- `promptlib.variants.spec`: the ``key=value,...`` spec grammar (`parse_spec`);
- `promptlib.variants.textfiles`: the YAML text files its ``instruction_file`` and
  ``register_file`` keys name;
- `promptlib.variants.saved`: variants saved as JSON (`load_variant_file`).
"""

from __future__ import annotations

from promptlib.variants.saved import (
    MAX_JSON_DEPTH,
    REPORT_FIELD,
    load_variant_file,
    variant_from_saved,
)
from promptlib.variants.spec import parse_spec
from promptlib.variants.textfiles import _read_text_file, read_text_file, text_file_review
from promptlib.variants.variant import (
    APPLICATION,
    APPLICATION_FILES,
    APPLICATION_TASKS,
    AS_DRAWN,
    BASE_FILE,
    FORMATS,
    INSTRUCTION_FILES,
    INSTRUCTIONS,
    MAX_K,
    MAX_SEED,
    NO_FILE,
    OFFICIAL_LABELS,
    POOLS,
    REGISTER_FILES,
    REGISTERS,
    DemoRef,
    PromptVariant,
    frame_file,
)

__all__ = [
    "APPLICATION",
    "APPLICATION_FILES",
    "APPLICATION_TASKS",
    "AS_DRAWN",
    "BASE_FILE",
    "FORMATS",
    "INSTRUCTIONS",
    "INSTRUCTION_FILES",
    "MAX_JSON_DEPTH",
    "MAX_K",
    "MAX_SEED",
    "NO_FILE",
    "OFFICIAL_LABELS",
    "POOLS",
    "REGISTERS",
    "REGISTER_FILES",
    "REPORT_FIELD",
    "DemoRef",
    "PromptVariant",
    "_read_text_file",
    "frame_file",
    "load_variant_file",
    "parse_spec",
    "read_text_file",
    "text_file_review",
    "variant_from_saved",
]
