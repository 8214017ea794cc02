"""Workbench YAML refuses anchors and aliases (issue 19, defect 8): an alias bomb stays small."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from experiments.tracking.tracking import load_config
from promptlib.errors import WorkbenchError
from promptlib.yamlsafe import MAX_DEPTH, safe_yaml_load


def _bomb() -> str:
    """Nine levels of nine aliases: about 500 bytes that expand to 9**9 strings."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


class _Special(WorkbenchError):
    pass


def test_plain_yaml_loads() -> None:
    assert safe_yaml_load("name: x\ntasks: [a, b]\n", "s.yaml") == {
        "name": "x",
        "tasks": ["a", "b"],
    }
    assert safe_yaml_load("", "s.yaml") is None


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("a: &x 1\nb: 2\n", "anchor &x at line 1"),
        ("a: 1\nb: *x\n", "line 2"),  # an undefined alias is refused too, before composing
        ("base: &b {k: 1}\nother:\n  <<: *b\n", "anchor &b"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "deeper than"),
        ("a: [1, 2\n", "malformed YAML"),
    ],
)
def test_refusals_name_the_file(text: str, needle: str) -> None:
    with pytest.raises(_Special) as e:
        safe_yaml_load(text, "ablations/x.yaml", error=_Special)
    msg = str(e.value)
    assert msg.startswith("ablations/x.yaml: ")
    assert needle in msg
    assert "\n" not in msg


def test_alias_bomb_is_refused_cheaply() -> None:
    bomb = _bomb()
    assert len(bomb) < 600
    tracemalloc.start()
    try:
        with pytest.raises(WorkbenchError, match="aliases are not supported in workbench YAML"):
            safe_yaml_load(bomb, "bomb.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000


def test_mlflow_yaml_alias_bomb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = tmp_path / "mlflow.yaml"
    cfg.write_text(_bomb() + "tracking_uri: sqlite:///x.db\n")
    with pytest.raises(WorkbenchError) as e:
        load_config(cfg)
    assert str(cfg) in str(e.value)
    assert "aliases are not supported" in str(e.value)
    assert "remove it to use the defaults" in str(e.value)
