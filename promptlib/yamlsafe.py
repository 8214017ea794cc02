"""One YAML loader for every workbench YAML file (sweep specs, `mlflow.yaml`).

Why: PyYAML's `safe_load` is safe against code execution but not against size. A 501-byte
document of nested aliases ("billion laughs") expands to gigabytes when it is constructed. The
workbench's YAML files are small hand-written configs that never need anchors or aliases, so
they are refused outright, before anything is built, and the nesting depth and node count are
bounded too. Every refusal names the file and the line.
"""

from __future__ import annotations

from typing import Any

import yaml

from promptlib.errors import WorkbenchError

# Far above any real spec or config; far below what could exhaust memory or the stack.
MAX_CHARS = 1_000_000
MAX_DEPTH = 64
MAX_NODES = 200_000


def _line(event: Any) -> str:
    mark = getattr(event, "start_mark", None)
    return f" at line {mark.line + 1}" if mark is not None else ""


def safe_yaml_load(text: str, where: str, error: type[WorkbenchError] = WorkbenchError) -> Any:
    """Parse `text` (read from `where`) as YAML without anchors or aliases, within bounds.

    Raises `error` (a WorkbenchError, exit 2) naming `where` for malformed YAML, an anchor
    (`&x`), an alias (`*x`, including `<<: *x` merge keys), nesting deeper than MAX_DEPTH or
    more than MAX_NODES values. An empty document gives None, as `yaml.safe_load` does.
    """
    if len(text) > MAX_CHARS:
        raise error(
            f"{where}: {len(text):,} characters of YAML is over the {MAX_CHARS:,} limit for "
            "workbench YAML files"
        )
    try:
        # Pass 1: look at the parser's events only; nothing is constructed, so nothing expands.
        depth = nodes = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise error(
                    f"{where}: YAML alias *{event.anchor}{_line(event)}: aliases are not "
                    "supported in workbench YAML; write the value out in full"
                )
            anchor = getattr(event, "anchor", None)
            if anchor is not None:
                raise error(
                    f"{where}: YAML anchor &{anchor}{_line(event)}: anchors and aliases are "
                    "not supported in workbench YAML; write the value out in full"
                )
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise error(
                        f"{where}: YAML nested deeper than {MAX_DEPTH} levels{_line(event)}; "
                        "workbench YAML files are flat configs"
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)):
                nodes += 1
                if nodes > MAX_NODES:
                    raise error(
                        f"{where}: more than {MAX_NODES:,} YAML values; workbench YAML files "
                        "are small configs"
                    )
        # Pass 2: build it; with no aliases the result is no bigger than the text.
        return yaml.load(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise error(f"{where}: malformed YAML{at}: {getattr(e, 'problem', None) or e}") from None
