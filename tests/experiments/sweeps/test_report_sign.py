"""One sign everywhere (issue 31): a sweep's comparisons table, its figures and its pooled
effects all state A − B with the same A and B.

The report: two models, two tasks, the variants listed reference first (so not in name order)
and the declared pair [reference, description]; on hearsay reference is better (A − B > 0),
on abercrombie description (A − B < 0). The figures are drawn by the sweep's own report path
and read back from their matplotlib artists. Before the fix the forest plot said
"description − reference" and drew every task at minus the table's difference.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import matplotlib.pyplot as plt
import pytest
from matplotlib.container import ErrorbarContainer

from experiments.analysis.records import Comparison
from experiments.analysis.sensitivity import format_sensitivity
from experiments.metrics import balanced_accuracy
from experiments.output import comparison_table
from experiments.sweeps.report import _figures, _sensitivity, compare
from experiments.sweeps.spec import NamedVariant, SweepSpec
from experiments.trials.record import TrialRecord, parse_axes
from promptlib.variants import PromptVariant

REF, DESC = "instruction=reference", "instruction=description"
N = 40
# rows each variant gets right: reference the first k, description the last k
CORRECT = {
    ("gemma", "hearsay"): {REF: 30, DESC: 24},
    ("gemma", "abercrombie"): {REF: 22, DESC: 31},
    ("llama", "hearsay"): {REF: 33, DESC: 25},
    ("llama", "abercrombie"): {REF: 20, DESC: 26},
}


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    yield
    plt.close("all")


def _record(model: str, task: str, variant: str) -> TrialRecord:
    k = CORRECT[(model, task)][variant]
    hits = [i < k for i in range(N)] if variant == REF else [i >= N - k for i in range(N)]
    answers = ["Yes" if i % 2 == 0 else "No" for i in range(N)]
    gens = [a if h else ("No" if a == "Yes" else "Yes") for a, h in zip(answers, hits, strict=True)]
    return TrialRecord.of(
        task=task, model=model, variant=variant, metric="balanced_accuracy", complete=True,
        indices=[str(i) for i in range(N)], answers=answers, generations=gens, correct=hits,
        score=balanced_accuracy(gens, answers), axes=parse_axes(variant),
    )  # fmt: skip


def _spec() -> SweepSpec:
    return SweepSpec(
        path="ablations/sign.yaml", name="sign", description="", tasks=("hearsay", "abercrombie"),
        requires=(), models=("gemma", "llama"), split="test", limit=None, sample_seed=0,
        variants=(NamedVariant(REF, PromptVariant()), NamedVariant(DESC, PromptVariant())),
        comparisons=((REF, DESC),), n_resamples=200, correction="holm", scoring=None,
        across_tasks="t",
    )  # fmt: skip


@pytest.fixture(scope="module")
def report() -> tuple[SweepSpec, list[TrialRecord], list[Comparison], dict[str, Any]]:
    spec = _spec()
    records = [_record(m, t, v) for (m, t) in CORRECT for v in (REF, DESC)]  # plan order
    table, _ = compare(spec, records, catalog=None)  # type: ignore[arg-type]
    sens, _ = _sensitivity(spec, records, catalog=None)  # type: ignore[arg-type]
    return spec, records, table, sens


def _row(table: list[Comparison], model: str, task: str) -> Comparison:
    (row,) = [r for r in table if (r.model, r.task) == (model, task)]
    return row


def test_the_table_has_a_positive_and_a_negative_difference(report: Any) -> None:
    _, _, table, _ = report
    for model in ("gemma", "llama"):
        assert _row(table, model, "hearsay").statistic > 0.05
        assert _row(table, model, "abercrombie").statistic < -0.05
    for r in table:
        assert (r.a, r.b) == (REF, DESC)
        assert r.statistic == pytest.approx(r.score_a - r.score_b, abs=1e-12)
    assert "A − B" in comparison_table([r.to_dict() for r in table]).splitlines()[0]


def _forest_points(ax: Any) -> dict[tuple[str, str], tuple[float, float, float, str]]:
    """(model, task) -> (x, low, high, heading) of each drawn task square, read from the
    artists: the errorbar's marker x, its horizontal bar's ends, the y tick label at its row
    and the contrast's heading above it ("axis: A − B  [model]")."""
    ticks = {round(t.get_position()[1]): t.get_text() for t in ax.get_yticklabels()}
    out = {}
    for c in ax.containers:
        if not isinstance(c, ErrorbarContainer):
            continue
        line: Any = c.lines[0]
        (x,), (y,) = line.get_xdata(), line.get_ydata()
        ((x0, _), (x1, _)), *rest = c.lines[2][0].get_segments()
        assert not rest
        row = round(y)
        heading = next(ticks[h] for h in range(row - 1, -1, -1) if "[" in ticks[h])
        model = heading.rpartition("[")[2].rstrip("]")
        out[(model, ticks[row])] = (float(x), min(x0, x1), max(x0, x1), heading)
    return out


def test_the_forest_plot_draws_the_tables_differences_with_its_sign(report: Any) -> None:
    spec, records, table, sens = report
    _, figures = _sensitivity(spec, records, catalog=None)  # type: ignore[arg-type]
    ax = figures["forest.png"].axes[0]
    drawn = _forest_points(ax)
    assert len(drawn) == 4
    for (model, task), (x, _, _, heading) in drawn.items():
        assert x == pytest.approx(_row(table, model, task).statistic, abs=1e-12)
        assert heading == f"instruction: reference − description  [{model}]"
    for model in ("gemma", "llama"):
        (meta,) = [m for m in sens["meta_analysis"] if m["model"] == model]
        assert (meta["a"], meta["b"]) == (REF, DESC)  # the table's A and B
        for task, ci in zip(meta["tasks"], meta["effect_ci"], strict=True):
            _, lo, hi, _ = drawn[(model, task)]
            assert (lo, hi) == pytest.approx(tuple(ci), abs=1e-12)
        assert meta["paired_t"]["mean_difference"] == pytest.approx(
            sum(_row(table, model, t).statistic for t in ("hearsay", "abercrombie")) / 2
        )
    # the pooled diamonds: [low, pooled, high, pooled] of each row, in the same sign
    diamonds = [p.get_xy()[:4, 0] for p in ax.patches]
    assert [list(d) for d in diamonds] == [
        pytest.approx([m["ci"][0], m["pooled"], m["ci"][1], m["pooled"]])
        for m in sens["meta_analysis"]
    ]
    # the axis label names A − B with the table header's A and B
    a, b = (x.partition("=")[2] for x in (table[0].a, table[0].b))
    assert f"A − B = {a} − {b}" in ax.get_xlabel()


@pytest.mark.slow
def test_the_pair_figure_draws_the_tables_differences(report: Any) -> None:
    spec, records, table, _ = report
    figures = _figures(spec, records, table, catalog=_NoLabels())  # type: ignore[arg-type]
    assert len(figures) == 2
    for model in ("gemma", "llama"):
        (fig,) = [f for name, f in figures.items() if model in name]
        dx = fig.axes[1]
        ticks = {round(t.get_position()[0]): t.get_text() for t in dx.get_xticklabels()}
        points = {}
        for c in dx.collections:
            offsets = c.get_offsets()
            if (c.get_gid() or "").startswith("difference point") and len(offsets):
                (x, y), *_ = offsets
                points[ticks[round(x)]] = float(y)
        bars = {}
        for c in dx.containers:
            ((_, y0), (_, y1)), *_ = c.lines[2][0].get_segments()
            bars[str(c.lines[2][0].get_gid()).split(":")[1]] = (min(y0, y1), max(y0, y1))
        for task in ("hearsay", "abercrombie"):
            row = _row(table, model, task)
            assert points[task] == pytest.approx(row.statistic, abs=1e-12)
            assert bars[task] == pytest.approx((row.ci_low, row.ci_high), abs=1e-12)
        assert f"A − B = {REF} − {DESC}" in dx.get_title()
        legend = [t.get_text() for t in dx.get_legend().get_texts()]
        assert legend == [f"{REF} − {DESC}"]


def test_workbench_reports_pooled_section_has_the_tables_sign(report: Any) -> None:
    _, _, _, sens = report
    text = format_sensitivity(sens)
    for m in sens["meta_analysis"]:
        line = next(x for x in text.splitlines() if x.startswith(f"  {m['model']}: "))
        assert f"{REF} − {DESC}" in line
        assert f"{m['pooled']:+.3f}" in line


class _NoLabels:
    """A catalog whose tasks have no label set (no chance line): all `_figures` asks of it."""

    def task(self, name: str) -> Any:
        class _Spec:
            labels = None
            is_classification = False

        class _Task:
            spec = _Spec()

        return _Task()


def test_turning_the_order_around_mirrors_the_pooled_effects_and_nothing_else(
    report: Any,
) -> None:
    """The orientation changes the sign only: listed the other way round, every effect and
    the pool are negated, the intervals mirrored, the p-values, tau^2 and I^2 the same."""
    from experiments.analysis.sensitivity import sensitivity_report

    _, records, _, sens = report
    other = sensitivity_report(records, n_resamples=200, order=[DESC, REF])
    for m, o in zip(sens["meta_analysis"], other.meta_analysis, strict=True):
        assert (o["a"], o["b"]) == (DESC, REF)
        assert o["effects"] == pytest.approx([-e for e in m["effects"]], abs=1e-12)
        assert o["pooled"] == pytest.approx(-m["pooled"], abs=1e-12)
        assert o["ci"] == pytest.approx([-m["ci"][1], -m["ci"][0]], abs=1e-12)
        for key in ("p_value", "tau2", "i2", "variances"):
            assert o[key] == pytest.approx(m[key], abs=1e-12), key
        assert o["paired_t"]["p_value"] == pytest.approx(m["paired_t"]["p_value"])
