"""PPI++ means and paired differences (experiments.analysis.stats.ppi): the formulas, the
small-sample refusals, invariances, an oracle check against ppi-python, and a reduced
coverage grid of benchmarks/ppi_coverage.py with fixed seeds."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from experiments.analysis.stats import ppi


def _arm(
    rng: np.random.Generator, n: int, p: float, share: float, agree: float = 0.8
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y = (rng.random(n) < p).astype(float)
    f = np.where(rng.random(n) < agree, y, 1 - y)
    hand = np.full(n, np.nan)
    graded = rng.permutation(n)[: round(share * n)]
    hand[graded] = y[graded]
    return y, f, hand


def test_uniform_estimate_is_judge_mean_plus_graded_rectifier() -> None:
    rng = np.random.default_rng(1)
    _, f, hand = _arm(rng, 300, 0.7, 0.2)
    res = ppi.ppi_mean(f, hand)
    lab = ~np.isnan(hand)
    lam = res.lambda_
    expected = lam * f.mean() + np.mean(hand[lab] - lam * f[lab])
    assert res.estimate == pytest.approx(expected)
    # lambda is the least-squares slope of Y on f over the graded rows, in [0, 1]
    slope = np.cov(f[lab], hand[lab])[0, 1] / np.var(f[lab], ddof=1)
    assert lam == pytest.approx(min(max(slope, 0.0), 1.0))
    assert res.valid and res.low < res.estimate < res.high


def test_variance_matches_the_subset_sampling_formula() -> None:
    """Var = lambda^2 Var(f)/N + Var(R)/n_h (times the small-sample factors)."""
    rng = np.random.default_rng(2)
    n = 400
    _, f, hand = _arm(rng, n, 0.6, 0.25)
    res = ppi.ppi_mean(f, hand)
    lab = ~np.isnan(hand)
    nh = int(lab.sum())
    r = hand[lab] - res.lambda_ * f[lab]
    r = r - r.mean()
    var = res.lambda_**2 * np.var(f) / n + (r**2).sum() / nh**2 * nh / (nh - 2)
    assert res.se**2 == pytest.approx(var * n / (n - 1), rel=1e-6)


def test_hand_only_is_the_graded_mean_with_its_usual_interval() -> None:
    rng = np.random.default_rng(3)
    _, f, hand = _arm(rng, 200, 0.6, 0.3)
    res = ppi.ppi_mean(f, hand, lam=0.0)
    lab = ~np.isnan(hand)
    assert res.estimate == pytest.approx(hand[lab].mean())
    assert res.se == pytest.approx(np.std(hand[lab], ddof=1) / math.sqrt(lab.sum()), rel=0.02)


def test_too_few_hand_grades_refuses_an_interval_and_says_how_many_more() -> None:
    rng = np.random.default_rng(4)
    _, f, hand = _arm(rng, 40, 0.7, 0.05)  # 2 graded rows
    res = ppi.ppi_mean(f, hand)
    assert not res.valid
    assert math.isnan(res.low) and math.isnan(res.high)
    assert res.needed == ppi.MIN_HAND - 2
    assert ppi.hand_grades_needed(res) == ppi.MIN_HAND - 2
    assert "grade" in res.reason and str(ppi.MIN_HAND) in res.reason


def test_all_grades_one_near_the_ceiling_still_has_width() -> None:
    n = 200
    f = np.ones(n)
    f[:10] = 0
    hand = np.full(n, np.nan)
    hand[50:80] = 1.0  # every sampled grade is 1: the naive variance would be 0
    res = ppi.ppi_mean(f, hand)
    assert res.valid and res.floored
    assert res.high - res.low > 0.02


def test_shuffling_rows_with_their_clusters_changes_nothing() -> None:
    rng = np.random.default_rng(5)
    n = 240
    clusters = np.repeat(np.arange(80), 3)
    _, fa, ha = _arm(rng, n, 0.7, 0.2)
    _, fb, hb = _arm(rng, n, 0.6, 0.2)
    perm = rng.permutation(n)
    one = ppi.ppi_paired_difference(fa, ha, fb, hb, clusters=clusters)
    two = ppi.ppi_paired_difference(
        fa[perm], ha[perm], fb[perm], hb[perm], clusters=[f"k{c}" for c in clusters[perm]]
    )
    for field in ("estimate", "low", "high", "se", "p_value", "effective_n"):
        assert getattr(one, field) == pytest.approx(getattr(two, field), rel=1e-9), field
    assert one.lambda_ == pytest.approx(two.lambda_)
    assert (one.n_hand_a, one.n_hand_b, one.n_clusters) == (two.n_hand_a, two.n_hand_b, 80)


def test_clusters_widen_the_interval_of_repeated_rows() -> None:
    rng = np.random.default_rng(6)
    base = 100
    _, fa, ha = _arm(rng, base, 0.7, 0.3)
    _, fb, hb = _arm(rng, base, 0.5, 0.3)
    rep = np.repeat(np.arange(base), 4)  # every text four times, the same answers and grades
    plain = ppi.ppi_paired_difference(fa[rep], ha[rep], fb[rep], hb[rep])
    clustered = ppi.ppi_paired_difference(fa[rep], ha[rep], fb[rep], hb[rep], clusters=rep)
    assert clustered.se > 1.5 * plain.se
    assert "cluster-robust" in clustered.method


def test_difference_of_identical_arms_graded_on_the_same_rows_is_zero() -> None:
    rng = np.random.default_rng(7)
    _, f, hand = _arm(rng, 100, 0.7, 0.3)
    res = ppi.ppi_paired_difference(f, hand, f, hand)
    assert res.estimate == pytest.approx(0.0)
    assert res.n_hand_both == 30


def test_judge_only_is_labelled_as_judge_scores() -> None:
    rng = np.random.default_rng(8)
    _, fa, _ = _arm(rng, 100, 0.7, 0.3)
    _, fb, _ = _arm(rng, 100, 0.5, 0.3)
    res = ppi.judge_only_difference(fa, fb)
    assert "judge scores" in res.method and "NOT calibrated" in res.method
    assert res.estimate == pytest.approx(fa.mean() - fb.mean())


def test_unparsed_judge_replies_get_the_fixed_score() -> None:
    rng = np.random.default_rng(9)
    _, f, hand = _arm(rng, 100, 0.7, 0.3)
    g = f.copy()
    g[:5] = np.nan
    h = f.copy()
    h[:5] = ppi.UNPARSED_JUDGE_SCORE
    one, two = ppi.ppi_mean(g, hand), ppi.ppi_mean(h, hand)
    assert one.n_unparsed == 5 and one.estimate == pytest.approx(two.estimate)


def test_hand_grades_needed_reaches_the_target_by_projection() -> None:
    rng = np.random.default_rng(10)
    _, fa, ha = _arm(rng, 400, 0.7, 0.05)
    _, fb, hb = _arm(rng, 400, 0.6, 0.05)
    res = ppi.ppi_paired_difference(fa, ha, fb, hb)
    more = ppi.hand_grades_needed(res, target_half_width=res.half_width / 2)
    assert 2 * res.n_hand < more < 800 - res.n_hand
    assert ppi.hand_grades_needed(res, target_half_width=10 * res.half_width) == 0


def test_bad_input_names_what_to_fix() -> None:
    with pytest.raises(ppi.PPIInputError, match="same rows"):
        ppi.ppi_paired_difference([1, 0], [1, 0], [1], [1])
    with pytest.raises(ppi.PPIInputError, match=r"\[0, 1\]"):
        ppi.ppi_mean([2.0, 0.0], [1.0, np.nan])
    with pytest.raises(ppi.PPIInputError, match="level"):
        ppi.ppi_mean([1.0, 0.0], [1.0, np.nan], level=95)


@pytest.mark.parametrize("lam", [None, 1.0])
def test_agrees_with_ppi_python_on_a_separate_large_unlabelled_sample(lam: float | None) -> None:
    """ppi-python (a test oracle only) assumes the graded rows are a separate sample; with N
    unlabelled rows >> n graded ones that and our subset form agree to ~1%."""
    ppi_py = pytest.importorskip("ppi_py")
    rng = np.random.default_rng(11)
    n_lab, n_unl = 300, 60_000
    y = (rng.random(n_lab + n_unl) < 0.65).astype(float)
    f = np.where(rng.random(len(y)) < 0.85, y, 1 - y)
    hand = np.full(len(y), np.nan)
    hand[:n_lab] = y[:n_lab]
    ours = ppi.ppi_mean(f, hand, lam=lam)
    theirs = ppi_py.ppi_mean_ci(y[:n_lab], f[:n_lab], f[n_lab:], alpha=0.05, lam=lam)
    point = ppi_py.ppi_mean_pointestimate(y[:n_lab], f[:n_lab], f[n_lab:], lam=lam)
    assert ours.estimate == pytest.approx(float(np.ravel(point)[0]), abs=2e-3)
    their_half = (float(np.ravel(theirs[1])[0]) - float(np.ravel(theirs[0])[0])) / 2
    assert ours.half_width == pytest.approx(their_half, rel=0.02)


def _bench() -> ModuleType:
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "ppi_coverage.py"
    spec = importlib.util.spec_from_file_location("ppi_coverage_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ppi_coverage_benchmark"] = module
    spec.loader.exec_module(module)
    return module


REDUCED_GRID = [  # (scenario, n, share, bias, clustered, seed, judge-only coverage below)
    # (measured at these seeds: 0.000, 0.425, 0.190; the pass-wrong bias gave 0.78-0.90)
    ("null", 400, 0.10, 0.15, False, 101, 0.05),
    ("effect", 200, 0.20, 0.15, False, 102, 0.60),
    ("null", 400, 0.20, 0.15, True, 103, 0.35),
]


@pytest.mark.parametrize(
    ("scenario", "n", "share", "bias", "clustered", "seed", "judge_max"), REDUCED_GRID
)
def test_reduced_grid_covers_where_valid_and_judge_only_fails_under_bias(
    scenario: str,
    n: int,
    share: float,
    bias: float,
    clustered: bool,
    seed: int,
    judge_max: float,
) -> None:
    """A judge whose mean for A is 0.15 too high: PPI covers, the judge's own interval does
    not (under the null it centres on 0.15; with the effect it adds 0.15 to a difference an
    80% judge shrinks by 40%, overshooting by 0.06)."""
    bench = _bench()
    cell = bench.Cell(scenario, n, share, bias, clustered)
    res = bench.simulate_cell(cell, reps=800, seed=seed)
    assert res.invalid == 0.0
    assert 0.93 <= res.coverage <= 0.97
    assert res.judge_coverage < judge_max  # the biased judge's interval misses the truth
    assert res.hand_ratio > 1.0  # the judge narrows the interval


@pytest.mark.parametrize("scenario", ["null", "effect", "ceiling", "rare"])
def test_bias_shifts_the_judge_mean_for_a_by_b(scenario: str) -> None:
    """The acceptance's "biased toward one variant by 0.15": A's judge mean is 0.15 above an
    unbiased 80% judge's, B's unchanged; the earlier `pass-wrong` definition moved it by only
    b (1 - p_A) 0.8."""
    bench = _bench()
    pa, pb = bench.SCENARIOS[scenario]
    unbiased_a = bench.AGREE * pa + (1 - bench.AGREE) * (1 - pa)
    unbiased_b = bench.AGREE * pb + (1 - bench.AGREE) * (1 - pb)
    rng = np.random.default_rng(105)
    for kind, shift in (("shift", 0.15), ("pass-wrong", 0.15 * (1 - pa) * bench.AGREE)):
        cell = bench.Cell(scenario, 200_000, 0.1, 0.15, bias_kind=kind)
        ya, fa, yb, fb, _ = bench.draw(rng, cell)
        assert ya.mean() == pytest.approx(pa, abs=0.005)
        assert fa.mean() - unbiased_a == pytest.approx(shift, abs=0.005), kind
        assert fb.mean() == pytest.approx(unbiased_b, abs=0.005), kind
        # 80% agreement before the bias: B's judge is untouched
        assert (fb == yb).mean() == pytest.approx(bench.AGREE, abs=0.005)


def test_a_shift_beyond_the_judges_zero_scores_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """At p_A = 0.98 an 80% judge scores 0 on 21.2% of A's rows: a shift of 0.25 cannot come
    from flipping them, and the benchmark says so instead of simulating a smaller bias."""
    bench = _bench()
    cell = bench.Cell("ceiling", 100, 0.1, 0.25)
    assert cell.flip > 1 and "0.212" in cell.refusal
    with pytest.raises(bench.BiasOutOfRange, match=r"at most 0\.212"):
        bench.simulate_cell(cell, reps=5, seed=106)
    args = "--reps 5 --scenario ceiling --n 100 --share 0.3 --bias 0.25 --clustered no"
    bench.main(args.split())
    out = capsys.readouterr().out
    assert "refused: a shift of 0.25" in out and "shift of its mean score for A" in out
    assert "refused cells (bias beyond the judge's 0-scores): 1" in out
    assert bench.Cell("ceiling", 100, 0.1, 0.15).refusal == ""


def test_reduced_grid_refuses_two_hand_grades() -> None:
    bench = _bench()
    res = bench.simulate_cell(bench.Cell("null", 40, 0.05, 0.0), reps=20, seed=104)
    assert res.invalid == 1.0 and math.isnan(res.coverage)


def test_explicit_uniform_inclusion_probabilities_change_nothing() -> None:
    rng = np.random.default_rng(12)
    _, f, hand = _arm(rng, 200, 0.7, 0.2)
    pi = np.full(200, 0.2)
    one, two = ppi.ppi_mean(f, hand), ppi.ppi_mean(f, hand, pi=pi)
    assert one.estimate == pytest.approx(two.estimate)
    assert one.se == pytest.approx(two.se)
    with pytest.raises(ppi.PPIInputError, match="inclusion"):
        ppi.ppi_mean(f, hand, pi=np.zeros(200))


def test_an_interval_never_says_an_impossible_share() -> None:
    """Every hand grade 0 (the floor keeps the interval from collapsing): the interval of a
    share stops at 0, of a difference at -1/+1 (the truth is inside, so no coverage is lost)."""
    n = 60
    judge = np.zeros(n)
    none = np.zeros(n)
    est = ppi.ppi_mean(judge, none)
    assert est.valid and est.low == 0.0 and 0.0 < est.high < 0.3
    assert est.estimate == 0.0
    ones = np.ones(n)
    diff = ppi.ppi_paired_difference(ones, ones, judge, none)
    assert diff.valid and diff.high == 1.0 and diff.low < 1.0


def test_too_few_rows_to_ever_be_valid_says_so_not_grade_more() -> None:
    """8 rows per variant: grading every one leaves it below the 10 graded a valid
    interval needs, so the reason asks for more rows, not for grades that cannot exist."""
    rng = np.random.default_rng(0)
    judge = rng.integers(0, 2, 8).astype(float)
    hand = judge.copy()
    res = ppi.ppi_paired_difference(judge, hand, judge, hand)
    assert not res.valid and res.reason is not None
    assert res.reason.startswith("too few rows") and "evaluate more rows" in res.reason
    j16, h16 = np.tile(judge, 2), np.concatenate([hand, np.full(8, np.nan)])
    more = ppi.ppi_paired_difference(j16, h16, j16, h16)
    assert not more.valid and more.reason is not None and "grade" in more.reason
    assert not more.reason.startswith("too few rows")  # 16 rows, 8 graded: grading helps


def test_effective_n_counts_what_the_judge_bought_not_the_pairing() -> None:
    """Both variants graded on the same rows, their grades correlated: a judge that says
    nothing (one score everywhere) is worth no hand grade, so the effective sample size is at
    most the grades given (the pairing's gain is the hand grades' own); a judge that agrees
    with the grades is worth more than them."""
    rng = np.random.default_rng(3)
    n = 200
    ya = (rng.random(n) < 0.6).astype(float)
    yb = np.where(rng.random(n) < 0.8, ya, 1 - ya)  # correlated with A's
    graded = rng.random(n) < 0.2
    ha, hb = np.where(graded, ya, np.nan), np.where(graded, yb, np.nan)
    flat = np.ones(n)
    mute = ppi.ppi_paired_difference(flat, ha, flat, hb)
    assert mute.valid and mute.effective_n <= mute.n_hand * 1.0001
    sharp = ppi.ppi_paired_difference(
        np.where(rng.random(n) < 0.95, ya, 1 - ya),
        ha,
        np.where(rng.random(n) < 0.95, yb, 1 - yb),
        hb,
    )
    assert sharp.valid and sharp.effective_n > 1.5 * sharp.n_hand
    one = ppi.ppi_mean(flat, ha)
    assert one.effective_n <= one.n_hand * 1.0001
