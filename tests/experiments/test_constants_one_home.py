"""A constant or a type of choices is defined once: the other modules that name it import it
(issue 32), so a change in one place cannot leave a stale copy behind."""

from __future__ import annotations

from typing import get_args

from experiments import criteria, ids, metrics
from experiments.analysis import compare, stats
from experiments.cli import options
from experiments.generate import provenance
from experiments.grading import criteria as grading_criteria
from experiments.judge import rubrics
from experiments.llm import types as llm_types
from experiments.sweeps import spec as sweep_spec
from experiments.trials import spec as trial_spec
from promptlib import data


def test_each_shared_constant_is_the_one_object_of_its_home() -> None:
    assert provenance.text_sha256 is ids.text_sha256
    assert compare.AcrossTest is stats.AcrossTest
    assert trial_spec.Definition is metrics.Definition
    assert sweep_spec.SPLITS is data.SPLITS
    # the paper's grading criteria: hand grades and the judge grade the same two
    assert grading_criteria.CRITERIA is rubrics.CRITERIA is criteria.CRITERIA
    assert grading_criteria.GUIDE is criteria.GUIDE


def test_the_cli_choices_are_the_runners_literals() -> None:
    """Typer needs enums for its choices; their values are the runner's `Literal`s, in order."""
    assert tuple(c.value for c in options.Definition) == get_args(metrics.Definition)
    assert tuple(c.value for c in options.Scoring) == get_args(llm_types.Scoring)
    assert tuple(c.value for c in options.Mode) == get_args(llm_types.Mode)
    assert tuple(c.value for c in options.Split) == data.SPLITS
    assert {k.value: v for k, v in options.DEFINITIONS.items()} == {
        v: v for v in get_args(metrics.Definition)
    }
    assert {k.value: v for k, v in options.SCORINGS.items()} == {
        v: v for v in get_args(llm_types.Scoring)
    }
