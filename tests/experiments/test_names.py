"""`experiments.names` holds the MLflow name rules (issue 20): its sweep/study name check and its
`safe_model` agree with the rules their callers had before they called it (copied below, frozen,
from commit c0d9f37), and the callers refuse what it refuses."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from experiments.names import check_name, safe_model
from experiments.optimize.config import check_study_name
from experiments.sweeps import SpecError, load_spec
from promptlib.errors import WorkbenchError

NAMES = [
    "a",
    "A",
    "0",
    "demo",
    "A.b-c_d",
    "hearsay.openai_stub.optuna",
    "a" * 100,
    "a" * 101,
    "x" * 99 + ".",
    "",
    ".",
    "..",
    ".hidden",
    "-x",
    "_x",
    "a.",
    "a..b",
    "a...b",
    "a.b.c",
    "a/b",
    "a\\b",
    "a b",
    "a:b",
    "a\n",
    "\na",
    "é",
    "aé",
    "٣",
    "a٣",
    "ǅ",
    "a\t",
    "a$",
]

MODELS = [
    "openai/gpt-4o:mini é",
    "local/smollm2@q4",
    "local/smollm2",
    "",
    "a b",
    "x_y",
    "ÅÉ",
    "٣",
    "a-b.c",
    "ﬁ",
]


# c0d9f37 experiments/sweeps/spec.py:58 `_NAME` (and experiments/optimize/config.py:16
# `_STUDY_NAME`, the same pattern), frozen
_OLD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def _old_name_ok(name: str) -> bool:
    # c0d9f37 experiments/sweeps/spec.py:167 (and experiments/optimize/config.py:31), frozen
    return not (not _OLD_NAME.fullmatch(name) or ".." in name)


def _old_safe_model(model: str) -> str:  # c0d9f37 experiments/sweeps/report.py:117-118, frozen
    return "".join(c if c.isalnum() else "_" for c in model)


def _sweep_name_ok(name: str, tmp_path: Path) -> bool:
    """Whether `load_spec` accepts `name` as a sweep's name (other fields may still fail)."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: {json.dumps(name)}\ntasks: [hearsay]\n", encoding="utf-8")
    try:
        load_spec(spec)
    except SpecError as e:
        refused = (f"name {name!r} must be", "field 'name' is required")
        return not any(text in str(e) for text in refused)
    return True


def _study_name_ok(name: str) -> bool:
    try:
        check_study_name(name)
    except WorkbenchError:
        return False
    return True


@pytest.mark.parametrize("name", NAMES)
def test_check_name_is_the_sweep_and_study_name_rule(name: str, tmp_path: Path) -> None:
    assert check_name(name) == _old_name_ok(name)
    assert check_name(name) == _study_name_ok(name) == _sweep_name_ok(name, tmp_path)


def test_check_name_accepts_and_refuses() -> None:
    assert check_name("a" * 100) and not check_name("a" * 101)
    assert not check_name("a..b") and not check_name("a\n") and not check_name("")


@pytest.mark.parametrize("model", MODELS)
def test_safe_model_is_the_figure_name_rule(model: str) -> None:
    assert safe_model(model) == _old_safe_model(model)
