"""An import's source files are checked for keys as they decode (`secret_scan.check_file`):
inside zip, gzip, bzip2, xz, zstd and tar (nested too), with JSON's escapes decoded, JSON
parsed (every key and value, and JSON inside strings), percent-encoding decoded; a finding
says where, never the key. What a reader of the file sees, the check sees."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from experiments.imports.secret_scan import MAX_NESTING, Finding, Unchecked, check_file

DATA = Path(__file__).resolve().parents[2] / "data" / "imports"
ENV_KEY = "q7Zsecretvalue9931-env"  # no known shape: found as the environment's value
SHAPED = "sk-proj-Abc0123456789xyzXYZ"  # in no environment variable: found by its shape


@pytest.fixture(autouse=True)
def _key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_PROVIDER_API_KEY", ENV_KEY)


def _escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def _row(**extra: object) -> dict[str, object]:
    return {"row": "1", "variant": "A", "model": "m", "correct": 1, **extra}


def _jsonl(*rows: dict[str, object]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _zip(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def _tar_gz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _zstd(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    return bytes(zstandard.ZstdCompressor().compress(data))


KEYED = _jsonl(_row(), _row(row="2", error=f"401: bad key {ENV_KEY}"))
# (case, the file's bytes, words its finding's `where` carries)
CASES: list[tuple[str, Callable[[], bytes], list[str]]] = [
    ("plain jsonl", lambda: KEYED, ["line 2", "error"]),
    ("gzip'd jsonl", lambda: gzip.compress(KEYED), ["line 2"]),
    ("bzip2'd jsonl", lambda: bz2.compress(KEYED), ["line 2"]),
    ("xz'd jsonl", lambda: lzma.compress(KEYED), ["line 2"]),
    ("zstd'd jsonl", lambda: _zstd(KEYED), ["line 2"]),
    ("a deflated zip member", lambda: _zip({"ok.json": b"{}", "s/1.json": KEYED}), ["member s/1.json"]),
    ("a stored zip member", lambda: _zip({"s/1.json": KEYED}, zipfile.ZIP_STORED), ["member s/1.json"]),
    ("a zip's member name", lambda: _zip({f"s/{ENV_KEY}.json": b"{}"}), ["its name"]),
    ("a gzip inside a zip", lambda: _zip({"rows.jsonl.gz": gzip.compress(KEYED)}), ["member rows.jsonl.gz", "line 2"]),
    ("a tar.gz member", lambda: _tar_gz({"logs/x.jsonl": KEYED}), ["member logs/x.jsonl"]),
    ("a zip behind other bytes", lambda: b"#!/bin/sh\nexit 0\n" + _zip({"a.json": KEYED}), ["member a.json"]),
    ("JSON, a value with an escaped dash", lambda: json.dumps({"out": SHAPED}).replace("-", "\\u002d").encode(), ["at out"]),
    ("JSON, a value fully escaped", lambda: ('{"out": "' + _escaped(ENV_KEY) + '"}').encode(), ["at out"]),
    ("JSON, a key (not a value)", lambda: json.dumps({"a": {SHAPED: 1}}).encode(), ["at a."]),
    ("JSON escaped twice (a JSON string inside a string)", lambda: json.dumps({"body": json.dumps({"x": _escaped(SHAPED)})}).encode(), ["at body"]),
    ("JSON inside a string, a credential's field", lambda: json.dumps({"call": {"args": json.dumps({"api_key": "zz-123-unshaped"})}}).encode(), ["field 'api_key'", "at call.args.api_key"]),
    ("a credential's field, any shape", lambda: json.dumps({"providers": [{"config": {"apiKey": "AbCdEfGh1234"}}]}).encode(), ["field 'apiKey'", "providers[0].config.apiKey"]),
    ("a promptfoo env block", lambda: json.dumps({"env": {"ANTHROPIC_API_KEY": "unshaped0123"}}).encode(), ["env.ANTHROPIC_API_KEY"]),
    ("CSV, escaped in a cell", lambda: f'row,variant,error\n1,A,"{_escaped(SHAPED)}"\n'.encode(), ["line 2"]),
    ("CSV, percent-encoded", lambda: f"row,variant,url\n1,A,/v1?x={SHAPED.replace('-', '%2D')}\n".encode(), ["line 2"]),
    ("a bearer token", lambda: b'{"err": "echo: Authorization: Bearer abcdef0123456789"}', ["at err"]),
    ("a password in a URL", lambda: b'{"db": "postgresql://u:hunter2pw@db/x"}', ["at db"]),
    ("UTF-16 text", lambda: ("\ufeff" + KEYED.decode()).encode("utf-16"), []),
    ("CSV, a credential's column", lambda: b"row,variant,api_key\n1,A,AbCdEfGh1234\n", ["column 'api_key'", "line 2"]),
    ("CSV, JSON in a quoted cell", lambda: b'row,variant,meta\n1,A,"{""api_key"": ""AbCdEfGh1234""}"\n', ["field 'api_key'", "line 2"]),
    ("TSV, a credential's column", lambda: b"row\tvariant\tOPENAI_API_KEY\n1\tA\tAbCdEfGh1234\n", ["OPENAI_API_KEY", "line 2"]),
    ("UTF-16 JSON without a byte-order mark", lambda: json.dumps({"out": SHAPED}).encode("utf-16-le"), ["at out"]),
    ("UTF-32 JSON without a byte-order mark", lambda: json.dumps({"out": SHAPED}).encode("utf-32-be"), ["at out"]),
]  # fmt: skip


@pytest.mark.parametrize(("case", "make", "where"), CASES, ids=[c[0] for c in CASES])
def test_a_key_is_found_however_the_file_encodes_it(
    tmp_path: Path, case: str, make: Callable[[], bytes], where: list[str]
) -> None:
    path = tmp_path / "source"
    path.write_bytes(make())
    found = check_file(path)
    assert isinstance(found, Finding), case
    shown = f"{found.what} {found.where}"
    for w in where:
        assert w in shown, shown
    assert ENV_KEY not in shown and SHAPED[3:] not in shown  # says where, never the key


CLEAN = [
    ("a log-probability's token", {"logprobs": [{"token": "Yes", "logprob": -0.1}]}),
    ("inspect's call key", {"call": {"call_key": "0123456789abcdef0123"}}),
    ("max_tokens, tokenUsage", {"max_tokens": "256", "tokenUsage": {"total": 10}}),
    ("promptfoo's own redaction", {"config": {"apiKey": "[REDACTED]"}}),
    ("a reference to the key", {"apiKey": "${OPENAI_API_KEY}", "token": "os.environ/HF_TOKEN"}),
    ("a sentence in a key field", {"api_key": "set it in the environment"}),
    ("bearer bonds", {"text": "payable to Bearer instruments; Authorization: No"}),
    ("a URL's ordinary query", {"url": "https://example.com/a?id=3&page=2"}),
]
CLEAN_CSV = [
    ("a CSV of results", b"row,variant,model,prediction,answer\n1,A,m,Yes,Yes\n2,A,m,No,Yes\n"),
    ("a CSV's token column", b"row,variant,token,max_tokens\n1,A,Yes,256\n"),
    ("a CSV's key column left empty", b"row,variant,api_key\n1,A,\n2,A,[REDACTED]\n"),
]


@pytest.mark.parametrize(("case", "data"), CLEAN_CSV, ids=[c[0] for c in CLEAN_CSV])
def test_a_csv_without_a_key_is_not_refused(tmp_path: Path, case: str, data: bytes) -> None:
    path = tmp_path / "clean.csv"
    path.write_bytes(data)
    assert check_file(path) is None, case


@pytest.mark.parametrize(("case", "doc"), CLEAN, ids=[c[0] for c in CLEAN])
def test_what_is_not_a_key_is_not_refused(
    tmp_path: Path, case: str, doc: dict[str, object]
) -> None:
    path = tmp_path / "clean.json"
    path.write_text(json.dumps(doc))
    assert check_file(path) is None, case


@pytest.mark.parametrize(
    "path", sorted(p for p in DATA.rglob("*") if p.suffix in (".eval", ".json", ".jsonl"))
)
def test_the_real_tools_fixtures_hold_no_key(path: Path) -> None:
    """inspect_ai's .eval logs (zstd zip members), lm-eval's and promptfoo's files: no false
    alarm on what the real tools write (promptfoo writes its apiKey as [REDACTED])."""
    if path.suffix == ".eval":
        pytest.importorskip("zipfile_zstd")
    assert check_file(path) is None


def test_an_archive_that_does_not_open_cannot_be_checked(tmp_path: Path) -> None:
    """Stored as it is, so a member that will not decompress is refused, not skipped."""
    data = bytearray(_zip({"a.json": KEYED * 50}))
    data[60:90] = b"\0" * 30  # inside the deflated member
    path = tmp_path / "broken.zip"
    path.write_bytes(bytes(data))
    with pytest.raises(Unchecked, match=r"member a\.json"):
        check_file(path)
    path.write_bytes(gzip.compress(KEYED)[:-12])  # a gzip cut short
    with pytest.raises(Unchecked, match="does not decompress"):
        check_file(path)


def test_archives_nested_too_deep_or_too_large_cannot_be_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = b'{"ok": 1}'
    for _ in range(MAX_NESTING + 1):
        data = gzip.compress(data)
    path = tmp_path / "deep.gz"
    path.write_bytes(data)
    with pytest.raises(Unchecked, match="nested"):
        check_file(path)
    from experiments.imports import secret_scan

    monkeypatch.setattr(secret_scan, "MAX_DECODED", 1000)
    path.write_bytes(gzip.compress(b" " * 5000))  # a small bomb
    with pytest.raises(Unchecked, match="decompresses to more than"):
        check_file(path)
