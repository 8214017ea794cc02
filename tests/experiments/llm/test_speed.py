"""experiments/llm/speed.py: a local model's measured speed, kept per CPU and model."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.llm.speed import (
    Speed,
    cached_speed,
    cpu_description,
    measure_speed,
    speed_path,
    store_speed,
)

MODEL = "local/smollm2"


def _speed(prompt: float = 500.0) -> Speed:
    return Speed(MODEL, cpu_description(), prompt, 50.0, "2026-01-01T00:00:00Z", 0.5)


def test_a_stored_speed_is_read_back_on_this_cpu_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path))
    assert cached_speed(MODEL) is None  # never measured here
    store_speed(MODEL, _speed())
    assert cached_speed(MODEL) == _speed()
    assert cached_speed("openai/gpt-4o-mini") is None  # only local models have a speed
    # another CPU (its description read from a file) is another key: not this measurement
    other = tmp_path / "cpuinfo"
    other.write_text("model name\t: Some Other CPU\nflags\t\t: fpu sse2 avx2\n")
    monkeypatch.setenv("WORKBENCH_CPUINFO", str(other))
    assert cached_speed(MODEL) is None
    monkeypatch.delenv("WORKBENCH_CPUINFO")
    store_speed(MODEL, _speed(prompt=700.0))  # measured again: replaces the entry
    assert cached_speed(MODEL) == _speed(prompt=700.0)


def test_an_unreadable_store_is_no_measurement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path))
    speed_path().write_text("{not json")
    assert cached_speed(MODEL) is None
    store_speed(MODEL, _speed())  # and a new measurement overwrites it
    assert cached_speed(MODEL) == _speed()


@pytest.mark.slow
@pytest.mark.model
def test_a_real_measurement_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SmolLM2 run for real (a few seconds): positive rates, stored, then read back."""
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path))
    speed = measure_speed(MODEL)
    assert speed.prompt_tok_s > 0 and speed.gen_tok_s > 0
    assert speed.model == MODEL and speed.cpu == cpu_description()
    assert cached_speed(MODEL) == speed
