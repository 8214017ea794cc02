"""The test files' names (issue 32): `SLOW_FIRST` in tests/conftest.py ranks files by name
alone, so two files of one name (test_sequential.py in sweeps/ and analysis/) were both
started first or both not; and every file it names must exist, or a rename leaves it behind."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.conftest import SLOW_FIRST

TESTS = Path(__file__).resolve().parent
SHARED = {"__init__.py", "conftest.py"}  # pytest's own per-folder files


def test_test_file_names_are_unique_across_the_tree() -> None:
    names = Counter(p.name for p in TESTS.rglob("*.py") if p.name not in SHARED)
    twice = {name: n for name, n in names.items() if n > 1}
    assert twice == {}, f"rename one of each (SLOW_FIRST matches by name): {twice}"


def test_each_slow_first_name_is_one_test_file() -> None:
    for name in SLOW_FIRST:
        found = list(TESTS.rglob(name))
        assert len(found) == 1, f"SLOW_FIRST names {name}, found {found}"
