"""Every numeric option and input has bounds (issue 30, defects 10 and 12).

`--n-resamples 1000000000000` ended in a numpy memory traceback, `--timeout 1e308` was taken
and every call then failed as a retried "InternalServerError 500". Every numeric option of
the CLI is declared with its range (`experiments.cli.options.bounded`, `experiments.bounds`)
and refuses a number outside it, nan, infinity or text as it is parsed: one line naming the
option and its range, exit 2, no traceback. The test walks the CLI's commands, so an option
added without a range fails here.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from experiments import bounds
from experiments.cli import app
from experiments.cli.options import _Bounded
from tests.conftest import REPO

# the click command built once, not at each of the hundreds of `invoke`s
pytestmark = pytest.mark.usefixtures("one_click_command")


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    subs = getattr(command, "commands", None)
    if subs:
        for name, sub in sorted(subs.items()):
            yield from _commands(sub, (*path, name))
    else:
        yield path, command


def _numeric() -> list[tuple[tuple[str, ...], Any]]:
    """(command path, param) of every option or argument typed as a number."""
    out = []
    for path, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            if param.type_descriptor.annotation in (int, float):
                out.append((path, param))
    return out


NUMERIC = _numeric()


def _parser(param: Any) -> Any:
    return param.type_descriptor.parameter_info.parser


def test_the_walk_finds_the_numeric_options() -> None:
    found = {(" ".join(path), param.opts[0]) for path, param in NUMERIC}
    for known in [("run", "--timeout"), ("import", "--n-resamples"), ("optimize", "--heldout")]:
        assert known in found
    assert len(found) >= 20


def test_every_numeric_option_has_bounds() -> None:
    """An option typed int or float must be declared with `bounded` (its range, its line)."""
    unbounded = [
        f"workbench {' '.join(path)} {param.opts[0]}"
        for path, param in NUMERIC
        if not isinstance(_parser(param), _Bounded)
    ]
    assert unbounded == [], "declare these with experiments.cli.options.bounded(...)"


@pytest.mark.parametrize(
    ("path", "param"), NUMERIC, ids=[f"{' '.join(p)} {x.opts[0]}" for p, x in NUMERIC]
)
def test_defaults_lie_inside_their_bounds(path: tuple[str, ...], param: Any) -> None:
    limits = _parser(param).bounds
    assert param.default is None or limits.contains(param.default), (path, param.default)
    assert limits.describe() in (param.help or ""), "the help says the range"


def _outside(limits: bounds.Bounds) -> list[str]:
    """Values each option must refuse: just outside either end, far outside, nan, inf,
    the wrong kind of number, text."""
    step = 1 if limits.integer else 1e-3
    below = limits.low if limits.low_open else limits.low - step
    above = limits.high if limits.high_open else limits.high + step
    values = [below, above, limits.high * 1e6 + 10, -1e308, 1e308]
    shown = [str(int(v)) if limits.integer and math.isfinite(v) else repr(float(v)) for v in values]
    shown += ["nan", "inf", "-inf", "1e400", "ten", ""]
    if limits.integer:
        shown += ["1.5", "1e3"]
    return shown


CASES = [
    (path, param.opts[0], value)
    for path, param in NUMERIC
    for value in _outside(_parser(param).bounds)
]


@pytest.mark.parametrize(
    ("path", "option", "value"), CASES, ids=[f"{' '.join(p)} {o} {v}" for p, o, v in CASES]
)
def test_out_of_range_is_one_line_and_exit_2(
    path: tuple[str, ...], option: str, value: str
) -> None:
    result = CliRunner().invoke(app, [*path, option, value])
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {option} must be ") and repr(value) in lines[0]
    assert "Traceback" not in result.output + result.stderr and result.stdout == ""


@pytest.mark.parametrize(("path", "param"), NUMERIC[:1])
def test_a_value_inside_is_taken(path: tuple[str, ...], param: Any) -> None:
    limits = _parser(param).bounds
    assert _parser(param)(str(int(limits.high))) == limits.high
    assert _parser(param)(str(int(limits.low) + 1)) == int(limits.low) + 1


def _workbench(args: list[str], tmp_path: Path, lb_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_BASE")}
    env |= {
        "LEGALBENCH_DIR": str(lb_dir),
        "WORKBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "WORKBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "OPENAI_API_KEY": "sk-test",
        "PYTHONPATH": str(REPO),
    }
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )


@pytest.mark.data
def test_a_trillion_resamples_is_refused_before_any_work(lb_dir: Path, tmp_path: Path) -> None:
    """Defect 10: `--n-resamples 1e12` asked numpy for terabytes (a traceback)."""
    from tests.experiments.imports.conftest import correctness, lines, write_jsonl

    path = write_jsonl(tmp_path / "r.jsonl", lines(correctness(40, 0.75, 0.5, seed=3)))
    r = _workbench(
        ["import", "jsonl", str(path), "--no-track", "--n-resamples", "1000000000000"],
        tmp_path,
        lb_dir,
    )
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip().splitlines() == [
        "error: --n-resamples must be an integer from 100 to 1000000, not '1000000000000'"
    ]
    assert r.stdout == ""


@pytest.mark.data
def test_a_timeout_of_1e308_is_refused_before_any_call(lb_dir: Path, tmp_path: Path) -> None:
    """Defect 12: `--timeout 1e308` was taken; every call then failed as a retried 500."""
    from experiments.testing.stub_server import StubOpenAI

    with StubOpenAI() as stub:
        r = _workbench(
            [
                *("run", "hearsay", "--model", "openai/stub", "--api-base", stub.url),
                *("--limit", "2", "--retries", "0", "--no-track", "--timeout", "1e308"),
            ],
            tmp_path,
            lb_dir,
        )
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip().splitlines() == [
        "error: --timeout must be a number of seconds > 0 and <= 86400, not '1e308'"
    ]
    assert sum(stub.counts.values()) == 0 and not (tmp_path / "runs").exists()
