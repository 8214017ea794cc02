"""Where a secret ended up: every file under a folder (an MLflow store's sqlite database and
artifact folders, runs/, the response cache) searched for a key, as written and as its
tail (a cut key leaks too), also inside zip and gzip files and JSON-escaped.

Written apart from `experiments.imports.secret_scan` on purpose: a test of where keys go
must not ask the code under test whether they went there."""

from __future__ import annotations

import contextlib
import gzip
import io
import zipfile
from pathlib import Path


def _forms(secret: str) -> list[bytes]:
    """The secret and its last 10 characters, plain, fully \\u-escaped, and UTF-16."""
    out = []
    for s in (secret, secret[-10:]):
        out += [s.encode(), "".join(f"\\u{ord(c):04x}" for c in s).encode()]
        out.append(s.encode("utf-16-le"))
    return out


def _contents(data: bytes) -> list[bytes]:
    """The bytes, and what a zip's members or a gzip stream hold."""
    out = [data]
    if data[:2] == b"\x1f\x8b":
        with contextlib.suppress(OSError, EOFError):
            out.append(gzip.decompress(data))
    if data[:4] == b"PK\x03\x04":
        with contextlib.suppress(ImportError):
            import zipfile_zstd  # noqa: F401  # zstd members, as inspect_ai writes them
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                out += _contents(archive.read(info))
    return out


def leaks(root: Path, secret: str) -> list[str]:
    """The files under `root` holding `secret` (or its tail) in any form `_forms` lists."""
    forms = _forms(secret)
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if any(f in c for c in _contents(path.read_bytes()) for f in forms):
            found.append(str(path.relative_to(root)))
    return found
