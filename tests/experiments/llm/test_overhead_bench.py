"""benchmarks/overhead.py's arithmetic: the per-round interval is a one-sample t-interval of
the log ratios, decided at full precision; saved rounds pool only with the same prompts and
load; a saved file is whole (no model runs here: the timings are given)."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
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
    assert "no spread between rounds: no interval" in OB.round_ratios([105.0, 210.0], [100, 200])
    # an upper end that prints as 1.0500 but is above it: not "within"
    near = OB.round_ratios([104.999, 105.003] * 5, [100.0] * 10)
    assert "1.0500]: undecided" in near
    assert "one round" in OB.round_ratios([1.0], [1.0])
    assert "no ratio" in OB.round_ratios([0.0, 1.0], [1.0, 1.0])


def _rounds(sha: str = "a", wb: float = 80.0, code: str = "c0de") -> object:
    r = OB.Rounds("t", 300, 2, 32, sha, 9, "EPYC x2")
    r.distinct.append(70.0)
    r.reruns += [0.5, 0.5, 0.6]
    for k in r.quiet:
        r.quiet[k].append(wb if k == "workbench" else 78.0)
    for k in r.loaded:
        r.loaded[k].append(170.0)
    r.outside_quiet.append(None)
    r.outside_loaded.append(3.0)
    r.code.append(code)
    r.commits.append("abc1234")
    r.order.append("forward")
    return r


def test_save_load_pool(tmp_path: Path) -> None:
    a, b = _rounds(wb=80.0), _rounds(wb=82.0)
    b.order[0] = "reversed"
    a.save(tmp_path / "a.json")
    assert not list(tmp_path.glob("*.tmp"))
    back = OB.Rounds.load(tmp_path / "a.json")
    assert back == a
    both = back.pooled(b, "b.json")
    assert both.rounds == 2 and both.quiet["workbench"] == [80.0, 82.0]
    text = OB.report(both)
    assert f"= {162 / 156:.4f}" in text  # summed over both runs' rounds
    assert "quiet not recorded" in text and "loaded 3.00 s" in text
    assert "forward in 1 round(s), reversed in 1;" in text
    assert "median 0.500 s, worst 0.600 s" in text
    assert "unequal" in OB.report(a)  # one forward round: positions not balanced


def test_pool_refuses_other_prompts_code_copies_and_bad_files(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="prompts_sha256 differ"):
        _rounds("a").pooled(_rounds("b"), "b.json")
    with pytest.raises(SystemExit, match="not one committed code"):
        _rounds(code="c0de").pooled(_rounds(code="beef"), "b.json")
    with pytest.raises(SystemExit, match="not one committed code"):
        _rounds(code="c0de+changes").pooled(_rounds(code="c0de+changes", wb=81.0), "b.json")
    with pytest.raises(SystemExit, match="a round already in an earlier file"):
        _rounds().pooled(_rounds(), "copy.json")
    (tmp_path / "bad.json").write_text(json.dumps({"task": "t"}))
    with pytest.raises(SystemExit, match=r"bad\.json: not a file `--save` wrote"):
        OB.Rounds.load(tmp_path / "bad.json")
    short = json.loads(json.dumps(OB.asdict(_rounds())))
    short["distinct"] = []  # a list out of step with the rounds: refused, not summed
    (tmp_path / "short.json").write_text(json.dumps(short))
    with pytest.raises(SystemExit, match=r"another length.*distinct"):
        OB.Rounds.load(tmp_path / "short.json")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "overhead.py"
    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True)


def test_pool_cli_refuses_empty_runs_and_run_options(tmp_path: Path) -> None:
    empty = OB.Rounds("t", 300, 2, 32, "a", 9, "EPYC x2")  # a run killed in its first round
    empty.save(tmp_path / "empty.json")
    done = _cli("--pool", str(tmp_path / "empty.json"))
    assert done.returncode == 2 and "no finished round" in done.stderr
    _rounds().save(tmp_path / "one.json")
    done = _cli("--pool", str(tmp_path / "one.json"), "--save", str(tmp_path / "x.json"))
    assert done.returncode == 2 and "runs nothing" in done.stderr
    assert not (tmp_path / "x.json").exists()
    done = _cli("--pool", str(tmp_path / "one.json"))
    assert done.returncode == 0 and "1 round(s)" in done.stdout and "one round" in done.stdout
