"""benchmarks/overhead.py's arithmetic: the per-round interval is a one-sample t-interval of
the log ratios, decided at full precision; saved rounds pool only with the same prompts and
load; a saved file is whole (no model runs here: the timings are given)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest
from scipy import stats


def _bench() -> ModuleType:
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "overhead.py"
    spec = importlib.util.spec_from_file_location("overhead_bench", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["overhead_bench"] = mod
    spec.loader.exec_module(mod)
    return mod


OB = _bench()


def _interval(text: str) -> tuple[float, float]:
    low, high = text.split("[")[1].split("]")[0].split(", ")
    return float(low), float(high)


def test_interval_is_the_t_interval_of_log_ratios() -> None:
    wb, bare = [77.0, 78.0, 85.0, 93.0], [74.0, 76.0, 82.0, 82.0]
    logs = [math.log(w / b) for w, b in zip(wb, bare, strict=True)]
    m, sd = sum(logs) / 4, float(stats.tstd(logs))
    half = float(stats.t.ppf(0.975, 3)) * sd / 2
    low, high = _interval(OB.round_ratios(wb, bare))
    assert low == pytest.approx(math.exp(m - half), abs=1e-4)
    assert high == pytest.approx(math.exp(m + half), abs=1e-4)
    # shuffling the rounds (pairs kept) changes nothing
    assert (
        OB.round_ratios(wb[::-1], bare[::-1]).split("(")[1]
        == OB.round_ratios(wb, bare).split("(")[1]
    )


def test_verdict_sides() -> None:
    assert "within" in OB.round_ratios([100.0, 101.0, 100.5], [100.0, 100.0, 100.0])
    assert "above" in OB.round_ratios([120.0, 121.0, 119.0], [100.0, 100.0, 100.0])
    assert "undecided" in OB.round_ratios([90.0, 120.0], [100.0, 100.0])
    # equal ratios: the interval is the point, decided against the goal at full precision
    assert "[1.0500, 1.0500]: within" in OB.round_ratios([105.0, 210.0], [100.0, 200.0])
    assert "above" in OB.round_ratios([105.01, 210.02], [100.0, 200.0])
    # an upper end that prints as 1.0500 but is above it: not "within"
    near = OB.round_ratios([104.99, 105.01] * 5, [100.0] * 10)
    assert "undecided" in near and not 1.05 < _interval(near)[0]
    assert "one round" in OB.round_ratios([1.0], [1.0])
    assert "no ratio" in OB.round_ratios([0.0, 1.0], [1.0, 1.0])


def _rounds(sha: str = "a", wb: float = 80.0) -> object:
    r = OB.Rounds("t", 300, 2, 32, sha, commits=["c1"], distinct=[70.0], reruns=[0.5, 0.5, 0.6])
    for k in r.quiet:
        r.quiet[k].append(wb if k == "workbench" else 78.0)
    for k in r.loaded:
        r.loaded[k].append(170.0)
    r.outside_quiet.append(None)
    r.outside_loaded.append(3.0)
    return r


def test_save_load_pool(tmp_path: Path) -> None:
    a, b = _rounds(wb=80.0), _rounds(wb=82.0)
    a.save(tmp_path / "a.json")
    assert not list(tmp_path.glob("*.tmp"))
    back = OB.Rounds.load(tmp_path / "a.json")
    assert back == a
    both = back.pooled(b, "b.json")
    assert both.rounds == 2 and both.quiet["workbench"] == [80.0, 82.0]
    text = OB.report(both)
    assert f"= {162 / 156:.3f}" in text  # summed over both runs' rounds
    assert "quiet not recorded" in text and "loaded 3.00 s" in text


def test_pool_refuses_other_prompts(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="prompts_sha256 differ"):
        _rounds("a").pooled(_rounds("b"), "b.json")
    (tmp_path / "bad.json").write_text(json.dumps({"task": "t"}))
    with pytest.raises(SystemExit, match=r"bad\.json: not a file `--save` wrote"):
        OB.Rounds.load(tmp_path / "bad.json")
