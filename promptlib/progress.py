"""Progress bars for long steps (data extraction, trials, sweeps, optimisation).

They go to stderr and only on a terminal, and vanish when done, so pipes and `--json`
output stay clean. Here rather than in `experiments.output` because promptlib's data
download needs one too, and promptlib does not import experiments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_bar(description: str) -> Iterator[Callable[..., None]]:
    """A rich progress bar on stderr; yields `update(done, total, what=None)`.

    It is shown only on a terminal and removed when done, so pipes and `--json` stay clean.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        tid = bar.add_task(description, total=None)

        def update(done: int, total: int | None, what: str | None = None) -> None:
            if what is None:
                bar.update(tid, completed=done, total=total)
            else:
                bar.update(tid, completed=done, total=total, description=f"{description}: {what}")

        yield update
