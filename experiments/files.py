"""Crash-safe files: a result is either wholly on disk or not there at all.

Files are written under a temporary name in the same folder, flushed and fsynced, then
renamed over the target, and the folder is fsynced so the rename itself survives a power
cut. A trial's folder (predictions plus summary) is built the same way as a whole, so the
two files always land together.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from promptlib.errors import WorkbenchError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


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


def atomic_symlink(target: str, link: Path) -> bool:
    """Point the symlink `link` at `target` at once: a temporary sibling link renamed over
    it, then the folder fsynced, so a reader finds the old target or the new one, never no
    link. False, and nothing changed, where the OS or filesystem makes no symlinks (Windows
    without the privilege): the caller chooses what to write instead."""
    link.parent.mkdir(parents=True, exist_ok=True)
    tmp = link.parent / f".{link.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    tmp.unlink(missing_ok=True)  # left by a killed writer whose process id this one reuses
    try:
        os.symlink(target, tmp, target_is_directory=True)
    except (OSError, NotImplementedError):
        return False
    try:
        os.replace(tmp, link)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(link.parent)
    return True


# lock file -> (descriptor, depth) of the locks this thread holds (re-entrant per thread)
_HELD = threading.local()


def lock_path(path: Path) -> Path:
    """The lock file of the folder `path`: a hidden sibling, present only while it is held."""
    return path.parent / f".{path.name}.lock"


@contextlib.contextmanager
def dir_lock(path: Path) -> Iterator[None]:
    """Hold the lock writers of the folder `path` take turns through (a file beside it).

    Why: a reader that decides what to write from what is saved (keep a complete trial, carry
    its grades, import grades) must not let another writer slip in between its read and its
    write. The lock is re-entrant within a thread, so `atomic_write_dir` under it does not
    wait on itself; other threads and processes wait.

    The lock file is removed when the lock is released, so `runs/` holds only results once
    nobody writes. Removing a flock file is racy unless every taker checks what it locked;
    here it does, and the protocol stays exclusive:

    - a taker opens (creating) the file, `flock`s it, then checks that the path still names
      the file it locked (same device and inode); if not, it locked a file that was removed
      meanwhile, so it closes it and starts again;
    - only a holder removes the file, while still holding it, and closes it afterwards.

    So a taker that proceeds holds the flock of the file the path names, and the path keeps
    naming that file until this taker removes it: no second taker can pass the check in the
    meantime (it would need the same flock, or a file the path does not name). A waiter on a
    removed file wakes, fails the check and waits on the new one. A process killed while
    holding leaves the file behind (the kernel drops the flock): the next taker locks it at
    once and removes it when done. Where `fcntl` is missing (Windows) `filelock` is used and
    the file stays.
    """
    target = lock_path(path)
    held: dict[str, list[int]] = _HELD.__dict__.setdefault("locks", {})
    key = str(target)
    if key in held:  # this thread holds it already
        held[key][1] += 1
        try:
            yield
        finally:
            held[key][1] -= 1
        return
    if fcntl is None:  # pragma: no cover - not POSIX
        import filelock

        path.parent.mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(key, is_singleton=True):
            yield
        return
    fd = _take(target)
    held[key] = [fd, 1]
    try:
        yield
    finally:
        del held[key]
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)  # still holding it: see the docstring
        finally:
            os.close(fd)  # releases the flock


def _take(target: Path) -> int:
    """A descriptor of `target`, flocked, that `target` still names (see `dir_lock`)."""
    assert fcntl is not None
    target.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(target, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            mine = os.fstat(fd)
            try:
                now = os.stat(target)
            except FileNotFoundError:
                now = None
        except BaseException:
            os.close(fd)
            raise
        if now is not None and (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
            return fd
        os.close(fd)  # its last holder removed it while we waited: lock the current one


def atomic_write_dir(path: Path, files: Mapping[str, str | bytes]) -> None:
    """Replace the folder `path` with one holding exactly `files` (name -> text, or bytes
    written as they are: a figure's PNG; a name may be a path inside it, "judge/x.jsonl"),
    at once.

    The new folder is built under a temporary name and renamed into place; an existing folder
    is first moved aside and removed after the swap, so readers see the old set or the new
    set of files, never a mix. Writers of the same folder (two runs of one trial) take turns
    through `dir_lock`.
    """
    with dir_lock(path):
        _swap_dir(path, files)


def _swap_dir(path: Path, files: Mapping[str, str | bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    old: Path | None = None
    try:
        for name, content in files.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)  # "judge/<id>.jsonl"
            if isinstance(content, bytes):
                with open(tmp / name, "wb") as fb:
                    fb.write(content)
                    fb.flush()
                    os.fsync(fb.fileno())
                continue
            with open(tmp / name, "w", encoding="utf-8") as f:
                f.write(content)
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
        # the previous result is removed once a folder is in its place (the new one, or it
        # put back); if putting it back failed, it stays in the hidden folder, not deleted
        if old is not None and path.exists():
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


# ---- spreadsheet-safe CSV cells --------------------------------------------------------------
# A cell starting with one of these is a formula to Excel and LibreOffice (CSV injection).
_FORMULA = re.compile(r"^'*[=+\-@\t\r]")
_QUOTED_FORMULA = re.compile(r"^'+[=+\-@\t\r]")


def csv_cell(text: str) -> str:
    """`text` safe to open in a spreadsheet: a formula-like cell gets a leading quote.

    Every CSV the workbench writes for people (grade export, comparisons.csv) passes its
    text cells through here. Cells already starting with quotes before a formula character
    get one more, so `csv_uncell` gives back exactly the text that was exported.
    """
    return f"'{text}" if _FORMULA.match(text) else text


def csv_uncell(cell: str) -> str:
    """The text `csv_cell` exported (its protective quote removed)."""
    return cell[1:] if _QUOTED_FORMULA.match(cell) else cell
