"""Crash-safe files: a result is either wholly on disk or not there at all.

Files are written under a temporary name in the same folder, flushed and fsynced, then
renamed over the target, and the folder is fsynced so the rename itself survives a power
cut. A trial's folder (predictions plus summary) is built the same way as a whole, so the
two files always land together.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from promptlib.errors import WorkbenchError


class OutputError(WorkbenchError):
    """An output folder cannot be written; found before any model is called."""


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return  # some filesystems do not allow opening folders; the rename still happened
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` so a crash leaves the old file or the new one, never a torn one."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path`: temporary sibling, fsync, rename, fsync of the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


@contextlib.contextmanager
def dir_lock(path: Path) -> Iterator[None]:
    """Hold the lock writers of the folder `path` take turns through (a file beside it).

    Why: a reader that decides what to write from what is saved (keep a complete trial, carry
    its grades, import grades) must not let another writer slip in between its read and its
    write. The lock is re-entrant within a thread, so `atomic_write_dir` under it does not
    wait on itself; other threads and processes wait.
    """
    import filelock

    path.parent.mkdir(parents=True, exist_ok=True)
    # one lock object per path in this process (is_singleton), counted per thread
    with filelock.FileLock(str(path.parent / f".{path.name}.lock"), is_singleton=True):
        yield


def atomic_write_dir(path: Path, files: Mapping[str, str]) -> None:
    """Replace the folder `path` with one holding exactly `files` (name -> text), at once.

    The new folder is built under a temporary name and renamed into place; an existing folder
    is first moved aside and removed after the swap, so readers see the old set or the new
    set of files, never a mix. Writers of the same folder (two runs of one trial) take turns
    through `dir_lock`.
    """
    with dir_lock(path):
        _swap_dir(path, files)


def _swap_dir(path: Path, files: Mapping[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    old: Path | None = None
    try:
        for name, text in files.items():
            with open(tmp / name, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        _fsync_dir(tmp)
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old.", dir=path.parent))
            os.replace(path, old / "d")
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not path.exists():
            with contextlib.suppress(OSError):
                os.replace(old / "d", path)  # put the previous result back
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def check_writable(folders: Iterable[tuple[str, Path]]) -> None:
    """Fail before any model call if an output folder cannot be created or written.

    `folders` are (what, path) pairs; the error names the folder, what it holds and the fix.
    """
    for what, folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(prefix=".write-check.", dir=folder)
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            reason = e.strerror or str(e)
            raise OutputError(
                f"{folder}: cannot write {what} there ({reason}); make it writable or point "
                "the matching setting elsewhere before running (no model was called)"
            ) from e
