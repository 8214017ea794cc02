"""reports/<sweep>/<sweep id>/ and `latest` (issue 31, point 3): nothing overwrites a result.

A sweep rerun on another model (another sweep id) used to write over reports/<sweep>/. Here:
each sweep id writes its own folder, whole or not at all, and `latest` names the newest.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from experiments import files
from experiments.reports.folders import (
    LATEST,
    LATEST_FILE,
    latest_id,
    point_latest,
    run_folder,
    run_ids,
    write_run,
)

A, B = "a" * 64, "b" * 64


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_two_sweep_ids_keep_two_folders_and_latest_names_the_second(tmp_path: Path) -> None:
    first = write_run(tmp_path, "demo", A, {"comparisons.csv": "a\n", "forest.png": b"\x89A"})
    second = write_run(tmp_path, "demo", B, {"comparisons.csv": "b\n", "forest.png": b"\x89B"})
    assert first.path == tmp_path / "demo" / A and second.path == tmp_path / "demo" / B
    assert contents(first.path) == {"comparisons.csv": b"a\n", "forest.png": b"\x89A"}
    assert contents(second.path) == {"comparisons.csv": b"b\n", "forest.png": b"\x89B"}
    assert run_ids(tmp_path / "demo") == [A, B]
    assert latest_id(tmp_path / "demo") == B
    link = tmp_path / "demo" / LATEST
    assert link.is_symlink() and os.readlink(link) == B  # relative: a moved reports/ works
    assert (link / "comparisons.csv").read_text() == "b\n"
    assert second.latest == link and not (tmp_path / "demo" / LATEST_FILE).exists()


def test_a_rerun_of_one_sweep_id_replaces_its_folder_only(tmp_path: Path) -> None:
    write_run(tmp_path, "demo", A, {"comparisons.csv": "a\n", "old.png": b"1"})
    write_run(tmp_path, "demo", B, {"comparisons.csv": "b\n"})
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (tmp_path / "demo" / B).iterdir()}
    write_run(tmp_path, "demo", A, {"comparisons.csv": "a2\n"})  # resumed: A again
    assert contents(tmp_path / "demo" / A) == {"comparisons.csv": b"a2\n"}  # whole, no old.png
    after = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (tmp_path / "demo" / B).iterdir()}
    assert after == before  # B's files untouched, not even rewritten
    assert latest_id(tmp_path / "demo") == A  # A is the sweep run most recently run
    assert [p.name for p in (tmp_path / "demo").iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("where", ["building", "swapping"])
def test_an_interrupted_write_leaves_no_half_folder_and_latest_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    write_run(tmp_path, "demo", A, {"comparisons.csv": "a\n"})
    write_run(tmp_path, "demo", B, {"comparisons.csv": "b\n"})
    real_fsync, real_replace = files._fsync_dir, os.replace

    def interrupted_fsync(path: Path) -> None:  # every file is written, not yet renamed
        if path.name.startswith(f".{A}."):
            raise KeyboardInterrupt
        real_fsync(path)

    def interrupted_replace(src: str | Path, dst: str | Path) -> None:
        if Path(dst) == tmp_path / "demo" / A and Path(src).name != "d":  # new folder in place
            raise KeyboardInterrupt
        real_replace(src, dst)  # the previous folder aside, and back

    if where == "building":
        monkeypatch.setattr(files, "_fsync_dir", interrupted_fsync)
    else:
        monkeypatch.setattr(os, "replace", interrupted_replace)
    with pytest.raises(KeyboardInterrupt):
        write_run(tmp_path, "demo", A, {"comparisons.csv": "half\n", "forest.png": b"x"})
    monkeypatch.undo()
    assert contents(tmp_path / "demo" / A) == {"comparisons.csv": b"a\n"}  # the previous one
    assert contents(tmp_path / "demo" / B) == {"comparisons.csv": b"b\n"}
    assert latest_id(tmp_path / "demo") == B  # still the previous latest
    assert sorted(p.name for p in (tmp_path / "demo").iterdir()) == sorted([A, B, LATEST])


def test_a_first_write_interrupted_leaves_no_folder_and_no_latest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(path: Path) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(files, "_fsync_dir", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_run(tmp_path, "demo", A, {"comparisons.csv": "a\n"})
    monkeypatch.undo()
    assert run_ids(tmp_path / "demo") == [] and latest_id(tmp_path / "demo") is None
    assert not run_folder(tmp_path, "demo", A).exists()


def test_without_symlinks_a_latest_file_names_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_run(tmp_path, "demo", A, {"comparisons.csv": "a\n"})  # a link, made where one can

    def no_symlinks(*args: object, **kwargs: object) -> None:
        raise OSError(1314, "A required privilege is not held by the client")

    monkeypatch.setattr(os, "symlink", no_symlinks)
    written = write_run(tmp_path, "demo", B, {"comparisons.csv": "b\n"})
    assert written.latest == tmp_path / "demo" / LATEST_FILE
    assert (tmp_path / "demo" / LATEST_FILE).read_text() == B + "\n"
    assert not (tmp_path / "demo" / LATEST).is_symlink()  # a stale link would name A
    assert latest_id(tmp_path / "demo") == B
    monkeypatch.undo()
    point_latest(tmp_path / "demo", A)  # symlinks again: the file goes, the link names A
    assert latest_id(tmp_path / "demo") == A
    assert not (tmp_path / "demo" / LATEST_FILE).exists()


def test_latest_names_only_sweep_ids(tmp_path: Path) -> None:
    sweep = tmp_path / "demo"
    sweep.mkdir()
    assert latest_id(sweep) is None and latest_id(tmp_path / "missing") is None
    (sweep / LATEST_FILE).write_text("../../etc\n")
    assert latest_id(sweep) is None
    (sweep / f".{A}.x1y2").mkdir()  # a killed writer's temporary folder
    (sweep / "comparisons.csv").write_text("from before reports were per run\n")
    assert run_ids(sweep) == []
    with pytest.raises(ValueError, match="not a sweep id"):
        write_run(tmp_path, "demo", "../x", {})


def test_a_previous_folder_that_cannot_be_put_back_is_kept_not_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The swap moves the previous folder aside; if neither the new folder nor the previous
    one can be renamed into place, the previous one stays in its hidden folder."""
    write_run(tmp_path, "demo", A, {"comparisons.csv": "a\n"})
    real_replace = os.replace

    def refused(src: str | Path, dst: str | Path) -> None:
        if Path(dst) == tmp_path / "demo" / A:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", refused)
    with pytest.raises(OSError, match="No space"):
        write_run(tmp_path, "demo", A, {"comparisons.csv": "new\n"})
    monkeypatch.undo()
    kept = list((tmp_path / "demo").glob(f".{A}.old.*/d/comparisons.csv"))
    assert [p.read_text() for p in kept] == ["a\n"]
