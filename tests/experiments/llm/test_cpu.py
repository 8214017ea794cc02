"""How the embedded models are loaded on the CPUs users have (`experiments.llm.cpu`).

llama.cpp's AMX weight repacking crashes in the first multi-token decode
(ggml-org/llama.cpp#20824), and this machine may have no AMX: the decision is tried on faked
CPU descriptions, and a real model is loaded under one to show the setting reaches llama.cpp.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.llm import cpu
from promptlib.errors import WorkbenchError

SAPPHIRE_RAPIDS = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 avx512f avx512bw avx512vl avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8
"""
EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9R14
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 avx512f avx512bw avx512_vnni avx512_bf16
"""
GRAVITON = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm sve svebf16 i8mm
CPU implementer\t: 0x41
CPU part\t: 0xd40
"""


def _described(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    monkeypatch.setenv(cpu.CPUINFO_ENV, str(path))
    monkeypatch.delenv(cpu.EXTRA_BUFTS_ENV, raising=False)


@pytest.mark.parametrize(
    ("text", "arch", "amx", "extra_bufts"),
    [
        (SAPPHIRE_RAPIDS, "x86_64", ("amx_bf16", "amx_int8", "amx_tile"), False),
        (EPYC, "x86_64", (), True),
        (GRAVITON, "aarch64", (), True),
    ],
    ids=["intel-amx", "amd-avx512", "arm-sve"],
)
def test_extra_buffer_types_are_off_exactly_on_amx_cpus(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    text: str,
    arch: str,
    amx: tuple[str, ...],
    extra_bufts: bool,
) -> None:
    _described(tmp_path, monkeypatch, text)
    info = cpu.read_cpu()
    assert info.arch == arch and info.amx == amx
    load = cpu.llama_load()
    assert load.extra_bufts is extra_bufts
    # the default layout adds nothing to a model's identity; the other one is named
    assert load.identity() == ({} if extra_bufts else {"llama_extra_bufts": False})
    if not extra_bufts:
        assert "AMX" in load.reason and cpu.AMX_ISSUE in load.reason
        assert cpu.EXTRA_BUFTS_ENV in load.reason  # how to override


def test_the_setting_overrides_the_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _described(tmp_path, monkeypatch, SAPPHIRE_RAPIDS)
    monkeypatch.setenv(cpu.EXTRA_BUFTS_ENV, "on")
    assert cpu.llama_load().extra_bufts is True
    _described(tmp_path, monkeypatch, EPYC)
    monkeypatch.setenv(cpu.EXTRA_BUFTS_ENV, "OFF")
    assert cpu.llama_load().extra_bufts is False
    monkeypatch.setenv(cpu.EXTRA_BUFTS_ENV, "maybe")
    with pytest.raises(
        WorkbenchError, match=r"WORKBENCH_LLAMA_EXTRA_BUFTS must be auto, on or off"
    ):
        cpu.llama_load()


def test_a_missing_description_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cpu.CPUINFO_ENV, str(tmp_path / "nope"))
    with pytest.raises(WorkbenchError, match=r"nope: no such CPU description"):
        cpu.read_cpu()


def test_no_cpuinfo_file_means_no_amx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS and Windows have no /proc/cpuinfo: nothing is changed there."""
    monkeypatch.delenv(cpu.CPUINFO_ENV, raising=False)
    monkeypatch.delenv(cpu.EXTRA_BUFTS_ENV, raising=False)
    monkeypatch.setattr(cpu, "_DEFAULT_CPUINFO", str(tmp_path / "absent"))
    info = cpu.read_cpu()
    assert info.flags == frozenset() and info.source == "none"
    assert cpu.llama_load(info).extra_bufts is True


@pytest.mark.model
def test_a_faked_amx_cpu_loads_the_real_model_without_extra_buffer_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decision reaches llama.cpp (the loaded model's parameters say so), is part of the
    model's identity (answers may differ bit for bit), and the model still answers."""
    from experiments.llm import gateway, llama
    from experiments.llm.identity import local_identity

    _described(tmp_path, monkeypatch, SAPPHIRE_RAPIDS)
    monkeypatch.setattr(llama, "_LOADED", {})  # a fresh load under the described CPU
    identity = local_identity("local/smollm2")
    assert identity["llama_extra_bufts"] is False
    assert gateway.get_model("local/smollm2").cache_identity()["llama_extra_bufts"] is False
    llm = llama.load_local("smollm2")
    assert llm.model_params.use_extra_bufts is False
    out = llm.create_completion("The capital of France is", max_tokens=4, temperature=0.0)
    assert out["usage"]["prompt_tokens"] > 1 and out["choices"][0]["text"].strip()
    llm.close()

    # another CPU description (a file of its own: a setting is read once per value)
    (tmp_path / "epyc").mkdir()
    _described(tmp_path / "epyc", monkeypatch, EPYC)
    monkeypatch.setattr(llama, "_LOADED", {})
    assert "llama_extra_bufts" not in local_identity("local/smollm2")
    llm = llama.load_local("smollm2")
    assert llm.model_params.use_extra_bufts is True
    llm.close()


@pytest.mark.parametrize("driver_amx", [True, False], ids=["driver-amx", "worker-amx"])
def test_a_ray_worker_loaded_otherwise_than_the_driver_is_refused_per_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, driver_amx: bool
) -> None:
    """The per-trial check compares every identity key either side has: the layout key
    exists only when extra buffer types are off, so comparing the worker's keys alone let
    an actor restarted on a CPU without AMX answer under the driver's AMX identity."""
    import types
    from unittest import mock

    from experiments.llm import llama
    from experiments.llm.identity import local_identity
    from experiments.sweeps import executors

    monkeypatch.setattr(llama, "_LOADED", {})
    _described(tmp_path, monkeypatch, SAPPHIRE_RAPIDS if driver_amx else EPYC)
    driver = local_identity("local/smollm2")
    (tmp_path / "worker").mkdir()
    _described(tmp_path / "worker", monkeypatch, EPYC if driver_amx else SAPPHIRE_RAPIDS)
    worker = executors.TrialWorker(1, False, None, ["local/smollm2"])
    assert ("llama_extra_bufts" in driver) is driver_amx
    assert ("llama_extra_bufts" in worker.identity["local/smollm2"]) is not driver_amx
    job = types.SimpleNamespace(
        lm=types.SimpleNamespace(name="local/smollm2"),
        resolved=types.SimpleNamespace(lm_identity={"model": "local/smollm2", **driver}),
        task=None,
    )
    ran: list[str] = []
    with (
        mock.patch.object(executors, "_preload_local", lambda *a: ran.append("loaded")),
        mock.patch("experiments.sweeps.executors.run_trial", lambda *a, **k: ran.append("ran")),
        pytest.raises(executors.ExecutorError, match=r"llama_extra_bufts"),
    ):
        worker.run(job)  # type: ignore[arg-type]
    assert ran == []


@pytest.mark.model
def test_a_loaded_model_is_identified_by_the_layout_it_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once loaded, the identity comes from the model itself, whatever the settings say
    later; and a load that did not follow the decision is refused, not run mislabelled."""
    from experiments.llm import llama, types
    from experiments.llm.identity import local_identity

    monkeypatch.setattr(llama, "_LOADED", {})
    _described(tmp_path, monkeypatch, SAPPHIRE_RAPIDS)
    llm = llama.load_local("smollm2")
    monkeypatch.setenv(cpu.EXTRA_BUFTS_ENV, "on")  # changed after the load
    assert local_identity("local/smollm2")["llama_extra_bufts"] is False
    llm.close()

    monkeypatch.setattr(llama, "_LOADED", {})
    monkeypatch.setattr(llama, "_extra_bufts", lambda on: __import__("contextlib").nullcontext())
    monkeypatch.setenv(cpu.EXTRA_BUFTS_ENV, "off")  # decided off, but the amendment is lost
    with pytest.raises(types.ModelError, match=r"extra buffer types on, not off"):
        llama.load_local("smollm2")
    assert "smollm2" not in llama._LOADED
