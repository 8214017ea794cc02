"""experiments/analysis/intervals.py: estimates, clusters, flags from the measured table, and coverage.

The coverage checks are reduced versions of benchmarks/coverage.py (the full table).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from experiments.analysis import intervals, stats


def _coverage() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "coverage.py"
    spec = importlib.util.spec_from_file_location("coverage_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["coverage_benchmark"] = module
    spec.loader.exec_module(module)
    return module


_CASES = ["Brown v. Board of Education", "Roe v. Wade", "Marbury v. Madison", "Miranda v. Arizona"]
_NAMES = [f"Party {c}" for c in "ABCDEFGH"]


def _inputs(name: str, rng: np.random.Generator, n: int) -> tuple[list[str], list[str], list[str]]:
    """(answers, generations A, generations B) of the kind each metric scores."""

    def pick(pool: list[str]) -> str:
        return str(rng.choice(pool))

    if name in ("accuracy", "balanced_accuracy"):
        y = [pick(["yes", "no", "no", "no", "maybe"]) for _ in range(n)]
        gens = ["yes", "no", "maybe", ""]
        return y, [t if rng.random() < 0.7 else pick(gens) for t in y], [pick(gens) for _ in y]
    if name == "sara_numeric_within_10pct":
        y = [f"${int(v)}" for v in rng.integers(100, 50_000, n)]

        def gen(ans: str) -> str:
            v = int(ans[1:])
            return pick([f"The tax is ${int(v * 1.05):,}.", f"{int(v * 1.3)}", "no idea", f"${v}"])

        return y, [gen(a) for a in y], [gen(a) for a in y]
    if name == "citation_open_contains":
        y = [pick(_CASES) for _ in range(n)]
        return y, [f"See {pick(_CASES)}, 347 U.S. 483" for _ in y], [pick(_CASES)[:8] for _ in y]
    if name == "definition_extraction_stemmed_match":
        y = [pick(["authorize,authorized", "contracts", "term"]) for _ in range(n)]
        gens = ["authorizes", "banana, Contract", "", "terms"]
        return y, [pick(gens) for _ in y], [pick(gens) for _ in y]
    if name == "ssla_f1":
        y = [",".join(rng.choice(_NAMES, int(rng.integers(1, 4)), replace=False)) for _ in range(n)]

        def ents(ans: str) -> str:
            found = [a for a in ans.split(",") if rng.random() < 0.6]
            if rng.random() < 0.3:
                found.append(pick(_NAMES))
            return ", ".join(found)

        return y, [ents(a) for a in y], [ents(a) for a in y]
    raise AssertionError(name)


@pytest.mark.parametrize(
    "name",
    [
        "accuracy",
        "balanced_accuracy",
        "sara_numeric_within_10pct",
        "citation_open_contains",
        "definition_extraction_stemmed_match",
        "ssla_f1",
    ],
)
def test_estimate_is_the_official_metric(name: str) -> None:
    rng = np.random.default_rng(3)
    y, a, b = _inputs(name, rng, 60)
    score = stats.metric_fn(name)
    one = intervals.metric_interval(y, a, metric=name, n_draws=500)
    two = intervals.metric_interval(y, a, b, metric=name, n_draws=500)
    assert one.estimate == score(y, a)
    assert two.estimate == score(y, a) - score(y, b)
    for ci in (one, two):
        assert ci.low <= ci.estimate <= ci.high and ci.level == 0.95 and ci.note
    if name != "ssla_f1":
        assert one.method.startswith("Bayesian: per-group Jeffreys Beta")
        assert "Dirichlet" in two.method and "500 posterior draws" in two.method
    else:
        assert one.method.startswith("bootstrap")


def test_balanced_accuracy_interval_is_the_mean_of_class_posteriors() -> None:
    """By hand: 8 of 10 minority rows and 45 of 90 majority rows right."""
    y = ["no"] * 10 + ["yes"] * 90
    a = ["no"] * 8 + ["yes"] * 2 + ["yes"] * 45 + ["no"] * 45
    ci = intervals.metric_interval(y, a, n_draws=200_000, seed=1)
    rng = np.random.default_rng(9)
    draws = (rng.beta(8.5, 2.5, 200_000) + rng.beta(45.5, 45.5, 200_000)) / 2
    low, high = np.quantile(draws, [0.025, 0.975])
    assert ci.estimate == pytest.approx(0.65, abs=1e-12)
    assert ci.low == pytest.approx(low, abs=3e-3) and ci.high == pytest.approx(high, abs=3e-3)


def test_paired_interval_is_the_mean_of_class_dirichlet_differences() -> None:
    """By hand: per class, Dirichlet over (both, A only, B only, neither) + 1/2 each."""
    y = ["no"] * 20 + ["yes"] * 80
    cells = {"no": (10, 5, 2, 3), "yes": (50, 6, 14, 10)}  # both, A only, B only, neither
    a: list[str] = []
    b: list[str] = []
    for label, counts in cells.items():
        other = "yes" if label == "no" else "no"
        for (hit_a, hit_b), k in zip(((1, 1), (1, 0), (0, 1), (0, 0)), counts, strict=True):
            a += [label if hit_a else other] * k
            b += [label if hit_b else other] * k
    ci = intervals.metric_interval(y, a, b, n_draws=200_000, seed=2)
    rng = np.random.default_rng(4)
    d = sum(
        (lambda p: p[:, 1] - p[:, 2])(rng.dirichlet(np.add(c, 0.5), 200_000)) / 2
        for c in cells.values()
    )
    low, high = np.quantile(d, [0.025, 0.975])
    assert ci.estimate == pytest.approx((3 / 20 - 8 / 80) / 2, abs=1e-12)
    assert ci.low == pytest.approx(low, abs=3e-3) and ci.high == pytest.approx(high, abs=3e-3)


def test_a_perfect_sample_keeps_a_real_interval() -> None:
    """All rows right: the bootstrap's zero-width interval is replaced by [lower, 1]."""
    y = ["yes"] * 15 + ["no"] * 15
    ci = intervals.metric_interval(y, y)
    assert ci.estimate == 1.0 and ci.high == 1.0 and 0.85 < ci.low < 0.99
    assert not ci.degenerate
    same = intervals.metric_interval(y, y, y)
    assert same.estimate == 0.0 and same.low < 0 < same.high


def test_clusters_widen_intervals_of_duplicated_rows() -> None:
    rng = np.random.default_rng(0)
    y, a, b = _inputs("balanced_accuracy", rng, 40)
    copies = 6
    yd, ad, bd = (np.repeat(np.array(v, dtype=object), copies) for v in (y, a, b))
    keys = np.repeat(np.arange(40), copies)
    for pb, pbd in ((None, None), (b, bd)):
        base = intervals.metric_interval(y, a, pb, n_draws=20_000)
        naive = intervals.metric_interval(yd, ad, pbd, n_draws=20_000)
        clustered = intervals.metric_interval(yd, ad, pbd, clusters=keys, n_draws=20_000)
        width = base.high - base.low
        assert clustered.estimate == naive.estimate == base.estimate
        # equal clusters: the interval of the distinct rows, up to posterior-draw noise
        assert clustered.high - clustered.low == pytest.approx(width, rel=0.03)
        assert naive.high - naive.low < 0.55 * width
        assert "240 rows in 40 clusters" in clustered.method
        assert getattr(clustered, "n_clusters", 40) == 40


def test_effective_sizes_are_kish() -> None:
    groups = np.array([0, 0, 0, 0, 1, 1])
    ids = np.array([0, 0, 0, 1, 2, 3])
    assert intervals.effective_sizes(groups, ids).tolist() == pytest.approx([16 / 10, 2.0])


def test_flags_come_from_the_measured_table(monkeypatch: pytest.MonkeyPatch) -> None:
    y = ["no"] * 5 + ["yes"] * 45  # a 5-row class: the old rule flagged it by size alone
    a = ["no"] * 4 + ["yes"] + ["yes"] * 40 + ["no"] * 5
    fake = {
        ("balanced", "single"): {(50, 0.1): (0.951, 0.955, "recall x"), (20, 0.5): (0.9, 0.9, "z")}
    }
    monkeypatch.setattr(intervals, "COVERAGE", fake)
    ci = intervals.metric_interval(y, a)
    assert not ci.unreliable and "0.951" in ci.note and "n = 50, minority share 0.1" in ci.note
    fake[("balanced", "single")][(50, 0.1)] = (0.912, 0.95, "recall 0.95/0.95")
    ci = intervals.metric_interval(y, a)
    assert ci.unreliable and ci.note.startswith("unreliable: measured 95% coverage 0.912")
    # smaller than every measured cell: flagged, coverage unknown
    small = intervals.metric_interval(y[:3] + y[-10:], a[:3] + a[-10:])
    assert small.unreliable and "below every cell" in small.note
    # nothing measured for this interval at all
    paired = intervals.metric_interval(y, a, a)
    assert paired.unreliable and "no coverage was measured" in paired.note


def test_shipped_table_flags_small_minorities_and_clears_large_samples() -> None:
    assert intervals.COVERAGE, "paste `benchmarks/coverage.py --emit` into intervals.py"
    y = ["no"] * 2 + ["yes"] * 18
    tiny = intervals.metric_interval(y, [*y[:1], "yes", *y[2:]])
    cell = intervals.coverage_cell("balanced", "single", np.array([2.0, 18.0]))
    assert cell is not None and cell[0] == (20, 0.1)
    # a class right on every row is off the measured grid (recall <= 0.95): flagged whatever
    # the cell says
    assert tiny.unreliable and "off the measured grid" in tiny.note
    big_y = ["no"] * 600 + ["yes"] * 600
    wrong = {"no": "yes", "yes": "no"}
    big_pred = [wrong[v] if i % 10 == 0 else v for i, v in enumerate(big_y)]  # recall 0.9
    big = intervals.metric_interval(big_y, big_pred)
    assert not big.unreliable and "n = 200, minority share 0.5" in big.note
    assert intervals.metric_interval(big_y, big_y).unreliable  # recall 1.0: off the grid
    three = ["a"] * 100 + ["b"] * 100 + ["c"] * 100
    three_pred = [("b" if v == "a" else "a") if i % 10 == 0 else v for i, v in enumerate(three)]
    assert "3 answer classes" in intervals.metric_interval(three, three_pred).note


# ---- reduced coverage simulations (the full grid: benchmarks/coverage.py) --------------------
def test_exact_coverage_of_one_variant_where_the_bootstrap_failed() -> None:
    """n = 100 with 10 minority rows, recall 0.9/0.9: bootstrap_ci covered 0.753 (issue 18).
    Exact coverage over all 16 recall scenarios must stay above 0.92 (it was ~0.94)."""
    cov = _coverage()
    bal, rows = cov.exact_single(100, 0.1, np.random.default_rng(0), intervals.N_DRAWS, 0.5)
    assert bal.coverage["recall 0.9/0.9"] >= 0.93
    assert bal.worst[0] >= 0.92 and rows.worst[0] >= 0.92
    assert 0.94 <= bal.median <= 0.96


def test_paired_and_clustered_coverage_reduced() -> None:
    """600 simulations per scenario (SE ~0.009 at 0.95): >= 0.91 fails a true 0.85 by 6 SE."""
    cov = _coverage()
    rng = np.random.default_rng(5)
    sims = 600
    for sc, rho in (((0.9, 0.9, 0.9, 0.9), 0.7), ((0.95, 0.95, 0.9, 0.9), 0.0)):
        bal, rows = cov.simulate_paired(cov.row_sizes(100, 0.1), sc, rho, sims, rng, 2000)
        assert bal >= 0.91 and rows >= 0.91, (sc, rho, bal, rows)
    sizes = cov.clustered_sizes("20 texts x 30", 0.5, rng)
    on = cov.simulate_single(sizes, (0.7, 0.7), sims, rng, 2000)
    off = cov.simulate_single(sizes, (0.7, 0.7), sims, rng, 2000, use_clusters=False)
    assert min(on) >= 0.91 and max(off) <= 0.6, (on, off)


def test_quick_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    _coverage().main(["--quick"])
    out = capsys.readouterr().out
    assert "| balanced | single | 100 | 0.1 |" in out and "posterior draws" in out
