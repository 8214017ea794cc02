"""Secrets in a file as it will be stored, after decoding: an import's source files go to
MLflow byte for byte (`workbench compare` reads them back), so a file holding a key is
refused, and the check must see what a reader of the file would see.

- **Archives and compressed streams** are opened, nested ones too (`MAX_NESTING` deep):
  zip (an inspect_ai ``.eval`` log; its members deflated or zstd-compressed), gzip, bzip2,
  xz, zstd and tar; member names and a zip's comment count as text. A member that cannot be
  opened, or more than `MAX_DECODED` bytes in all, cannot be checked, and is refused too.
- **Text** is checked as written, with JSON's escapes decoded (``sk\\u002d…``, escaped twice
  too) and percent-decoded; UTF-16 and UTF-32 without a byte-order mark as `json.loads`
  reads them. A CSV or TSV is checked cell by cell as its reader unquotes them: a
  credential's column (``api_key``) with a value, JSON in a quoted cell.
- **JSON** (a document, or JSON lines) is parsed, and every string, key or value, is checked
  as decoded, as is every JSON document inside a string; a credential's field
  (`secrets.credential_name`: ``api_key``, ``apiKey``, ``OPENAI_API_KEY``, ``access_token``,
  ``password``, ...) with a value is a secret whatever its shape (not a reference to one:
  ``[REDACTED]``, ``${OPENAI_API_KEY}``).

What counts as a secret is `secrets.find_secret`'s: values of secret environment variables,
keys of known shapes, bearer tokens, URL passwords and credentials' fields. A finding
says where (member, JSON path or line), never the secret.
"""

from __future__ import annotations

import bisect
import bz2
import contextlib
import csv
import gzip
import io
import json
import lzma
import re
import tarfile
import urllib.parse
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from experiments.secrets import credential_name, find_secret, redact_reply, secret_value

MAX_NESTING = 4
"""Archives inside archives opened at most this deep."""
MAX_DECODED = 1 << 30
"""Bytes decompressed at most for one file (1 GiB): beyond it the file cannot be checked."""
_ZIP_ZSTD = 93  # zip's compression method number for zstd (inspect_ai's .eval logs)
_ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|["\\/bfnrt])')
_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_JSON_IN_STRING = 3  # JSON documents inside strings decoded at most this deep


@dataclass(frozen=True)
class Finding:
    """A secret in a file: what it is and where (never the secret itself)."""

    what: str  # e.g. "the value of OPENAI_API_KEY"
    where: str  # e.g. "member samples/1_epoch_1.json, at output.completion"


class Unchecked(Exception):
    """A file that cannot be checked for secrets (an archive that does not open, too large
    decompressed); the message says what, to be shown after the file's path."""


def check_file(path: Path) -> Finding | None:
    """The first secret in the file at `path` as it decodes, else None; `Unchecked` when it
    cannot be read through."""
    return check_bytes(path.read_bytes())


def check_bytes(data: bytes) -> Finding | None:
    """The first secret in a file's `data` as it decodes (`check_file`)."""
    return _Scan().data(data, ())


def decode_escapes(text: str) -> str:
    """`text` with JSON's backslash escapes decoded (a text that is not JSON as a whole, e.g.
    a CSV cell, may still carry them)."""

    def one(m: re.Match[str]) -> str:
        code = m[1]
        return chr(int(code[1:], 16)) if code[0] == "u" else _SIMPLE[code]

    return _ESCAPE.sub(one, text)


class _Scan:
    """One file's check: the decoded bytes so far (for `MAX_DECODED`)."""

    def __init__(self) -> None:
        self.decoded = 0

    def data(self, data: bytes, where: tuple[str, ...], depth: int = 0) -> Finding | None:
        opener = _container(data)
        if opener is None:
            found = _text(_as_text(data), where)
            wide = _wide(data) if found is None else None
            return _text(wide, where) if wide is not None else found
        if depth >= MAX_NESTING:
            raise Unchecked(f"{_at(where)}archives nested more than {MAX_NESTING} deep")
        for entry in opener(data, where):
            inner = (*where, entry.label)
            if entry.name is not None and (found := _text(entry.name, (*inner, "its name"))):
                return found
            if entry.read is None:
                continue
            if (found := self.data(self._read(entry.read, inner), inner, depth + 1)) is not None:
                return found
        return None

    def _read(self, read: Callable[[int], bytes], where: tuple[str, ...]) -> bytes:
        left = MAX_DECODED - self.decoded
        try:
            data = read(left + 1)
        except Unchecked:
            raise
        except Exception as e:  # zip, gzip, bz2, xz, zstd and tar each raise their own
            why = redact_reply(str(e))[0][:120]  # a zip's errors name the member
            raise Unchecked(
                f"{_at(where)}does not decompress ({type(e).__name__}: {why})"
            ) from None
        self.decoded += len(data)
        if self.decoded > MAX_DECODED:
            raise Unchecked(f"decompresses to more than {_size(MAX_DECODED)}, the most checked")
        return data


# ---- containers -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """What an archive holds: a member (its name, checked as text, and a reader of at most n
    of its bytes; none for a folder or link), a compressed stream's content, or a comment."""

    label: str  # where it is, e.g. "member samples/1_epoch_1.json", "gzip-decompressed"
    name: str | None = None
    read: Callable[[int], bytes] | None = None


Opener = Callable[[bytes, tuple[str, ...]], Iterator[Entry]]


def _container(data: bytes) -> Opener | None:
    """How to open `data`, by its first bytes; None for anything else (read as text)."""
    if data[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return _zip_entries
    if data[:2] == b"\x1f\x8b":
        return _stream("gzip", lambda f: gzip.GzipFile(fileobj=f))
    if data[:3] == b"BZh" and data[4:10] in (b"1AY&SY", b"\x17rE8P\x90"):
        return _stream("bzip2", lambda f: bz2.BZ2File(f))
    if data[:6] == b"\xfd7zXZ\x00":
        return _stream("xz", lambda f: lzma.LZMAFile(f))
    if data[:4] == b"\x28\xb5\x2f\xfd":
        return _stream("zstd", _zstd_reader)
    if data[257:262] == b"ustar":
        return _tar_entries
    if not _utf8(data) and zipfile.is_zipfile(io.BytesIO(data)):
        return _zip_entries  # a zip behind other bytes (zipfile, and so inspect_ai, reads it)
    return None


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _read_up_to(f: Any, n: int) -> bytes:
    """At most `n` bytes of `f` (readers may return fewer than asked before the end)."""
    out = bytearray()
    while len(out) < n and (chunk := f.read(min(n - len(out), 1 << 20))):
        out += chunk
    return bytes(out)


def _stream(kind: str, open_: Callable[[IO[bytes]], Any]) -> Opener:
    """A compressed stream's opener: one entry, its content."""

    def entries(data: bytes, where: tuple[str, ...]) -> Iterator[Entry]:
        def read(n: int) -> bytes:
            with open_(io.BytesIO(data)) as f:
                return _read_up_to(f, n)

        yield Entry(f"{kind}-decompressed", read=read)

    return entries


def _zstd_reader(f: IO[bytes]) -> Any:
    try:
        import zstandard  # optional: installed with inspect-ai (the `interop` extra)
    except ImportError:
        raise Unchecked(
            "is zstd-compressed and zstandard is not installed: pip install zstandard"
        ) from None
    return zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True)


def _zip_entries(data: bytes, where: tuple[str, ...]) -> Iterator[Entry]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise Unchecked(
            f"{_at(where)}is not a readable zip archive ({redact_reply(str(e))[0]})"
        ) from None
    if any(info.compress_type == _ZIP_ZSTD for info in archive.infolist()):
        try:
            import zipfile_zstd  # type: ignore[import-not-found,import-untyped,unused-ignore]  # noqa: F401  # optional: inspect-ai's own zstd support for zip
        except ImportError:
            raise Unchecked(
                f"{_at(where)}has zstd-compressed members and zipfile-zstd is not installed: "
                "pip install 'legal-prompt-workbench[interop]'"
            ) from None
    if archive.comment:
        yield Entry("the archive's comment", read=lambda n: archive.comment[:n])
    for info in archive.infolist():

        def read(n: int, info: zipfile.ZipInfo = info) -> bytes:
            with archive.open(info) as f:
                return _read_up_to(f, n)

        label = f"member {info.filename}"
        yield Entry(label, info.filename, None if info.is_dir() else read)


def _tar_entries(data: bytes, where: tuple[str, ...]) -> Iterator[Entry]:
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data))  # noqa: SIM115 (read member by member)
    except (tarfile.TarError, OSError) as e:
        raise Unchecked(
            f"{_at(where)}is not a readable tar archive ({redact_reply(str(e))[0]})"
        ) from None
    for member in archive:

        def read(n: int, member: tarfile.TarInfo = member) -> bytes:
            f = archive.extractfile(member)
            return b"" if f is None else _read_up_to(f, n)

        names = f"{member.name}\n{member.linkname}" if member.linkname else member.name
        yield Entry(f"member {member.name}", names, read if member.isfile() else None)


# ---- text and JSON ----------------------------------------------------------------------------
def _as_text(data: bytes) -> str:
    """Bytes as text: UTF-8 (or UTF-16/32 by its byte-order mark); bytes that are not text
    keep their ASCII, where a key is."""
    for bom, codec in ((b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"),
                       (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16")):  # fmt: skip
        if data.startswith(bom):
            return data.decode(codec, errors="replace")
    return data.decode("utf-8-sig", errors="replace")


def _wide(data: bytes) -> str | None:
    """`data` as UTF-16 or UTF-32 text without a byte-order mark, as `json.loads` reads
    such bytes (by where its first bytes are zero), else None."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" not in data[:4]:
        return None
    encoding = json.detect_encoding(data[:4])
    return data.decode(encoding, errors="replace") if encoding != "utf-8" else None


def _text(text: str, where: tuple[str, ...]) -> Finding | None:
    """The first secret in `text`: in its JSON (a document or lines) as decoded, else in the
    text as written, with escapes decoded, percent-decoded, then in its cells as a CSV or
    TSV reader reads them (`_csv_rows`)."""
    values = _json_values(text)
    if values:
        return _in_json(values, where)
    for variant in _variants(text):
        if (secret := find_secret(variant)) is not None:
            line = variant.count("\n", 0, secret.start) + 1
            return Finding(secret.what, _join((*where, f"line {line}")))
    rows = _csv_rows(text)
    for at, row in rows:
        for column, cell in row.items():
            if credential_name(column) and secret_value(cell):
                return Finding(f"a value of the column {column!r}", _join((*where, at)))
    return _in_json(rows, where) if rows else None


def _csv_rows(text: str) -> list[tuple[str, Any]]:
    """(line, {column: cell}) of `text` read as a CSV (or TSV, or ;-separated) file with a
    header line, cells unquoted (``""`` is ``"``); none for a text that is not one."""
    header = text.split("\n", 1)[0]
    delimiter = next((d for d in ("\t", ",", ";") if d in header), None)
    if delimiter is None:
        return []
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        names = next(reader, [])
        if len(names) < 2:
            return []
        columns = [n if n not in names[:i] else f"{n}#{i + 1}" for i, n in enumerate(names)]
        return [
            (f"line {reader.line_num}", dict(zip(columns, row, strict=False))) for row in reader
        ]
    except csv.Error:  # a cell over the csv module's limit: no reader reads it (tabular)
        return []


def _variants(text: str) -> Iterator[str]:
    """`text`, then (where they differ) its escapes decoded, twice, and it percent-decoded."""
    seen = {text}
    yield text
    once = decode_escapes(text) if "\\" in text else text
    for variant in (once, decode_escapes(once) if "\\" in once else once):
        if variant not in seen:
            seen.add(variant)
            yield variant
    if "%" in text and (unquoted := urllib.parse.unquote(text)) not in seen:
        yield unquoted


def _json_values(text: str) -> list[tuple[str, Any]]:
    """(where, value) of `text` as one JSON document, else of each line if every non-blank
    line is JSON; none for a text that is neither."""
    if text.lstrip()[:1] not in ("{", "[", '"'):
        return []
    try:
        return [("", json.loads(text))]
    except (ValueError, RecursionError):
        pass
    values = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                values.append((f"line {n}", json.loads(line)))
            except (ValueError, RecursionError):
                return []
    return values


def _in_json(values: list[tuple[str, Any]], where: tuple[str, ...]) -> Finding | None:
    """The first secret among the decoded strings of JSON values (keys and values, and JSON
    inside them), or a credential's field with a value; where: its line and path. The
    strings are searched joined, in one pass (a log has millions), and walked again with
    their paths only to name the one found."""
    texts: list[str] = []
    field = any(_gather(value, texts) for _, value in values)
    if not field and find_secret("\n".join(texts)) is None:
        return None
    joined: list[str] = []
    starts: list[int] = []
    paths: list[tuple[str, str]] = []  # (line, path) of each string
    pos = 0
    for line, value in values:
        for path, key, text in _strings(value, "", 0):
            if key is not None and credential_name(key) and secret_value(text):
                return Finding(f"a value of the field {key!r}", _where(where, line, path))
            for variant in _variants(text) if ("\\" in text or "%" in text) else (text,):
                starts.append(pos)
                paths.append((line, path))
                joined.append(variant)
                pos += len(variant) + 1
    secret = find_secret("\n".join(joined))
    if secret is None:  # cannot be: the same strings
        return None
    line, path = paths[bisect.bisect_right(starts, secret.start) - 1]
    return Finding(secret.what, _where(where, line, path))


def _gather(value: Any, texts: list[str]) -> bool:
    """Every string of a JSON value (as `_strings` walks it, without paths: the fast pass)
    and their decoded variants into `texts`; True at a credential's field with a value."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                texts.append(str(k))
                if isinstance(v, str) and credential_name(str(k)) and secret_value(v):
                    return True
                stack.append((v, depth))
        elif isinstance(item, list):
            stack.extend((v, depth) for v in item)
        elif isinstance(item, str):
            texts.extend(_variants(item) if ("\\" in item or "%" in item) else (item,))
            if depth < _JSON_IN_STRING and item.lstrip()[:1] in ("{", "["):
                with contextlib.suppress(ValueError, RecursionError):
                    stack.append((json.loads(item), depth + 1))
    return False


def _where(where: tuple[str, ...], line: str, path: str) -> str:
    return _join((*where, *([line] if line else []), f"at {path}" if path else "the document"))


def _strings(value: Any, path: str, depth: int) -> Iterator[tuple[str, str | None, str]]:
    """(path, the field's name if the string is a field's value, string) for every string in
    a JSON value: keys (as `path` + key), values, and the strings of JSON inside strings."""
    if isinstance(value, dict):
        for k, v in value.items():
            here = f"{path}.{k}" if path else str(k)
            yield here, None, str(k)
            if isinstance(v, str):
                yield here, str(k), v
                yield from _nested(v, here, depth)
            else:
                yield from _strings(v, here, depth)
    elif isinstance(value, list):
        for n, v in enumerate(value):
            yield from _strings(v, f"{path}[{n}]", depth)
    elif isinstance(value, str):
        yield path, None, value
        yield from _nested(value, path, depth)


def _nested(text: str, path: str, depth: int) -> Iterator[tuple[str, str | None, str]]:
    """The strings of a JSON document inside a string (a tool call's arguments, a body)."""
    if depth >= _JSON_IN_STRING or text.lstrip()[:1] not in ("{", "["):
        return
    try:
        inner = json.loads(text)
    except (ValueError, RecursionError):
        return
    yield from _strings(inner, path, depth + 1)


def _size(n: int) -> str:
    return f"{n / 2**30:g} GiB" if n >= 2**30 else f"{n:,} bytes"


def _at(where: tuple[str, ...]) -> str:
    return f"{_join(where)}: " if where else ""


def _join(where: tuple[str, ...]) -> str:
    """Where, said without a secret: a member's name or a JSON path may hold the key itself."""
    return redact_reply(", ".join(where))[0]
