"""Workbench YAML refuses anchors and aliases (issue 19, defect 8): an alias bomb stays small."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest

from experiments.tracking import load_config
from promptlib.errors import WorkbenchError
from promptlib.yamlsafe import MAX_CHARS, MAX_DEPTH, MAX_NODES, safe_yaml_load


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
        ("text: " + "[" * 5000 + "]" * 5000, "nested deeper than 64 levels"),  # libyaml's limit
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


# ---- review rev3: duplicate keys, merge keys, size refused before a full parse ----------------
_SPEC = "name: y\ntasks: [hearsay]\nmodels: [local/smollm2]\nlimit: 5\n"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (_SPEC + "limit: 7\n", "key 'limit' at line 5 is given twice (first at line 4)"),
        ("fixed:\n  demos: none\n  demos: k2\n", "key 'demos' at line 3 is given twice"),
        ("- {x: 1, x: 2}\n", "key 'x' at line 1 is given twice"),
        ("name: y\n<<: {limit: 3}\nlimit: 5\n", "merge key '<<' at line 2"),
        ("a:\n  <<: {k: 1}\n", "merge key '<<' at line 2"),
    ],
)
def test_duplicate_and_merge_keys_are_refused(text: str, needle: str) -> None:
    """`safe_load` keeps the last of two keys and merges `<<:` silently: the config would say
    something other than what its reader sees."""
    with pytest.raises(_Special) as e:
        safe_yaml_load(text, "ablations/x.yaml", error=_Special)
    msg = str(e.value)
    assert msg.startswith("ablations/x.yaml: ") and needle in msg and "\n" not in msg


def test_spec_and_mlflow_yaml_refuse_duplicate_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from experiments.sweeps.spec import SpecError, load_spec

    spec = tmp_path / "dup.yaml"
    spec.write_text(_SPEC + "limit: 7\naxes:\n  instruction: [reference, description]\n")
    with pytest.raises(SpecError, match=r"dup\.yaml: key 'limit' at line 5 is given twice"):
        load_spec(spec)
    merged = tmp_path / "merge.yaml"
    merged.write_text("name: y\ntasks: [hearsay]\n<<: {limit: 3}\nlimit: 5\n")
    with pytest.raises(SpecError, match=r"merge\.yaml: merge key '<<' at line 3"):
        load_spec(merged)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = tmp_path / "mlflow.yaml"
    cfg.write_text("tracking_uri: sqlite:///a.db\ntracking_uri: sqlite:///b.db\n")
    with pytest.raises(WorkbenchError, match=r"mlflow\.yaml: key 'tracking_uri' at line 2"):
        load_config(cfg)


@pytest.mark.parametrize("chars", [MAX_CHARS - 100, 398_222])
def test_large_yaml_is_refused_fast(chars: int) -> None:
    """A 398 KB flow list took 11.5 s to parse before it was refused; the size limit is checked
    before parsing, the value count while streaming events (stopping at the limit)."""
    text = "description: [" + "a," * ((chars - 20) // 2) + "a]\n"
    assert abs(len(text) - chars) < 30
    t0 = time.perf_counter()
    with pytest.raises(_Special) as e:
        safe_yaml_load(text, "big.yaml", error=_Special)
    took = time.perf_counter() - t0
    assert took < 0.5, f"refused after {took:.2f} s"
    msg = str(e.value)
    assert msg.startswith("big.yaml: ")
    assert f"{MAX_CHARS:,}" in msg or f"{MAX_NODES:,}" in msg
