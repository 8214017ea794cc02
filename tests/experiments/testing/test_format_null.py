"""A reduced check of the range test and the per-variant scores over drawn formats and
verbalizers, through the whole sweep path (the full grid: benchmarks/format_null.py).

With 60 simulations the Monte Carlo s.e. of a 5% rejection rate is 2.8 points, so the size
band is alpha + 3 s.e.; a variant's mean score must match its set accuracy within 4 s.e.
Failures injected on rows are failure states (never a score); shuffling the task file's rows
or the spec's variants changes no score and no p-value.
"""

from __future__ import annotations

import csv
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from experiments.analysis import stats
from experiments.testing.validation import (
    InjectedFailure,
    VariantLM,
    VariantSetup,
    run_variants,
    simulate_variants,
    variant_setup,
)
from experiments.trials.record import NOT_SHOWN
from promptlib import Catalog, LocalSource
from promptlib.verbalizers import SCHEMES

pytestmark = [pytest.mark.data, pytest.mark.slow]

VERBALIZERS = "[official, true_false, letters]"
FORMATS = "{draw: 4, seed: 0, with: [base]}"


@pytest.mark.parametrize(
    ("task", "n", "axis", "levels", "p"),
    [
        ("overruling", 100, "verbalizer", VERBALIZERS, 0.7),
        ("diversity_1", 60, "format", FORMATS, 0.95),  # imbalanced (76/24), near ceiling
    ],
)
def test_no_effect_rejects_at_most_alpha_and_scores_match_the_set_accuracy(
    catalog: Catalog, tmp_path: Path, task: str, n: int, axis: str, levels: str, p: float
) -> None:
    setup = variant_setup(catalog, task=task, n_rows=n, axis=axis, levels=levels, workdir=tmp_path)
    r = simulate_variants(catalog, setup, n_sims=60, p=p, invalid_rate=0.3, seed=21)
    assert r.rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 60), r
    for variant, (bias, se) in r.score_errors().items():
        assert abs(bias) <= 4 * se + 1e-9, (variant, bias, se)
    assert r.rows_used == (n,)  # the comparison says it used every row
    assert 0.0 < r.invalid_rate < 0.3 * (1 - p) + 0.05, r  # invalid replies were sent, and counted


def test_one_better_variant_is_detected_and_scored_at_its_accuracy(
    catalog: Catalog, tmp_path: Path
) -> None:
    setup = variant_setup(
        catalog, task="overruling", n_rows=100, axis="verbalizer", levels=VERBALIZERS,
        workdir=tmp_path,
    )  # fmt: skip
    r = simulate_variants(catalog, setup, n_sims=30, p=0.65, effect=0.25, invalid_rate=0.3)
    assert r.rate >= 0.7, r  # a 0.25 gap on 100 rows is found most of the time
    first = setup.variants[0]
    bias, se = r.score_errors()[first]
    assert r.p_correct[first] == pytest.approx(0.9) and abs(bias) <= 4 * se + 1e-9, r


@pytest.mark.parametrize("task", ["overruling", "diversity_1"])
def test_right_in_the_shown_words_is_one_and_invalid_replies_never_count(
    catalog: Catalog, tmp_path: Path, task: str
) -> None:
    levels = "[official, " + ", ".join(SCHEMES) + "]"
    setup = variant_setup(catalog, task=task, n_rows=60, axis="verbalizer", levels=levels,
                          workdir=tmp_path)  # fmt: skip
    right, _ = run_variants(
        setup, catalog, VariantLM(setup.prompts, dict.fromkeys(setup.variants, 1.0), 1)
    )
    assert {o.variant: o.score for o in right} == dict.fromkeys(setup.variants, 1.0)
    # every reply invalid: under a verbalizer it is the right answer in the official words
    lm = VariantLM(setup.prompts, dict.fromkeys(setup.variants, 0.0), 2, invalid_rate=1.0)
    wrong, row = run_variants(setup, catalog, lm)
    for o in wrong:
        assert o.score == 0.0 and all(r.parsed is None and r.correct is False for r in o.rows)
        if o.variant in ("verbalizer=letters", "verbalizer=numbers", "verbalizer=true_false"):
            assert all(
                r.scored == NOT_SHOWN and (r.generation or "").strip() == r.answer for r in o.rows
            )
    assert row.p_value == 1.0 and row.statistic == 0.0


def _setup(
    catalog: Catalog, tmp_path: Path, levels: str = VERBALIZERS, n: int = 40
) -> VariantSetup:
    return variant_setup(catalog, task="overruling", n_rows=n, axis="verbalizer", levels=levels,
                         workdir=tmp_path)  # fmt: skip


def test_failed_rows_are_failure_states_and_the_comparison_tests_nothing(
    catalog: Catalog, tmp_path: Path
) -> None:
    setup = _setup(catalog, tmp_path)
    victim = setup.variants[1]
    rows = [r["index"] for r in setup.resolved[1].rows[:3]]
    p = dict.fromkeys(setup.variants, 1.0)
    lm = VariantLM(setup.prompts, p, 3, faults={(victim, i): "error" for i in rows})
    records, row = run_variants(setup, catalog, lm)
    hit = next(o for o in records if o.variant == victim)
    assert not hit.complete and hit.score is None
    failed = [r for r in hit.rows if r.error is not None]
    assert [r.index for r in failed] == rows and all(r.correct is None for r in failed)
    assert all(o.complete and o.score == 1.0 for o in records if o.variant != victim)
    assert row.p_value is None and row.n is None and row.score_a is None
    assert row.status == f"{victim} incomplete (3 of 40 rows failed)", row.status


@pytest.mark.parametrize(
    ("fault", "error"), [("raise", InjectedFailure), ("kill", KeyboardInterrupt)]
)
def test_a_model_that_raises_or_is_killed_mid_trial_gives_no_result(
    catalog: Catalog, tmp_path: Path, fault: str, error: type[BaseException]
) -> None:
    setup = _setup(catalog, tmp_path)
    row_index = setup.resolved[2].rows[20]["index"]
    lm = VariantLM(setup.prompts, dict.fromkeys(setup.variants, 1.0), 4,
                   faults={(setup.variants[2], row_index): fault})  # type: ignore[dict-item]  # fmt: skip
    with pytest.raises(error):
        run_variants(setup, catalog, lm)
    assert lm.calls == 2 * 40 + 21  # stopped at the row: nothing after it was answered


def _task_copy(lb_dir: Path, task: str, n: int, dest: Path, shuffle: int | None) -> Path:
    """A LegalBench folder holding `task` with its first `n` test rows, shuffled or not."""
    shutil.copytree(lb_dir / "tasks" / task, dest / "tasks" / task)
    path = dest / "tasks" / task / "test.tsv"
    with path.open(encoding="utf-8-sig", newline="") as f:
        head, *body = list(csv.reader(f, delimiter="\t", quotechar='"', strict=True))[: n + 1]
    if shuffle is not None:
        random.Random(shuffle).shuffle(body)
    with path.open("w", encoding="utf-8", newline="") as f:
        out = csv.writer(f, delimiter="\t", quotechar='"', lineterminator="\n")
        out.writerows([head, *body])
    return dest


def test_row_order_and_variant_order_change_no_score_and_no_p_value(
    lb_dir: Path, tmp_path: Path
) -> None:
    levels = "[official, true_false, letters, numbers]"
    cases = [(None, levels), (7, levels), (None, "[numbers, letters, true_false, official]")]
    seen = []
    for i, (shuffle, lv) in enumerate(cases):
        catalog = Catalog(
            LocalSource(_task_copy(lb_dir, "overruling", 60, tmp_path / str(i), shuffle))
        )
        setup = _setup(catalog, tmp_path, lv, n=1000)  # every row of the copy
        lm = VariantLM(setup.prompts, dict.fromkeys(setup.variants, 0.7), 5, invalid_rate=0.3)
        records, row = run_variants(setup, catalog, lm)
        seen.append((
            {o.variant: o.score for o in records},
            {o.variant: o.rows[0].index for o in records},
            (row.a, row.b, row.p_value, row.p_post_selection, row.n),
        ))  # fmt: skip
    assert seen[1][1] != seen[0][1]  # the rows really came in another order
    assert seen[0][0] == seen[1][0] == seen[2][0]
    assert seen[0][2] == seen[1][2] == seen[2][2]
    assert seen[0][2][4] == 60


def test_the_range_tests_p_value_does_not_depend_on_the_variants_order() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 80)
    preds = [np.where(rng.random(80) < 0.7, y, 1 - y) for _ in range(4)]
    first = stats.range_permutation_test(y, preds, "balanced_accuracy", 999, seed=3)
    for order in ([3, 2, 1, 0], [1, 3, 0, 2]):
        other = stats.range_permutation_test(y, [preds[j] for j in order], "balanced_accuracy",
                                             999, seed=3)  # fmt: skip
        assert other.p_value == first.p_value and other.statistic == first.statistic
        assert other.scores == tuple(first.scores[j] for j in order)
        assert order[other.best] == first.best and order[other.worst] == first.worst
