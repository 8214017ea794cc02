"""The response cache: a broken store is a clear error when opening, and a miss (never a lost
trial) when a read or write fails later."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from experiments.llm.cache import CacheError, ResponseCache, cache_key
from experiments.llm.types import Completion, Decoding
from promptlib.errors import WorkbenchError

KEY = cache_key({"model": "openai/stub", "api_base": None, "mode": "chat"}, "Q: x", Decoding())


def test_round_trip(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c")
    cache.put(KEY, Completion("Yes", tokens_in=3, tokens_out=1, cost=0.5))
    cache.put("failed", Completion(None, error="boom"))
    got = cache.get(KEY)
    assert got is not None and (got.text, got.tokens_in, got.tokens_out, got.cost) == (
        "Yes",
        3,
        1,
        0.5,
    )
    assert cache.get("failed") is None and len(cache) == 1
    cache.close()


def test_corrupt_database_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "wb"))
    responses = tmp_path / "wb" / "responses"
    responses.mkdir(parents=True)
    (responses / "cache.db").write_bytes(b"this is not a database \x00\xff" * 500)
    with pytest.raises(CacheError) as info:
        ResponseCache()
    message = str(info.value)
    assert isinstance(info.value, WorkbenchError)
    assert str(responses / "cache.db") in message
    assert f"delete {responses}" in message and "WORKBENCH_CACHE_DIR" in message
    assert "\n" not in message
    assert (responses / "cache.db").exists()  # nothing is deleted behind the user's back


def test_cache_dir_that_is_a_file_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("x")
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(a_file))
    with pytest.raises(CacheError) as info:
        ResponseCache()
    message = str(info.value)
    assert f"{a_file} is a file, not a directory" in message
    assert "WORKBENCH_CACHE_DIR" in message and "--no-cache" in message


def test_responses_path_that_is_a_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "responses").write_text("x")
    with pytest.raises(CacheError, match="is a file, not a directory"):
        ResponseCache(tmp_path / "responses")


def test_read_error_is_a_miss_with_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = ResponseCache(tmp_path / "c")
    cache.put(KEY, Completion("Yes"))
    assert cache.get(KEY) is not None
    # Break the store under the open cache: its table is gone, so every query fails in SQLite.
    with sqlite3.connect(tmp_path / "c" / "cache.db") as db:
        db.execute("DROP TABLE Cache")
    assert cache.get(KEY) is None
    assert cache.get(KEY) is None
    cache.put(KEY, Completion("No"))  # a failed write is skipped, not raised
    err = capsys.readouterr().err
    assert err.count("warning: response cache") == 1, err
    assert str(tmp_path / "c") in err and "Traceback" not in err


def test_entry_of_unexpected_shape_is_a_miss(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = ResponseCache(tmp_path / "c")
    cache._cache.set(KEY, {"text": "Yes"})  # e.g. written by another version
    assert cache.get(KEY) is None
    assert "warning: response cache" in capsys.readouterr().err
