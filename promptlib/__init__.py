"""Prompt-variant engine: LegalBench tasks -> PromptVariant -> rendered prompts."""

from promptlib.data import DataSource, HuggingFaceSource, LocalSource, default_source
from promptlib.demos import bind, evaluation_rows, sample_demos
from promptlib.errors import (
    DataError,
    LeakageError,
    TemplateError,
    UnknownTaskError,
    VariantError,
    WorkbenchError,
)
from promptlib.render import CompiledPrompt, compile_prompt, render
from promptlib.tasks import Catalog, Task, TaskProblem, TaskSpec
from promptlib.templates import Demo, ParsedPrompt, parse_prompt
from promptlib.variants import DemoRef, PromptVariant, parse_spec

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
    "WorkbenchError",
    "bind",
    "compile_prompt",
    "default_source",
    "evaluation_rows",
    "parse_prompt",
    "parse_spec",
    "render",
    "sample_demos",
]
