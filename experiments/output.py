"""Everything the `workbench` command line prints, built from plain result dicts.

The CLI wires options to the library and hands the results here; each function returns the
whole text (or JSON) so a command prints its answer in one piece, never half of it. Keeping
the formatting in one module lets a command grow a section (a new table, a new column) by
adding a function that takes the result dict, without touching the option wiring.

Progress bars (`progress_bar`, from promptlib.progress) go to stderr, so `--json` output on
stdout stays clean.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from experiments.trials.labels import display_name, table_names
from experiments.trials.record import TrialStatus
from promptlib.progress import progress_bar as progress_bar  # the CLI's bars, re-exported

if TYPE_CHECKING:  # start-up time: the analysis (scipy) loads only once there is one to print
    from experiments.analysis.records import AcrossTaskTest, Comparison


def _f(x: Any, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


def as_json(obj: Any, indent: int | None = None) -> str:
    """One JSON document (non-JSON values such as paths shown with str)."""
    return json.dumps(obj, ensure_ascii=False, default=str, indent=indent)


# ---- tasks and prompts -------------------------------------------------------------------------
def task_list(entries: Sequence[Any], source: str = "") -> str:
    """`workbench tasks`: a header, one line per task (a `TaskProblem` shows its error), and
    under the table what a "-" split means when one is shown."""
    # start-up time: the CLI imports output first
    from promptlib.tasks import TaskProblem

    lines = [f"{'task':<60} {'type':<11} {'metric':<36} {'train':>5} {'test':>5}  labels"]
    missing = {"train": 0, "test": 0}
    for s in entries:
        if isinstance(s, TaskProblem):
            lines.append(f"{s.name:<60} error: {s.error}")
            continue
        labels = ",".join(s.labels) if s.labels else "-"
        if len(labels) > 50:
            labels = labels[:47] + "..."
        n_test = "-" if s.n_test is None else str(s.n_test)
        n_train = "-" if s.n_train is None else str(s.n_train)
        missing["train"] += s.n_train is None
        missing["test"] += s.n_test is None
        lines.append(
            f"{s.name:<60} {s.task_type:<11} {s.metric:<36} {n_train:>5} {n_test:>5}  {labels}"
            + ("  (your task)" if s.user_task else "")  # `workbench task new`'s, not LegalBench's
        )
    if any(missing.values()):
        if any(getattr(s, "user_task", False) for s in entries):
            source += ("; " if source else "") + "your own tasks: their task folders"
        lines.append(_missing_splits_note(missing, len(entries), source))
    return "\n".join(lines)


def _missing_splits_note(missing: dict[str, int], n_tasks: int, source: str) -> str:
    """What "-" in the train or test column means: the file is not in this data."""
    where = f" ({source})" if source else ""
    counts = "; ".join(
        f"no {split}.tsv: {n} of {n_tasks} tasks" for split, n in missing.items() if n
    )
    return (
        f'train, test: rows in each task\'s train.tsv and test.tsv; "-": the file is not in '
        f"this data{where}, so the task has no rows of that split here and a sweep on that "
        f"split skips it ({counts}). LegalBench's full test splits are in the Hugging Face "
        "dataset nguha/legalbench (--hf)."
    )


def rendered_prompts(task: str, label: str, variant_id: str, items: list[dict[str, Any]]) -> str:
    """`workbench render`: a header, then each prompt under its index and answer."""
    header = f"# task={task} variant={label} id={variant_id[:12]}"
    blocks = [header] + [
        f"----- index={it['index']} answer={it['answer']}\n{it['prompt']}" for it in items
    ]
    return "\n".join(blocks)


# ---- one trial -------------------------------------------------------------------------------
def trial_summary(s: dict[str, Any]) -> str:
    """`workbench run`: a trial's summary (`TrialResult.summary()` plus predictions/tracking)."""
    graded = s.get("graded")
    if s["score"] is not None:
        score_line = f"{s['metric']:<28}{_f(s['score'])}"
    elif s["metric"] == "manual" and s["status"] == TrialStatus.COMPLETE:
        score_line = (
            f"{'score':<28}ungraded (graded by hand: workbench grade export {s['trial_id'][:12]})"
        )
    else:
        score_line = f"{s['metric']:<28}-   (on answered rows: {_f(s['score_on_answered'])})"
    lines = [
        f"task      {s['task']}   split={s['split']}   n={s['n']}   status={s['status']}",
        f"variant   {s['variant']}   ({s['variant_id'][:12]})",
        f"model     {s['model']}   scoring={s['scoring']}",
        score_line,
    ]
    if graded:
        lines.append(f"{'graded rows':<28}{graded}")
    lines += [
        f"{'accuracy':<28}{_f(s['accuracy'])}",
        f"{'invalid rate':<28}{_f(s['invalid_rate'])}",
        f"{'errors':<28}{s['n_errors']}",
        f"{'model calls / cache hits':<28}{s['model_calls']} / {s['cache_hits']}",
        f"{'tokens in / out':<28}"
        + (
            "not counted (log-likelihood scoring: no usage is returned)"
            if str(s.get("scoring", "")).startswith("loglik") and not s["tokens_in"]
            else f"{s['tokens_in']} / {s['tokens_out']}"
        ),
        f"{'cost (USD)':<28}{_f(s['cost'], '.6f')}",
        f"{'wall time (s)':<28}{s['wall_time']}",
        f"predictions {s['predictions']}",
    ]
    if s.get("mlflow_run_id"):
        again = "; this trial was tracked before" if s.get("mlflow_reused") else ""
        lines.append(f"MLflow run  {s['mlflow_run_id']}   ({s.get('mlflow_experiment')}{again})")
    elif s.get("mlflow_kept_run_id"):
        lines.append(
            f"MLflow run  {s['mlflow_kept_run_id']}   ({s.get('mlflow_experiment')}; the finished "
            "trial's, unchanged: this rerun was not logged)"
        )
    return "\n".join(lines)


def score_line(task: str, metric: str, value: float, n: int) -> str:
    """`workbench score`."""
    return f"{task}  {metric} = {value:.4f}  (n={n})"


# ---- sweeps ----------------------------------------------------------------------------------
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


def sweep_summary(
    result: dict[str, Any], tracking_uri: str, folders: Sequence[str] = (), explain: bool = False
) -> str:
    """`workbench sweep`: header, skipped tasks, comparison and across-task tables, where to look.

    `result` is `run_sweep`'s dict; its optional `trial_rows` (per-trial invalid rates) feed
    the comparison table's invalid-output columns; its `report_dir` is where its files went
    (this sweep run's own folder, under the reports folder).
    `folders` (the spec's): a text file's path is shown relative to it when that is shorter.
    """
    lines = [
        f"sweep {result['sweep']}: {result['trials']} trials "
        f"({result['resumed']} resumed from MLflow), parent run {result['parent_run_id']}",
    ]
    lines += [f"skipped {s['task']}: {s['reason']}" for s in result["skipped"]]
    lines += note_lines(result.get("notes") or [])
    if result.get("sequential") is not None:
        lines.append(sequential_table(result["sequential"], folders, explain=explain))
    else:
        lines.append(comparison_table(result["comparisons"], result.get("trial_rows"),
                                      folders=folders, explain=explain))  # fmt: skip
        lines.append(across_table(result["across_tasks"], folders))
    if result.get("cost"):
        lines.append(cost_line(result["cost"]))
    sens = result.get("sensitivity") or {}
    if sens.get("per_task") or sens.get("error"):
        lines.append(
            sens.get("error") or f"prompt sensitivity: in workbench report {result['sweep']}"
        )
    if result.get("report_dir"):
        lines.append(
            report_folder_line(result["report_dir"], result["report_files"], result["latest"])
        )
    lines.append(f"MLflow store: {tracking_uri}")
    where = f" (experiment {result['experiment']})" if result.get("experiment") else ""
    lines.append(
        # workbench ui finds the same store from any folder of the project (or the user
        # default); make ui only works at the project root
        "Open the MLflow UI on these runs: workbench ui  (or make ui at the project root), then "
        f"http://127.0.0.1:5000{where}"
    )
    lines += decision_lines(result, folders)  # last: what to do, one line per comparison
    return "\n".join(lines)


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


def report_folder_line(folder: str, files: Sequence[str], latest: str) -> str:
    """Where `workbench sweep` wrote this sweep run's files: its own folder, named by its
    sweep id (`reports.folders`), and the `latest` pointer (symlink, or LATEST file) now
    naming it."""
    table = [f for f in files if f.startswith("comparisons.")]
    figures = [f for f in files if f not in table]
    listed = ", ".join(table) + (f"; figures: {', '.join(figures)}" if figures else "")
    points = "names it" if latest.endswith("LATEST") else "points at it"
    return f"reports written to {folder}/ ({listed}); {latest} {points}"


def cost_line(cost: dict[str, Any]) -> str:
    """What a sweep cost: model calls made now against the full grid's, tokens and price."""
    price = "unknown" if cost.get("cost_usd") is None else f"${cost['cost_usd']:.4f}"
    share = cost.get("share_of_grid")
    of_grid = "" if share is None else f" ({share:.0%} of the grid)"
    return (
        f"cost ({cost['design']} design): {cost['model_calls']} model calls made now, "
        f"{cost['cache_hits']} rows from the cache or MLflow; {cost['rows_evaluated']} rows "
        f"evaluated of the full grid's {cost['grid_calls']}{of_grid}; {_tokens(cost)}; "
        f"cost {price}"
    )


def _tokens(cost: dict[str, Any]) -> str:
    """The tokens sent, saying which rows nobody counted (log-likelihood rows record none)
    rather than printing their 0 as a total."""
    uncounted = cost.get("tokens_uncounted_rows") or 0
    counted = f"tokens {cost['tokens_in']} in, {cost['tokens_out']} out"
    if not uncounted:
        return counted
    rows = f"{uncounted} log-likelihood row{'s' if uncounted != 1 else ''}"
    if not cost["tokens_in"] and not cost["tokens_out"]:
        return f"tokens not counted ({rows}: the model returns label log-probabilities, no usage)"
    return f"{counted} (not counted: {rows})"


def sequential_table(
    rows: list[dict[str, Any]],
    folders: Sequence[str] = (),
    family: int | None = None,
    explain: bool = False,
) -> str:
    """A sequential sweep's comparisons: the decision, the rows at the stop and the interval
    reached, the looks, and the arms eliminated (when, on how many rows). `family`: how many
    comparisons the level was split over when `rows` are fewer (one model's of several)."""
    if not rows:
        return "no sequential comparisons (nothing to compare)"
    shown = _names(rows, folders)  # A, B and the eliminated arms: one name each
    arm = max([24, *(len(shown[str(r[k])]) for r in rows for k in ("a", "b"))])
    out = [
        f"{'model':<18} {'task':<28} {'A':<{arm}} {'B':<{arm}} {'score A':>8} {'score B':>8} "
        f"{'A − B':>7} {'interval':>17} {'rows':>5} {'clus':>5} {'budget':>6} {'looks':>5}  "
        "decision"
    ]
    for r in rows:
        ci = f"[{r['ci_low']:+.3f},{r['ci_high']:+.3f}]" if r.get("ci_low") is not None else "-"
        decided = r["decision"] if r.get("decision") else f"none ({r['status']})"
        if r.get("decision") == "best" and r.get("best_identified") is False:
            tied = ", ".join(map(str, r.get("in_contention") or ()))
            decided = f"A beats B; the best is not identified (still in contention: {tied})"
        out.append(
            f"{str(r['model'])[:18]:<18} {r['task'][:28]:<28} {shown[str(r['a'])]:<{arm}} "
            f"{shown[str(r['b'])]:<{arm}} "
            f"{_f(r.get('score_a'), '.3f'):>8} {_f(r.get('score_b'), '.3f'):>8} "
            f"{_f(r.get('estimate'), '+.3f'):>7} {ci:>17} {r['n']:>5} "
            f"{_f(r.get('n_clusters'), 'd'):>5} {r['budget']:>6} "
            f"{len(r.get('looks') or ()):>5}  {decided}"
        )
        out += [
            f"    eliminated {shown[str(e['variant'])]} after {e['rows']} rows (by {e['by']})"
            for e in r.get("eliminated") or ()
        ]
    first = rows[0]
    if explain:
        out.append(_sequential_legend(first, family or len(rows)))
    else:
        out += _sequential_short_legend(first, family or len(rows))
    return "\n".join(out)


def _sequential_short_legend(first: dict[str, Any], n: int) -> list[str]:
    """The sequential table's legend in three short lines; `--explain` gives the full text."""
    level = f"{first['alpha']:.4g} per comparison (Bonferroni over {n})"
    if first.get("method") == "group":
        design = f"group-sequential, looks every {first['batch']} rows"
        interval = f"repeated confidence interval (normal theory); test: {first['sequence']}"
    else:
        design = f"anytime-valid, looks after every {first['batch']} rows"
        interval = f"confidence sequence ({first['sequence']}); no p-values"
    by_prompt = first.get("clustered_by") == "prompt"
    clus = "; clus: clusters of rows given one prompt" if by_prompt else ""
    return [
        f"design: sequential, {design}; level {level}",
        f"interval: {interval}",
        f"rows: on both arms at the stop{clus}; full method: --explain",
    ]


def _sequential_legend(first: dict[str, Any], n: int) -> str:
    """The sequential table's note: the design, the test, the units, the level."""
    units = (
        "rows given the same prompt (repeated texts) are one cluster (clus), evaluated "
        "together and swapped or bet on as one; the metric still counts every row"
        if first.get("clustered_by") == "prompt"
        else "rows are the units"
    )
    level = (
        f"level {first['alpha']:.4g} per comparison (family {first['family_alpha']}, "
        f"Bonferroni over {n})"
    )
    if first.get("method") == "group":
        delta = (
            f"; equivalent: two one-sided tests at the looks, inside +-{first['delta']} (its "
            "interval is the one-sided bounds')"
            if first.get("delta")
            else ""
        )
        return (
            f"design: sequential, group-sequential, planned looks every {first['batch']} rows "
            f"up to the budget; test: {first['sequence']}, A − B in the task's metric, {level}; "
            f"decisions A/B exact under exchangeable replies of A and B per cluster; interval: "
            f"repeated confidence interval at {1 - first['alpha']:.4g}, normal theory, "
            "approximate, and it may disagree with the decision near 0 (the decision is the "
            f"permutation test's); {units}; A, B: the best and worst variant for "
            f"best_vs_worst/all_pairs (successive elimination){delta}. rows: on both arms at "
            "the stop; scores on those rows."
        )
    delta = f"; equivalent: the interval inside +-{first['delta']}" if first.get("delta") else ""
    return (
        f"design: sequential, looks after every {first['batch']} rows; sequence: "
        f"{first['sequence']}; interval: anytime-valid at {level}, of A − B "
        "in the task's metric (excluding 0 holds its level exactly when A's and B's replies "
        f"are exchangeable on every cluster); {units}; A, B: the best and worst variant for "
        f"best_vs_worst/all_pairs (successive elimination){delta}. rows: on both arms at the "
        "stop; scores on those rows. No p-values: a fixed-design test on rows chosen by "
        "stopping would not hold its level."
    )


def incomplete_trials_error(incomplete: list[dict[str, Any]]) -> str:
    """stderr line of a sweep with incomplete trials."""
    listed = "; ".join(
        f"{t['task']} · {t['variant']} · {t['model']} ({t['status']}: {t['n_errors']} of "
        f"{t['n']} rows failed)"
        for t in incomplete
    )
    # the first row error says what to do (a key to set, a server to start) before a rerun
    first = next((t for t in incomplete if t.get("first_error")), None)
    why = f" First error: {first['first_error']}." if first else ""
    return (
        f"error: {len(incomplete)} trial(s) incomplete: {listed}.{why} Their comparisons have "
        "no p-value. Rerun the same command to resume: only the failed rows are sent again."
    )


def sweep_report(
    sweep_name: str,
    info: dict[str, Any],
    doc: dict[str, Any],
    trials: Sequence[dict[str, Any]] | None = None,
    *,
    report_dir: str | None = None,
    shown: tuple[int, int] | None = None,
    explain: bool = False,
) -> str:
    """`workbench report`: a sweep's tables again, from its MLflow parent run (a text file's
    path shown relative to here or to the spec's folder, its `spec` param, when shorter).

    `report_dir`: the run's folder under reports/, when there is one here. `shown`: (this
    model's comparisons, the sweep's) when `doc` is cut to one model (``--model``)."""
    spec = (info.get("params") or {}).get("spec")
    folders = [os.path.dirname(str(spec)) or "."] if spec else []
    sid = f"sweep id {info['sweep_id']}, " if info.get("sweep_id") else ""
    lines = [f"sweep {sweep_name} ({sid}run {info['run_id']}, {info['status']})"]
    if doc.get("model_shown") and shown is not None:
        lines.append(
            f"model {doc['model_shown']} only (--model): {shown[0]} of the sweep's {shown[1]} "
            "comparisons; every number is the whole sweep's (corrections over all its models)"
        )
    if doc.get("sequential") is not None:  # a sequential sweep's comparisons are its sequences'
        lines.append(
            sequential_table(doc["sequential"], folders, shown[1] if shown else None, explain)
        )
    else:
        lines.append(comparison_table(doc["comparisons"], trials, folders=folders, explain=explain))
    lines.append(across_table(doc.get("across_tasks") or [], folders))
    lines += [
        f"incomplete: {t['task']} · {display_name(str(t['variant']), folders)} · {t['model']} "
        f"({t['n_errors']} of {t['n']} rows failed); rerun the sweep to resume"
        for t in doc.get("incomplete") or []
    ]
    lines.append(sensitivity_section(doc.get("sensitivity"), folders))
    if report_dir:
        lines.append(f"report files: {report_dir}/")
    lines += decision_lines(doc, folders)  # last: what to do
    return "\n".join(lines)


def sensitivity_section(sens: dict[str, Any] | None, folders: Sequence[str] = ()) -> str:
    """The prompt-sensitivity section of `workbench report` (`experiments.analysis.sensitivity`)."""
    if not sens:
        return "prompt sensitivity: not computed for this sweep (run it again to add it)"
    if sens.get("error"):
        return f"prompt sensitivity: {sens['error']}"
    # start-up time: the CLI imports output first
    from experiments.analysis.sensitivity import format_sensitivity

    return format_sensitivity(sens, folders)


def dry_run(
    items: list[dict[str, Any]],
    skipped: list[dict[str, Any]],
    notes: list[dict[str, str]] | None = None,
    times: Sequence[Any] = (),
    spec_path: str = "SPEC",
    folders: Sequence[str] = (),
) -> str:
    """`workbench sweep --dry-run`: the planned trials with token and cost estimates, and
    each local model's time on this machine (`estimate.ModelTime`) or how to get it. Variant
    names are whole, a text file's path relative to here or to the spec's folder (`folders`)
    when shorter: a cut name hid which file."""
    shown = _names(items, folders, ("variant",))
    arm = max([28, *map(len, shown.values())])
    lines = [f"{'task':<40} {'variant':<{arm}} {'model':<20} {'n':>5} {'~tokens':>9} {'~cost':>9}"]
    for it in items:
        cost = "?" if it["cost_est"] is None else f"${it['cost_est']:.4f}"
        lines.append(
            f"{it['task'][:40]:<40} {shown[str(it['variant'])]:<{arm}} {it['model'][:20]:<20} "
            f"{it['n']:>5} {it['prompt_tokens_est']:>9} {cost:>9}"
        )
    total = sum(it["prompt_tokens_est"] for it in items)
    costs = [it["cost_est"] for it in items]
    known = all(c is not None for c in costs)
    batch = any(it.get("price") == "batch" for it in items)  # --batch: at batch prices
    lines.append(
        f"{len(items)} trials, ~{total} prompt tokens (4 characters per token), cost "
        + (f"~${sum(c for c in costs if c is not None):.4f}" if known else "unknown for this model")
        + ("" if not batch else " at batch prices" if known else " (batch price unknown)")
        + "; no model was called"
    )
    if any(it.get("bound") == "upper" for it in items):
        grid = sum(it.get("grid_n", it["n"]) for it in items)
        lines.append(
            f"sequential design: these are upper bounds, {sum(it['n'] for it in items)} calls "
            f"at most (the budget) of these variants' full grid of {grid}; a comparison stops "
            "as soon as it is decided, so the calls depend on the true differences (README: "
            "'When to use which design' gives the rows measured at 0.5x, 1x and 2x the MDE)"
        )
    else:
        lines.append(f"fixed design: {sum(it['n'] for it in items)} calls (the full grid)")
    lines += [f"skipped {s['task']}: {s['reason']}" for s in skipped]
    lines += note_lines(notes or [])
    lines += model_time_lines([t for t in times if t.local], spec_path)
    return "\n".join(lines)


def note_lines(notes: list[dict[str, str]]) -> list[str]:
    """A planned variant's prompt working against it (`experiments.sweeps.plan.note_items`)."""
    return [f"note {n['task']}: variant {n['variant']}: {n['note']}" for n in notes]


# ---- plans (`workbench plan`, the time lines of `workbench sweep --dry-run`) -------------------
def duration(seconds: float) -> str:
    """A time estimate in words: "40 s", "12 min", "2.5 h", "14 h"."""
    if seconds < 90:
        return f"{max(round(seconds), 1)} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    hours = seconds / 3600
    return f"{hours:.1f} h" if hours < 10 else f"{round(hours)} h"


def _rates(speed: Any) -> str:
    return f"{speed.prompt_tok_s:g} prompt tok/s, {speed.gen_tok_s:g} generated tok/s"


def _measured(speed: Any) -> str:
    """Where and when a speed was measured, with the load then (`llm.speed.Speed`)."""
    load = "" if speed.load is None else f", load average {speed.load:g}"
    return f"on {speed.cpu}, {speed.measured_at}{load}"


def model_time_lines(times: Sequence[Any], spec_path: str) -> list[str]:
    """Per model (`estimate.ModelTime`): calls, tokens, time on this machine or why none."""
    lines = []
    for t in times:
        head = f"{t.model}: {t.calls} calls, ~{t.prompt_tokens} prompt tokens"
        if t.local:  # what it evaluates: llama.cpp keeps the prefix shared with the row before
            head += f" (~{t.fresh_tokens} not shared with the row before)"
        if t.seconds is not None:
            s = t.speed
            bound = "at most " if t.upper else "about "
            lines.append(
                f"{head}, {bound}{duration(t.seconds)} on this machine (measured {_rates(s)} "
                f"{_measured(s)})"
            )
        elif t.local:
            lines.append(
                f"{head}; time unknown: {t.model} was not measured on this machine: run "
                f"`workbench plan --measure {spec_path}` (a few seconds)"
            )
        else:
            price = "unknown price" if t.cost is None else f"~${t.cost:.4f}"
            lines.append(f"{head}, {price}; time {t.why}")
    return lines


def time_warning(times: Sequence[Any]) -> str:
    """One stderr line when a study's estimated time passes an hour (`estimate.too_long`)."""
    total = sum(t.seconds or 0.0 for t in times)
    slowest = max((t for t in times if t.seconds), key=lambda t: t.seconds)
    return (
        f"warning: about {duration(total)} on this machine (measured "
        f"{slowest.speed.prompt_tok_s:g} prompt tok/s for {slowest.model}); cut rows with "
        "`limit:` or models"
    )


def measuring_note(model: str, path: str) -> str:
    """stderr before a local model's speed is measured (`llm.speed.measure_speed`)."""
    return f"measuring {model} on this machine (a few seconds; kept in {path})"


def not_measured_note(model: str, error: str) -> str:
    return f"note: {model} could not be measured, so its time is not estimated: {error}"


def study_plan(p: Any) -> str:
    """`workbench plan`: per task and model the rows, calls, time or price and MDE80, then
    the models' totals and what the columns mean (`estimate.StudyPlan`)."""
    corrected = "Holm" if p.correction == "holm" else "BH"
    lines = [
        f"plan of {p.name} ({p.spec_path}): {_count(len(p.tasks), 'task')} x "
        f"{_count(len(p.models), 'model')}, split {p.split}, {p.design} design, "
        f"comparisons: {p.comparisons}; " + _family(p, corrected),
        f"{'task':<36} {'model':<22} {'rows':>5} {'(of)':>6} {'train':>5} {'calls':>6} "
        f"{'~time':>7} {'~price':>9} {'MDE80':>6} {'MDE80 ' + corrected:>11}",
    ]
    tasks = {t.task: t for t in p.tasks}
    for c in p.cells:
        t = tasks[c.task]
        of = "-" if t.split_rows is None else str(t.split_rows)
        train = "-" if t.train_rows is None else str(t.train_rows)
        time = "-" if c.seconds is None else duration(c.seconds)
        price = "-" if c.local else "?" if c.cost is None else f"${c.cost:.4f}"
        mde = _mde_cell(t.mde)
        fam = _mde_cell(t.mde_family)
        lines.append(
            f"{c.task[:36]:<36} {c.model[:22]:<22} {t.rows:>5} {of:>6} {train:>5} "
            f"{c.calls:>6} {time:>7} {price:>9} {mde:>6} {fam:>11}"
        )
    lines += [f"skipped {task}: {why}" for task, why in p.skipped]
    lines += model_time_lines(p.times, p.spec_path)
    total = sum(t.seconds or 0.0 for t in p.times)
    costs = [t.cost for t in p.times if not t.local]
    price = (
        "" if not costs
        else ", price unknown" if any(c is None for c in costs)
        else f", ~${sum(c for c in costs if c):.4f} at litellm's prices"
    )  # fmt: skip
    timed = [t for t in p.times if t.seconds is not None]
    bound = "at most" if any(t.upper for t in timed) else "about"
    when = f"{bound} {duration(total)} on this machine" if timed else "time not estimated"
    if timed and len(timed) < len(p.times):
        when += f" (for {', '.join(t.model for t in timed)})"
    lines.append(f"total: {sum(t.calls for t in p.times)} calls, {when}{price}")
    lines += _plan_legend(p)
    return "\n".join(lines)


def _family(p: Any, corrected: str) -> str:
    """The header's multiple-testing clause: the correction and the comparisons it spans."""
    if not p.family:
        return "none tested"
    tests = _count(p.family, "tested comparison")
    if p.sequential_alpha is not None and p.comparisons in ("all_pairs", "best_vs_worst"):
        return (
            f"alpha {p.sequential_alpha:g} split over {_count(p.family, 'elimination')} "
            "(Bonferroni; each splits its share over its pairs)"
        )
    if p.sequential_alpha is not None:
        return f"alpha {p.sequential_alpha:g} split over {tests} (Bonferroni)"
    return f"{corrected} over {tests}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _mde_cell(m: Any) -> str:
    return "-" if m is None or m.value is None else f"{m.value:.3f}"


def _plan_legend(p: Any) -> list[str]:
    """What the plan's columns mean, and what its MDE80 assumes."""
    a = p.assumption
    lines = [
        "rows: the test rows every variant is evaluated on, after the spec's limit (of: the "
        "split's rows); train: the train split's rows, the pool demonstrations come from; "
        "~time: on this machine, from its measured rates (prompt text shared with the row "
        "before is not evaluated again); ~price: litellm's prices, for API models",
    ]
    if p.mde_note and p.design == "sequential":
        lines.append(f"MDE80: not given: {p.mde_note}")
        return lines
    metric = ", ".join(dict.fromkeys(t.metric.replace("_", " ") for t in p.tasks)) or "the metric"
    units = {
        "prompt": "swapping clusters of rows given the same prompt",
        "rows": "swapping rows",
    }.get(p.cluster_by, f"swapping clusters of rows ({p.cluster_by}, joined to same-prompt rows)")
    lines.append(
        f"MDE80: the smallest true difference in {metric} that the paired permutation test "
        f"(two-sided, {p.n_resamples} resamples, {units}) detects 80% of the time at "
        f"p <= 0.05, simulated for these rows and their answer classes "
        f"(experiments/analysis/power.py), ASSUMING {a.describe()} (--accuracy, "
        f"--correlation); the report's MDE80 is simulated from the real outcomes"
    )
    if p.family > 1:
        corrected = "Holm" if p.correction == "holm" else "Benjamini-Hochberg"
        lines.append(
            f"MDE80 {'Holm' if p.correction == 'holm' else 'BH'}: the same at alpha 0.05/"
            f"{p.family} = {p.alpha_family:.4g}, what one comparison needs under {corrected} "
            f"over the {p.family} tested comparisons when it is the only real difference"
        )
    if p.mde_note:
        lines.append(f"note: {p.mde_note}")
    for t in p.tasks:
        if not t.skipped and not t.comparisons:
            lines.append(
                f"MDE80 - {t.task}: no comparison of this spec is tested on it (a variant it "
                "names is skipped there: see 'skipped' above)"
            )
        for m in (t.mde, t.mde_family):
            if m is not None and m.value is None and m.note:
                lines.append(f"MDE80 - {t.task} (alpha {m.alpha:.4g}): {m.note}")
    return lines


# ---- optimisation ----------------------------------------------------------------------------
def search_space(task: str, study: str, space: dict[str, Any]) -> str:
    """stderr at a study's start: each axis and its levels (`SearchSpace.to_dict`), then what
    was left out and why."""
    axes: dict[str, list[Any]] = space["axes"]
    lines = [f"search space of {task} (study {study}): {len(axes)} axes"]
    lines += [f"  {axis}: {', '.join(map(str, levels))}" for axis, levels in axes.items()]
    lines += [f"  note: {n}" for n in space.get("notes") or []]
    return "\n".join(lines)


def optimize_report(r: dict[str, Any]) -> str:
    """`workbench optimize`: the search, the winner and its held-out verdict."""
    h, b = r["heldout"], r["base_heldout"]

    def f(x: Any) -> str:
        return "-" if x is None else f"{x:.3f}"

    lines = [
        f"task {r['task']} · model {r['model']} · method {r['method']} · study {r['study']}",
        f"trials: {r['n_trials']} ({r['n_pruned']} pruned, {r['n_failed']} failed); dev rows "
        f"{r['n_dev']}; held-out rows {h['n']} (never seen by the search)",
        f"best variant: {r['best_variant']}{_file_won(r)}",
        *_winner_lines(r),
        f"dev score (search):        {f(r['dev_score'])}",
        f"held-out, best variant:    {f(h['score'])}  95% CI [{f(h['ci_low'])}, {f(h['ci_high'])}]"
        + (" !" if h.get("ci_note") else ""),
        f"held-out, base prompt:     {f(b['score'])}  95% CI [{f(b['ci_low'])}, {f(b['ci_high'])}]"
        + (" !" if b.get("ci_note") else ""),
        f"best vs base on held-out:  p = {r['p_value']:.4f}  ({r['test']})"
        if r.get("p_value") is not None
        else f"best vs base on held-out:  {r['test']}",
    ]
    if h.get("clustered_by") is not None:
        lines.append(f"held-out units:            {_verdict_units(h)}")
    # a flagged interval (degenerate, or of unknown coverage) is never shown without its sign
    lines += [
        f"! {arm} CI: {x['ci_note']}" for arm, x in (("best", h), ("base", b)) if x.get("ci_note")
    ]
    if h.get("cluster_note"):
        lines.append(f"! units: {h['cluster_note']}")
    if r.get("cost"):
        c = r["cost"]
        share = "" if c.get("share_of_grid") is None else f" ({c['share_of_grid']:.0%})"
        lines.append(
            f"model calls: {c['model_calls']} made now (search {c['search_calls']}, verdict "
            f"{c['verdict_calls']}) of the full grid's {c['grid_calls']}{share}: every trial "
            "on every dev row, both prompts on every judged held-out row"
        )
    if r.get("prompt_registry"):
        lines.append(f"registered: {r['prompt_registry']}")
    lines += [f"note: {n}" for n in r.get("search_notes") or []]
    rec = r.get("recommendation")
    if rec:  # last: use the winner, or keep the base prompt
        lines.append(f"decision: {rec['line']}")
    return "\n".join(lines)


def _winner_lines(r: dict[str, Any]) -> list[str]:
    """Where the winner's variant file is and the command that reruns it; without a file
    (the library's `optimize`, not the command), where the same JSON is."""
    if r.get("best_variant_file"):
        return [
            f"best variant file: {r['best_variant_file']}",
            f"rerun the best variant: {r['rerun_command']}",
        ]
    return [
        "winner: best_variant_json in the --json report, and best_variant.json on the study's "
        f"MLflow run; rerun it with workbench run {r['task']} --variant-file FILE (either)"
    ]


def _verdict_units(h: dict[str, Any]) -> str:
    """What the held-out verdict's test swapped and resampled: clusters of rows given the
    same prompt (as the sweep table's `clus`), or rows (the sequential verdict)."""
    n, how = h.get("n"), h.get("clustered_by")
    if how == "prompt":
        return (
            f"{h.get('n_clusters')} clusters of {n} rows (rows either prompt gave the same "
            "prompt are one cluster, swapped and resampled whole)"
        )
    if how == "rows":
        prompts = h.get("prompt_clusters")
        held = "" if prompts is None else f"; {prompts} distinct prompts among them"
        return f"{n} rows, each its own unit (not clustered{held})"
    return f"{h.get('n_clusters')} clusters of {n} rows (by {how})"


def _file_won(r: dict[str, Any]) -> str:
    """Which `--instruction-file` the winner's `instruction=custom` is (the label names none)."""
    file = (r.get("best_params") or {}).get("instruction_file")
    return f" (instruction_file {file})" if file not in (None, "none") else ""


# ---- grading ---------------------------------------------------------------------------------
def grade_export(path: str, n_rows: int, trial_id: str) -> str:
    return (
        f"wrote {path}: {n_rows} rows of trial {trial_id[:12]} to grade; fill the 'grade' "
        "column with 1/0 (or correct/incorrect), then: workbench grade import " + path
    )


def grade_import(summary: dict[str, Any]) -> str:
    tracked = (
        f"; MLflow run {summary['mlflow_run_id']} updated" if summary.get("mlflow_run_id") else ""
    )
    return (
        f"trial {summary['trial_id'][:12]} ({summary['task']}): {summary['metric']} = "
        f"{summary['score']:.4f} on {summary['graded']} graded rows{tracked}"
    )


# ---- command-line notes and errors (stderr lines, the version) --------------------------------
def version_line(version: str | None) -> str:
    """`workbench --version` (None: the package is not installed)."""
    if version is None:
        return "workbench (version unknown: the package is not installed)"
    return f"workbench {version}"


def task_problem(name: str, error: str) -> str:
    """stderr line of `workbench tasks` for a task whose data cannot be read."""
    return f"error: task {name!r}: {error}"


def demonstrations_left_out(split: str, excluded: Sequence[str]) -> str:
    """stderr note of `workbench render`: rows held out because they are demonstrations."""
    return (
        f"note: {len(excluded)} {split} row(s) left out because they are "
        "demonstrations: " + ", ".join(excluded)
    )


def run_note(text: str) -> str:
    """stderr note of `workbench run` (grades dropped or kept, an earlier trial kept)."""
    return f"note: {text}"


def run_untracked_error(out_dir: str, error: str) -> str:
    """stderr line of `workbench run` when the trial is saved but the store refused it."""
    return (
        f"error: the trial is saved in {out_dir} but not tracked: {error}. Run the "
        "same command again to track it (answers come from the cache), or add --no-track"
    )


def run_incomplete_error(
    status: str, reason: str, predictions: str, rerun_helps: bool, kept: Sequence[str] = ()
) -> str:
    """stderr line of `workbench run` for a trial with failed rows; `kept`: what of an
    earlier, better result this rerun left as it was (`run_kept_notes`), in the same line."""
    # an error a rerun meets again (longer than the context, a missing key) gets its fix,
    # not the advice to run again
    then = (
        "Run the same command again to retry only those rows."
        if rerun_helps
        else "The same prompts fail the same way until that is fixed: see the fix in the error."
    )
    also = "".join(f" {k[:1].upper()}{k[1:]}." for k in kept)
    return (
        f"error: trial {status}: {reason}; see 'error' in {predictions}. It has no score.{also} "
        f"{then}"
    )


def run_kept_notes(summary: dict[str, Any]) -> list[str]:
    """What an unfinished `workbench run` left as it was: the saved trial on disk, and the
    trial's FINISHED MLflow run (the rerun was not logged beside it)."""
    kept = [summary[k] for k in ("grades_kept", "trial_kept") if summary.get(k)]
    if summary.get("mlflow_kept_run_id"):
        kept.append(
            f"its FINISHED MLflow run {summary['mlflow_kept_run_id']} stays the trial's record "
            "(this rerun was not logged)"
        )
    return kept


def command_error(message: str) -> str:
    """stderr line of any command stopped by a workbench error (message already redacted)."""
    return f"error: {message}"


def sweep_rebuilt_note(n_rebuilt: int) -> str:
    """stderr note of `workbench sweep` when trial runs were logged anew."""
    return (
        f"note: {n_rebuilt} trial run(s) had lost their MLflow artifacts; "
        "they were run again (answers from the response cache) and logged anew"
    )


def other_sweep_runs_note(sweep_name: str, shown: str, others: Sequence[dict[str, Any]]) -> str:
    """stderr line of `workbench report NAME` when the sweep has several runs (sweep ids):
    which one is shown (the latest) and how to show another."""
    listed = [f"{o['sweep_id'][:12]} (models {o['models'] or '?'}, {o['status']})" for o in others]
    more = f" and {len(listed) - 5} more" if len(listed) > 5 else ""
    return (
        f"note: sweep {sweep_name!r} has {len(others) + 1} runs; showing the latest, "
        f"{shown[:12]}; other runs: {', '.join(listed[:5])}{more}; show one with "
        "workbench report <sweep id>"
    )


def sweep_not_complete_error(sweep_name: str, status: str) -> str:
    """stderr line of `workbench report` on a sweep that has not finished."""
    return (
        f"error: sweep {sweep_name!r} is not complete (parent run {status}); "
        "its table is partial. Rerun the sweep to resume it"
    )


# ---- generated texts (`workbench variants generate`) -----------------------------------------
def generation_lines(doc: dict[str, Any]) -> str:
    """stdout of `workbench variants generate`: one line per candidate, then how to use them."""
    lines = []
    for c in doc["candidates"]:
        n = c["candidate"]
        if c["status"] == "written":
            lines.append(
                f"wrote {c['path']} ({doc['kind']} of {doc['task']} by {doc['generator']}, "
                f"candidate {n}, sha256 {c['text_sha256'][:12]}, reviewed: false)"
            )
        elif c["status"] == "unchanged":
            lines.append(f"unchanged {c['path']} (candidate {n}: the same text is there already)")
        elif c["status"] == "duplicate":
            lines.append(f"candidate {n}: {c['reason']} ({c['path']}), not written again")
    written = [c["path"] for c in doc["candidates"] if c["status"] in ("written", "unchanged")]
    if written:
        lines.append(
            f"use: --variant {doc['variant_key']}={written[0]} (or {doc['variant_key']}: in a "
            "sweep spec); read the text first, then set reviewed: true in the file"
        )
    if doc.get("mlflow_run_id"):
        lines.append(f"MLflow run {doc['mlflow_run_id']}")
    return "\n".join(lines)


def generation_refused(candidate: int, reason: str) -> str:
    """stderr line of a candidate text `workbench variants generate` did not write."""
    return f"error: candidate {candidate} refused, not written: {reason}"


def unreviewed_warning(path: str) -> str:
    """stderr line of a sweep or run that uses a generated text no one has reviewed."""
    return (
        f"warning: {path} is generated text not yet reviewed (reviewed: false): read it, then "
        "set reviewed: true in the file; until then runs using it are tagged "
        "workbench.unreviewed"
    )


# ---- imports (`workbench import`, `workbench compare`) -----------------------------------------
def _left_out_lines(left_out: Sequence[dict[str, Any]], shown: int = 10) -> list[str]:
    """The rows left out of the comparisons, grouped by (task, model) and reason."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for x in left_out:
        groups.setdefault((x["task"], x["model"], x["reason"]), []).append(x["row"])
    lines = []
    for (task, model, reason), rows in groups.items():
        more = f" and {len(rows) - shown} more" if len(rows) > shown else ""
        lines.append(
            f"left out of {task} ({model}): {len(rows)} row(s) {reason}, not scored as wrong: "
            f"{', '.join(rows[:shown])}{more}"
        )
    return lines


def import_summary(result: dict[str, Any], explain: bool = False) -> str:
    """`workbench import` and `workbench compare`: what was read, the rows left out, the
    scoring notes, the comparison and across-task tables, sensitivity, where it is tracked."""
    files = result["files"]
    tools = f" ({', '.join(result['tools'])})" if result.get("tools") else ""
    lines = [
        f"import {result['import']}: {len(result['trials'])} trial(s) from {len(files)} "
        f"{result['format']} file(s){tools}"
    ]
    lines += _left_out_lines(result.get("left_out") or [])
    lines += [f"note: {n}" for n in result.get("notes") or []]
    models = {t["model"] for t in result["trials"]}
    if not result["comparisons"] and len(models) > 1 and result.get("between") != "models":
        lines.append("one variant per model: to compare the models, add --between models")
    if result.get("between") == "models":
        lines.append(
            "between models: A and B are models, and the 'model' column (shown with more than "
            "one) names the prompt variant they were both given"
        )
    lines.append(comparison_table(result["comparisons"], of="import", explain=explain))
    lines += [f"pairing: {n}" for n in result.get("pairing") or []]
    lines.append(across_table(result["across_tasks"]))
    lines.append(sensitivity_section(result.get("sensitivity")))
    tr = result.get("tracking")
    if tr:
        how = (
            "read back from"
            if tr.get("read_back")
            else "already tracked, not logged again"
            if tr.get("reused")
            else "tracked"
        )
        where = f", experiment {tr['experiment']}" if tr.get("experiment") else ""
        lines.append(f"MLflow: {how}: parent run {tr['run_id']}{where} ({tr['tracking_uri']})")
        lines.append(f"again, with other tests: workbench compare {result['import']} --help")
    else:
        lines.append("MLflow: not tracked (--no-track)")
    lines += decision_lines(result)
    return "\n".join(lines)
