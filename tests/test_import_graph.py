"""The import graph of `experiments/` and `promptlib/` (issue 20, point 6), read with `ast` only.

Edges are every import of a project module: at module top level, inside a function, and under
`if TYPE_CHECKING:`, plus the edge to each parent package's `__init__` that `from a.b.c import x`
runs first (unless it is the importer's own package). Checked:

- no circle: no strongly connected component of more than one module;
- `promptlib` imports nothing from `experiments`;
- an import inside a function is kept only for start-up time or an optional extra, and says which
  in a comment on its line or the line above (`start-up` or `optional`);
- no import back up: the packages of `experiments/` form layers (`LAYERS`) and a module imports
  only from a lower layer or its own package.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("experiments", "promptlib")
REASONS = ("start-up", "optional")


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The project module an imported name lives in (`a.b.c` -> `a.b` when `c` is not a module)."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in MODULES else None


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = module.split(".")
            if MODULES[module].name != "__init__.py":
                parts = parts[:-1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, base] if base else parts)
        names = [f"{base}.{alias.name}" for alias in node.names]
    out = []
    for name in names:
        owner = _owner(name)
        if owner is None or owner == module:
            continue
        out.append(owner)
        parts = owner.split(".")
        for k in range(1, len(parts)):  # a.b.c runs a/__init__ and a/b/__init__ first
            parent = ".".join(parts[:k])
            if parent in MODULES and not (module == parent or module.startswith(parent + ".")):
                out.append(parent)
    return out


def _imports(module: str) -> Iterator[tuple[str, int, str]]:
    """(target, line, where) with where one of top, function, typing."""
    tree = ast.parse(MODULES[module].read_text(), filename=str(MODULES[module]))

    def walk(node: ast.AST, where: str) -> Iterator[tuple[str, int, str]]:
        for child in ast.iter_child_nodes(node):
            here = where
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                here = "typing"
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) and where != "typing":
                here = "function"
            if isinstance(child, ast.Import | ast.ImportFrom):
                for target in _targets(module, child):
                    yield target, child.lineno, here
            yield from walk(child, here)

    yield from walk(tree, "top")


EDGES = {m: sorted(set(_imports(m))) for m in MODULES}


def _circles() -> list[list[str]]:
    graph = {m: sorted({t for t, _, _ in EDGES[m]}) for m in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in MODULES:
        if v not in index:
            visit(v)
    return sorted(found)


def _edges_within(component: list[str]) -> list[str]:
    inside = set(component)
    return [
        f"{m}:{line} -> {t} [{where}]"
        for m in component
        for t, line, where in EDGES[m]
        if t in inside
    ]


def test_no_circles() -> None:
    circles = _circles()
    detail = [", ".join(c) + ":\n  " + "\n  ".join(_edges_within(c)) for c in circles]
    assert circles == [], "\n".join(detail)


def test_promptlib_imports_nothing_from_experiments() -> None:
    back = [
        f"{m}:{line} -> {t}"
        for m in MODULES
        if m.split(".")[0] == "promptlib"
        for t, line, _ in EDGES[m]
        if t.split(".")[0] == "experiments"
    ]
    assert back == []


def _function_imports(module: str) -> list[tuple[int, int]]:
    """(first, last line) of each import of a project module inside a function."""
    wanted = {line for _, line, where in EDGES[module] if where == "function"}
    tree = ast.parse(MODULES[module].read_text())
    return sorted(
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom) and node.lineno in wanted
    )


def test_imports_inside_functions_say_why() -> None:
    """The reason is on the import's lines or in a comment above it or above the run of
    imports it belongs to."""
    unexplained = []
    for m, path in MODULES.items():
        lines = path.read_text().splitlines()
        spans = _function_imports(m)
        in_import = {n for first, last in spans for n in range(first, last + 1)}
        for first, last in spans:
            said = lines[first - 1 : last]
            above = first - 1
            while above >= 1 and (above in in_import or lines[above - 1].lstrip().startswith("#")):
                said.append(lines[above - 1])
                above -= 1
            comments = [line.split("#", 1)[1] for line in said if "#" in line]
            if not any(reason in c for c in comments for reason in REASONS):
                unexplained.append(f"{path.relative_to(ROOT)}:{first}: {lines[first - 1].strip()}")
    assert unexplained == [], "\n".join(unexplained)


# Lowest first. A package imports only from packages below it (or itself); the top-level
# modules of `experiments/` (ids, settings, ...) are one layer each, the root face the top.
LAYERS = (
    ("promptlib",),
    ("bounds",),  # the ranges of numbers a user gives, read by settings and up
    ("project",),  # the project file (mlflow.yaml) the default folders are relative to
    ("ids", "settings", "secrets", "files", "metrics", "criteria"),
    ("names",),
    ("llm",),
    ("trials",),
    ("analysis",),
    ("output",),
    ("reports",),  # a report's files (comparisons.json, .csv, figures) and their folders
    ("tracking",),
    ("grading", "judge"),  # hand grades (sheets, store, agreement); the judge (rubrics, runs)
    ("calibrated",),  # hand grades + judge scores -> PPI estimates, comparisons, grade next
    ("generate",),
    ("sweeps", "optimize"),
    ("imports",),  # other tools' results read into trials, compared by the plan a sweep's are
    ("testing",),
    ("cli",),
    ("experiments",),  # experiments/__init__.py, the package face
)
RANK = {name: rank for rank, layer in enumerate(LAYERS) for name in layer}


def _package(module: str) -> str:
    """`promptlib`, `experiments` (the root face) or the part of `experiments` a module is in."""
    parts = module.split(".")
    if parts[0] == "promptlib":
        return "promptlib"
    return parts[1] if len(parts) > 1 else "experiments"


def test_no_import_back_up() -> None:
    unknown = sorted({_package(m) for m in MODULES} - set(RANK))
    assert unknown == [], f"give these packages a layer in LAYERS: {unknown}"
    up = [
        f"{m}:{line} -> {t} ({_package(m)} imports {_package(t)}, a layer above or beside it)"
        for m in MODULES
        for t, line, _ in EDGES[m]
        if _package(t) != _package(m) and RANK[_package(t)] >= RANK[_package(m)]
    ]
    assert up == [], "\n".join(up)


# Edges the layers allow that the design still forbids (importer, imported): an import's
# results are compared by their comparison plan (`experiments.analysis.plan`), as a sweep's
# are, never by dressing the import up as a sweep.
FORBIDDEN = (("imports", "sweeps"),)


def test_no_forbidden_edges() -> None:
    found = [
        f"{m}:{line} -> {t} ({_package(m)} may not import {_package(t)})"
        for m in MODULES
        for t, line, _ in EDGES[m]
        if (_package(m), _package(t)) in FORBIDDEN
    ]
    assert found == [], "\n".join(found)
