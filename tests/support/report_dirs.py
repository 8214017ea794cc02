"""Report-folder helpers only the tests use (moved out of `experiments.sweeps.report_dirs`)."""

from __future__ import annotations

from pathlib import Path

from experiments.sweeps.report_dirs import _SWEEP_ID


def run_ids(sweep_dir: Path) -> list[str]:
    """The sweep ids with a report folder in `sweep_dir` (not `latest`, not temporaries)."""
    if not sweep_dir.is_dir():
        return []
    return sorted(
        p.name
        for p in sweep_dir.iterdir()
        if _SWEEP_ID.fullmatch(p.name) and p.is_dir() and not p.is_symlink()
    )
