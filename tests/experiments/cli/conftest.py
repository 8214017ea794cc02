"""Fixtures of the CLI's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import typer.main
import typer.testing

from experiments.cli import app


@pytest.fixture(scope="module")
def one_click_command() -> Iterator[None]:
    """`CliRunner().invoke(app, ...)` builds the click command from the Typer app on every call
    (0.05-0.15 s; hundreds of calls in a module that walks every option): build it once for the
    module. A click command is made to be invoked again; the app's commands do not change."""
    command = typer.main.get_command(app)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(typer.testing, "_get_command", lambda _app: command)
        yield
