"""promptlib.leakage: one definition of row identity, and guards that nest, overlap and
release only their own claims (threads included)."""

from __future__ import annotations

import ast
import random
import threading
from pathlib import Path

import pytest

import promptlib
from promptlib import Catalog, LeakageError, compile_prompt, leakage, parse_spec
from promptlib.leakage import check_heldout, content_key, heldout_guard, is_guarded

PROMPTLIB = Path(promptlib.__file__).parent


@pytest.fixture(autouse=True)
def _no_guard_left_behind() -> None:
    assert not leakage._GUARDED, "a guard from another test is still active"


# ---- content_key ----------------------------------------------------------------------------
def test_content_key_normalises_whitespace_and_ignores_index_and_answer() -> None:
    a = {"index": "1", "answer": "Yes", "text": "The  witness\nsaid ", "date": "2020"}
    b = {"index": "9", "answer": "No", "date": "2020", "text": "The witness said"}
    assert content_key(a) == content_key(b) == (("date", "2020"), ("text", "The witness said"))
    assert content_key(a, ["text"]) == (("text", "The witness said"),)
    assert content_key(a, ["text", "missing"]) == (("text", "The witness said"), ("missing", ""))
    assert content_key({"text": None}) == (("text", ""),)
    assert content_key(a) != content_key({**a, "text": "The witness wrote"})


def test_content_key_reads_dspy_examples() -> None:
    dspy = pytest.importorskip("dspy")
    ex = dspy.Example(text=" a  b ", answer="Yes").with_inputs("text")
    assert content_key(ex, ["text"]) == content_key({"text": "a b"}, ["text"])
    assert content_key(ex) == (("text", "a b"),)


# ---- one room: no other definition, no demos <-> render cycle -------------------------------
def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (functions included)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_demos_does_not_import_render_or_leakage_at_module_level() -> None:
    demos = _imports(PROMPTLIB / "demos.py")
    assert not any(m.startswith("promptlib.render") for m in demos), demos
    tree = ast.parse((PROMPTLIB / "demos.py").read_text())
    top = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert "promptlib.leakage" not in top and "promptlib.render" not in top
    assert not any(m.startswith("promptlib.render") for m in _imports(PROMPTLIB / "leakage.py"))


def test_row_identity_is_defined_once() -> None:
    for name in ("demos.py", "render.py"):
        src = (PROMPTLIB / name).read_text()
        assert "def _key" not in src and "def _content_key" not in src, name
        assert "_GUARDED" not in src and ".split())" not in src, name
    experiments = PROMPTLIB.parent / "experiments"
    if experiments.is_dir():  # the experiment engine uses the same definition
        for path in sorted((experiments / "optimize").glob("*.py")):
            assert "join(r[c].split())" not in path.read_text(), path
        assert "def key(d" not in (experiments / "optimize" / "dspy_programs.py").read_text()


def test_old_names_still_import() -> None:
    from promptlib.render import heldout_guard as render_guard
    from promptlib.render import query_columns

    assert leakage.evaluation_rows is promptlib.evaluation_rows
    assert render_guard is heldout_guard is promptlib.heldout_guard
    assert query_columns is leakage.query_columns
    with pytest.raises(ImportError):
        from promptlib.demos import no_such_name  # noqa: F401


# ---- guards: synthetic rows -------------------------------------------------------------------
A = {"index": "a", "answer": "Yes", "text": "alpha"}
B = {"index": "b", "answer": "No", "text": "beta"}
C = {"index": "c", "answer": "Yes", "text": "gamma"}


def guarded(task: str = "t") -> set[str]:
    return {r["index"] for r in (A, B, C) if is_guarded(task, r)}


def test_nested_overlapping_guards_release_only_their_own_claims() -> None:
    with heldout_guard("t", [A, B]):
        assert guarded() == {"a", "b"}
        with heldout_guard("t", [B, C]):
            assert guarded() == {"a", "b", "c"}
        assert guarded() == {"a", "b"}  # b is still the outer guard's
        with pytest.raises(LeakageError, match="held-out row"):
            check_heldout("t", B)
        check_heldout("t", C)
    assert guarded() == set()
    assert not leakage._GUARDED


def test_overlapping_guards_that_do_not_nest() -> None:
    outer = heldout_guard("t", [A, B])
    inner = heldout_guard("t", [B, C])
    outer.__enter__()
    inner.__enter__()
    outer.__exit__(None, None, None)  # the first one out is not the last one in
    assert guarded() == {"b", "c"}
    inner.__exit__(None, None, None)
    assert guarded() == set() and not leakage._GUARDED


def test_one_guard_claims_a_row_once_and_tasks_are_separate() -> None:
    with heldout_guard("t", [A, A, {**A, "index": "a2", "text": " alpha "}]):
        with heldout_guard("t", [A]):
            pass
        assert guarded() == {"a"}
        assert guarded("other") == set()
    assert not leakage._GUARDED


def test_guard_is_released_when_the_search_raises() -> None:
    with pytest.raises(RuntimeError), heldout_guard("t", [A]):
        raise RuntimeError("search failed")
    assert not leakage._GUARDED


def test_an_example_with_only_some_columns_is_matched_on_them() -> None:
    row = {"index": "1", "answer": "No", "text": "alpha", "date": "2020"}
    with heldout_guard("t", [row]):
        assert is_guarded("t", {"text": "alpha"})
        assert is_guarded("t", {"text": " alpha", "date": "2020"})
        assert not is_guarded("t", {"text": "alpha", "date": "2021"})
        assert not is_guarded("t", {"text": "alpha", "other": "x"})
        assert not is_guarded("t", {"index": "1"})  # no content: nothing to identify


def test_guards_from_many_threads_keep_their_counts() -> None:
    rows = [{"index": str(i), "answer": "No", "text": f"row {i}"} for i in range(40)]
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        try:
            start.wait()
            for _ in range(200):
                mine = rng.sample(rows, 5)
                with heldout_guard("t", mine):
                    if not all(is_guarded("t", r) for r in mine):
                        raise AssertionError("a row this thread guards was released")
        except BaseException as e:
            errors.append(e)

    with heldout_guard("t", rows[:3]):
        threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[0]
        assert all(is_guarded("t", r) for r in rows[:3])  # the outer claims survived
        assert not any(is_guarded("t", r) for r in rows[3:])
    assert not leakage._GUARDED


# ---- guards: real renders -----------------------------------------------------------------
@pytest.mark.data
def test_nested_guards_on_rendered_rows(catalog: Catalog) -> None:
    """The brief's case: outer guard on {a, b}, inner on {b, c}; b stays guarded."""
    task = catalog.task("hearsay")
    compiled = compile_prompt(parse_spec("base"), task)
    a, b, c = task.rows("test")[:3]
    with heldout_guard("hearsay", [a, b]):
        with heldout_guard("hearsay", [b, c]):
            for row in (a, b, c):
                with pytest.raises(LeakageError, match="held-out row was rendered"):
                    compiled.render(row)
        compiled.render(c)  # the inner guard's own row is released
        for row in (a, b):
            with pytest.raises(LeakageError, match="held-out row was rendered"):
                compiled.render(row)
        with pytest.raises(LeakageError):
            compiled.render({"text": b["text"]})  # by content, without index or answer
    for row in (a, b, c):
        compiled.render(row)


@pytest.mark.data
def test_a_guarded_row_shown_as_a_demonstration_is_caught(catalog: Catalog) -> None:
    """The guard covers what the prompt shows: the query and every demonstration."""
    task = catalog.task("hearsay")
    compiled = compile_prompt(parse_spec("base"), task)
    demo = compiled.demos[0]
    row = next(iter(task.rows("test")))
    compiled.render(row)
    guarded = [{"index": "x", "answer": demo.answer, **demo.values}]
    with heldout_guard("hearsay", guarded), pytest.raises(LeakageError):
        compiled.render(row)
    compiled.render(row)
