"""The comparison table of a sweep, report or import, its short legend and its
`--explain` method text; the across-task table; the decision lines printed last.

Variant names are shown as the tables name them (`trials.labels`): a text file's path short.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from experiments.output.common import _f
from experiments.trials.labels import table_names

if TYPE_CHECKING:  # start-up time: the analysis (scipy) loads only once there is one to print
    from experiments.analysis.records import AcrossTaskTest, Comparison


def _invalid_by_arm(trials: Sequence[dict[str, Any]] | None) -> dict[tuple[Any, ...], Any]:
    """(model, task, variant) -> invalid-output rate, from a sweep's per-trial rows."""
    return {(t["model"], t["task"], t["variant"]): t.get("invalid_rate") for t in (trials or ())}


def _names(
    rows: Sequence[Mapping[str, Any] | Comparison | AcrossTaskTest],
    folders: Sequence[str],
    keys: Sequence[str] = ("a", "b"),
) -> dict[str, str]:
    """Each variant name in `rows` as tables print it: a text file as its stem, unless two
    names would then read the same (`trials.labels.table_names`; display only, the name
    itself is unchanged). Unique among every variant the rows name, not only their A and B:
    a best-of-k row's other draws, a sequential row's eliminated arms and those still in
    contention (a stem shared with one of them would not say which file won)."""
    return table_names((n for r in rows for n in _named(r, keys)), folders)


def _named(
    row: Mapping[str, Any] | Comparison | AcrossTaskTest, keys: Sequence[str] = ("a", "b")
) -> list[str]:
    """The variant names `row` holds: `keys`, then those its draws and arms list (a
    comparison record: A, B and its draws; a dict: a sequential row or a dry run's item)."""
    if not isinstance(row, Mapping):
        return [str(row.a), str(row.b), *map(str, getattr(row, "draw_scores", None) or ())]
    names = [str(row[k]) for k in keys if k in row]
    names += map(str, row.get("draw_scores") or ())
    names += map(str, row.get("rows_per_arm") or ())
    names += (str(e["variant"]) for e in row.get("eliminated") or ())
    names += map(str, row.get("in_contention") or ())
    return names


def comparison_table(
    table: Sequence[Comparison | Mapping[str, Any]],
    trials: Sequence[dict[str, Any]] | None = None,
    of: str = "sweep",
    folders: Sequence[str] = (),
    explain: bool = False,
) -> str:
    """The comparisons of a sweep, one line each, and a legend of at most three lines naming
    the test, the interval and the correction; `explain`: the full method instead.

    `trials` (per-trial rows with model, task, variant and invalid_rate) adds the columns
    'inv A' / 'inv B': the share of each arm's rows whose output is not a valid label
    ('-' when unknown, e.g. a task without a label set). `of` names what the comparisons
    belong to ("sweep", or "import": its metric may be the source tool's own scoring).
    The column 'A − B' is each row's score A − score B (`analysis.contrast`), as every
    figure draws it. `table`: the records, or their stored rows (read once, here).
    """
    if not table:
        return "no comparisons (nothing to compare)"
    rows = _comparisons(table)
    invalid = _invalid_by_arm(trials)
    show_invalid = bool(invalid)
    models = sorted({str(r.model) for r in rows})
    width = max(len(m) for m in models) if len(models) > 1 else 0
    # variant names are shown whole: a truncated "instruction=reference,se" hides the draw
    shown = _names(rows, folders)
    arm = max([24, *(len(shown[str(n)]) for r in rows for n in (r.a, r.b))])
    head = (
        (f"{'model':<{width}} " if width else "")
        + f"{'task':<28} {'A':<{arm}} {'B':<{arm}} {'score A':>8} {'score B':>8} "
        + (f"{'inv A':>6} {'inv B':>6} " if show_invalid else "")
        + f"{'A − B':>7} {'95% CI':>17} {'p':>7} {'p corr':>7} {'n':>5} {'clus':>5} "
        + f"{'MDE80':>6}"
    )
    out = [head, *_comparison_rows(rows, invalid, show_invalid, width, arm, shown)]
    tested = [r for r in rows if r.tested]
    if not tested:
        out.append("no comparison was tested: every one involves an incomplete trial")
        return "\n".join(out)
    if explain:
        out.append(_comparison_footnote(tested, show_invalid, of))
    else:
        out += _comparison_legend(tested, show_invalid, of)
    return "\n".join(out)


def _comparisons(table: Sequence[Comparison | Mapping[str, Any]]) -> list[Comparison]:
    """Each row as its record: a stored row (comparisons.json, a test's dict) read once."""
    # start-up time: the analysis (scipy) loads only once there are comparisons to print
    from experiments.analysis.records import Comparison

    return [r if isinstance(r, Comparison) else Comparison.from_dict(r) for r in table]


def _comparison_rows(
    table: list[Comparison],
    invalid: dict[tuple[Any, ...], Any],
    show_invalid: bool,
    width: int,
    arm: int,
    shown: dict[str, str],
) -> list[str]:
    """One line per comparison, under `comparison_table`'s header."""
    out: list[str] = []
    for r in table:
        left = (
            (f"{r.model!s:<{width}} " if width else "")
            + f"{str(r.task)[:28]:<28} {shown[str(r.a)]:<{arm}} {shown[str(r.b)]:<{arm}} "
            f"{_f(r.score_a, '.3f'):>8} {_f(r.score_b, '.3f'):>8} "
        )
        if show_invalid:
            inv_a = invalid.get((r.model, r.task, r.a))
            inv_b = invalid.get((r.model, r.task, r.b))
            left += f"{_f(inv_a, '.3f'):>6} {_f(inv_b, '.3f'):>6} "
        if r.p_value is None:
            out.append(left + f"not tested: {r.status}")
            continue
        ci = f"[{r.ci_low:+.3f},{r.ci_high:+.3f}]" if r.ci_low is not None else "-"
        flag = " !" if r.ci_note else ""
        out.append(
            left + f"{r.statistic:>+7.3f} {ci:>17} {r.p_value:>7.4f} "
            f"{r.p_corrected:>7.4f} {r.n:>5} {_f(r.n_clusters, 'd'):>5} "
            f"{_f(r.mde_80, '.3f'):>6}{'?' if r.mde_unreliable else ''}{flag}"
        )
    return out


def _short_method(method: str) -> str:
    """An interval method's name, without its details (`analysis.intervals`)."""
    if method.startswith("Bayesian"):
        return "Bayesian (Jeffreys posteriors)"
    if method.startswith("bootstrap ("):  # F1's: one name, whatever each task's cluster count
        inside = method.removeprefix("bootstrap (").split(")", 1)[0]
        paired = "paired " if "paired" in inside else ""
        return f"bootstrap ({paired}{'clusters' if ' clusters of ' in inside else 'rows'})"
    head = method.split("),", 1)[0]
    return head + ")" if "(" in head and not head.endswith(")") else head


def _comparison_legend(tested: list[Comparison], show_invalid: bool, of: str) -> list[str]:
    """The table's legend: three short lines naming the metric, the test, the interval and
    the correction; the full method is `--explain`'s (and the JSON's fields)."""
    first = tested[0]
    metrics = ", ".join(sorted({str(r.metric) for r in tested}))
    units = (
        "rows; clus: clusters the tests resample"
        if of == "sweep"
        else _units_footnote(tested, of).removeprefix("n: ")
    ) + ("; inv: invalid outputs" * show_invalid)
    family = first.family_size or len(tested)
    shown = f" ({len(tested)} shown here)" if family != len(tested) else ""
    correction = f"{_correction(first)} over {family} tests{shown}"
    if first.is_range:  # best_vs_worst: no interval and no MDE (`analysis.compare.best_vs_worst`)
        test = str(first.test).split(" (")[0]
        return [
            f"A − B in {metrics}; n: {units}",
            f"p: {test} of max - min over {first.k} variants (A best, B worst); "
            f"p corr: {correction}",
            "no 95% CI or MDE80: best and worst are chosen after seeing the scores (!); "
            "full method: --explain",
        ]
    test = f"{str(first.test).split(' (')[0]}, two-sided"
    methods = sorted({_short_method(str(r.ci_method)) for r in tested if r.ci_method})
    ci = "; ".join(methods) or "paired bootstrap"
    return [
        f"A − B in {metrics}; n: {units}",
        f"p: {test}; p corr: {correction}; 95% CI: {ci}; MDE80: simulated",
        "! interval flagged, ? MDE flagged (ci_note, mde_note); full method: --explain",
    ]


def _correction(first: Comparison) -> str:
    """The correction's name (a row stored without one: Holm, the default)."""
    return first.correction or "Holm"


def _comparison_footnote(tested: list[Comparison], show_invalid: bool, of: str) -> str:
    """How the tested comparisons were computed: metric, units, test, interval, MDE, correction."""
    first = tested[0]
    metrics = sorted({str(r.metric) for r in tested})
    what = (
        "each task's official metric"
        if of == "sweep"
        else "the official metric, or 'accuracy': the share of rows the source tool scored correct"
    )
    parts = [f"metric: {what} ({', '.join(metrics)}); A − B = score A − score B"]
    parts.append(_units_footnote(tested, of))
    if show_invalid:
        parts.append("inv: share of the arm's rows whose output is not a valid label")
    if first.is_range:
        parts.append(
            f"test: {first.test} of max - min over the {first.k} variants "
            f"(R={first.n_resamples} resamples, p=(b+1)/(R+1)); A = best, B = worst. "
            "The paper's post-selection pair test (anti-conservative) is in the JSON as "
            "p_post_selection"
        )
    else:
        mc = sorted({r.n_resamples for r in tested if not r.exact and r.n_resamples})
        how = []
        if any(r.exact for r in tested):
            how.append("exact over all swap patterns where few rows differ")
        if mc:
            how.append(f"Monte Carlo with R={', '.join(map(str, mc))} resamples, p=(b+1)/(R+1)")
        parts.append(f"test: {first.test}, two-sided; p: {'; '.join(how)}")
        # start-up: the analysis (scipy) loads only once there are comparisons to print
        from experiments.analysis.intervals import F1_RESAMPLES

        counts: dict[str, int] = {}
        for r in tested:
            if r.ci_method:
                counts[r.ci_method] = counts.get(r.ci_method, 0) + 1
        each = [
            f"{m} ({n} of {len(tested)} comparisons)" if len(counts) > 1 else m
            for m, n in sorted(counts.items())
        ]
        parts += [f"95% CI of A − B: {m}" for m in each or [f"paired bootstrap ({F1_RESAMPLES})"]]
        parts.append(
            "'!' marks an interval flagged degenerate or unreliable, or one that points "
            "another way than the test (see ci_note in the JSON)"
        )
        parts.append(
            "MDE80: smallest true difference this test, as run, detects 80% of the time "
            "(simulated, experiments.analysis.power; '-' where no effect can reach it or, over "
            "5,000 units (experiments.analysis.power.MAX_UNITS), it is not simulated; '?' "
            "where it is flagged unreliable: its validation measured the true power off "
            "0.80 +- 0.05 for such data, or did not reach them (more units, a smaller "
            "minority share, more classes, another metric): see mde_note)"
        )
    # the family the correction ran over: the whole sweep's, also when fewer rows are shown
    # (`workbench report --model`)
    family = first.family_size or len(tested)
    shown = f" ({len(tested)} shown here)" if family != len(tested) else ""
    parts.append(
        f"p corr: {_correction(first)} across this {of}'s {family} tested comparisons{shown}"
    )
    return "method:\n" + "\n".join(f"  {p}." for p in parts)


def _units_footnote(tested: list[Comparison], of: str) -> str:
    """What `n` and `clus` count; for an import, which clustering each comparison used (the
    source's prompt identity, the task's texts, or rows tested as independent units)."""
    if of == "sweep":
        return (
            "n: rows; clus: clusters of rows given the same prompt (or by the sweep's "
            "cluster_by), the units the tests swap and resample"
        )
    by: dict[str, list[str]] = {}
    for r in tested:
        where = f"{r.task} ({r.model})"
        how = str(r.clustered_by or "rows")
        if where not in by.setdefault(how, []):
            by[how].append(where)
    if len(by) == 1:
        how = next(iter(by))
        return f"n: rows; clus: the units the tests swap and resample, clustered by {how}"
    each = "; ".join(f"{how}: {', '.join(where)}" for how, where in by.items())
    return f"n: rows; clus: the units the tests swap and resample, clustered by {each}"


def across_table(
    across: Sequence[AcrossTaskTest | Mapping[str, Any]], folders: Sequence[str] = ()
) -> str:
    """The declared across-task test of a sweep, one line per (model, comparison); its mean
    difference is of A − B. `across`: the records, or their stored rows (read once, here)."""
    if not across:
        return "across tasks: no across-task test (a single task, or no comparison)"
    rows = _across_tests(across)
    if all(r.n_tasks < 2 and r.p_value is None and not r.missing_tasks for r in rows):
        # one line, not one "no test" line per comparison (a one-task sweep of 4 variants
        # printed 6): the JSON keeps each row
        return "across tasks: no across-task test (fewer than 2 tasks per comparison)"
    lines = ["across tasks:"]
    shown = _names(rows, folders)
    for r in rows:
        p = "-" if r.p_value is None else f"{r.p_value:.4f}"
        diff = r.mean_difference
        d = "" if diff is None else f", mean A − B {diff:+.3f}"
        note = f" ({r.note})" if r.note else ""
        missing = f"; no score for {', '.join(r.missing_tasks)}" if r.missing_tasks else ""
        lines.append(
            f"  {r.model}: A {shown[str(r.a)]} vs B {shown[str(r.b)]}: {r.test} "
            f"({r.n_tasks} tasks), "
            f"p = {p}{d}{note}{missing}"
        )
    return "\n".join(lines)


def _across_tests(
    across: Sequence[AcrossTaskTest | Mapping[str, Any]],
) -> list[AcrossTaskTest]:
    """Each across-task row as its record: a stored row read once."""
    # start-up time: the analysis (scipy) loads only once there is a test to print
    from experiments.analysis.records import AcrossTaskTest

    return [r if isinstance(r, AcrossTaskTest) else AcrossTaskTest.from_dict(r) for r in across]


def decision_lines(doc: dict[str, Any], folders: Sequence[str] = ()) -> list[str]:
    """What to do after a sweep, report or import: one line per comparison and across-task
    test, from its recommendation (`experiments.analysis.decision`), printed last; its arms
    named as the tables name them (a text file's path short, `display_name`)."""
    # start-up time: the CLI imports output first; the analysis is loaded by then
    from experiments.analysis.decision import lines

    # a sequential row stays a dict (`sweeps.sequential_result`, a layer above)
    rows: list[Mapping[str, Any] | Comparison | AcrossTaskTest] = [
        *_comparisons(doc.get("comparisons") or ()),
        *(doc.get("sequential") or ()),
        *_across_tests(doc.get("across_tasks") or ()),
    ]
    shown = _names(rows, folders)
    if all(s == n for n, s in shown.items()):
        return lines(doc)
    # one pass, every name (also those shown as written) an alternative, the longer first: a
    # name inside another (``…a.yaml`` in ``…a.yaml,seed=1``) is never replaced within it
    pattern = re.compile("|".join(map(re.escape, sorted(shown, key=len, reverse=True))))
    return [pattern.sub(lambda m: shown[m.group(0)], line) for line in lines(doc)]
