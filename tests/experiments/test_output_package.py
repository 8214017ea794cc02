"""`experiments.output` is a package of one module per concept behind the names the single
module had (issue 32, part 3): callers keep `output.X` and ``from experiments.output import X``,
each function defined once in the module of its concept, and the package still loads none of
the analysis (scipy) until there is a result to print."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

from experiments import output

# every public name of the old experiments/output.py (progress_bar: promptlib's, re-exported)
OLD_NAMES = [
    "across_table",
    "as_json",
    "command_error",
    "comparison_table",
    "cost_line",
    "decision_lines",
    "demonstrations_left_out",
    "dry_run",
    "duration",
    "generation_lines",
    "generation_refused",
    "grade_export",
    "grade_import",
    "import_summary",
    "incomplete_trials_error",
    "measuring_note",
    "model_time_lines",
    "not_measured_note",
    "note_lines",
    "optimize_report",
    "other_sweep_runs_note",
    "progress_bar",
    "rendered_prompts",
    "report_folder_line",
    "run_incomplete_error",
    "run_kept_notes",
    "run_note",
    "run_untracked_error",
    "score_line",
    "search_space",
    "sensitivity_section",
    "sequential_table",
    "study_plan",
    "sweep_not_complete_error",
    "sweep_rebuilt_note",
    "sweep_report",
    "sweep_summary",
    "task_list",
    "task_problem",
    "time_warning",
    "trial_summary",
    "unreviewed_warning",
    "version_line",
]

MODULES = (
    "calibrated",
    "judged",
    "common",
    "comparisons",
    "generation",
    "grades",
    "imports",
    "messages",
    "optimize",
    "plan",
    "sequential",
    "slices",  # `report --by slice|class` (issue 34)
    "sweeps",
    "tasks",
    "trials",
)


@pytest.mark.parametrize("name", OLD_NAMES)
def test_every_old_name_is_still_reachable(name: str) -> None:
    assert name in output.__all__
    value = getattr(output, name)
    exec(f"from experiments.output import {name}", {})  # the other spelling
    if name != "progress_bar":  # defined in one of the package's modules, not copied
        assert value.__module__.startswith("experiments.output."), value.__module__


def test_the_package_has_one_module_per_concept() -> None:
    found = {m.name for m in pkgutil.iter_modules(output.__path__)}
    assert set(MODULES) == found
    for name in found:
        module = importlib.import_module(f"experiments.output.{name}")
        assert module.__doc__, f"output.{name} says what it holds"


def test_importing_the_output_loads_no_analysis() -> None:
    # start-up time: the CLI imports output first; the analysis (scipy) loads only to print one
    code = (
        "import sys, experiments.output; "
        "print(sorted(m for m in sys.modules if m.startswith(('scipy', 'experiments.analysis'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
