"""The `workbench` command line: entry point `experiments.cli:main`, `python -m experiments.cli`."""

from experiments.cli.cli import app, main

__all__ = [
    "app",
    "main",
]
