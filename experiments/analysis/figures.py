"""Figures in the style of the LegalBench paper's prompt-study figures, with their uncertainty.

- `pair_figure` (Figures 1 and 2): per task, the variants' scores side by side, each bar with
  its 95% interval; below, each tested pair's paired difference with its 95% interval and
  permutation-test p-value.
- `draws_figure` (Figure 3): per task, the score of each demonstration draw with its 95%
  interval, the best and the worst marked; below, best - worst with the range test's p-value.

Intervals are read from the comparison rows (`analysis.compare`), never computed or guessed
here: each arm's `ci_a_low/ci_a_high`, `ci_b_low/ci_b_high`, a draw's `draw_ci[name]`, the
difference's `ci_low/ci_high`. A row without them (written before they existed, or a pair
chosen after seeing the scores) draws no error bar and says "no interval". A flagged interval
(its note non-empty) is drawn dashed, and the legend says so.
"""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from experiments.analysis.confusion import confusion_figure as confusion_figure  # its home
from experiments.analysis.contrast import MINUS, Contrast
from experiments.analysis.records import Comparison
from experiments.trials.labels import ShortNames, short_names
from experiments.trials.record import TrialRecord, parse_axes

# names are drawn as written: two '$' in a model or variant name are not TeX (`$\foo$` failed
# the save after every trial had run; `$x_1$` showed another name)
matplotlib.rcParams["text.parse_math"] = False

_COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3"]
# one marker per round of the colours: pair k is (colour k % 5, marker k // 5), unique to 35
_MARKERS = ["D", "o", "s", "^", "v", "P", "X"]
_FLAGGED = "--"  # line style of a flagged interval
_LABELLED_ROWS = 4  # more rows per task than this: the difference panel draws no value labels
_LEGEND_ROWS = 10  # the difference legend's entries per column
_KEY_FONT = 6.5  # the key of abbreviated names, below the figure
_FOREST_WIDTH = 8.5  # inches, before `_fit_width`
Interval = tuple[float, float]


def _p_label(p: float | None) -> str:
    if p is None:
        return "incomplete"
    return f"p={p:.3f}" if p >= 0.001 else "p<0.001"


def _metric_label(outcomes: Sequence[TrialRecord]) -> str:
    metrics = sorted({getattr(o, "metric", "score") for o in outcomes})
    return metrics[0].replace("_", " ") if len(metrics) == 1 else "official metric (per task)"


def _chance_lines(ax: Any, tasks: Sequence[str], chance: Mapping[str, float | None]) -> bool:
    """A dotted line at 1/K over each task's own group of bars (K = its number of labels)."""
    drawn = False
    for i, t in enumerate(tasks):
        level = chance.get(t)
        if level is not None:
            ax.hlines(level, i - 0.45, i + 0.45, color="grey", lw=0.8, ls=":", gid=f"chance:{t}")
            drawn = True
    return drawn


def _interval(low: Any, high: Any) -> Interval | None:
    """(low, high) when both are finite numbers with low <= high; else None (draw nothing)."""
    if not isinstance(low, int | float) or not isinstance(high, int | float):
        return None
    lo, hi = float(low), float(high)
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        return None
    return lo, hi


def _note(value: Any) -> str | None:
    return str(value) if value else None


def _arm_interval(rows: Sequence[Comparison], variant: str) -> tuple[Interval | None, bool]:
    """A variant's own interval from the first pair row naming it, and whether it is flagged
    (by its own note, `ci_a_note`/`ci_b_note`)."""
    for r in rows:
        for low, high, note, arm in (
            (r.ci_a_low, r.ci_a_high, r.ci_a_note, r.a),
            (r.ci_b_low, r.ci_b_high, r.ci_b_note, r.b),
        ):
            iv = _interval(low, high) if arm == variant else None
            if iv is not None:
                return iv, _note(note) is not None
    return None, False


def _errorbar(
    ax: Any, x: float, y: float, iv: Interval, *, flagged: bool, gid: str, color: str = "black"
) -> None:
    """An asymmetric error bar spanning exactly [low, high]; dashed when flagged.

    Centred on the estimate when the interval holds it; otherwise on the interval's midpoint
    (some intervals, e.g. Bayesian ones, need not hold the point estimate) so that the drawn
    bar is still exactly the interval.
    """
    lo, hi = iv
    centre = y if lo <= y <= hi else (lo + hi) / 2
    bars = ax.errorbar(
        [x], [centre], yerr=[[centre - lo], [hi - centre]], fmt="none", ecolor=color,
        elinewidth=1.0, capsize=2.5, zorder=4,
    )  # fmt: skip
    (segments,) = bars.lines[2]
    segments.set_gid(gid)
    if flagged:
        segments.set_linestyle(_FLAGGED)


def _no_interval(ax: Any, x: float, y: float, fontsize: float = 5.5) -> None:
    ax.text(x, y, "no interval", ha="center", va="bottom", rotation=90, fontsize=fontsize,
            color="black", gid="no interval",
            bbox={"facecolor": "white", "alpha": 0.8, "lw": 0, "pad": 1})  # fmt: skip


def _signed(v: float) -> str:
    return f"{v:+.2f}"


def _difference_label(row: Comparison, value: float, iv: Interval | None) -> str:
    text = _signed(value)
    text += f" [{_signed(iv[0])}, {_signed(iv[1])}]" if iv else " (no interval)"
    text += f"  {_p_label(row.p_value)}"
    if row.n_clusters is not None and row.n is not None:
        text += f"\n{row.n} rows, {row.n_clusters} clusters"
    return text


def _legend_extras(
    *, interval: bool, flagged: bool, chance: bool, bars: bool = False
) -> list[Line2D]:
    extras = []
    if interval:
        extras.append(Line2D([], [], color="black", lw=1.0, label="95% interval"))
    if flagged:
        what = "dashed (bar hatched)" if bars else "dashed"
        label = f"{what}: flagged interval,\nmay under-cover (see ci_note)"
        extras.append(Line2D([], [], color="black", lw=1.0, ls=_FLAGGED, label=label))
    if chance:
        extras.append(Line2D([], [], color="grey", lw=0.8, ls=":", label="chance (1/K)"))
    return extras


def _difference_panel(
    ax: Any,
    tasks: Sequence[str],
    table: Sequence[Comparison],
    metric: str,
    what: str,
    one_colour: bool = False,
    names: ShortNames | None = None,
) -> tuple[bool, bool, list[Any]]:
    """Each tested row's difference A − B (its `statistic`, score_a − score_b: the sign of
    the table's row, never turned around here) with its interval; zero line.

    One colour and marker per pair (a, b), labelled in the legend with `names`' short forms,
    unless `one_colour` (best vs worst, whose pair differs from task to task). With more
    than `_LABELLED_ROWS` rows per task the values are not written beside the points (they
    would overprint each other): the table has them. Returns (an interval drawn, a flagged
    one drawn, the value labels)."""
    show = names or ShortNames()
    pairs = list(dict.fromkeys((r.a, r.b) for r in table if r.task in tasks))
    labelled: set[int] = set()
    drawn_any = flagged_any = False
    texts: list[Any] = []
    top = 0.1
    per_task = max(1, max((sum(r.task == t for r in table) for t in tasks), default=1))
    for i, t in enumerate(tasks):
        rows = [r for r in table if r.task == t]
        step = 0.8 / max(1, len(rows))
        for j, r in enumerate(rows):
            x = i + (j - (len(rows) - 1) / 2) * step
            k = 0 if one_colour else pairs.index((r.a, r.b))
            value = r.statistic
            if value is None:
                value = Contrast(r.a, r.b).diff(r.score_a, r.score_b)
            if value is None or r.p_value is None:
                ax.text(x, 0.0, "incomplete", ha="center", va="bottom", rotation=90, fontsize=6)
                continue
            iv = _interval(r.ci_low, r.ci_high)
            pair = Contrast(show(r.a), show(r.b))
            label = None if one_colour or k in labelled else pair.label
            labelled.add(k)
            ax.scatter([x], [value], color=_COLORS[k % len(_COLORS)],
                       marker=_MARKERS[(k // len(_COLORS)) % len(_MARKERS)], s=22, zorder=5,
                       label=label, gid=f"difference point:{t}:{r.a}:{r.b}")  # fmt: skip
            if iv is not None:
                flagged = _note(r.ci_note) is not None
                _errorbar(ax, x, value, iv, flagged=flagged, gid=f"difference:{t}:{r.a}:{r.b}")
                drawn_any, flagged_any = True, flagged_any or flagged
                top = max(top, abs(iv[0]), abs(iv[1]))
            top = max(top, abs(value))
            if per_task > _LABELLED_ROWS:
                continue
            high = iv[1] if iv else value
            texts.append(ax.text(
                x, high + 0.04 * top, _difference_label(r, value, iv), ha="center", va="bottom",
                fontsize=5.5 if per_task == 1 else 5, rotation=0 if per_task == 1 else 90,
                gid="difference label",
            ))  # fmt: skip
    ax.axhline(0.0, color="grey", lw=0.8, ls=":")
    ax.set_ylim(-top * 1.3, top * (2.2 if texts else 1.3))  # room for the labels above
    ax.set_xlim(-0.6, len(tasks) - 0.4)
    ax.set_xticks(range(len(tasks)), tasks, rotation=30, ha="right", fontsize=8)
    ax.set_xlabel("task")
    ax.set_ylabel(f"{what}\nin {metric} (95% interval)", fontsize=8)
    return drawn_any, flagged_any, texts


def _fit_labels(fig: Any, ax: Any, texts: Sequence[Any]) -> bool:
    """Raise the panel's top until every value label lies inside it (a label drawn above the
    panel overprinted its title); False, and no labels, when one is too tall to fit."""
    if not texts:
        return True
    fig.canvas.draw()  # the layout, so the labels' and the panel's sizes are known
    renderer = fig.canvas.get_renderer()
    height = ax.get_window_extent(renderer).height
    low, high = ax.get_ylim()
    span = high - low
    for t in texts:
        h = t.get_window_extent(renderer).height + 4.0  # pixels, with a margin
        if h > 0.6 * height:
            for x in texts:
                x.remove()
            return False
        span = max(span, (t.get_position()[1] - low) * height / (height - h))
    ax.set_ylim(low, low + span * 1.03)
    return True


def _text_width(chars: int, fontsize: float) -> float:
    """Inches `chars` characters take at `fontsize` (an upper estimate, for a first layout)."""
    return chars * fontsize * 0.6 / 72


def _fit_width(fig: Any) -> None:
    """Widen the figure until each panel's title and x label fit over it: the layout makes
    room for tick labels and legends by narrowing the panel, and a title wider than its panel
    ran off the figure."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    need = 0.0
    for ax in fig.axes:
        width = ax.get_window_extent(renderer).width
        for text in (ax.title, ax.xaxis.label):
            if text.get_text():
                need = max(need, text.get_window_extent(renderer).width - width)
    if need > 0:
        fig.set_figwidth(fig.get_figwidth() + need / fig.dpi + 0.3)


def _key_entries(key: Sequence[tuple[str, str]], width: float) -> list[str]:
    """The key's lines (short = full name), each wrapped to the figure's width (inches)."""
    chars = max(40, int((width - 0.5) * 72 / (_KEY_FONT * 0.6)))
    return [
        "\n    ".join(textwrap.wrap(f"{short} = {full}", chars, break_long_words=True,
                                    break_on_hyphens=False))
        for short, full in key
    ]  # fmt: skip


def _key_height(entries: Sequence[str]) -> float:
    """Inches the key needs below the plot (its lines, its title, a margin)."""
    if not entries:
        return 0.0
    lines = sum(e.count("\n") + 1 for e in entries) + 2
    return lines * _KEY_FONT * 1.6 / 72 + 0.15


def _draw_key(fig: Any, entries: Sequence[str], title: str = "names in this figure") -> None:
    """The key of abbreviated names, below the plot (a legend of text only, so the layout
    makes room for it)."""
    if not entries:
        return
    handles = [Line2D([], [], lw=0) for _ in entries]
    fig.legend(handles, entries, loc="outside lower left", fontsize=_KEY_FONT, handlelength=0,
               handletextpad=0, frameon=False, title=title, title_fontsize=_KEY_FONT + 0.5,
               alignment="left", borderaxespad=0.2, labelspacing=0.25)  # fmt: skip


def _two_panels(width: float, key: Sequence[str] = ()) -> tuple[Any, Any, Any]:
    """A comparison figure's two panels: the scores above, the differences below; `key`
    (`_key_entries`) adds its height below them."""
    fig, (ax, dx) = plt.subplots(
        2, 1, figsize=(width, 7.0 + _key_height(key)), height_ratios=[3, 2],
        layout="constrained",
    )  # fmt: skip
    return fig, ax, dx


def _panels_width(n_tasks: int, per_task: int = 1, side: float = 2.0) -> float:
    """Inches: room per task for its rows' value labels (up to `_LABELLED_ROWS`), the y
    labels, and `side` inches for the legends at the right."""
    plot = max(4.0, n_tasks * max(1.3, 0.45 * min(per_task, _LABELLED_ROWS)))
    return max(6.5, plot + 1.0 + side)


def _score_axes(
    ax: Any, tasks: Sequence[str], metric: str, chance: Mapping[str, float | None]
) -> bool:
    """The score panel's chance lines, task ticks, limits and labels; True if a chance line
    was drawn."""
    has_chance = _chance_lines(ax, tasks, chance)
    ax.set_xticks(range(len(tasks)), tasks, rotation=30, ha="right", fontsize=8)
    ax.set_xlim(-0.6, len(tasks) - 0.4)
    ax.set_ylim(0, 1.1)
    ax.set_xlabel("task")
    ax.set_ylabel(f"{metric} (95% interval)")
    return has_chance


def pair_figure(
    name: str,
    model: str,
    outcomes: Sequence[TrialRecord],
    table: Sequence[Comparison],
    chance: Mapping[str, float | None] | None = None,
) -> Any:
    """Scores with their 95% intervals, and each tested pair's paired difference below.

    A missing score (incomplete trial) is marked, never drawn as 0; a bar whose row carries no
    interval draws none and says so. Variant names longer than `trials.labels.SHORT` are
    drawn short (a file's stem, or V1, V2, ...), with a key below the plot.
    """
    tasks = list(dict.fromkeys(o.task for o in outcomes))
    variants = list(dict.fromkeys(o.variant for o in outcomes))
    score = {(o.task, o.variant): o.score for o in outcomes}
    metric = _metric_label(outcomes)
    show = short_names([*variants, *(n for r in table for n in (r.a, r.b))])
    per_task = max([sum(r.task == t for r in table) for t in tasks] or [1])
    # the legends at the right: the variants' (38: its longest fixed line, the flag's) and
    # the pairs', in columns of `_LEGEND_ROWS`
    pairs = list(dict.fromkeys(Contrast(show(r.a), show(r.b)).label for r in table))
    columns = max(1, math.ceil(len(pairs) / _LEGEND_ROWS))
    side = max(
        _text_width(max([38, *(len(show(v)) for v in variants)]), 7) + 0.45,
        columns * (_text_width(max(map(len, pairs), default=0), 7) + 0.45),
    )
    fig_width = _panels_width(len(tasks), per_task, side)
    key = _key_entries(show.key(), fig_width)
    fig, ax, dx = _two_panels(fig_width, key)
    width = 0.8 / max(1, len(variants))
    any_interval = any_flagged = False
    for j, v in enumerate(variants):
        xs = [i + (j - (len(variants) - 1) / 2) * width for i in range(len(tasks))]
        ys = [score.get((t, v)) for t in tasks]
        bars = ax.bar(
            [x for x, y in zip(xs, ys, strict=True) if y is not None],
            [y for y in ys if y is not None],
            width=width,
            label=show(v),
            color=_COLORS[j % len(_COLORS)],
        )
        patches = iter(bars.patches)
        for t, x, y in zip(tasks, xs, ys, strict=True):
            if y is None:
                ax.text(x, 0.02, "n/a", ha="center", fontsize=6, rotation=90)
                continue
            patch = next(patches)
            iv, flagged = _arm_interval([r for r in table if r.task == t], v)
            if iv is None:
                _no_interval(ax, x, 0.02)
            else:
                _errorbar(ax, x, y, iv, flagged=flagged, gid=f"interval:{t}:{v}")
                if flagged:
                    patch.set_hatch("///")
                    patch.set_edgecolor("white")
                any_interval, any_flagged = True, any_flagged or flagged
    for i, t in enumerate(tasks):
        rows = [r for r in table if r.task == t]
        if len(rows) == 1:  # several pairs: their p-values are on the difference panel
            tops = [score.get((t, v)) or 0.0 for v in variants]
            tops += [iv[1] for v in variants if (iv := _arm_interval(rows, v)[0])]
            ax.text(i, min(max(tops) + 0.02, 1.04), _p_label(rows[0].p_value), ha="center",
                    fontsize=7)  # fmt: skip
    has_chance = _score_axes(ax, tasks, metric, chance or {})
    ax.set_title(f"{name} — {model}\nscore of each variant; p: paired permutation test",
                 fontsize=10)  # fmt: skip
    # variant swatches drawn plain: a hatched (flagged) first bar must not hatch the legend
    handles: list[Any] = [
        Patch(facecolor=_COLORS[j % len(_COLORS)], label=show(v)) for j, v in enumerate(variants)
    ]
    handles += _legend_extras(interval=any_interval, flagged=False, chance=has_chance)
    diff_interval, diff_flagged, value_labels = _difference_panel(
        dx, tasks, table, metric, f"paired difference A {MINUS} B", names=show
    )
    if diff_interval and not any_interval:
        handles += _legend_extras(interval=True, flagged=False, chance=False)
    handles += _legend_extras(
        interval=False, flagged=any_flagged or diff_flagged, chance=False, bars=True
    )
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    entries = len(dx.get_legend_handles_labels()[0])
    if entries:
        dx.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title=f"A {MINUS} B",
                  title_fontsize=7, ncol=math.ceil(entries / _LEGEND_ROWS))  # fmt: skip
    dx.set_title(_difference_title(table, show), fontsize=7)
    _draw_key(fig, key, "variant names (short = full)")
    _fit_width(fig)
    if not _fit_labels(fig, dx, value_labels):
        dx.set_title(dx.get_title() + "\n(values: see the comparisons table)", fontsize=7)
    return fig


def _difference_title(table: Sequence[Comparison], show: ShortNames) -> str:
    """The difference panel's title: what is drawn, A − B named when the figure has one pair,
    and the interval's method when the rows share one."""
    title = f"paired difference A {MINUS} B of the official score, with its 95% interval"
    pairs = list(dict.fromkeys((r.a, r.b) for r in table))
    if len(pairs) == 1:
        title += "\n" + textwrap.fill(f"A {MINUS} B = {Contrast(*map(show, pairs[0])).label}", 75)
    elif max(Counter(r.task for r in table).values(), default=0) > _LABELLED_ROWS:
        title += "\n(values and p-values: the comparisons table)"
    methods = {r.ci_method for r in table if r.ci_method}
    if len(methods) == 1:
        title += "\n" + textwrap.fill(f"interval: {methods.pop()}", 75)
    return title


def draws_figure(
    name: str,
    model: str,
    outcomes: Sequence[TrialRecord],
    table: Sequence[Comparison],
    chance: Mapping[str, float | None] | None = None,
) -> Any:
    """Each draw's score with its 95% interval (`draw_ci`), best and worst marked; below,
    best - worst, the range test's statistic (no interval unless the row gives one: a pair
    chosen after seeing the scores has none that would be unbiased)."""
    tasks = list(dict.fromkeys(o.task for o in outcomes))
    metric = _metric_label(outcomes)
    fig, ax, dx = _two_panels(_panels_width(len(tasks)))
    any_interval = any_flagged = labelled = False
    for i, t in enumerate(tasks):
        draws = [o for o in outcomes if o.task == t]
        rows = [r for r in table if r.task == t]
        row = rows[0] if rows else None
        cis = (row.draw_ci if row else None) or {}
        notes = (row.draw_ci_note if row else None) or {}
        step = 0.7 / max(1, len(draws))
        xs = {o.variant: i + (j - (len(draws) - 1) / 2) * step for j, o in enumerate(draws)}
        for o in draws:
            x = xs[o.variant]
            if o.score is None:
                ax.text(x, 0.02, "n/a", ha="center", fontsize=6, rotation=90)
                continue
            ax.scatter([x], [o.score], color="#4C72B0", s=18, zorder=2,
                       label=None if labelled else "draw")  # fmt: skip
            labelled = True
            pair = cis.get(o.variant)
            iv = _interval(*pair) if isinstance(pair, Sequence) and len(pair) == 2 else None
            if iv is None:
                _no_interval(ax, x, 0.02, fontsize=5)
            else:
                flagged = _note(notes.get(o.variant)) is not None
                _errorbar(ax, x, o.score, iv, flagged=flagged, gid=f"interval:{t}:{o.variant}",
                          color="#4C72B0")  # fmt: skip
                any_interval, any_flagged = True, any_flagged or flagged
        if row is not None and row.p_value is None:
            ax.text(i, 1.04, _p_label(None), ha="center", fontsize=7)
        elif row is not None:
            marks = (
                (row.a, row.score_a, "#55A868", "^", "best"),
                (row.b, row.score_b, "#C44E52", "v", "worst"),
            )
            for arm, y, color, marker, label in marks:
                x = xs.get(arm, float(i))
                ax.scatter([x], [y], color=color, marker=marker, s=60,
                           zorder=5, label=label if i == 0 else None)  # fmt: skip
            tops = [row.score_a or 0.0] + [iv[1] for p in cis.values() if (iv := _interval(*p))]
            ax.text(i, min(max(tops) + 0.03, 1.04), _p_label(row.p_value), ha="center",
                    fontsize=7)  # fmt: skip
    has_chance = _score_axes(ax, tasks, metric, chance or {})
    ax.set_title(
        f"{name} — {model}\nscore of each variant; p: range permutation test",
        fontsize=9,
    )
    handles, _ = ax.get_legend_handles_labels()
    handles += _legend_extras(interval=any_interval, flagged=False, chance=has_chance)
    diff_interval, diff_flagged, value_labels = _difference_panel(
        dx, tasks, table, metric, "best − worst", one_colour=True
    )
    if diff_interval and not any_interval:
        handles += _legend_extras(interval=True, flagged=False, chance=False)
    handles += _legend_extras(interval=False, flagged=any_flagged or diff_flagged, chance=False)
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    dx.set_title(
        "best − worst (the range test's statistic), with its 95% interval"
        if diff_interval
        else "best − worst (the range test's statistic)\nno interval: an interval for a pair "
        "chosen after seeing the scores would be biased",
        fontsize=8,
    )
    _fit_labels(fig, dx, value_labels)
    return fig


# ---- prompt sensitivity (issue 11) ---------------------------------------------------------
def _short_variant(name: str) -> str:
    """``instruction=reference,seed=0`` -> ``reference · 0`` (the axes go in the axis label)."""
    return " · ".join(_axes(name).values()) or name


def _variant_axes(names: Sequence[str]) -> str:
    return ", ".join(_axes(names[0])) if names else ""


def _axes(name: str) -> dict[str, str]:
    """A variant name's axis levels (a format point keeps its commas); {} if it has none."""
    try:
        return parse_axes(name)
    except ValueError:  # not axis=level pairs: shown as it is
        return {}


def variance_share_figure(report: Mapping[str, Any]) -> Any:
    """Share of the variance of per-row correctness per factor (bars), with its CI."""
    all_shares = report.get("variance_shares") or {}
    # a model with no variance has no shares (all null): drawn as no bars, named in the title
    shares = {m: v for m, v in all_shares.items() if v.get("sum_of_shares") is not None}
    no_variance = [m for m in all_shares if m not in shares]
    models = list(shares)
    factors: list[str] = []
    for v in shares.values():
        factors += [f for f in v["shares"] if f not in factors]
    order = sorted(factors, key=lambda f: -max(shares[m]["shares"].get(f, 0.0) for m in models))
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.38 * max(1, len(order)) * max(1, len(models))))
    height = 0.8 / max(1, len(models))
    colors = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3"]
    for j, m in enumerate(models):
        ys = [i + (j - (len(models) - 1) / 2) * height for i in range(len(order))]
        vals = [shares[m]["shares"].get(f, 0.0) for f in order]
        ci = [shares[m]["ci"].get(f, [v, v]) for f, v in zip(order, vals, strict=True)]
        err = [
            [max(0.0, v - lo) for v, (lo, _) in zip(vals, ci, strict=True)],
            [max(0.0, hi - v) for v, (_, hi) in zip(vals, ci, strict=True)],
        ]
        ax.barh(ys, vals, height=height, xerr=err, color=colors[j % len(colors)], label=m,
                error_kw={"lw": 0.8, "capsize": 2})  # fmt: skip
        for y, v, (_, hi) in zip(ys, vals, ci, strict=True):
            ax.text(max(v, hi) + 0.01, y, f"{v:.1%}", va="center", fontsize=7)
    ax.set_yticks(range(len(order)), order, fontsize=8)
    ax.invert_yaxis()
    top = max([hi for m in models for _, hi in shares[m]["ci"].values()] or [1.0])
    ax.set_xlim(0, min(1.0, top + 0.12))
    ax.set_xlabel(
        "share of the variance of per-row correctness (variance components)\n"
        "(95% cluster-bootstrap interval; method per factor in variance_shares.json)"
    )
    ax.set_ylabel("factor")
    title = "What moves per-row correctness: task, item, prompt axes"
    if no_variance:
        title += f"\nno variance (no shares): {', '.join(no_variance)}"
    ax.set_title(title, fontsize=10)
    if not order:
        ax.text(0.5, 0.5, "no task with 2 or more variants", ha="center", transform=ax.transAxes)
    if models:
        ax.legend(fontsize=8, loc="lower right", title="model", title_fontsize=8)
    fig.tight_layout()
    return fig


def _drawn_key(show: ShortNames, drawn: Sequence[str]) -> list[tuple[str, str]]:
    """`show`'s key (`ShortNames.key`) cut to the names the figure draws."""
    return [(s, full) for (s, full), n in zip(show.key(), _abbreviated(show), strict=True)
            if n in drawn]  # fmt: skip


def _abbreviated(show: ShortNames) -> list[str]:
    """The full names `ShortNames.key` lists, in its order."""
    return [n for n, s in show.short.items() if s != n]


def _forest_names(
    rows: Sequence[Mapping[str, Any]], variants: Sequence[str] = ()
) -> tuple[dict[str, ShortNames], list[str]]:
    """Per axis, the short forms of its levels (numbered over the levels of every variant of
    the study, `variants`, as the other figures number them); and the key's entries
    (axis-prefixed when more than one axis has abbreviated levels)."""
    levels: dict[str, list[str]] = {}  # per axis, its levels as names: ``axis=level``
    for r in rows:
        for side in ("a", "b"):
            levels.setdefault(str(r["axis"]), []).append(str(r[side]))
    study: dict[str, list[str]] = {}
    for v in variants:
        for axis, level in _axes(v).items():
            study.setdefault(axis, []).append(f"{axis}={level}")
    # one axis each: shortened as the comparison figure shortens one-axis variant names
    show = {axis: short_names([*study.get(axis, ()), *names]) for axis, names in levels.items()}
    # a level drawn as itself (the heading names its axis) needs no line in the key
    listed = {
        axis: [(s, full) for s, full in _drawn_key(names, levels[axis]) if full != f"{axis}={s}"]
        for axis, names in show.items()
    }
    abbreviated = [axis for axis, entries in listed.items() if entries]
    key = [
        (f"{axis}: {short}" if len(abbreviated) > 1 else short, full)
        for axis in abbreviated
        for short, full in listed[axis]
    ]
    return show, _key_entries(key, _FOREST_WIDTH)


def _level(names: ShortNames, level: str) -> str:
    """An ``axis=level``'s drawn form: its short form, or the level (the axis is named)."""
    short = names(level)
    return short if short != level else level.partition("=")[2]


def forest_figure(report: Mapping[str, Any]) -> Any:
    """Per-task paired effects of each axis contrast (95% CI) and the random-effects pool.

    Every effect is its row's A − B, level a minus level b as the report orients it
    (`experiments.analysis.contrast`: the sign of the comparisons table), drawn as given:
    the tasks' intervals are the row's ``effect_ci``, the pool's its ``ci``. Long level names
    (text files) are drawn short, with a key below."""
    from scipy.stats import norm

    rows = list(report.get("meta_analysis") or [])
    z = float(norm.ppf(0.975))
    metrics = sorted({str(r["metric"]) for r in rows})  # pooled only within one metric
    show, key = _forest_names(rows, list(report.get("variants") or ()))
    labels: list[str] = []
    n_lines = sum(len(r["tasks"]) + 2 for r in rows)
    fig, ax = plt.subplots(
        figsize=(_FOREST_WIDTH, 1.6 + 0.26 * max(2, n_lines) + _key_height(key)),
        layout="constrained",
    )
    y = 0
    heads = []
    contrasts: list[Contrast] = []
    for r in rows:
        names = show[str(r["axis"])]
        c = Contrast(*(_level(names, str(r[side])) for side in ("a", "b")))
        contrasts.append(c)
        unit = f", {r['metric'].replace('_', ' ')}" if len(metrics) > 1 else ""
        labels.append(f"{r['axis']}: {c.label}  [{r['model']}{unit}]")
        heads.append(y)
        y += 1
        # an older report has no effect_ci: the same interval, from the variances it pooled
        cis = r.get("effect_ci") or [
            [e - z * v**0.5, e + z * v**0.5] for e, v in zip(r["effects"], r["variances"],
                                                          strict=True)
        ]  # fmt: skip
        for task, eff, (lo, hi) in zip(r["tasks"], r["effects"], cis, strict=True):
            bars = ax.errorbar(eff, y, xerr=[[max(0.0, eff - lo)], [max(0.0, hi - eff)]],
                               fmt="s", color="#4C72B0", ms=4, lw=1, capsize=2)  # fmt: skip
            bars.lines[0].set_gid(f"effect:{r['model']}:{r['axis']}:{task}")
            labels.append(f"{task}")
            y += 1
        if r.get("pooled") is not None:
            lo, hi = r["ci"]
            ax.fill([lo, r["pooled"], hi, r["pooled"]], [y, y - 0.3, y, y + 0.3], color="#C44E52",
                    gid=f"pooled:{r['model']}:{r['axis']}")  # fmt: skip
            labels.append(f"pooled (τ²={r['tau2']:.2g}, I²={r['i2']:.0%})")
        else:
            ax.text(0, y, f"not pooled: {r.get('note')}", fontsize=7, va="center")
            labels.append("pooled")
        y += 1
    ax.axvline(0, color="grey", lw=0.8, ls=":")
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    for h in heads:
        ax.get_yticklabels()[h].set_fontweight("bold")
        ax.axhline(h - 0.5, color="lightgrey", lw=0.6)
    ax.set_ylim(max(len(labels), 1) - 0.5, -0.5)  # top to bottom, no empty margins
    metric = metrics[0].replace("_", " ") if len(metrics) == 1 else "each contrast's metric"
    one = list(dict.fromkeys(c.label for c in contrasts))
    what = f"A {MINUS} B = {one[0]}" if len(one) == 1 else f"A {MINUS} B as each contrast names it"
    ax.set_xlabel(
        f"difference in {metric}, {what}\n"
        "(tasks: 95% CI; pooled: Hartung-Knapp-Sidik-Jonkman 95% CI)"
    )
    ax.set_ylabel("axis contrast / task")
    ax.set_title(
        f"Effect of each prompt axis per task (squares), A {MINUS} B, and pooled\n"
        "by random effects (diamonds: 95% CI); demonstration draws are not pooled",
        fontsize=9,
    )
    if not rows:
        ax.text(0.5, 0.5, "no axis contrast (demonstration draws are not pooled)",
                ha="center", transform=ax.transAxes, fontsize=8)  # fmt: skip
    _draw_key(fig, key, "level names (short = full)")
    _fit_width(fig)
    return fig


def sensitivity_heatmap(report: Mapping[str, Any]) -> Any:
    """Task x variant scores, one panel per model; a missing (excluded) trial is blank."""
    import numpy as np

    per_task = list(report.get("per_task") or [])
    models = list(dict.fromkeys(r["model"] for r in per_task)) or ["(none)"]
    tasks = list(dict.fromkeys(r["task"] for r in per_task))
    seen: list[str] = []
    for r in per_task:
        seen += [v for v in r["scores"] if v not in seen]
    # in the study's order, as the comparison figure lists (and numbers) them
    listed = [v for v in report.get("variants") or () if v in seen]
    variants = listed + [v for v in seen if v not in listed]
    width = max(6.0, 1.6 + 0.55 * len(variants))
    # numbered over every variant of the study, as the comparison figure numbers them: a
    # variant no task scored (incomplete everywhere) is not drawn but keeps its number
    show = short_names([*(report.get("variants") or ()), *variants])
    key = _key_entries(_drawn_key(show, variants), width)
    # levels alone (``reference · 0``, the axes in the axis label) only where every variant
    # has the same axes and the levels tell them apart: ``shots=1`` and ``cot=1`` (an
    # import's) were two columns both ticked ``1``
    plain = [_short_variant(v) for v in variants]
    same_axes = len({tuple(_axes(v)) for v in variants}) == 1
    by_level = not key and same_axes and len(set(plain)) == len(plain)
    ticks = plain if by_level else [show(v) for v in variants]
    fig, axes = plt.subplots(
        len(models), 1,
        figsize=(width, 1.0 + (0.45 * max(1, len(tasks)) + 2.2) * len(models) + _key_height(key)),
        squeeze=False, layout="constrained",
    )  # fmt: skip
    image = None
    for ax, model in zip(axes[:, 0], models, strict=True):
        grid = np.full((len(tasks), len(variants)), np.nan)
        for r in per_task:
            if r["model"] == model:
                for v, s in r["scores"].items():
                    grid[tasks.index(r["task"]), variants.index(v)] = s
        ax.set_xlabel(f"variant ({_variant_axes(variants)})" if by_level else "variant")
        ax.set_ylabel("task")
        ax.set_title(f"Score of each prompt variant — {model}", fontsize=10)
        if not tasks:
            ax.text(0.5, 0.5, "no task with 2 or more complete variants", ha="center",
                    transform=ax.transAxes)  # fmt: skip
            continue
        image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=1, aspect="auto")
        for i in range(len(tasks)):
            for j in range(len(variants)):
                val = grid[i, j]
                color = "white" if val < 0.6 else "black"
                text = "n/a" if np.isnan(val) else f"{val:.2f}"
                ax.text(j, i, text, ha="center", va="center", fontsize=7, color=color)
        ax.set_xticks(range(len(variants)), ticks, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(tasks)), tasks, fontsize=8)
    if image is not None:
        metric = {r["metric"] for r in per_task}
        label = metric.pop().replace("_", " ") if len(metric) == 1 else "official metric"
        fig.colorbar(image, ax=list(axes[:, 0]), label=label, shrink=0.9)
    _draw_key(fig, key, "variant names (short = full)")
    _fit_width(fig)
    return fig


def sensitivity_figures(report: Mapping[str, Any]) -> dict[str, Any]:
    """The three sensitivity figures, by the file name they are logged under."""
    return {
        "variance_shares.png": variance_share_figure(report),
        "forest.png": forest_figure(report),
        "sensitivity_heatmap.png": sensitivity_heatmap(report),
    }


def close(fig: Any) -> None:
    """Free a figure once logged: pyplot keeps every open figure alive (a figure it does not
    hold, `confusion_figure`'s, is left to the garbage collector)."""
    plt.close(fig)
