"""reports/<sweep>/<sweep id>/: one folder per sweep run, and `latest` naming the newest.

Why: a sweep rerun on another model is another sweep id, and it used to write over the first
run's reports/<sweep>/ files. Now a sweep run writes only its own folder, whole or not at all
(`files.atomic_write_dir`: built beside it, then renamed into place), and only then points
`latest` at it. A rerun of one sweep id (resumed after Ctrl-C) replaces that folder alone.

A run folder with an HTML report (``index.html``) also gets reports/<sweep>/index.html: a
page that opens the latest run's report (a relative meta refresh) and lists every run's
folder, written atomically after `latest` is pointed.

`latest` is a relative symlink ``reports/<sweep>/latest -> <sweep id>`` where the OS has
symlinks (replaced at once: `files.atomic_symlink`), else a text file
``reports/<sweep>/LATEST`` holding the id. `latest_id` is the one reader of either.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from experiments.files import atomic_symlink, atomic_write_dir, atomic_write_text

LATEST = "latest"  # the symlink
LATEST_FILE = "LATEST"  # the text file, where there are no symlinks
INDEX = "index.html"  # a run's HTML report, and the sweep folder's page pointing at the latest
_SWEEP_ID = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class ReportFolder:
    """A sweep run's report folder as written: the folder, its files, and the `latest`
    pointer (the symlink, or the LATEST file) now naming it."""

    path: Path
    files: tuple[str, ...]
    latest: Path


def run_folder(reports_dir: Path, sweep: str, sweep_id: str) -> Path:
    """reports/<sweep>/<sweep id>/."""
    return reports_dir / sweep / sweep_id


def write_run(
    reports_dir: Path, sweep: str, sweep_id: str, files: Mapping[str, str | bytes]
) -> ReportFolder:
    """Write a sweep run's folder whole (replacing this sweep id's folder, no other), then
    point `latest` at it. An error or interrupt before the rename leaves the previous folder
    and `latest` as they were (only a hidden temporary folder may be left after a kill)."""
    if not _SWEEP_ID.fullmatch(sweep_id):
        raise ValueError(f"not a sweep id: {sweep_id!r}")  # a folder name, never a path
    folder = run_folder(reports_dir, sweep, sweep_id)
    atomic_write_dir(folder, files)
    latest = point_latest(folder.parent, sweep_id)
    # also when this run has no page but an earlier one did: the sweep's page must not go
    # on opening that earlier run's report as the latest
    if INDEX in files or (folder.parent / INDEX).is_file():
        write_index(folder.parent, sweep, sweep_id)
    return ReportFolder(folder, tuple(sorted(files)), latest)


def write_index(sweep_dir: Path, sweep: str, latest: str) -> Path:
    """reports/<sweep>/index.html: opens `latest`'s report (relative, so the folder can be
    moved or zipped) and lists the sweep's run folders, the latest first, then newest first.
    Written atomically: a reader sees the old page or the new one."""
    ids = run_ids(sweep_dir)
    ids.sort(key=lambda i: (i != latest, -_mtime(sweep_dir / i), i))
    items = []
    for i in ids:
        has = (sweep_dir / i / INDEX).is_file()
        href = f"{i}/{INDEX}" if has else f"{i}/"
        what = " (latest)" if i == latest else ""
        what += "" if has else " (no HTML report: comparisons.json and figures)"
        items.append(f'<li><a href="{href}"><code>{i[:12]}</code></a>{html.escape(what)}</li>')
    name = html.escape(sweep)
    if (sweep_dir / latest / INDEX).is_file():
        head = f'<meta http-equiv="refresh" content="0; url={latest}/{INDEX}">\n'
        lead = (
            f'<p>Opening the latest report of sweep {name}: <a href="{latest}/{INDEX}">'
            f"<code>{latest[:12]}</code></a></p>\n"
        )
    else:  # the latest run's page could not be built: no older run's page stands in for it
        head = ""
        lead = (
            f'<p>The latest run of sweep {name}, <a href="{latest}/"><code>{latest[:12]}'
            "</code></a>, has no HTML report (its comparisons.json and figures are there); "
            "the reports below are of earlier runs.</p>\n"
        )
    page = (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n'
        + head
        + f"<title>Sweep {name}: reports</title></head>\n<body>\n"
        + lead
        + f"<h1>Sweep {name}: its runs' reports</h1>\n<ul>\n"
        + "\n".join(items)
        + "\n</ul>\n"
        "</body></html>\n"
    )
    path = sweep_dir / INDEX
    atomic_write_text(path, page)
    return path


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def point_latest(sweep_dir: Path, sweep_id: str) -> Path:
    """Make `latest` in `sweep_dir` name `sweep_id`; returns the pointer written.

    The symlink where the OS allows one (any LATEST file left is then removed: the link is
    what `latest_id` reads first); else the LATEST file, written atomically, and a stale
    link removed after it."""
    link = sweep_dir / LATEST
    if atomic_symlink(sweep_id, link):
        (sweep_dir / LATEST_FILE).unlink(missing_ok=True)
        return link
    text = sweep_dir / LATEST_FILE
    atomic_write_text(text, sweep_id + "\n")
    if link.is_symlink():
        link.unlink(missing_ok=True)
    return text


def latest_id(sweep_dir: Path) -> str | None:
    """The sweep id `latest` names in `sweep_dir` (the symlink, else the LATEST file), or
    None when there is neither or it names no sweep id."""
    link = sweep_dir / LATEST
    if link.is_symlink():
        name = Path(os.readlink(link)).name
    else:
        try:
            name = (sweep_dir / LATEST_FILE).read_text(encoding="utf-8").strip()
        except (FileNotFoundError, NotADirectoryError):
            return None
    return name if _SWEEP_ID.fullmatch(name) else None


def run_ids(sweep_dir: Path) -> list[str]:
    """The sweep ids with a report folder in `sweep_dir` (not `latest`, not temporaries)."""
    if not sweep_dir.is_dir():
        return []
    return sorted(
        p.name
        for p in sweep_dir.iterdir()
        if _SWEEP_ID.fullmatch(p.name) and p.is_dir() and not p.is_symlink()
    )
