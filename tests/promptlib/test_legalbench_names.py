"""The frozen LegalBench task names equal the data's, when the data is there."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptlib.data import LocalSource
from promptlib.legalbench_names import LEGALBENCH_TASKS


@pytest.mark.data
def test_the_frozen_names_are_the_datas(lb_dir: Path) -> None:
    assert LocalSource(lb_dir).names() == LEGALBENCH_TASKS


def test_the_frozen_names_are_sorted_and_distinct() -> None:
    assert list(LEGALBENCH_TASKS) == sorted(set(LEGALBENCH_TASKS)) and len(LEGALBENCH_TASKS) == 162
