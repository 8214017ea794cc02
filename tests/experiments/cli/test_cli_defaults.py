"""The CLI's defaults are the library's (issue 32): every command's --concurrency, --retries
and --timeout default to the gateway's constants, and `variants generate`'s --temperature
and --max-tokens to `GenerateRequest`'s, so a default changed in one place is changed for
both. They were written out twice, in `experiments.cli.options` and the gateway."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import typer

from experiments.cli import app
from experiments.generate import GenerateRequest
from experiments.llm import gateway
from experiments.llm.gateway import LiteLLMModel


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    subs = getattr(command, "commands", None)
    if subs:
        for name, sub in sorted(subs.items()):
            yield from _commands(sub, (*path, name))
    else:
        yield path, command


def _defaults(option: str) -> dict[str, Any]:
    """Command path -> the default of `option`, for the commands that have it."""
    return {
        " ".join(path): param.default
        for path, command in _commands(typer.main.get_command(app))
        for param in command.params
        if option in param.opts
    }


def test_the_call_options_default_to_the_gateways_constants() -> None:
    expected = {
        "--concurrency": gateway.CONCURRENCY,
        "--retries": gateway.MAX_RETRIES,
        "--timeout": gateway.TIMEOUT,
    }
    for option, value in expected.items():
        found = _defaults(option)
        assert len(found) >= 4, (option, found)  # run, sweep, optimize, variants generate...
        assert set(found.values()) == {value}, (option, found)


def test_the_gateway_itself_defaults_to_them() -> None:
    from experiments.llm.local_model import LocalModel

    for backend in (LiteLLMModel, LocalModel):  # every backend's own defaults
        init = backend.__init__.__kwdefaults__ or {}
        assert init["max_retries"] == gateway.MAX_RETRIES, backend
        assert init["timeout"] == gateway.TIMEOUT, backend


def test_the_generator_options_default_to_the_generate_request() -> None:
    request = {f.name: f.default for f in dataclasses.fields(GenerateRequest)}
    assert _defaults("--temperature") == {"variants generate": request["temperature"]}
    assert _defaults("--max-tokens") == {"variants generate": request["max_tokens"]}
