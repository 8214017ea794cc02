"""`python -m experiments.cli`."""

from experiments.cli import main

main()
