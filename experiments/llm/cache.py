"""Content-addressed response cache on disk.

The key is the sha256 of the model's identity (name, api_base, mode), the full rendered
prompt and every decoding parameter, so a cached answer is only ever reused for the very
same call. Storage is `diskcache` (SQLite underneath): safe for concurrent processes, and a
crash mid-write leaves the previous state, never a torn entry. Errors are never stored, and a
reply is stored and read back only with its secrets hidden (`secrets.redact_reply`; the
gateway hides them as a reply arrives, this catches any other model and older entries).

Faults of the cache itself:

- **Cannot open** — the cache directory cannot be created or is not a directory (e.g.
  ``WORKBENCH_CACHE_DIR`` names a regular file), or ``cache.db`` is not a SQLite database
  (corrupt): `ResponseCache(...)` raises `CacheError`, naming the path and what to do
  (delete the directory to clear the cache, set ``WORKBENCH_CACHE_DIR`` elsewhere, or run
  with ``--no-cache``). Nothing is moved or deleted automatically: another process may be
  using the same cache, and a user should see that their cache broke.
- **A read fails** after opening (a database error, a lock held past diskcache's timeout, an
  entry of an unexpected shape): `get` treats it as a miss, so the model is called and the
  trial goes on; the first such failure is reported once on stderr.
- **A write fails** (disk full, read-only, database error): `put` skips it, reporting once
  on stderr; the answer is still returned to the trial, only not reused later.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

from experiments import ids
from experiments.llm.types import Completion, Decoding
from experiments.secrets import redact_reply
from experiments.settings import responses_dir
from promptlib.errors import WorkbenchError


class CacheError(WorkbenchError):
    """The response cache cannot be opened; the message names its path and what to do."""


def cache_key(identity: dict[str, Any], prompt: str, decoding: Decoding) -> str:
    return ids.cache_key(identity, prompt, decoding.to_dict())


def _store_errors() -> tuple[type[BaseException], ...]:
    """What a diskcache read or write raises when the store itself fails."""
    import diskcache

    return (sqlite3.Error, diskcache.Timeout, OSError)


class ResponseCache:
    """Successful completions by content key."""

    def __init__(self, directory: Path | str | None = None) -> None:
        import diskcache

        self.directory = Path(directory) if directory is not None else responses_dir()
        advice = (
            f"delete {self.directory} to clear the cache, set WORKBENCH_CACHE_DIR to another "
            "folder, or run with --no-cache"
        )
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            what = e.strerror or type(e).__name__
            blocker = next(
                (p for p in (self.directory, *self.directory.parents) if p.is_file()), None
            )
            if blocker is not None:
                what = f"{blocker} is a file, not a directory"
            raise CacheError(
                f"cannot create the response cache at {self.directory}: {what}; set "
                "WORKBENCH_CACHE_DIR to a folder you can write, or run with --no-cache"
            ) from e
        try:
            self._cache = diskcache.Cache(str(self.directory), eviction_policy="none")
        except sqlite3.DatabaseError as e:
            raise CacheError(
                f"the response cache {self.directory / 'cache.db'} is unreadable ({e}); " + advice
            ) from e
        except OSError as e:
            raise CacheError(
                f"cannot open the response cache in {self.directory}: "
                f"{e.strerror or type(e).__name__}; " + advice
            ) from e
        self._warned = False

    def _warn(self, action: str, error: BaseException) -> None:
        if self._warned:
            return
        self._warned = True
        print(
            f"warning: response cache {self.directory}: {action} failed "
            f"({type(error).__name__}: {error}); going on without it for such calls",
            file=sys.stderr,
        )

    def get(self, key: str) -> Completion | None:
        """The cached completion for `key`; None on a miss or when the store cannot be read."""
        try:
            value = self._cache.get(key)
        except _store_errors() as e:
            self._warn("a read", e)
            return None
        if value is None:
            return None
        try:
            text, hidden = redact_reply(str(value["text"]))
            return Completion(
                text=text,
                tokens_in=int(value["tokens_in"]),
                tokens_out=int(value["tokens_out"]),
                cost=value.get("cost"),
                # a reply cut to types.MAX_REPLY_BYTES
                truncated=str(value["truncated"]) if value.get("truncated") else None,
                redacted=int(value.get("redacted") or 0) + hidden,
            )
        except (TypeError, KeyError, ValueError, AttributeError) as e:
            self._warn(f"reading entry {key[:12]}…", e)
            return None

    def put(self, key: str, completion: Completion) -> None:
        if completion.error is not None or completion.text is None:
            return  # errors are never cached: a rerun must retry them
        text, hidden = redact_reply(completion.text)
        redacted = completion.redacted + hidden
        try:
            self._cache.set(
                key,
                {
                    "text": text,
                    "tokens_in": completion.tokens_in,
                    "tokens_out": completion.tokens_out,
                    "cost": completion.cost,
                    **({"truncated": completion.truncated} if completion.truncated else {}),
                    **({"redacted": redacted} if redacted else {}),
                },
            )
        except _store_errors() as e:
            self._warn("a write", e)

    def __len__(self) -> int:
        return len(self._cache)

    def close(self) -> None:
        self._cache.close()
