"""The calibrated comparison's own numbers: the agreement-difference flag respects prompt
clusters, and "grade about N more" aims at the Holm-corrected decision."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from experiments.calibrated import CalibratedComparison, compare, stats
from experiments.calibrated.frames import Arm, ArmFrame


def _frame(variant: str, agree: list[int], hashes: list[str]) -> ArmFrame:
    """Rows all hand-graded 1, the judge agreeing where `agree` says so."""
    n = len(agree)
    judge = np.array([1.0 if x else 0.0 for x in agree])
    return ArmFrame(
        arm=Arm(f"t{variant}", "task", "m", variant),
        criterion="correctness",
        indices=tuple(str(i) for i in range(n)),
        prompt_hashes=tuple(hashes),
        judge=judge,
        hand=np.ones(n),
        judge_raw=tuple(float(x) for x in judge),
    )


def test_agreement_flag_counts_a_prompt_once_not_its_copies() -> None:
    """10 prompts x 10 identical rows: A's judge agrees on prompts 0-7, B's on 5-9. As 100
    independent rows Fisher's test calls it (p ~ 1e-5); as the 10 units they are, it is
    not significant (cluster-robust z on 10 clusters: by hand, p ~ 0.25)."""
    a_units = [1] * 8 + [0] * 2
    b_units = [0] * 5 + [1] * 5
    hashes = [f"p{k}" for k in range(10) for _ in range(10)]
    a = _frame("A", [u for u in a_units for _ in range(10)], hashes)
    b = _frame("B", [u for u in b_units for _ in range(10)], hashes)
    assert stats.fisher_p((80, 20), (50, 50)) < 1e-4
    ids = compare._clusters([a, b])
    differs, note = compare._agreement_gap(a, b, ids)
    assert not differs and note is not None and "80% of A" in note
    # the same agreement on 100 distinct prompts: independent rows, flagged (Fisher)
    distinct = [f"q{k}" for k in range(100)]
    a2, b2 = replace(a, prompt_hashes=tuple(distinct)), replace(b, prompt_hashes=tuple(distinct))
    differs2, note2 = compare._agreement_gap(a2, b2, compare._clusters([a2, b2]))
    assert differs2 and note2 is not None and "Fisher's exact test" in note2


def test_clustered_p_matches_a_hand_computed_two_sample_z() -> None:
    """Singleton clusters, A and B on separate rows: the sandwich variance is the unpooled
    two-sample variance times G/(G-1)."""
    a = np.array([1, 1, 1, 0, np.nan, np.nan, np.nan, np.nan])
    b = np.array([np.nan, np.nan, np.nan, np.nan, 1, 0, 0, 0])
    ids = np.arange(8, dtype=np.intp)
    ma, mb = 0.75, 0.25
    var = (np.sum((a[:4] - ma) ** 2) / 16 + np.sum((b[4:] - mb) ** 2) / 16) * 8 / 7
    from scipy import stats as sps

    expected = 2 * sps.norm.sf(0.5 / np.sqrt(var))
    assert abs(stats.clustered_rate_difference_p(a, b, ids) - expected) < 1e-12


def _est(seed: int, shift: float) -> stats.Estimate:
    rng = np.random.default_rng(seed)
    n = 300
    ya = (rng.random(n) < 0.6 + shift).astype(float)
    yb = (rng.random(n) < 0.6).astype(float)
    fa = np.where(rng.random(n) < 0.8, ya, 1 - ya)
    fb = np.where(rng.random(n) < 0.8, yb, 1 - yb)
    ha, hb = np.full(n, np.nan), np.full(n, np.nan)
    ha[:60], hb[:60] = ya[:60], yb[:60]
    return stats.paired_difference(fa, ha, fb, hb, np.arange(n, dtype=np.intp), 0.95)


def test_grades_to_decide_grows_with_holms_divisor() -> None:
    e = _est(1, 0.08)
    assert e.valid
    one, three = e.grades_to_decide(1), e.grades_to_decide(3)
    assert one is not None and three is not None and three > one >= 0
    # divisor 1 is the uncorrected target: |estimate| as the 95% half-width
    from experiments.analysis.stats import ppi

    assert one == ppi.hand_grades_needed(e.result, target_half_width=abs(e.estimate))


def test_corrected_rows_aim_at_the_holm_decision() -> None:
    """Three comparisons: an undecided row's grades-needed uses its Holm divisor, and the
    decision line says it is after the correction."""
    ests = [_est(s, 0.06) for s in (2, 3, 4)]
    rows = [
        CalibratedComparison(
            task="t",
            model="m",
            criterion="correctness",
            a=f"A{k}",
            b="B",
            level=0.95,
            test="PPI++",
            n_rows=300,
            n_hand_a=60,
            n_hand_b=60,
            n_hand_both=60,
            estimate=e.estimate,
            low=e.low,
            high=e.high,
            p_value=e.p_value,
            p_corrected=None,
            correction=None,
            family_size=None,
            se=e.se,
            lam_a=None,
            lam_b=None,
            effective_n=None,
            valid=True,
            reason=None,
            hand_needed=e.hand_needed,
            hand_estimate=None,
            hand_low=None,
            hand_high=None,
            hand_method=None,
            width_ratio=None,
            judge_estimate=None,
            judge_low=None,
            judge_high=None,
            judge_p=None,
            agreement_differs=False,
            agreement_note=None,
            random_subset=True,
            subset_note=None,
        )
        for k, e in enumerate(ests)
    ]
    out = compare.corrected(rows, ests)
    order = sorted(range(3), key=lambda k: rows[k].p_value or 0.0)
    assert any((r.p_corrected or 0.0) >= 0.05 for r in out)
    for rank, k in enumerate(order):
        r = out[k]
        assert r.p_corrected is not None
        if r.p_corrected >= 0.05:
            assert r.hand_needed == ests[k].grades_to_decide(3 - rank)
            assert "after the Holm correction" in r.decision
