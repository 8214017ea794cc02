"""`python -m experiments.cli`."""

from experiments.cli.cli import main

main()
