"""The `workbench` command line: option wiring only.

Every command turns a `WorkbenchError` into a one-line message on stderr and its exit code,
and builds its whole output before printing, so a failure never leaves half an answer. What
is printed is built in `experiments.output`; the options several commands share (data
source, model connection, cache) are declared once (`options`) and turned into a catalog, a model
and a cache by `Setup`.

Modules: `app` (the Typer apps, main options, `main`), `options` (shared options, `Setup`),
`help_format` (help wrapped to the terminal, flags shown and refused as flags),
and the commands: `catalog` (tasks, render), `trial` (run, score), `studies` (sweep,
optimize, report), `plan` (plan), `imports` (import, compare), `tools` (grade, doctor, ui),
`variants` (variants generate), `usertask` (task new, task list: your own data as a task),
`judge` (judge: a judge model grades trials on the paper's criteria).
`single` is the work of `workbench run` as a function a test can call (`run_single`);
`trial.run` only wires its options to it.
"""

from experiments.cli.app import app, main

# Importing a command module registers its commands on `app`, in the order
# `workbench --help` lists them.
# isort: off
from experiments.cli import catalog, trial, studies, plan  # noqa: F401
from experiments.cli import imports, tools, variants, usertask  # noqa: F401
from experiments.cli import grading, judge, calibrated  # noqa: F401
# isort: on

__all__ = [
    "app",
    "main",
]
