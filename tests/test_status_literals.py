"""No bare status strings in `experiments/` (issue 20, point 4), read with `ast` only.

A trial's status is a `TrialStatus` and a sweep's a `SweepStatus`
(`experiments/trials/record.py`): a StrEnum equals its string, so the JSON on disk is unchanged,
while a typo in a bare ``"complete"`` would silently never match. Flagged: a string constant
``"complete"``, ``"incomplete"`` or ``"failed"`` anywhere but a dict key, a subscript or the key
of a ``.get`` (``doc["incomplete"]`` names a list, not a status), outside `record.py`.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATUSES = {"complete", "incomplete", "failed"}
HOME = "experiments/trials/record.py"

# words drawn for a reader, not statuses compared or stored: (file, function, literal)
OUTPUT_TEXTS = Counter({
    ("experiments/analysis/figures.py", "_p_label", "incomplete"): 1,
    ("experiments/analysis/figures.py", "_difference_panel", "incomplete"): 1,
    # the provider's batch vocabulary (OpenAI's "failed" batch status), named once per module
    ("experiments/llm/batch_results.py", "<module>", "failed"): 1,
    ("experiments/testing/batch_fake.py", "<module>", "failed"): 1,
})  # fmt: skip

# none left (issue 20 moved the sweep outcomes and stored-summary reads to the record); a
# new bare status anywhere fails the test
REMAINING: Counter[tuple[str, str, str]] = Counter()


def _is_key(node: ast.Constant, parent: ast.AST | None) -> bool:
    """A dict key, a subscript, or the key of ``.get(...)``/``.pop(...)``: a name, not a value."""
    if isinstance(parent, ast.Dict):
        return any(k is node for k in parent.keys)
    if isinstance(parent, ast.Subscript):
        return parent.slice is node
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute):
        return parent.func.attr in ("get", "pop", "setdefault") and parent.args[:1] == [node]
    return False


def _literals(path: Path) -> Counter[tuple[str, str, str]]:
    rel = path.relative_to(ROOT).as_posix()
    found: Counter[tuple[str, str, str]] = Counter()

    def walk(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            here = where
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                here = f"{where}.{child.name}" if where else child.name
            if (
                isinstance(child, ast.Constant)
                and isinstance(child.value, str)
                and child.value in STATUSES
                and not _is_key(child, node)
            ):
                found[(rel, where or "<module>", child.value)] += 1
            walk(child, here)

    walk(ast.parse(path.read_text(), filename=str(path)), "")
    return found


def test_no_bare_status_strings_outside_the_record() -> None:
    found: Counter[tuple[str, str, str]] = Counter()
    for path in sorted((ROOT / "experiments").rglob("*.py")):
        if path.relative_to(ROOT).as_posix() != HOME:
            found += _literals(path)
    new = found - OUTPUT_TEXTS - REMAINING
    assert not new, (
        "bare status strings: use TrialStatus / SweepStatus (experiments/trials/record.py): "
        + ", ".join(f"{f} {fn}: {v!r} x{n}" for (f, fn, v), n in sorted(new.items()))
    )
    # a fixed one must leave the expected set, so the set only shrinks
    gone = (REMAINING + OUTPUT_TEXTS) - found
    assert not gone, f"no longer found, remove from the expected set: {sorted(gone)}"


def test_the_check_sees_a_status_and_not_a_key() -> None:
    tree = ast.parse('d = {"incomplete": x}\nd["failed"]\nd.get("complete")\ns == "complete"\n')
    seen = []
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Constant) and child.value in STATUSES:
                seen.append((child.value, _is_key(child, node)))
    assert sorted(seen) == [("complete", False), ("complete", True), ("failed", True),
                            ("incomplete", True)]  # fmt: skip
