"""Everything the `workbench` command line prints, built from the results it is handed.

The CLI wires options to the library and hands the results here; each function returns the
whole text (or JSON) so a command prints its answer in one piece, never half of it. Keeping
the formatting out of the option wiring lets a command grow a section (a new table, a new
column) by adding a function that takes the result, without touching the options.

One module per concept; every name is re-exported here, so `output.X` and
``from experiments.output import X`` are the ways to use them:

- `common`: a number or "-" (`_f`), one JSON document (`as_json`), a variant's notes;
- `tasks`: `workbench tasks` and the rendered prompts;
- `trials`: one trial's summary and score line;
- `comparisons`: the comparison table, its legend and `--explain` text, the across-task
  table and the decision lines;
- `sequential`: a sequential sweep's table;
- `slices`: `workbench report --by slice|class`, a comparison's per-slice (or class) table;
- `sweeps`: `workbench sweep` and `workbench report` around the tables (cost, files);
- `plan`: `--dry-run`, `workbench plan` and the time lines of local models;
- `optimize`, `grades`, `generation`, `imports`: those commands' reports;
- `messages`: stderr notes and errors, the version line;
- `calibrated`: `workbench grade report|next` (hand grades + judge scores by PPI);
- `judged`: a sweep's judge step (`judge:` in its spec): calibrated, or judge scores only.

Progress bars (`progress_bar`, from promptlib.progress) go to stderr, so `--json` output on
stdout stays clean. Start-up time: none of these modules imports the analysis (scipy) at
load; a function imports it once there is a result to print.
"""

from experiments.output.calibrated import calibrated_table, grade_report_pointer, next_items
from experiments.output.common import as_json, note_lines
from experiments.output.comparisons import across_table, comparison_table, decision_lines
from experiments.output.generation import generation_lines, generation_refused, unreviewed_warning
from experiments.output.grades import grade_export, grade_import
from experiments.output.imports import import_summary
from experiments.output.judged import judge_section
from experiments.output.messages import (
    command_error,
    demonstrations_left_out,
    other_sweep_runs_note,
    run_incomplete_error,
    run_kept_notes,
    run_note,
    run_untracked_error,
    sweep_not_complete_error,
    sweep_rebuilt_note,
    task_problem,
    version_line,
)
from experiments.output.optimize import optimize_report, search_space
from experiments.output.plan import (
    dry_run,
    duration,
    measuring_note,
    model_time_lines,
    not_measured_note,
    study_plan,
    time_warning,
)
from experiments.output.sequential import sequential_table
from experiments.output.slices import slice_report
from experiments.output.sweeps import (
    cost_line,
    incomplete_trials_error,
    report_folder_line,
    sensitivity_section,
    sweep_report,
    sweep_summary,
)
from experiments.output.tasks import rendered_prompts, task_list
from experiments.output.trials import score_line, trial_summary, undocumented_note
from promptlib.progress import progress_bar  # the CLI's bars, re-exported

__all__ = [
    "across_table",
    "as_json",
    "calibrated_table",
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
    "grade_report_pointer",
    "import_summary",
    "incomplete_trials_error",
    "judge_section",
    "measuring_note",
    "model_time_lines",
    "next_items",
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
    "slice_report",
    "study_plan",
    "sweep_not_complete_error",
    "sweep_rebuilt_note",
    "sweep_report",
    "sweep_summary",
    "task_list",
    "task_problem",
    "time_warning",
    "trial_summary",
    "undocumented_note",
    "unreviewed_warning",
    "version_line",
]
