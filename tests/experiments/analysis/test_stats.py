"""The statistics: calibrated under the null, in agreement with scipy, and exact when small."""

from __future__ import annotations

import itertools
from types import ModuleType

import numpy as np
import pytest

from experiments.analysis import stats
from experiments.analysis.stats import range_test
from tests.support.normal_mde import normal_approximation_mde


def _exchangeable(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y = rng.integers(0, 2, n)
    p_correct = rng.uniform(0.5, 0.9, n)  # per-example difficulty, shared by A and B
    a = np.where(rng.random(n) < p_correct, y, 1 - y)
    b = np.where(rng.random(n) < p_correct, y, 1 - y)
    return y, a, b


@pytest.mark.slow
@pytest.mark.parametrize("metric", ["accuracy", "balanced_accuracy"])
def test_null_rejection_rate_is_nominal(metric: str) -> None:
    rng = np.random.default_rng(2024)
    sims = 1000
    rejections = 0
    for s in range(sims):
        y, a, b = _exchangeable(rng, 120)
        r = stats.paired_permutation_test(y, a, b, metric=metric, n_resamples=999, seed=s)
        rejections += r.p_value <= 0.05
    rate = rejections / sims
    assert 0.03 <= rate <= 0.07, f"rejection rate {rate:.3f} at alpha=0.05 over {sims} sims"


def test_power_against_a_real_difference() -> None:
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 300)
    a = np.where(rng.random(300) < 0.85, y, 1 - y)
    b = np.where(rng.random(300) < 0.65, y, 1 - y)
    r = stats.paired_permutation_test(y, a, b, metric="accuracy", seed=0)
    assert r.statistic > 0.1 and r.p_value < 0.001


@pytest.mark.slow
def test_agrees_with_scipy_permutation_test_on_accuracy() -> None:
    from scipy.stats import permutation_test

    rng = np.random.default_rng(7)
    for _ in range(4):
        y = rng.integers(0, 3, 150)
        a = np.where(rng.random(150) < 0.7, y, (y + 1) % 3)
        b = np.where(rng.random(150) < 0.62, y, (y + 2) % 3)
        ours = stats.paired_permutation_test(y, a, b, metric="accuracy", n_resamples=20_000, seed=1)
        ca, cb = (a == y).astype(float), (b == y).astype(float)
        ref = permutation_test(
            (ca, cb),
            lambda x, z, axis: np.mean(x, axis=axis) - np.mean(z, axis=axis),
            permutation_type="samples",
            n_resamples=20_000,
            vectorized=True,
            random_state=2,
        )
        assert ours.statistic == pytest.approx(ref.statistic)
        # both Monte Carlo with R=20,000: allow 4 standard errors of the difference
        se = np.sqrt(2 * max(ref.pvalue, 1e-3) * (1 - ref.pvalue) / 20_000)
        assert abs(ours.p_value - ref.pvalue) <= 4 * se + 1e-4


def test_exact_when_few_examples_differ() -> None:
    y = np.array([1, 1, 1, 0, 0, 0, 1, 0])
    a = np.array([1, 1, 1, 0, 0, 0, 1, 0])
    b = np.array([0, 0, 1, 0, 0, 1, 1, 0])  # three discordant examples, all favour A
    r = stats.paired_permutation_test(y, a, b, metric="accuracy")
    assert r.exact and r.n_discordant == 3
    # by hand: of 2^3 sign patterns, only all-A and all-B reach |stat| = 3/8
    assert r.statistic == pytest.approx(3 / 8)
    assert r.p_value == pytest.approx(2 / 8)
    one_sided = stats.paired_permutation_test(y, a, b, metric="accuracy", alternative="greater")
    assert one_sided.p_value == pytest.approx(1 / 8)


def test_balanced_accuracy_statistic_matches_sklearn() -> None:
    from sklearn.metrics import balanced_accuracy_score

    rng = np.random.default_rng(3)
    y = rng.choice(["Yes", "No", "Maybe"], 80, p=[0.6, 0.3, 0.1])
    a = rng.choice(["Yes", "No", "Maybe"], 80)
    b = rng.choice(["Yes", "No", "Maybe"], 80)
    r = stats.paired_permutation_test(y, a, b, n_resamples=500)
    expected = balanced_accuracy_score(y, a) - balanced_accuracy_score(y, b)
    assert r.statistic == pytest.approx(expected)


def test_monte_carlo_is_seeded_and_never_zero() -> None:
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 500)
    a = y.copy()
    b = 1 - y
    r1 = stats.paired_permutation_test(y, a, b, n_resamples=999, seed=9)
    r2 = stats.paired_permutation_test(y, a, b, n_resamples=999, seed=9)
    assert r1 == r2 and not r1.exact
    assert r1.p_value == pytest.approx(1 / 1000)  # (b + 1) / (R + 1), never 0


def test_generic_metric_callable_agrees_with_fast_path() -> None:
    rng = np.random.default_rng(11)
    y, a, b = _exchangeable(rng, 60)

    def accuracy(t: np.ndarray, p: np.ndarray) -> float:
        return float(np.mean(t == p))

    slow = stats.paired_permutation_test(y, a, b, metric=accuracy, n_resamples=3000, seed=0)
    fast = stats.paired_permutation_test(y, a, b, metric="accuracy", n_resamples=3000, seed=0)
    assert slow.statistic == pytest.approx(fast.statistic)
    assert abs(slow.p_value - fast.p_value) < 0.06


def test_corrections_by_hand() -> None:
    p = [0.01, 0.04, 0.03, 0.20]
    # Holm: sorted 0.01*4, 0.03*3, 0.04*2, 0.20*1 -> 0.04, 0.09, 0.09 (monotone), 0.20
    assert stats.holm(p) == pytest.approx([0.04, 0.09, 0.09, 0.20])
    # BH: sorted p*m/rank = 0.04, 0.06, 0.0533, 0.20 -> step-up minima 0.04, 0.0533, 0.0533, 0.2
    assert stats.benjamini_hochberg(p) == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.20])


def test_bootstrap_ci_covers_the_estimate_and_differences() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    a = np.where(rng.random(200) < 0.8, y, 1 - y)
    b = np.where(rng.random(200) < 0.6, y, 1 - y)
    ci = stats.bootstrap_ci(y, a, metric="balanced_accuracy")
    assert ci.low < ci.estimate < ci.high and 0.6 < ci.estimate < 0.95
    diff = stats.bootstrap_ci(y, a, b, metric="accuracy")
    assert diff.low > 0 and diff.high < 0.45


def test_across_tasks_and_mde() -> None:
    a = [0.71, 0.65, 0.80, 0.55, 0.90, 0.62]
    b = [0.60, 0.61, 0.70, 0.50, 0.85, 0.66]
    t = stats.paired_t_across_tasks(a, b)
    w = stats.wilcoxon_across_tasks(a, b)
    assert t.n_tasks == w.n_tasks == 6 and 0 < t.p_value < 1 and 0 < w.p_value <= 1
    rng = np.random.default_rng(0)
    small = normal_approximation_mde(*_exchangeable(rng, 50))
    large = normal_approximation_mde(*_exchangeable(rng, 2000))
    assert small > large > 0  # more examples detect smaller differences


@pytest.mark.slow
def test_exact_enumeration_matches_brute_force_on_balanced_accuracy() -> None:
    from sklearn.metrics import balanced_accuracy_score

    y = np.array(["a", "a", "b", "b", "b", "c", "a", "c"])
    a = np.array(["a", "b", "b", "c", "b", "c", "a", "a"])
    b = np.array(["b", "a", "b", "b", "a", "a", "c", "c"])
    obs = balanced_accuracy_score(y, a) - balanced_accuracy_score(y, b)
    count = total = 0
    for swaps in itertools.product([0, 1], repeat=len(y)):
        m = np.array(swaps, dtype=bool)
        a2, b2 = np.where(m, b, a), np.where(m, a, b)
        s = balanced_accuracy_score(y, a2) - balanced_accuracy_score(y, b2)
        count += abs(s) >= abs(obs) - 1e-12
        total += 1
    r = stats.paired_permutation_test(y, a, b)
    assert r.exact and r.p_value == pytest.approx(count / total)


# ---- every test on the metric the table reports (issue 9, point 2) ---------------------------
_CASES = [
    "Brown v. Board of Education",
    "Roe v. Wade",
    "Miranda v. Arizona",
    "Gideon v. Wainwright",
]
_NAMES = ["Alpha Corp", "Bravo LLC", "Charlie Inc", "Delta Bank", "John Doe"]
_EXCEPTIONS = ["express agreement", "fraudulent conveyance", "de facto merger", "mere continuation"]


def _metric_data(
    name: str, rng: np.random.Generator, n: int = 60
) -> tuple[list[str], list[str], list[str]]:
    """(answers, generations A, generations B) of the kind each metric scores."""

    def pick(pool: list[str]) -> str:
        return str(rng.choice(pool))

    if name in ("accuracy", "balanced_accuracy"):
        y = [pick(["Yes", "No", "No", "No"]) for _ in range(n)]
        gens = ["Yes", "yes.", " No", "NO", "Maybe", ""]
        a = [t if rng.random() < 0.6 else pick(gens) for t in y]  # A mostly right
        return y, a, [pick(gens) for _ in y]
    if name == "sara_numeric_within_10pct":
        y = [f"${int(v)}" for v in rng.integers(100, 50_000, n)]

        def gen(ans: str) -> str:
            v = int(ans[1:])
            return pick(
                [
                    f"The tax is ${int(v * 1.05):,}.",
                    f"{int(v * 1.3)}",
                    "no idea",
                    f"${v}",
                    "7 then 100",
                ]
            )

        return y, [gen(a) for a in y], [gen(a) for a in y]
    if name == "citation_open_contains":
        y = [pick(_CASES) for _ in range(n)]
        return y, [f"See {pick(_CASES)}, 347 U.S. 483" for _ in y], [pick(_CASES)[:8] for _ in y]
    if name == "definition_extraction_stemmed_match":
        y = [
            pick(["authorize,authorized", "contracts", "term", "security interest"])
            for _ in range(n)
        ]
        gens = ["authorizes", "banana, Contract", "", "terms", "security interests, other"]
        return y, [pick(gens) for _ in y], [pick(gens) for _ in y]
    if name == "ssla_f1":
        y = [",".join(rng.choice(_NAMES, int(rng.integers(1, 4)), replace=False)) for _ in range(n)]

        def ents(ans: str) -> str:
            found = [a for a in ans.split(",") if rng.random() < 0.6]
            if rng.random() < 0.3:
                found.append(pick(_NAMES))
            return ", ".join(found)

        return y, [ents(a) for a in y], [ents(a) for a in y]
    if name == "successor_liability_f1":
        y = [
            ",".join(rng.choice(_EXCEPTIONS, int(rng.integers(1, 3)), replace=False))
            for _ in range(n)
        ]

        def exc(ans: str) -> str:
            named = [e for e in ans.split(",") if rng.random() < 0.6]
            if rng.random() < 0.3:
                named.append(pick(_EXCEPTIONS))
            return "The exceptions are " + " and ".join(named) if named else "None apply."

        return y, [exc(a) for a in y], [exc(a) for a in y]
    if name == "exact_match":  # a user's extraction task: the whole answer, normalised
        y = [pick(["clause 4.2", "Delaware", "thirty days", "the Licensee"]) for _ in range(n)]
        gens = ["Clause 4.2.", "delaware", "30 days", "", "the licensee", "New York"]
        return y, [t if rng.random() < 0.6 else pick(gens) for t in y], [pick(gens) for _ in y]
    if name == "macro_f1":  # a user's classification task declared with --metric f1
        y = [pick(["Yes", "No", "No", "Unclear"]) for _ in range(n)]
        gens = ["Yes", "yes.", " No", "NO", "Unclear", "Maybe", ""]
        return y, [t if rng.random() < 0.6 else pick(gens) for t in y], [pick(gens) for _ in y]
    raise AssertionError(f"no generator for metric {name!r}: add one")


def _official(name: str, gens: list[str], answers: list[str]) -> float:
    from experiments.metrics import METRICS

    if name == "accuracy":
        return stats.metric_fn("accuracy")(answers, gens)
    return METRICS[name](gens, answers)


def test_metric_names_cover_every_official_metric() -> None:
    from experiments.metrics import METRICS, is_rule_conclusion

    official = {m for m in METRICS if not is_rule_conclusion(m)}
    assert official | {"accuracy"} == set(stats.metric_names())
    for name in official:  # the callable is the official function with (y_true, y_pred) order
        y, a, _ = _metric_data(name, np.random.default_rng(0))
        assert stats.metric_fn(name)(y, a) == METRICS[name](a, y)
    with pytest.raises(ValueError, match="unknown metric 'f2'"):
        stats.metric_fn("f2")
    with pytest.raises(ValueError, match="unknown metric"):
        stats.paired_permutation_test(["a"], ["a"], ["b"], metric="f2")


@pytest.mark.parametrize("name", stats.metric_names())
def test_statistic_is_the_reported_score_difference_for_every_metric(name: str) -> None:
    rng = np.random.default_rng(sum(map(ord, name)))
    y, a, b = _metric_data(name, rng)
    sa, sb = _official(name, a, y), _official(name, b, y)
    assert sa != sb, "the generated data should separate the variants"
    r = stats.paired_permutation_test(y, a, b, metric=name, n_resamples=999, seed=0)
    assert r.statistic == sa - sb  # exactly, as the table reports it
    assert r.metric == name and 0 < r.p_value <= 1
    # the vectorised path is the one that ran: its decomposition reproduces the scores
    ya = np.asarray(y, dtype=object)
    dec = stats.checked_decomposition(
        name, ya, [np.asarray(a, dtype=object), np.asarray(b, dtype=object)], [sa, sb]
    )
    # macro F1 is no sum of per-row terms: it has no decomposition (the exact slow path ran)
    assert (dec is None) == (name == "macro_f1")
    # the range test, the bootstrap and the MDE use the same scores
    _, c, _ = _metric_data(name, rng)
    rr = stats.range_permutation_test(y, [a, b, c], metric=name, n_resamples=199)
    assert rr.scores == (sa, sb, _official(name, c, y))
    assert rr.statistic == max(rr.scores) - min(rr.scores)
    ci = stats.bootstrap_ci(y, a, b, metric=name, n_resamples=300)
    assert ci.estimate == sa - sb and ci.low <= ci.estimate <= ci.high
    assert normal_approximation_mde(y, a, b, metric=name) > 0


def test_f1_task_is_tested_on_f1_not_on_per_row_correctness() -> None:
    # ssla: A names both parties of the 20 two-party rows (0.8 per row: never "correct",
    # because the official count adds a false positive) and misses the 10 one-party rows;
    # B gets the one-party rows exactly right and names nobody on the others.
    y = ["Alpha Corp,Bravo LLC"] * 20 + ["Charlie Inc"] * 10
    a = ["Alpha Corp, Bravo LLC"] * 20 + [""] * 10
    b = [""] * 20 + ["Charlie Inc"] * 10
    f1_a, f1_b = stats.metric_fn("ssla_f1")(y, a), stats.metric_fn("ssla_f1")(y, b)
    correct = {  # per-row "correct" (the row's metric equals 1.0), what used to be tested
        v: [
            "1" if stats.metric_fn("ssla_f1")([t], [p]) == 1.0 else "0"
            for t, p in zip(y, g, strict=True)
        ]
        for v, g in (("a", a), ("b", b))
    }
    old = stats.paired_permutation_test(["1"] * 30, correct["a"], correct["b"], metric="accuracy")
    new = stats.paired_permutation_test(y, a, b, metric="ssla_f1", alternative="greater")
    assert f1_a - f1_b > 0.4 and old.statistic < 0  # opposite signs
    assert new.statistic == f1_a - f1_b and new.p_value < 0.01  # the test follows F1


def test_none_prediction_scores_as_an_empty_generation() -> None:
    y = ["Yes", "No", "No", "Yes"]
    a = ["Yes", None, "No", "Yes"]
    b = ["Yes", "No", "No", "No"]
    r = stats.paired_permutation_test(y, a, b, metric="accuracy")
    assert r.statistic == pytest.approx(0.0) and r.n_discordant == 2  # None is a wrong answer
    ents = stats.paired_permutation_test(["Alpha"], [None], [""], metric="ssla_f1")
    assert ents.statistic == 0.0 and ents.n_discordant == 0
    with pytest.raises(ValueError, match="y_true contains None"):
        stats.paired_permutation_test([None], ["a"], ["b"])
    with pytest.raises(ValueError, match="pair up row by row"):
        stats.paired_permutation_test(["a", "b"], ["a"], ["b", "a"])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["balanced_accuracy", "ssla_f1"])
def test_vectorised_null_agrees_with_recomputing_the_metric(name: str) -> None:
    """The decomposed path against the slow loop that swaps raw predictions and rescores."""
    rng = np.random.default_rng(4)
    y, a, b = _metric_data(name, rng, n=40)
    _, c, _ = _metric_data(name, rng, n=40)
    official = stats.metric_fn(name)

    def slow(t: np.ndarray, p: np.ndarray) -> float:  # a callable: forces the generic loop
        return official(t, p)

    R = 2000
    fast = stats.paired_permutation_test(y, a, b, metric=name, n_resamples=R, seed=1)
    loop = stats.paired_permutation_test(y, a, b, metric=slow, n_resamples=R, seed=2)
    assert fast.statistic == loop.statistic
    se = np.sqrt(2 * max(fast.p_value, 0.01) * (1 - fast.p_value) / R)
    assert abs(fast.p_value - loop.p_value) <= 4 * se + 1e-3
    fr = stats.range_permutation_test(y, [a, b, c], metric=name, n_resamples=R, seed=1)
    lr = stats.range_permutation_test(y, [a, b, c], metric=slow, n_resamples=R, seed=2)
    assert fr.statistic == lr.statistic and fr.scores == lr.scores
    se = np.sqrt(2 * max(fr.p_value, 0.01) * (1 - fr.p_value) / R)
    assert abs(fr.p_value - lr.p_value) <= 4 * se + 1e-3


# ---- range test and the post-selection pair test (issue 9, point 1) -----------------------------
def _validity() -> ModuleType:
    """benchmarks/stats_validity.py: the simulations, run reduced here."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "stats_validity.py"
    spec = importlib.util.spec_from_file_location("stats_validity", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["stats_validity"] = module
    spec.loader.exec_module(module)
    return module


def test_range_test_by_hand_and_its_arguments() -> None:
    y = ["Yes", "No", "Yes", "No"]
    preds = [["Yes", "No", "Yes", "No"], ["No", "No", "Yes", "No"], ["No", "Yes", "Yes", "No"]]
    r = stats.range_permutation_test(y, preds, metric="accuracy", n_resamples=499)
    assert r.scores == (1.0, 0.75, 0.5) and r.statistic == 0.5 and r.k == 3 and r.n == 4
    assert (r.best, r.worst, r.n_discordant) == (0, 2, 2)
    assert r.test == stats.RANGE_TEST and r.alternative == "greater" and r.n_resamples == 499
    # two discordant rows, 3! arrangements each: P(range >= 0.5) = P(both rows' wrong answers
    # fall on different variants... ) computed by enumeration below
    import itertools

    rows = [np.array([1.0, 0.0, 0.0]), np.array([1.0, 1.0, 0.0])]  # per-variant hits, rows 0 and 1
    hits = 0
    perms = list(itertools.permutations(range(3)))
    for p0, p1 in itertools.product(perms, perms):
        tot = rows[0][list(p0)] + rows[1][list(p1)] + 2  # rows 2 and 3 always right
        hits += (tot.max() - tot.min()) / 4 >= 0.5 - 1e-9
    exact = hits / len(perms) ** 2
    se = np.sqrt(exact * (1 - exact) / 499)
    assert abs(r.p_value - exact) <= 4 * se + 2 / 500
    for alternative in ("less", "two-sided"):
        other = stats.range_permutation_test(y, preds, "accuracy", 499, alternative=alternative)
        assert 0 < other.p_value <= 1 and other.alternative == alternative
    with pytest.raises(ValueError, match="at least 2 variants"):
        stats.range_permutation_test(y, preds[:1])
    with pytest.raises(ValueError, match="alternative"):
        stats.range_permutation_test(y, preds, alternative="bigger")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pair up row by row"):
        stats.range_permutation_test(y, [preds[0], preds[1][:3]])


def test_range_test_names_two_draws_when_all_tie() -> None:
    """Five draws that all score alike: best and worst are still two different draws (a
    table reading 'seed=0 vs seed=0' looked like a bug), and the range is 0 with p = 1."""
    y = ["Yes", "No"] * 10
    same = ["Yes"] * 20  # balanced accuracy 0.5 for every draw
    r = stats.range_permutation_test(y, [same] * 5, "balanced_accuracy", 199)
    assert r.best != r.worst and r.statistic == 0.0 and r.p_value == 1.0
    post = stats.post_selection_pair_test(y, [same] * 5, "balanced_accuracy", 199)
    assert (post.best, post.worst) == (r.best, r.worst)


def test_range_test_with_two_variants_is_the_paired_test() -> None:
    rng = np.random.default_rng(8)
    y, a, b = _exchangeable(rng, 150)
    b = np.where(rng.random(150) < 0.1, y, b)  # B a little better
    pair = stats.paired_permutation_test(y, a, b, n_resamples=20_000, seed=0)
    rng_test = stats.range_permutation_test(y, [a, b], n_resamples=20_000, seed=0)
    assert rng_test.statistic == pytest.approx(abs(pair.statistic))
    assert abs(rng_test.p_value - pair.p_value) < 0.015  # both Monte Carlo, R = 20,000


def test_grouped_and_per_row_paths_draw_the_same_null() -> None:
    v = _validity()
    y, preds = v.exchangeable_variants(np.random.default_rng(3), 300, 5, 0.2)
    yo = np.asarray(y, dtype=object)
    scores = [stats.metric_fn("balanced_accuracy")(y, p) for p in preds]
    dec = stats.checked_decomposition("balanced_accuracy", yo, preds, scores)
    assert dec is not None
    g, d1 = range_test._range_null_decomposed(dec, 4000, np.random.default_rng(0), "grouped")
    h, d2 = range_test._range_null_decomposed(dec, 4000, np.random.default_rng(1), "gather")
    from scipy.stats import ks_2samp

    assert d1 == d2 and ks_2samp(g, h).pvalue > 0.001
    assert abs(g.mean() - h.mean()) < 4 * g.std() / np.sqrt(2000)


def test_range_test_detects_a_real_difference() -> None:
    v = _validity()
    y, preds = v.exchangeable_variants(np.random.default_rng(5), 300, 5, 0.5, effect=0.3)
    r = stats.range_permutation_test(y, preds, n_resamples=999)
    assert r.best == 0 and r.p_value < 0.01


@pytest.mark.slow
@pytest.mark.parametrize("minority", [0.5, 0.2])
def test_range_test_size_is_nominal_and_post_selection_is_not(minority: float) -> None:
    """Size at alpha = 0.05, 5 interchangeable variants, n = 100 (full run: the benchmark).

    500 simulations: the Monte Carlo standard error of a 0.05 rate is 0.0097, so a test of
    true size 0.05 lands in [0.02, 0.08] (+-3 SE) with probability > 0.99.
    """
    v = _validity()
    sims = 500
    assert 3 * np.sqrt(0.05 * 0.95 / sims) <= 0.03
    ranged, post = v.rejection_rates(
        sims,
        7,
        lambda g: v.exchangeable_variants(g, 100, 5, minority),
        n_resamples=199,
        post_selection=minority == 0.5,
    )
    assert 0.02 <= ranged.rate <= 0.08, f"range test size {ranged}"
    if post is not None:  # the paper's test: about 25-30%
        assert post.rate >= 0.15, f"post-selection size {post}"


def test_post_selection_pair_test_is_labelled_and_picks_best_and_worst() -> None:
    y = ["Yes", "No", "Yes", "No", "Yes", "No"]
    preds = [
        ["Yes", "No", "No", "No", "Yes", "Yes"],
        ["Yes", "No", "Yes", "No", "Yes", "No"],
        ["No"] * 6,
    ]
    r = stats.post_selection_pair_test(y, preds, metric="accuracy")
    assert r.test == "post-selection, anti-conservative (as in the paper)"
    assert (r.best, r.worst) == (1, 2) and r.scores == (4 / 6, 1.0, 0.5)
    assert r.statistic == pytest.approx(0.5) and r.exact


# ---- honest intervals (issue 9, point 3) ------------------------------------------------------
def test_stratified_resamples_keep_every_class() -> None:
    strata = np.array([0] * 18 + [1] * 2)  # 90/10 at n = 20: the case that used to lose a class
    sizes = np.bincount(strata)
    counts = stats.resample_counts(strata, sizes, 5000, np.random.default_rng(0))
    assert np.all(counts[:, strata == 1].sum(axis=1) == 2)
    assert np.all(counts[:, strata == 0].sum(axis=1) == 18)


def test_small_class_interval_is_flagged_unreliable() -> None:
    y = ["No"] * 18 + ["Yes"] * 2
    a = ["No"] * 16 + ["Yes"] * 2 + ["Yes", "No"]
    ci = stats.bootstrap_ci(y, a)
    assert ci.unreliable and "smallest class has 2 rows" in ci.note
    assert "stratified by answer class" in ci.method and not ci.degenerate
    assert 0 <= ci.low <= ci.estimate <= ci.high <= 1
    assert ci.estimate == stats.metric_fn("balanced_accuracy")(y, a)
    with pytest.raises(ValueError, match="within classes"):
        stats.bootstrap_ci(y, a, stratify=False)


def test_zero_width_intervals_are_reported_as_degenerate() -> None:
    y = ["Yes", "No"] * 15
    perfect = stats.bootstrap_ci(y, y)
    assert (perfect.low, perfect.high) == (1.0, 1.0) and perfect.degenerate
    assert "not certainty" in perfect.note and not perfect.unreliable
    same = stats.bootstrap_ci(y, ["Yes"] * 30, ["Yes"] * 30)
    assert same.degenerate and same.low == same.high == 0.0


def test_bootstrap_accepts_callables_and_unstratified_metrics() -> None:
    rng = np.random.default_rng(2)
    y, a, b = _exchangeable(rng, 80)

    def accuracy(t: np.ndarray, p: np.ndarray) -> float:
        return float(np.mean(t == p))

    ci = stats.bootstrap_ci(y, a, b, metric=accuracy, n_resamples=400)
    named = stats.bootstrap_ci(y, a, b, metric="accuracy", n_resamples=400)
    assert ci.estimate == pytest.approx(named.estimate)
    assert abs(ci.low - named.low) < 0.05 and abs(ci.high - named.high) < 0.05
    assert "stratified" not in named.method
    mde = normal_approximation_mde(y, a, b, metric=accuracy)
    assert mde == pytest.approx(normal_approximation_mde(y, a, b, metric="accuracy"), rel=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("paired", [False, True])
def test_interval_coverage_at_n_200_with_90_10_classes(paired: bool) -> None:
    """Reduced coverage run (the full one, 1000+ simulations per cell: the benchmark).

    300 simulations: the Monte Carlo SE near 0.94 is 0.014, so asserting >= 0.90 leaves
    2.5 SE below the benchmark's measured 0.94; the 0.93 bar is checked there.
    """
    v = _validity()
    c = v.coverage(200, 300, 11, paired, n_resamples=500)
    assert c.coverage.rate >= 0.90, f"coverage {c.coverage}"
    assert c.unreliable == 0.0 and c.degenerate == 0.0


# ---- across tasks and corrections (issue 9, points 4 and 5) -------------------------------------
def test_across_tasks_reports_degenerate_inputs() -> None:
    a = [0.71, 0.65, 0.80, 0.55, 0.90, 0.62]
    shifted = [x - 0.1 for x in a]  # every difference 0.1 (up to rounding): t used to say 1e-31
    t = stats.across_tasks("t", a, shifted)
    assert t.p_value is None and t.statistic is None and "zero variance" in t.note
    assert t.test == "paired t-test over tasks" and t.mean_difference == pytest.approx(0.1)
    w = stats.across_tasks("wilcoxon", a, shifted)
    p = stats.across_tasks("permutation", a, shifted)
    # for sign-based tests identical differences are the strongest evidence n tasks can give
    assert w.p_value == pytest.approx(2 / 2**6) and p.p_value == pytest.approx(2 / 2**6)
    assert "identical" in w.note and "identical" in p.note
    for test in ("t", "wilcoxon", "permutation"):
        zero = stats.across_tasks(test, a, a)  # type: ignore[arg-type]
        assert zero.p_value is None and "zero" in zero.note
        one = stats.across_tasks(test, [0.8], [0.6])  # type: ignore[arg-type]
        assert one.p_value is None and "fewer than 2 tasks" in one.note
        missing = stats.across_tasks(test, [0.8, None, 0.7], [0.6, 0.5, float("nan")])  # type: ignore[arg-type]
        assert missing.p_value is None and "positions [1, 2]" in missing.note
    with pytest.raises(ValueError, match="t, wilcoxon or permutation"):
        stats.across_tasks("z", a, a)  # type: ignore[arg-type]


def test_permutation_across_tasks_by_hand() -> None:
    a, b = [0.6, 0.5, 0.7], [0.5, 0.3, 0.75]  # differences 0.1, 0.2, -0.05: mean 0.0833
    # with 3 tasks no sign pattern reaches p < 0.05: no p-value at the default alpha
    assert stats.permutation_across_tasks(a, b).p_value is None
    r = stats.permutation_across_tasks(a, b, alpha=0.5)  # smallest p 2/8 < 0.5
    # 8 sign patterns; |sum| >= 0.25: (+,+,-) 0.25 and (-,-,+) -0.25, (+,+,+) 0.35, (-,-,-)
    assert r.p_value == pytest.approx(4 / 8) and r.statistic == pytest.approx(0.25 / 3)
    assert "exact over 8 sign patterns" in r.note
    t = stats.paired_t_across_tasks(a, b)
    from scipy.stats import ttest_rel

    assert t.p_value == pytest.approx(ttest_rel(a, b).pvalue)


@pytest.mark.parametrize("bad", [[1.2, 0.01], [float("nan"), 0.2], [-0.1], [None, 0.3]])
def test_corrections_refuse_invalid_p_values(bad: list[float]) -> None:
    for correction in (stats.holm, stats.benjamini_hochberg):
        with pytest.raises(ValueError, match=r"p-values must be numbers in \[0, 1\]"):
            correction(bad)
    assert stats.holm([]) == [] and stats.benjamini_hochberg([]) == []
    assert stats.holm([0.0, 1.0]) == [0.0, 1.0]
