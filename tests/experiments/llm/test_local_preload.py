"""Preloading a local model with a given number of threads (a Ray actor's share of the CPUs):
an argument through `llama.load_local`, not a patched ``os.cpu_count``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [pytest.mark.model]


def test_build_local_takes_its_threads() -> None:
    from experiments.llm.llama import build_local

    llm = build_local("smollm2", n_threads=1)
    try:
        assert llm.n_threads == 1 and llm.context_params.n_threads == 1
    finally:
        llm.close()


def test_the_backend_preloads_with_the_threads_it_is_given() -> None:
    """In a fresh process (one load per process): the local backend's `preload` loads the
    model with that many threads; a served or API model has nothing to load."""
    code = (
        "import os\n"
        "from experiments.llm import backend_class, llama\n"
        "backend_class('openai/x').preload('openai/x', 1)\n"
        "assert not llama._LOADED\n"
        "backend_class('local/smollm2').preload('local/smollm2', 1)\n"
        "llm = llama._LOADED['smollm2']\n"
        "assert llm.n_threads == 1, llm.n_threads\n"
        "assert (os.cpu_count() or 2) == 1 or llama.load_local('smollm2').n_threads == 1\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
