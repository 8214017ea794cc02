"""One YAML loader for every workbench YAML file (sweep specs, `mlflow.yaml`, text files).

Why: PyYAML's `safe_load` is safe against code execution but not against size. A 501-byte
document of nested aliases ("billion laughs") expands to gigabytes when it is constructed. The
workbench's YAML files are small hand-written configs that never need anchors or aliases, so
they are refused outright, before anything is built, and the nesting depth and node count are
bounded too. A key given twice (`safe_load` keeps the last silently) and a merge key (`<<:`,
which overrides or is overridden by the keys beside it) make a config say something other
than what its reader sees, so they are refused as well. Every refusal names the file and the
line.

Cost: the size limit is checked before anything is parsed, and the node count while streaming
the parser's events (libyaml when installed), which stops at the first value over the limit;
a file over either limit is refused in milliseconds, not after a full parse.
"""

from __future__ import annotations

from typing import Any

import yaml

from promptlib.errors import WorkbenchError

# Far above any real spec or config (the largest shipped spec is 1.5 KB and ~100 values);
# far below what takes a noticeable time to parse or could exhaust memory or the stack.
MAX_CHARS = 256_000
MAX_DEPTH = 64
MAX_NODES = 10_000
MERGE_TAG = "tag:yaml.org,2002:merge"

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~10x faster


class _Refused(Exception):
    """A construct the workbench refuses, found while building (message without the file)."""


class _StrictLoader(_BaseLoader):  # type: ignore[misc]
    """SafeLoader that refuses duplicate keys and merge keys in every mapping."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key_node, _ in node.value:
                line = key_node.start_mark.line + 1
                if key_node.tag == MERGE_TAG:
                    raise _Refused(
                        f"merge key '<<' at line {line}: merge keys are not supported in "
                        "workbench YAML; write the keys out in the mapping itself"
                    )
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = first.get(key)
                except TypeError:
                    continue  # unhashable: SafeConstructor says so below
                if seen is not None:
                    raise _Refused(
                        f"key {key!r} at line {line} is given twice (first at line {seen}); "
                        "keep one (YAML would silently use the last)"
                    )
                first[key] = line
        return super().construct_mapping(node, deep=deep)


def _line(event: Any) -> str:
    mark = getattr(event, "start_mark", None)
    return f" at line {mark.line + 1}" if mark is not None else ""


def safe_yaml_load(text: str, where: str, error: type[WorkbenchError] = WorkbenchError) -> Any:
    """Parse `text` (read from `where`) as YAML without anchors or aliases, within bounds.

    Raises `error` (a WorkbenchError, exit 2) naming `where` for malformed YAML, more than
    MAX_CHARS characters, an anchor (`&x`), an alias (`*x`), a merge key (`<<:`), a key given
    twice in one mapping, nesting deeper than MAX_DEPTH or more than MAX_NODES values. An
    empty document gives None, as `yaml.safe_load` does.
    """
    if len(text) > MAX_CHARS:
        raise error(
            f"{where}: {len(text):,} characters of YAML is over the {MAX_CHARS:,}-character "
            "limit for workbench YAML files (specs and configs are a few KB); shorten it"
        )
    try:
        # Pass 1: look at the parser's events only; nothing is constructed, so nothing expands.
        depth = nodes = 0
        for event in yaml.parse(text, Loader=_BaseLoader):
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
                        f"{where}: more than {MAX_NODES:,} YAML values (the limit, reached"
                        f"{_line(event)}); workbench YAML files are small configs"
                    )
        # Pass 2: build it; with no aliases the result is no bigger than the text.
        return yaml.load(text, Loader=_StrictLoader)
    except _Refused as e:
        raise error(f"{where}: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or e
        if "maximum nesting depth" in str(problem):  # libyaml's own limit, met scanning ahead
            raise error(
                f"{where}: YAML nested deeper than {MAX_DEPTH} levels{at}; workbench YAML files "
                "are flat configs"
            ) from None
        raise error(f"{where}: malformed YAML{at}: {problem}") from None
