"""Prompt-variant engine: LegalBench tasks -> PromptVariant -> rendered prompts.

The names below are imported when first used (PEP 562 `__getattr__`), not when the package
is: every `promptlib.*` module runs this file first (`promptlib.errors` too, which the whole
CLI imports), and `workbench --help` must not pay for the task catalog, YAML and numpy
(issue 35: start-up costs what the command needs). `from promptlib import X` works as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from promptlib.lazy import lazy_exports

if TYPE_CHECKING:
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

_HOMES = {
    "Catalog": "promptlib.tasks",
    "CompiledPrompt": "promptlib.render",
    "DataError": "promptlib.errors",
    "DataSource": "promptlib.data",
    "Demo": "promptlib.templates",
    "DemoRef": "promptlib.variants",
    "HuggingFaceSource": "promptlib.data",
    "LeakageError": "promptlib.errors",
    "LocalSource": "promptlib.data",
    "ParsedPrompt": "promptlib.templates",
    "PromptVariant": "promptlib.variants",
    "Task": "promptlib.tasks",
    "TaskProblem": "promptlib.tasks",
    "TaskSpec": "promptlib.tasks",
    "TemplateError": "promptlib.errors",
    "UnknownTaskError": "promptlib.errors",
    "VariantError": "promptlib.errors",
    "VariantFileError": "promptlib.errors",
    "WorkbenchError": "promptlib.errors",
    "bind": "promptlib.demos",
    "check_no_leak": "promptlib.leakage",
    "compile_prompt": "promptlib.render",
    "content_key": "promptlib.leakage",
    "default_source": "promptlib.data",
    "evaluation_rows": "promptlib.leakage",
    "heldout_guard": "promptlib.leakage",
    "load_variant_file": "promptlib.variants",
    "parse_prompt": "promptlib.templates",
    "parse_spec": "promptlib.variants",
    "query_columns": "promptlib.leakage",
    "render": "promptlib.render",
    "sample_demos": "promptlib.demos",
}
"""Where each public name lives: imported from there on first use."""

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


__getattr__, __dir__ = lazy_exports(globals(), _HOMES)
