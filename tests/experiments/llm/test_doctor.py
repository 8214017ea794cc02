"""`workbench doctor`: the build, the CPU, the load decision, each embedded model's file and
sha256, and a real multi-token prompt per model in a child process; a crash there is one line
that names the cause and what to do."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from experiments.llm import doctor
from tests.conftest import run_cli
from tests.experiments.llm.test_cpu import SAPPHIRE_RAPIDS


def _killed_by(sig: int) -> list[str]:
    return [sys.executable, "-c", f"import os, signal; os.kill(os.getpid(), {sig})"]


@pytest.mark.parametrize(
    ("sig", "amx", "says"),
    [
        (signal.SIGSEGV, True, "WORKBENCH_LLAMA_EXTRA_BUFTS"),
        (signal.SIGSEGV, False, "rebuild llama-cpp-python"),
        (signal.SIGILL, False, "instructions this CPU lacks"),
    ],
    ids=["segv-on-amx", "segv", "illegal-instruction"],
)
def test_a_crashing_model_is_one_line_with_what_to_do(sig: int, amx: bool, says: str) -> None:
    probe = doctor.run_probe("local/x", amx=amx, command=lambda m: _killed_by(sig))
    assert not probe.ok
    assert "\n" not in probe.line and probe.line.startswith("local/x: llama.cpp crashed")
    assert signal.Signals(sig).name in probe.line and says in probe.line
    if amx:
        assert "ggml-org/llama.cpp#20824" in probe.line


def test_a_hanging_model_is_one_line() -> None:
    probe = doctor.run_probe(
        "local/x",
        amx=False,
        command=lambda m: [sys.executable, "-c", "import time; time.sleep(30)"],
        timeout=1,
    )
    assert not probe.ok and "did not finish in 1 s" in probe.line


def test_doctor_exits_1_and_says_why_when_a_probe_crashes() -> None:
    lines: list[str] = []
    code = doctor.report(lines.append, command=lambda m: _killed_by(signal.SIGSEGV))
    assert code == 1
    crashed = [x for x in lines if "llama.cpp crashed (SIGSEGV)" in x]
    assert len(crashed) == 2 and lines[-1] == "2 problem(s) above"


@pytest.mark.model
@pytest.mark.slow
def test_doctor_runs_both_models_on_this_machine(tmp_path: Path) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_CPUINFO")}
    r = run_cli(["doctor"], env, tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "llama.cpp system info: CPU :" in out and "CPU features:" in out
    for name in ("local/smollm2", "local/gemma3-270m"):
        assert f"{name}: ok, " in out
        (line,) = [x for x in out.splitlines() if x.startswith(f"{name}: /")]
        assert "sha256 " in line and len(line.split("sha256 ")[1]) == 64
    assert out.strip().endswith("all embedded models ran")


@pytest.mark.model
@pytest.mark.slow
def test_doctor_on_a_faked_amx_cpu_loads_without_extra_buffer_types(tmp_path: Path) -> None:
    import os

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(SAPPHIRE_RAPIDS)
    env = dict(os.environ) | {"WORKBENCH_CPUINFO": str(cpuinfo)}
    env.pop("WORKBENCH_LLAMA_EXTRA_BUFTS", None)
    r = run_cli(["doctor"], env, tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "AMX: amx_bf16, amx_int8, amx_tile" in r.stdout
    assert "extra buffer types: off (CPU has AMX" in r.stdout
    probes = [x for x in r.stdout.splitlines() if ": ok, " in x]
    assert len(probes) == 2 and all("extra buffer types off" in x for x in probes)
    # the decision is told once per process on stderr (the probe children's stderr is read
    # by the doctor, so only the doctor's own line shows)
    assert r.stderr.count("extra buffer types off") == 1


def test_a_model_loaded_otherwise_than_decided_is_a_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe that ran, but with the layout the decision ruled out (a llama-cpp-python that
    ignored it), is not 'ok': its answers would carry the wrong identity."""
    import json

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(SAPPHIRE_RAPIDS)
    monkeypatch.setenv("WORKBENCH_CPUINFO", str(cpuinfo))
    monkeypatch.delenv("WORKBENCH_LLAMA_EXTRA_BUFTS", raising=False)
    said = {"prompt_tokens": 40, "completion_tokens": 8, "seconds": 0.1, "text": " Yes"}
    said |= {"use_extra_bufts": True, "n_threads": 2, "n_threads_batch": 2}
    fake = [sys.executable, "-c", f"print({json.dumps(json.dumps(said))})"]
    lines: list[str] = []
    assert doctor.report(lines.append, command=lambda m: fake) == 1
    wrong = [x for x in lines if "not as decided (off)" in x]
    assert len(wrong) == 2 and lines[-1] == "2 problem(s) above"
