"""The ``.env`` file litellm loads at import, loaded without importing litellm.

litellm's import loads a ``.env`` (found from its package folder upward, the project's when
the virtualenv is in it) into the environment, unless ``LITELLM_MODE`` is not ``DEV``. Every
model used to import litellm before its identity and calls read their settings, so a
``WORKBENCH_LOCAL_N_CTX`` (or any ``WORKBENCH_*``) put there applied to local models too.
The local backend no longer imports litellm: it loads the same file the same way
(`load_env_file`), so those settings, the context size in its cache identity among them,
still apply instead of silently reverting to their defaults.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path


def _litellm_folder() -> Path | None:
    """litellm's package folder, found without importing it (None: not installed)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).resolve().parent


def env_file() -> Path | None:
    """The ``.env`` litellm's import would load: the first one from litellm's package folder
    upward (python-dotenv's ``find_dotenv`` called from litellm's code), or None."""
    folder = _litellm_folder()
    if folder is None:
        return None
    for parent in (folder, *folder.parents):
        candidate = parent / ".env"
        if candidate.is_file():
            return candidate
    return None


def load_env_file() -> None:
    """Load the ``.env`` litellm's import would, as it would: only in its default ``DEV``
    mode, without overriding a variable already set (unless litellm's hot-reload flag says
    so)."""
    if os.getenv("LITELLM_MODE", "DEV") != "DEV":
        return
    path = env_file()
    if path is None:
        return
    import dotenv

    dotenv.load_dotenv(path, override=os.getenv("LITELLM_DEV_ENV_HOT_RELOAD") == "True")
