"""Folders and `WORKBENCH_*` settings read from the environment, in one place.

Below every other experiments module (it imports nothing from the project), so any of them may
read a setting without an import circle.
"""

from __future__ import annotations

import os
from pathlib import Path

#: the cache folder when `WORKBENCH_CACHE_DIR` is unset (responses/, models/, locks/ inside)
DEFAULT_CACHE_DIR = "~/.cache/workbench"


def cache_dir() -> Path:
    return Path(os.environ.get("WORKBENCH_CACHE_DIR") or DEFAULT_CACHE_DIR).expanduser()
