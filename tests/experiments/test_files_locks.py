"""Review rev3 (issue 19): `dir_lock` leaves no lock file behind in runs/ once released, and
stays exclusive although the file is removed (threads and processes, a waiter on a removed
file, a file left by a killed holder)."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path

import pytest

from experiments.files import atomic_write_dir, dir_lock, lock_path


def test_released_lock_leaves_only_results(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / ("ab" * 32)
    with dir_lock(folder):
        assert lock_path(folder).exists()
        with dir_lock(folder):  # re-entrant in this thread
            atomic_write_dir(folder, {"summary.json": "{}"})
        assert lock_path(folder).exists()  # still held by the outer block
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [folder.name]


def test_a_stale_lock_file_is_taken_and_removed(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    lock_path(folder).write_text("")  # a holder killed with SIGKILL: file stays, flock gone
    atomic_write_dir(folder, {"a": "1"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]


def test_a_waiter_on_a_removed_file_does_not_share_the_lock(tmp_path: Path) -> None:
    """A waits holding; B waits on A's file; A releases (removing it) while C arrives: B and C
    must still take turns (B locked a removed file, so it locks the new one instead)."""
    folder = tmp_path / "t"
    inside: list[str] = []
    overlaps: list[tuple[str, str]] = []
    guard = threading.Lock()

    def hold(name: str, seconds: float) -> None:
        with dir_lock(folder):
            with guard:
                if inside:
                    overlaps.append((inside[0], name))
                inside.append(name)
            time.sleep(seconds)
            with guard:
                inside.remove(name)

    a = threading.Thread(target=hold, args=("a", 0.4))
    a.start()
    time.sleep(0.1)
    b = threading.Thread(target=hold, args=("b", 0.3))
    b.start()  # B opens A's file and waits on it
    time.sleep(0.35)
    c = threading.Thread(target=hold, args=("c", 0.3))
    c.start()  # around A's release: C may create a new file
    for t in (a, b, c):
        t.join(10)
    assert not overlaps
    assert not lock_path(folder).exists()


def _count(folder: str, n: int) -> None:
    counter = Path(folder) / "count"
    for _ in range(n):
        with dir_lock(Path(folder) / "t"):
            value = int(counter.read_text())
            time.sleep(0.001)  # widen the window a lost update needs
            counter.write_text(str(value + 1))


@pytest.mark.slow
def test_processes_take_turns_although_the_file_is_removed(tmp_path: Path) -> None:
    (tmp_path / "count").write_text("0")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_count, args=(str(tmp_path), 60)) for _ in range(3)]
    for p in procs:
        p.start()
    _count(str(tmp_path), 60)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert (tmp_path / "count").read_text() == str(4 * 60)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["count"]
