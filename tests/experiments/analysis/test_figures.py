"""The per-task comparison figures draw the intervals the comparison rows carry (issue 18.7).

Built from synthetic rows shaped like `experiments.analysis.compare`'s; the checks read the drawn
artists: each error bar's segment must be exactly the row's [low, high], a row without an
interval must draw none (and say "no interval"), a flagged interval is dashed, the chance line
and every axis label are there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import pytest
from matplotlib.collections import LineCollection
from matplotlib.container import ErrorbarContainer
from matplotlib.text import Text

from experiments.analysis import figures
from experiments.analysis.records import Comparison


def pair_figure(name: str, model: str, outcomes: Any, rows: Any, *chance: Any) -> Any:
    """`figures.pair_figure` of rows given as stored dicts (fields not given are None)."""
    return figures.pair_figure(
        name, model, outcomes, [Comparison.from_dict(r) for r in rows], *chance
    )


def draws_figure(name: str, model: str, outcomes: Any, rows: Any, *chance: Any) -> Any:
    """`figures.draws_figure` of rows given as stored dicts (fields not given are None)."""
    return figures.draws_figure(
        name, model, outcomes, [Comparison.from_dict(r) for r in rows], *chance
    )


@dataclass(frozen=True)
class Outcome:
    task: str
    variant: str
    score: float | None
    metric: str = "balanced_accuracy"


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    yield
    plt.close("all")


def intervals(ax: Any) -> dict[str, tuple[float, float, bool]]:
    """gid of each drawn error bar -> (low, high, dashed)."""
    out = {}
    for c in ax.containers:
        if isinstance(c, ErrorbarContainer):
            (lines,) = c.lines[2]
            assert isinstance(lines, LineCollection)
            ((x0, lo), (x1, hi)), *rest = lines.get_segments()
            assert not rest and x0 == x1
            styles: Any = lines.get_linestyle()  # [(offset, dashes or None)]
            dashed = any(dashes is not None for _, dashes in styles)
            out[str(lines.get_gid())] = (min(lo, hi), max(lo, hi), dashed)
    return out


def texts(fig: Any) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def assert_labelled(fig: Any) -> None:
    for ax in fig.axes:
        assert ax.get_xlabel() == "task"
        assert ax.get_ylabel() and "(95% interval)" in ax.get_ylabel()
        assert ax.get_title()


def chance_levels(ax: Any) -> dict[str, float]:
    out = {}
    for c in ax.collections:
        gid = c.get_gid() or ""
        if gid.startswith("chance:"):
            ((_, y0), (_, y1)), *_ = c.get_segments()
            assert y0 == y1
            out[gid.removeprefix("chance:")] = y0
    return out


def pair_row(task: str, **extra: Any) -> dict[str, Any]:
    return {
        "task": task, "a": "A", "b": "B", "score_a": 0.70, "score_b": 0.64,
        "statistic": 0.06, "p_value": 0.04, "ci_low": 0.01, "ci_high": 0.11, "ci_note": None,
        **extra,
    }  # fmt: skip


ARMS = {"ci_a_low": 0.61, "ci_a_high": 0.78, "ci_b_low": 0.55, "ci_b_high": 0.73}


def test_pair_figure_draws_each_arms_interval_and_the_tested_difference() -> None:
    outcomes = [Outcome("t1", "A", 0.70), Outcome("t1", "B", 0.64)]
    fig = pair_figure("s", "m", outcomes, [pair_row("t1", **ARMS)], {"t1": 0.5})
    bars, diff = fig.axes[:2]
    drawn = intervals(bars)
    assert drawn["interval:t1:A"] == pytest.approx((0.61, 0.78, False))
    assert drawn["interval:t1:B"] == pytest.approx((0.55, 0.73, False))
    assert set(drawn) == {"interval:t1:A", "interval:t1:B"}
    assert intervals(diff) == {"difference:t1:A:B": pytest.approx((0.01, 0.11, False))}
    assert any("+0.06 [+0.01, +0.11]" in t and "p=0.040" in t for t in texts(fig))
    assert chance_levels(bars) == {"t1": 0.5}
    assert_labelled(fig)
    assert "balanced accuracy" in bars.get_ylabel()
    assert "no interval" not in texts(fig)


def test_an_interval_that_misses_the_estimate_is_still_drawn_as_given() -> None:
    """Intervals that need not hold the point (e.g. Bayesian) are drawn exactly, not clipped."""
    outcomes = [Outcome("t1", "A", 0.98), Outcome("t1", "B", 0.64)]
    row = pair_row("t1", **{**ARMS, "ci_a_low": 0.80, "ci_a_high": 0.95})
    drawn = intervals(pair_figure("s", "m", outcomes, [row]).axes[0])
    assert drawn["interval:t1:A"] == pytest.approx((0.80, 0.95, False))


def test_old_rows_without_intervals_draw_none_and_say_so() -> None:
    outcomes = [Outcome("t1", "A", 0.70), Outcome("t1", "B", 0.64)]
    row = pair_row("t1", ci_low=None, ci_high=None)  # no ci_a_*/ci_b_* keys at all
    fig = pair_figure("s", "m", outcomes, [row], {"t1": 0.5})
    bars, diff = fig.axes[:2]
    assert intervals(bars) == {} and intervals(diff) == {}
    assert [t.get_text() for t in bars.texts].count("no interval") == 2
    assert any("(no interval)" in t.get_text() for t in diff.texts)
    assert chance_levels(bars) == {"t1": 0.5}
    assert_labelled(fig)


def test_half_given_or_non_finite_intervals_are_not_drawn() -> None:
    outcomes = [Outcome("t1", "A", 0.70), Outcome("t1", "B", 0.64)]
    row = pair_row("t1", ci_a_low=0.6, ci_a_high=None, ci_b_low=float("nan"), ci_b_high=0.7,
                   ci_low=0.2, ci_high=0.1)  # fmt: skip
    fig = pair_figure("s", "m", outcomes, [row])
    assert intervals(fig.axes[0]) == {} and intervals(fig.axes[1]) == {}


def test_flagged_intervals_are_dashed_and_the_legend_says_so() -> None:
    outcomes = [Outcome("t1", "A", 0.70), Outcome("t1", "B", 0.64)]
    row = pair_row("t1", **ARMS, ci_note="coverage 0.88 in the table", ci_a_note=None,
                   ci_b_note="coverage 0.87")  # fmt: skip
    fig = pair_figure("s", "m", outcomes, [row])
    bars, diff = fig.axes[:2]
    drawn = intervals(bars)
    assert drawn["interval:t1:A"][2] is False and drawn["interval:t1:B"][2] is True
    assert intervals(diff)["difference:t1:A:B"][2] is True
    hatched = [p for p in bars.patches if p.get_hatch()]
    assert [p.get_height() for p in hatched] == pytest.approx([0.64])
    legend = [t.get_text() for t in bars.get_legend().get_texts()]
    assert any("flagged" in t for t in legend) and any("95% interval" in t for t in legend)
    swatches = [h for h in bars.get_legend().legend_handles if h.get_label() in ("A", "B")]
    assert len(swatches) == 2 and not any(h.get_hatch() for h in swatches)


def test_the_difference_panel_names_the_interval_method() -> None:
    outcomes = [Outcome("t1", "A", 0.70), Outcome("t1", "B", 0.64)]
    row = pair_row("t1", ci_method="cluster bootstrap, BC percentile")
    assert (
        "cluster bootstrap, BC percentile"
        in pair_figure("s", "m", outcomes, [row]).axes[1].get_title()
    )


def test_an_arm_is_flagged_by_its_own_note_not_by_the_differences() -> None:
    """Every pair row carries each arm's note (`compare.pair`): the difference's note (e.g.
    the interval and the test disagree) says nothing of an arm's own interval."""
    outcomes = [Outcome("t1", "A", 0.70), Outcome("t1", "B", 0.64)]
    row = pair_row("t1", **ARMS, ci_a_note="unreliable (smallest class < 10 rows)",
                   ci_note="the 95% interval excludes 0 but the test does not reject")  # fmt: skip
    drawn = intervals(pair_figure("s", "m", outcomes, [row]).axes[0])
    assert drawn["interval:t1:A"][2] and not drawn["interval:t1:B"][2]


def test_unflagged_figures_have_no_flag_in_the_legend() -> None:
    outcomes = [Outcome("t1", "A", 0.70), Outcome("t1", "B", 0.64)]
    fig = pair_figure("s", "m", outcomes, [pair_row("t1", **ARMS)])
    assert not any("flagged" in t.get_text() for t in fig.axes[0].get_legend().get_texts())


def test_incomplete_trials_are_marked_not_drawn_as_zero() -> None:
    outcomes = [
        Outcome("t1", "A", 0.70), Outcome("t1", "B", 0.64),
        Outcome("t2", "A", 0.80), Outcome("t2", "B", None),
    ]  # fmt: skip
    untested = {"task": "t2", "a": "A", "b": "B", "score_a": 0.80, "score_b": None,
                "statistic": None, "p_value": None, "ci_low": None, "ci_high": None,
                "ci_note": None}  # fmt: skip
    fig = pair_figure("s", "m", outcomes, [pair_row("t1", **ARMS), untested], {"t2": 0.25})
    bars, diff = fig.axes[:2]
    assert set(intervals(bars)) == {"interval:t1:A", "interval:t1:B"}
    assert set(intervals(diff)) == {"difference:t1:A:B"}
    assert "n/a" in [t.get_text() for t in bars.texts]
    assert "incomplete" in [t.get_text() for t in bars.texts]
    assert "incomplete" in [t.get_text() for t in diff.texts]
    assert len(bars.patches) == 3  # the missing score has no bar at all
    assert chance_levels(bars) == {"t2": 0.25}


def test_all_pairs_each_difference_gets_its_own_interval_and_legend_entry() -> None:
    outcomes = [Outcome("t1", v, s) for v, s in (("A", 0.7), ("B", 0.6), ("C", 0.5))]
    rows = [
        pair_row("t1", a="A", b="B", ci_low=0.02, ci_high=0.18, ci_a_low=0.6, ci_a_high=0.8,
                 ci_b_low=0.5, ci_b_high=0.7),
        pair_row("t1", a="A", b="C", ci_low=0.1, ci_high=0.3),
        pair_row("t1", a="B", b="C", ci_low=-0.05, ci_high=0.25, ci_b_low=0.41, ci_b_high=0.6),
    ]  # fmt: skip
    bars, diff = pair_figure("s", "m", outcomes, rows).axes[:2]
    assert intervals(bars) == {
        "interval:t1:A": pytest.approx((0.6, 0.8, False)),
        "interval:t1:B": pytest.approx((0.5, 0.7, False)),  # the first row naming B
        "interval:t1:C": pytest.approx((0.41, 0.6, False)),
    }
    assert intervals(diff) == {
        "difference:t1:A:B": pytest.approx((0.02, 0.18, False)),
        "difference:t1:A:C": pytest.approx((0.1, 0.3, False)),
        "difference:t1:B:C": pytest.approx((-0.05, 0.25, False)),
    }
    assert [t.get_text() for t in diff.get_legend().get_texts()] == ["A − B", "A − C", "B − C"]


def draws_row(task: str, scores: dict[str, float], **extra: Any) -> dict[str, Any]:
    best = max(scores, key=scores.__getitem__)
    worst = min(scores, key=scores.__getitem__)
    return {
        "task": task, "a": best, "b": worst, "score_a": scores[best], "score_b": scores[worst],
        "statistic": scores[best] - scores[worst], "p_value": 0.03, "ci_low": None,
        "ci_high": None, "ci_note": "no interval: best and worst are chosen after seeing the scores",
        **extra,
    }  # fmt: skip


SCORES = {"seed=0": 0.60, "seed=1": 0.72, "seed=2": 0.55}


def test_draws_figure_draws_every_draws_interval() -> None:
    outcomes = [Outcome("t1", v, s) for v, s in SCORES.items()]
    cis = {"seed=0": [0.52, 0.68], "seed=1": [0.64, 0.79], "seed=2": [0.46, 0.63]}
    row = draws_row("t1", SCORES, draw_ci=cis, draw_ci_note={"seed=2": "coverage 0.9"})
    fig = draws_figure("s", "m", outcomes, [row], {"t1": 0.5})
    top, diff = fig.axes[:2]
    drawn = intervals(top)
    assert drawn == {
        f"interval:t1:{v}": pytest.approx((lo, hi, v == "seed=2")) for v, (lo, hi) in cis.items()
    }
    assert intervals(diff) == {}  # best - worst: chosen after the fact, no interval
    assert any("+0.17 (no interval)" in t and "p=0.030" in t for t in texts(fig))
    assert chance_levels(top) == {"t1": 0.5}
    assert_labelled(fig)
    legend = [t.get_text() for t in top.get_legend().get_texts()]
    assert {"draw", "best", "worst", "95% interval", "chance (1/K)"} <= set(legend)
    assert any("flagged" in t for t in legend)


def test_draws_without_intervals_draw_none() -> None:
    outcomes = [Outcome("t1", v, s) for v, s in SCORES.items()]
    fig = draws_figure("s", "m", outcomes, [draws_row("t1", SCORES)], {"t1": 0.5})
    top = fig.axes[0]
    assert intervals(top) == {}
    assert [t.get_text() for t in top.texts].count("no interval") == 3
    assert chance_levels(top) == {"t1": 0.5}
    assert_labelled(fig)


def test_a_difference_interval_given_for_best_vs_worst_is_drawn() -> None:
    outcomes = [Outcome("t1", v, s) for v, s in SCORES.items()]
    row = draws_row("t1", SCORES, ci_low=0.05, ci_high=0.3, ci_note=None)
    fig = draws_figure("s", "m", outcomes, [row])
    assert intervals(fig.axes[1]) == {
        "difference:t1:seed=1:seed=2": pytest.approx((0.05, 0.3, False))
    }


def test_untested_draws_are_marked_incomplete() -> None:
    outcomes = [Outcome("t1", "seed=0", 0.6), Outcome("t1", "seed=1", None)]
    row = {"task": "t1", "a": "best", "b": "worst", "score_a": None, "score_b": None,
           "statistic": None, "p_value": None, "ci_low": None, "ci_high": None, "ci_note": None}  # fmt: skip
    fig = draws_figure("s", "m", outcomes, [row])
    assert "incomplete" in [t.get_text() for t in fig.axes[0].texts]
    assert "n/a" in [t.get_text() for t in fig.axes[0].texts]
    assert intervals(fig.axes[0]) == {}
    assert_labelled(fig)


def test_empty_sweep_still_gives_labelled_figures() -> None:
    assert_labelled(pair_figure("s", "m", [], []))
    assert_labelled(draws_figure("s", "m", [], []))


def test_names_with_dollar_signs_are_drawn_as_written() -> None:
    """A model or variant named with two '$' (`openai/$\\foo$`, `$x_1$`) was read as TeX by
    matplotlib: the figure failed to save ('Unknown symbol') after every trial had run, or
    showed another name (x with a subscript 1). Names are drawn as they are written."""
    import io

    names = {"A": "$\\foo$", "B": "$x_1$"}
    outcomes = [Outcome("t1", names["A"], 0.70), Outcome("t1", names["B"], 0.64)]
    row = pair_row("t1", a=names["A"], b=names["B"], **ARMS)
    fig = pair_figure("s$", "openai/$\\bar$", outcomes, [row], {"t1": 0.5})
    fig.savefig(io.BytesIO(), format="png")  # raised ValueError: Unknown symbol
    drawn = [t for t in fig.findobj(Text) if t.get_text()]
    assert any("openai/$\\bar$" in t.get_text() for t in drawn)  # the title
    assert any(t.get_text() == "$x_1$" for t in drawn)  # the legend
    assert not [t.get_text() for t in drawn if t.get_parse_math() and "$" in t.get_text()]
