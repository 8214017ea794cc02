"""Content-addressed response cache on disk.

The key is the sha256 of the model's identity (name, api_base, mode), the full rendered
prompt and every decoding parameter, so a cached answer is only ever reused for the very
same call. Storage is `diskcache` (SQLite underneath): safe for concurrent processes, and a
crash mid-write leaves the previous state, never a torn entry. Errors are never stored.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from experiments.models import Completion, Decoding

DEFAULT_CACHE_DIR = "~/.cache/workbench"


def cache_dir() -> Path:
    return Path(os.environ.get("WORKBENCH_CACHE_DIR") or DEFAULT_CACHE_DIR).expanduser()


def cache_key(identity: dict[str, Any], prompt: str, decoding: Decoding) -> str:
    payload = {"lm": identity, "prompt": prompt, "decoding": decoding.to_dict()}
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """Successful completions by content key."""

    def __init__(self, directory: Path | str | None = None) -> None:
        import diskcache

        self.directory = Path(directory) if directory is not None else cache_dir() / "responses"
        self.directory.mkdir(parents=True, exist_ok=True)
        self._cache = diskcache.Cache(str(self.directory), eviction_policy="none")

    def get(self, key: str) -> Completion | None:
        value = self._cache.get(key)
        if value is None:
            return None
        return Completion(
            text=value["text"],
            tokens_in=value["tokens_in"],
            tokens_out=value["tokens_out"],
            cost=value.get("cost"),
        )

    def put(self, key: str, completion: Completion) -> None:
        if completion.error is not None or completion.text is None:
            return  # errors are never cached: a rerun must retry them
        self._cache.set(
            key,
            {
                "text": completion.text,
                "tokens_in": completion.tokens_in,
                "tokens_out": completion.tokens_out,
                "cost": completion.cost,
            },
        )

    def __len__(self) -> int:
        return len(self._cache)

    def close(self) -> None:
        self._cache.close()
