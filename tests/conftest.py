"""Shared fixtures. Tests that need LegalBench data skip, with the reason, where it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from promptlib import Catalog, LocalSource

REPO = Path(__file__).resolve().parents[1]


def legalbench_dir() -> Path | None:
    env = os.environ.get("LEGALBENCH_DIR")
    if env:
        return Path(env) if Path(env).is_dir() else None
    guess = REPO.parent / "shared" / "legalbench"
    return guess if guess.is_dir() else None


@pytest.fixture(scope="session")
def lb_dir() -> Path:
    d = legalbench_dir()
    if d is None:
        pytest.skip(
            "LegalBench data not found: set LEGALBENCH_DIR to a folder in LegalBench's layout "
            "(e.g. ../shared/legalbench)"
        )
    return d


@pytest.fixture(scope="session")
def catalog(lb_dir: Path) -> Catalog:
    return Catalog(LocalSource(lb_dir))
