"""Prompt-variant engine: LegalBench tasks -> PromptVariant -> rendered prompts."""

from promptlib.data import DataSource, HuggingFaceSource, LocalSource, default_source
from promptlib.demos import bind, sample_demos
from promptlib.errors import (
    DataError,
    LeakageError,
    TemplateError,
    UnknownTaskError,
    VariantError,
    VariantFileError,
    WorkbenchError,
)
from promptlib.leakage import (
    check_no_leak,
    content_key,
    evaluation_rows,
    heldout_guard,
    query_columns,
)
from promptlib.render import CompiledPrompt, compile_prompt, render
from promptlib.tasks import Catalog, Task, TaskProblem, TaskSpec
from promptlib.templates import Demo, ParsedPrompt, parse_prompt
from promptlib.variants import DemoRef, PromptVariant, load_variant_file, parse_spec

__all__ = [
    "Catalog",
    "CompiledPrompt",
    "DataError",
    "DataSource",
    "Demo",
    "DemoRef",
    "HuggingFaceSource",
    "LeakageError",
    "LocalSource",
    "ParsedPrompt",
    "PromptVariant",
    "Task",
    "TaskProblem",
    "TaskSpec",
    "TemplateError",
    "UnknownTaskError",
    "VariantError",
    "VariantFileError",
    "WorkbenchError",
    "bind",
    "check_no_leak",
    "compile_prompt",
    "content_key",
    "default_source",
    "evaluation_rows",
    "heldout_guard",
    "load_variant_file",
    "parse_prompt",
    "parse_spec",
    "query_columns",
    "render",
    "sample_demos",
]
