"""Test helpers: the OpenAI-compatible stub server and the known-effect simulation."""

from experiments.testing.stub_server import StubOpenAI
from experiments.testing.validation import KnownEffectLM, SimulationResult, simulate

__all__ = [
    "KnownEffectLM",
    "SimulationResult",
    "StubOpenAI",
    "simulate",
]
