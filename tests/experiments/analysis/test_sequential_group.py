"""The group-sequential design and clustered sequences (issue 29): boundaries against published
values, exact size with repeated texts, rare classes and near-ceiling accuracy, equivalence,
and the order that keeps a cluster's rows together."""

from __future__ import annotations

import math

import numpy as np
import pytest

from experiments.analysis.sequential import (
    Elimination,
    EliminationCore,
    PairedSequence,
    Planned,
    normal_boundaries,
    planned_looks,
    row_order,
    simulate_paired,
)
from experiments.analysis.sequential.betting import block_ends, unit_ends
from promptlib.errors import WorkbenchError

ALPHA = 0.05


@pytest.mark.parametrize(
    ("fractions", "published"),
    [
        # gsDesign sfLDOF / ldbounds iuse=1, one-sided alpha 0.025, equally spaced looks
        ((1 / 3, 2 / 3, 1.0), (3.7103, 2.5114, 1.9930)),
        ((0.25, 0.5, 0.75, 1.0), (4.3326, 2.9631, 2.3590, 2.0141)),
        ((0.2, 0.4, 0.6, 0.8, 1.0), (4.8769, 3.3569, 2.6803, 2.2898, 2.0310)),
    ],
)
def test_boundaries_match_published_lan_demets_obrien_fleming(
    fractions: tuple[float, ...], published: tuple[float, ...]
) -> None:
    one_sided = normal_boundaries(fractions, 0.025, sides=1, family="obf")
    assert np.allclose(one_sided, published, atol=2e-4)
    # two-sided at 0.05 spends 0.025 per side: the same boundaries to within the tiny
    # chance of crossing the other side first
    assert np.allclose(
        normal_boundaries(fractions, 0.05, sides=2, family="obf"), published, atol=2e-3
    )


def _clustered(rng: np.random.Generator, n_texts: int, shares: list[float]) -> tuple:
    """Texts repeated 1-3 times (as LegalBench's), answers by text, in the clustered order."""
    sizes = rng.integers(1, 4, n_texts)
    labels = rng.choice(len(shares), n_texts, p=shares)
    cid = np.repeat(np.arange(n_texts), sizes)
    answers = [f"c{labels[c]}" for c in cid]
    order = row_order(answers, 0, [str(i) for i in range(len(cid))], cid.tolist())
    return [answers[i] for i in order], cid[order]


def _null_hits(
    rng: np.random.Generator, cid: np.ndarray, sims: int, low: float, high: float
) -> tuple[np.ndarray, np.ndarray]:
    """Two exchangeable arms that answer every copy of a text alike (identical prompts)."""
    n_cl = int(cid.max()) + 1
    p = rng.uniform(low, high, (sims, n_cl))
    a = rng.random((sims, n_cl)) < p
    b = rng.random((sims, n_cl)) < p
    return a[:, cid], b[:, cid]


CELLS = [
    # (texts, class shares, difficulty range): balanced, rare class, near ceiling
    (150, [0.5, 0.5], 0.5, 0.95),
    (150, [0.9, 0.1], 0.5, 0.95),
    (120, [0.6, 0.2, 0.1, 0.06, 0.04], 0.6, 0.95),
    (150, [0.5, 0.5], 0.93, 1.0),
]


def _rejections(
    answers: list[str], a: np.ndarray, b: np.ndarray, chunks: int, **kw: object
) -> float:
    """The share deciding A or B, the null paths drawn anew for each chunk of simulations:
    the group test is exact over the data and the paths together; one fixed set of paths
    reused by every simulation would measure the size given those paths only."""
    out = []
    for c, (aa, bb) in enumerate(zip(np.array_split(a, chunks), np.array_split(b, chunks),
                                     strict=True)):  # fmt: skip
        res = simulate_paired("balanced_accuracy", answers, aa, bb, seed=100 + c, **kw)  # type: ignore[arg-type]
        out.append(np.isin(res.decision, ("A", "B")))
    return float(np.concatenate(out).mean())


@pytest.mark.slow
@pytest.mark.parametrize("method", ["group", "anytime"])
@pytest.mark.parametrize("cell", CELLS, ids=["50/50", "90/10", "5 classes", "ceiling"])
def test_size_with_repeated_texts_is_at_most_alpha(method: str, cell: tuple) -> None:
    n_texts, shares, low, high = cell
    rng = np.random.default_rng(29)
    answers, cid = _clustered(rng, n_texts, shares)
    sims = 400
    a, b = _null_hits(rng, cid, sims, low, high)
    rate = _rejections(answers, a, b, 8, batch=10, alpha=ALPHA, clusters=cid.tolist(),
                       method=method, n_paths=1000)  # fmt: skip
    assert rate <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / sims), rate


@pytest.mark.slow
def test_rows_as_units_would_reject_too_often_where_clusters_hold() -> None:
    """The failure the clusters guard against, seen by the same simulation: every text
    repeated three times, the group test over rows rejects a true null far above alpha."""
    rng = np.random.default_rng(7)
    n_texts = 200
    cid = np.repeat(np.arange(n_texts), 3)
    labels = rng.choice(2, n_texts)
    raw = [f"c{labels[c]}" for c in cid]
    order = row_order(raw, 0, [str(i) for i in range(len(cid))], cid.tolist())
    answers, cid = [raw[i] for i in order], cid[order]
    sims = 400
    a, b = _null_hits(rng, cid, sims, 0.5, 0.95)
    se = math.sqrt(ALPHA * (1 - ALPHA) / sims)
    rates = {
        name: _rejections(
            answers, a, b, 8, batch=30, clusters=clusters, method="group", n_paths=1000
        )
        for name, clusters in (("clusters", cid.tolist()), ("rows", None))
    }
    assert rates["clusters"] <= ALPHA + 2 * se
    assert rates["rows"] > ALPHA + 4 * se, rates


@pytest.mark.slow
def test_best_of_k_group_design_size_with_clusters() -> None:
    rng = np.random.default_rng(11)
    answers, cid = _clustered(rng, 120, [0.7, 0.3])
    sims, k = 300, 4
    n_cl = int(cid.max()) + 1
    p = rng.uniform(0.5, 0.95, (sims, 1, n_cl))
    hits = (rng.random((sims, k, n_cl)) < p)[:, :, cid]
    plan = Planned(planned_looks(20, len(answers)), n_paths=400, seed=3)
    core = EliminationCore(
        "balanced_accuracy", answers, k, ALPHA, sims, clusters=cid.tolist(), plan=plan
    )
    for start in range(0, len(answers), 20):
        if not core.live.any():
            break
        core.update(hits[:, :, start : start + 20])
    best, worst = core.best_vs_worst()
    rate = float(core.beats(best, worst).mean())
    assert rate <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / sims), rate


@pytest.mark.slow
def test_equivalence_stops_under_the_null_and_rarely_at_the_margin() -> None:
    """Two one-sided tests at the looks: with delta well above the noise most null runs end
    'equivalent'; with the true difference at delta, at most alpha (+ 2 s.e.) do."""
    rng = np.random.default_rng(3)
    n, sims, delta = 600, 400, 0.12
    answers = [("Yes", "No")[i % 2] for i in range(n)]
    p = rng.uniform(0.5, 0.95, (sims, n))
    a0, b0 = rng.random((sims, n)) < p, rng.random((sims, n)) < p
    null = simulate_paired(
        "accuracy", answers, a0, b0, batch=20, delta=delta, method="group", n_paths=500
    )
    assert float((null.decision == "equivalent").mean()) > 0.5
    a1 = rng.random((sims, n)) < p
    b1 = rng.random((sims, n)) < np.clip(p - delta, 0, 1)
    edge = simulate_paired(
        "accuracy", answers, a1, b1, batch=20, delta=delta, method="group", n_paths=500
    )
    rate = float((edge.decision == "equivalent").mean())
    assert rate <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / sims), rate


@pytest.mark.slow
def test_one_sequence_decides_as_the_vectorised_ones() -> None:
    """`PairedSequence` with a plan and `simulate_paired(method="group")` run the same test."""
    rng = np.random.default_rng(5)
    answers, cid = _clustered(rng, 80, [0.6, 0.4])
    n = len(answers)
    a = rng.random((6, n)) < 0.8
    b = rng.random((6, n)) < 0.55
    out = simulate_paired(
        "balanced_accuracy", answers, a, b, batch=10, clusters=cid.tolist(), method="group",
        n_paths=300, seed=4,
    )  # fmt: skip
    for s in range(6):
        plan = Planned(planned_looks(10, n), n_paths=300, seed=4)
        seq = PairedSequence("balanced_accuracy", answers, clusters=cid.tolist(), plan=plan)
        for lo in range(0, n, 10):
            look = seq.update(list(a[s, lo : lo + 10]), list(b[s, lo : lo + 10]))
            if look.decision != "continue":
                break
        assert look.decision == out.decision[s]
        assert look.n_rows == out.rows[s]
        assert look.estimate == pytest.approx(out.estimate[s])


def test_blocks_and_units_never_split_a_cluster() -> None:
    cid = [0, 0, 1, 2, 2, 2, 3]
    ends = unit_ends(cid, len(cid))
    assert ends.tolist() == [False, True, True, False, False, True, True]
    cls = np.array([0, 0, 1, 0, 1, 1, 0])
    blocks = block_ends(cls, 2, ends)
    assert not blocks[[0, 3, 4]].any()  # never inside a cluster
    with pytest.raises(WorkbenchError, match="not together"):
        unit_ends([0, 1, 0], 3)


def test_clustered_order_keeps_texts_together_whatever_the_input_order() -> None:
    rng = np.random.default_rng(2)
    n = 90
    cid = rng.integers(0, 40, n)
    answers = [("Yes", "No")[int(c) % 2] for c in cid]
    keys = [f"r{i:03d}" for i in range(n)]
    order = row_order(answers, 1, keys, cid.tolist())
    assert sorted(order) == list(range(n))
    runs = [int(cid[i]) for i in order]
    seen = [c for j, c in enumerate(runs) if j == 0 or runs[j - 1] != c]
    assert len(seen) == len(set(runs))  # each cluster is one run
    perm = rng.permutation(n)
    again = row_order([answers[i] for i in perm], 1, [keys[i] for i in perm],
                      [int(cid[i]) for i in perm])  # fmt: skip
    assert [keys[perm[i]] for i in again] == [keys[i] for i in order]


def test_a_plan_is_checked() -> None:
    with pytest.raises(WorkbenchError, match="planned looks"):
        PairedSequence("accuracy", ["Yes", "No"], plan=Planned((5,)))
    assert planned_looks(10, 35) == (10, 20, 30, 35)
    with pytest.raises(WorkbenchError, match="best-of-k"):
        Elimination("accuracy", ["Yes", "No"], ["a"], plan=Planned((2,)))
