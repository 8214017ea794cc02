"""Writing a task folder atomically: never half-written, never overwritten unasked.

The files are written (and flushed to disk) into a hidden temporary folder beside the
task's, which is then renamed into place: a reader sees no task or the whole task, never a
part of one, and a crash leaves only a hidden ``.new-*`` folder, which the catalog ignores.
With ``force`` an existing task is swapped for the new one in one step (Linux's
``renameat2(RENAME_EXCHANGE)``); where that call is missing, the old folder is moved aside
first and the new one renamed in, so a reader may find no task for that instant, never a
mixed one. The old folder is removed last.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from promptlib.errors import DataError

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def write_task(
    tasks_dir: Path,
    name: str,
    files: tuple[tuple[str, str], ...],
    force: bool,
    check: Callable[[Path], None] | None = None,
) -> Path:
    """Write `files` (name -> text) as the folder ``tasks_dir/name``; return its path.

    `check` reads the written temporary folder before it is put in place (raising leaves
    nothing written)."""
    final = tasks_dir / name
    if final.exists() and not force:
        raise DataError(
            f"task {name!r} exists already ({final}); pass --force to replace it, or choose "
            "another name"
        )
    try:
        tasks_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".new-{name}-", dir=tasks_dir))
    except OSError as e:
        raise DataError(
            f"cannot create the task folder in {tasks_dir} ({e.strerror or e}); check its "
            "permissions or set WORKBENCH_TASKS_DIR to a folder you can write"
        ) from None
    try:
        for filename, text in files:
            _write_file(tmp / filename, text)
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; a task folder is an ordinary one
        _fsync_dir(tmp)
        if check is not None:
            check(tmp)
        _put_in_place(tmp, final, name, force)
        _fsync_dir(tasks_dir)
    except OSError as e:
        raise DataError(
            f"cannot write task {name!r} into {tasks_dir} ({e.strerror or e}); nothing was "
            "changed: check the folder and try again"
        ) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def _write_file(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _put_in_place(tmp: Path, final: Path, name: str, force: bool) -> None:
    """Rename `tmp` to `final`; with `force`, swap them when `final` exists (`tmp` then holds
    the old task, which the caller removes)."""
    if not final.exists():
        try:
            os.rename(tmp, final)  # fails if another process put a task there meanwhile
            return
        except OSError as e:
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not force:
                if e.errno in (errno.EEXIST, errno.ENOTEMPTY):
                    raise DataError(
                        f"task {name!r} was created by another process meanwhile ({final}); "
                        "pass --force to replace it"
                    ) from None
                raise
    if _exchange(tmp, final):
        return
    aside = Path(tempfile.mkdtemp(prefix=f".old-{name}-", dir=final.parent))
    os.rename(final, aside / name)
    try:
        os.rename(tmp, final)
    except OSError:
        os.rename(aside / name, final)  # put the old task back
        raise
    finally:
        if final.exists():  # the new task, or the old one put back: the aside folder goes
            shutil.rmtree(aside, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False if unsupported."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    renameat2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    renameat2.restype = ctypes.c_int
    res = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if res == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False  # the call or the file system cannot swap: fall back
    raise OSError(err, os.strerror(err), str(b))
