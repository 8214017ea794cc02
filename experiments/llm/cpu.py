"""The CPU the embedded models run on, and the llama.cpp load settings it decides.

pip builds llama-cpp-python for the CPU it is installed on, so a user's build has every
kernel their CPU has. On Intel CPUs with AMX (Sapphire Rapids and later: AWS c7i/m7i, GCP
C3) llama.cpp repacks the weights into its AMX "extra buffer type", and that path crashes in
the first multi-token decode (ggml-org/llama.cpp#20824; DSPy's CI hit the same). Loading
with extra buffer types off avoids it and was measured to cost nothing there (33.8 s vs
34.3 s with AMX compiled out, for 100 cuad_audit_rights prompts). Elsewhere the extra
buffer types (the AVX2/AVX-512/ARM weight repacking) stay on: they are the fast path.

Answers can differ bit for bit between the two layouts, so the choice is part of a local
model's identity (`experiments.llm.identity.local_identity`) when it is not the default.

The CPU description is read from ``/proc/cpuinfo`` or, to try the decision for a CPU you do
not have, from the file named by ``WORKBENCH_CPUINFO``. ``WORKBENCH_LLAMA_EXTRA_BUFTS``
(``auto``, ``on``, ``off``) overrides the decision.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

from experiments import settings
from experiments.settings import CPUINFO_ENV, EXTRA_BUFTS_ENV
from promptlib.errors import WorkbenchError

AMX_ISSUE = "ggml-org/llama.cpp#20824"
_DEFAULT_CPUINFO = "/proc/cpuinfo"


@dataclass(frozen=True)
class CpuInfo:
    """What the CPU says of itself: architecture, model name and feature flags."""

    arch: str
    model: str
    flags: frozenset[str]
    source: str

    @property
    def amx(self) -> tuple[str, ...]:
        """The AMX flags (amx_tile, amx_int8, amx_bf16, ...) the CPU reports, sorted."""
        return tuple(sorted(f for f in self.flags if f.startswith("amx")))

    def simd(self) -> tuple[str, ...]:
        """The vector extensions worth naming (AVX*, AMX*, NEON/ASIMD, SVE, SME), sorted."""
        keep = ("avx", "amx", "asimd", "neon", "sve", "sme2", "f16c", "fma")
        return tuple(sorted(f for f in self.flags if f.startswith(keep) or f == "sme"))


def read_cpu(path: str | Path | None = None) -> CpuInfo:
    """The CPU description from `path`, ``$WORKBENCH_CPUINFO`` or ``/proc/cpuinfo``.

    x86 lists its features under ``flags``, ARM under ``Features``. Where no such file
    exists (macOS, Windows) the flags are empty: no AMX, so nothing is changed.
    """
    chosen = path or settings.cpuinfo_env() or _DEFAULT_CPUINFO
    source = Path(chosen)
    try:
        text = source.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        if path or settings.cpuinfo_env():
            raise WorkbenchError(
                f"{source}: no such CPU description ({CPUINFO_ENV}); point it at a file in "
                "/proc/cpuinfo's format or unset it"
            ) from None
        return CpuInfo(platform.machine(), platform.processor(), frozenset(), "none")
    except OSError as e:
        raise WorkbenchError(f"{source}: cannot read the CPU description ({e})") from None
    flags: set[str] = set()
    model = ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        if key in ("flags", "features"):
            flags.update(value.split())
        elif key in ("model name", "cpu model", "hardware") and not model:
            model = value.strip()
    arch = platform.machine()
    if path or settings.cpuinfo_env():  # a described CPU: its architecture, not ours
        arch = "aarch64" if "asimd" in flags or "fp" in flags else "x86_64"
    return CpuInfo(arch, model, frozenset(flags), str(source))


@dataclass(frozen=True)
class LlamaLoad:
    """How llama.cpp loads a model here, and why (printed by `workbench doctor`)."""

    extra_bufts: bool
    reason: str

    def identity(self) -> dict[str, bool]:
        """The part of a local model's identity this decides: nothing when it is the
        default, so trials and caches made on other machines keep their ids."""
        return {} if self.extra_bufts else {"llama_extra_bufts": False}


def llama_load(cpu: CpuInfo | None = None) -> LlamaLoad:
    """Extra buffer types off on a CPU with AMX (or when told), on otherwise."""
    choice = (settings.extra_bufts_env() or "auto").strip().lower() or "auto"
    if choice not in ("auto", "on", "off"):
        raise WorkbenchError(
            f"{EXTRA_BUFTS_ENV} must be auto, on or off, not {choice!r}; unset it for auto"
        )
    if choice != "auto":
        return LlamaLoad(choice == "on", f"{EXTRA_BUFTS_ENV}={choice}")
    cpu = cpu or read_cpu()
    if cpu.amx:
        return LlamaLoad(
            False,
            f"CPU has AMX ({', '.join(cpu.amx)}): llama.cpp's AMX weight repacking crashes "
            f"in multi-token decodes ({AMX_ISSUE}); {EXTRA_BUFTS_ENV}=on to use it anyway",
        )
    return LlamaLoad(True, "no AMX on this CPU: llama.cpp repacks weights for its kernels")
