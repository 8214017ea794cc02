"""PromptVariant: frozen, content-hashed, transformed not mutated; spec parsing."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from promptlib import PromptVariant, VariantError, parse_spec


def test_id_is_sha256_of_canonical_json_and_stable_across_processes() -> None:
    v = parse_spec("instruction=description,demos=none")
    other = subprocess.run(
        [
            sys.executable,
            "-c",
            "from promptlib import parse_spec;"
            "print(parse_spec('demos=none,instruction=description').id)",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "1", "PATH": ""},
    ).stdout.strip()
    assert v.id == other
    import hashlib

    assert v.id == hashlib.sha256(v.canonical_json().encode()).hexdigest()
    assert PromptVariant.from_json(v.canonical_json()) == v


def test_transformations_return_new_variants() -> None:
    base = PromptVariant()
    sampled = base.with_demos(4, seed=3, pool="train+test")
    assert base.demos == "base" and sampled.demos == "sample" and sampled.k == 4
    assert sampled.id != base.id
    assert sampled.with_demos("none").demos == "none"
    assert base.with_format("claude").format == "claude"
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.demos = "none"  # type: ignore[misc]


def test_spec_parsing() -> None:
    assert parse_spec("base") == PromptVariant()
    v = parse_spec("demos=4,seed=3,pool=train+test")
    assert (v.demos, v.k, v.seed, v.pool) == ("sample", 4, 3, "train+test")
    assert parse_spec("demos=icl:2").demos == "icl:2"
    assert parse_spec("register=plain,demos=none").label == "register=plain,demos=none"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("instruction=descripton", "did you mean 'description'"),
        ("demos=4", "need a seed"),
        ("seed=3", "apply to resampled demos only"),
        ("demos=banana", "unknown demos level"),
        ("instruction=reference,register=plain", "no LegalBench prompt combines"),
        ("nonsense", "not key=value"),
        ("insruction=base", "did you mean 'instruction'"),
        ("demos=4,seed=x", "seed must be an integer"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(VariantError, match=message):
        parse_spec(spec)


def test_user_instruction_text_from_yaml(tmp_path: Path) -> None:
    f = tmp_path / "instr.yaml"
    f.write_text("text: |\n  Decide whether the evidence is hearsay.\n")
    v = parse_spec(f"instruction_file={f},demos=none")
    assert v.instruction == "custom"
    assert v.instruction_text == "Decide whether the evidence is hearsay.\n"
    bad = tmp_path / "bad.yaml"
    bad.write_text("text: [unclosed\n")
    with pytest.raises(VariantError, match="malformed YAML"):
        parse_spec(f"instruction_file={bad}")
