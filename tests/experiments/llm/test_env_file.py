"""The project ``.env`` applies to local models as it did when litellm's import loaded it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from experiments.llm import env_file
from experiments.llm.backends import get_model


@pytest.fixture
def dotenv_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with a ``.env`` above litellm's package folder, as a venv inside it has."""
    folder = tmp_path / ".venv" / "lib" / "site-packages" / "litellm"
    folder.mkdir(parents=True)
    monkeypatch.setattr(env_file, "_litellm_folder", lambda: folder)
    for name in ("WORKBENCH_LOCAL_N_CTX", "LITELLM_MODE", "LITELLM_DEV_ENV_HOT_RELOAD"):
        monkeypatch.setenv(name, "x")  # so that monkeypatch restores what load_dotenv sets
        monkeypatch.delenv(name)
    (tmp_path / ".env").write_text("WORKBENCH_LOCAL_N_CTX=1024\n")
    return tmp_path / ".env"


def test_env_file_is_the_one_above_litellm(dotenv_at: Path) -> None:
    assert env_file.env_file() == dotenv_at


@pytest.mark.model
def test_local_model_identity_reads_the_project_env(dotenv_at: Path) -> None:
    """Before: litellm's import (in every model's construction) loaded the .env, so the local
    model ran with, and was identified by, n_ctx 1024; without litellm it silently became
    4096: another context, other ContextTooLong rows, other cache keys."""
    lm = get_model("local/smollm2")
    assert lm.cache_identity()["n_ctx"] == 1024
    assert os.environ["WORKBENCH_LOCAL_N_CTX"] == "1024"


def test_a_set_variable_wins_over_the_file(
    dotenv_at: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_LOCAL_N_CTX", "2048")
    env_file.load_env_file()
    assert os.environ["WORKBENCH_LOCAL_N_CTX"] == "2048"


def test_not_loaded_outside_litellm_dev_mode(
    dotenv_at: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LITELLM_MODE", "PRODUCTION")
    env_file.load_env_file()
    assert "WORKBENCH_LOCAL_N_CTX" not in os.environ
