"""What to do after a comparison: one plain line a person can act on, from the table's numbers.

A table of differences, intervals and p-values is not a decision. Each comparison (a row of a
sweep's or an import's table, a sequential comparison, an across-task test, an optimisation's
best-vs-base verdict) gets a `Recommendation`: an action, the arm it names and the sentence
printed last. The rules keep the sentence from saying more than the numbers do:

- A difference is called only when the test behind the row rejects at `ALPHA` after the
  sweep's own multiple-testing correction (``p_corrected``, Holm or Benjamini-Hochberg over
  the sweep's tested comparisons), and only in the direction of the table's ``diff`` (A - B,
  as the table states it). The line quotes that diff with the table's sign and format, so it
  can never contradict the table. `ALPHA` is the level every fixed-design number is read at:
  the 95% intervals, the MDE80 column (simulated at 0.05) and the interval/test note.
- Otherwise the line says "no decision", with the rows and the MDE80: a true difference
  smaller than it is detected less than 80% of the time, so "no difference found" is not
  "no difference". Where the comparison has a base arm (an optimisation's base prompt) the
  line says "keep" it instead: the base is what one already has.
- A sequential comparison's line is its own decision (the sequence's or the group-sequential
  test's), never a re-test of its rows: a fixed-design test on rows chosen by stopping would
  not hold its level.
- Across tasks: the declared test's p-value, corrected (by the sweep's method) over the
  sweep's across-task tests when there are several; a direction only where the test's own
  statistic and the table's mean difference agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from experiments.analysis import stats
from experiments.analysis.records import (
    RECOMMENDATION,
    AcrossCorrection,
    AcrossTaskTest,
    Action,
    Comparison,
    Recommendation,
)

__all__ = ["ALPHA", "KEY", "SKIPPED", "Action", "Recommendation", "annotate", "fill", "lines"]

#: the level decisions are made at (fixed designs; a sequential design carries its own)
ALPHA = 0.05

#: the key a comparison row, across-task row or optimisation report carries it under (a
#: sequential row's ``decision`` is the sequence's own call: "A", "B", "best", ...)
KEY = RECOMMENDATION
MISSED = "differences smaller than that would often be missed"
#: how the status of a comparison not run on a task (a variant it skips) begins
#: (`experiments.sweeps.report`); any other untested comparison has an incomplete trial
SKIPPED = "skipped on this task"


Row = TypeVar("Row", Comparison, AcrossTaskTest)


def _where(row: Mapping[str, Any] | Comparison) -> str:
    """The line's start: "task (model): " for a sweep's or import's row, else nothing."""
    if isinstance(row, Comparison):
        task, model = row.task, row.model
    else:
        task, model = row.get("task"), row.get("model")
    if task is None:
        return ""
    return f"{task} ({model}): " if model is not None else f"{task}: "


def _ci(low: Any, high: Any, what: str = "95% CI") -> str:
    return "" if low is None or high is None else f", {what} [{low:+.3f}, {high:+.3f}]"


def _mde(row: Comparison) -> str:
    """The rows and the MDE80 of a comparison that did not decide (as the table's columns)."""
    n = row.n
    mde = row.mde_80
    if mde is None:  # the table's '-': no effect reaches 80% power, or too many units
        return f"n {n}; no MDE80 (see mde_note)"
    flag = ", flagged unreliable" if row.mde_unreliable else ""
    return f"n {n}, MDE80 {mde:.3f}{flag}: {MISSED}"


def _pv(p: float, alpha: float = ALPHA) -> str:
    """A p-value as the table prints it (4 decimals), with more where those would round a
    p below `alpha` up to it (p = 50/1001 is a call, "0.0500 < 0.05" reads as none)."""
    return f"{p:.4f}" if p >= alpha or round(p, 4) < alpha else f"{p:.6f}"


def _p(row: Comparison) -> tuple[float, str, str]:
    """The p-value decisions are made on, how the line names it, and its correction (a
    row without a corrected p, as an optimisation's single test, is decided on its p)."""
    corrected = row.p_corrected
    if corrected is not None:
        how = f", {row.correction}" if row.correction else ""
        return float(corrected), f"p corr {_pv(float(corrected))}", how
    assert row.p_value is not None
    return float(row.p_value), f"p {_pv(float(row.p_value))}", ""


def called(row: Comparison, alpha: float = ALPHA) -> int:
    """+1 when A is called better, -1 when B is, 0 when nothing is called (untested, the
    corrected p not below `alpha`, or a zero difference)."""
    if row.p_value is None or row.statistic is None:
        return 0
    p, _, _ = _p(row)
    diff = float(row.statistic)
    if p >= alpha or diff == 0:
        return 0
    return 1 if diff > 0 else -1


def _tied(row: Comparison, arm: str, mine: float | None) -> list[str]:
    """The other draws of a best-of-k row whose score equals `arm`'s (`mine`): the range
    test picks one of tied draws by the variants' order (`draw_scores`; a row written
    before it was recorded has none)."""
    scores = row.draw_scores or {}
    if mine is None:
        return []
    return [
        str(v) for v, s in scores.items() if v != arm and s is not None and abs(s - mine) <= 1e-12
    ]


def _includes_zero(low: Any, high: Any) -> bool:
    return low is not None and high is not None and low <= 0 <= high


def for_pair(row: Comparison, alpha: float = ALPHA) -> Recommendation:
    """A fixed-design comparison row (`experiments.analysis.compare.pair` or `best_vs_worst`,
    after `correct`): "use" the arm the test calls better, else "undecided"."""
    where, a, b, k = _where(row), str(row.a), str(row.b), row.k
    if row.p_value is None:
        among = "among the variants" if (a, b) == ("best", "worst") else f"between {a} and {b}"
        why = f"not tested ({row.status})"
        return Recommendation("undecided", None, f"{where}no decision {among}: {why}")
    assert row.statistic is not None  # a tested row has its statistic
    sign, diff = called(row, alpha), float(row.statistic)
    _, p_text, how = _p(row)
    if k:  # best vs worst of k variants: A is the best draw, B the worst, diff >= 0
        numbers = f"best - worst {diff:+.3f}, range test {p_text}"
        best, worst = _tied(row, a, row.score_a), _tied(row, b, row.score_b)
        if sign > 0 and best:  # which of them is A is the variants' order, not the data
            line = (
                f"no single variant to use: {', '.join([a, *best])} tie for the best score; the "
                f"variants differ ({numbers} < {alpha:g}{how}) and {b} is the worst of {k}"
            )
            return Recommendation("undecided", None, where + line)
        if sign > 0:
            rest = f"; {a} is the best by score, not tested against the other {k - 2}"
            also = f", tied with {', '.join(worst)}" if worst else ""
            line = f"use {a} over {b}, the worst of {k} variants{also} ({numbers} < {alpha:g}{how})"
            return Recommendation("use", a, where + line + (rest if k > 2 else ""))
        line = f"no decision among the {k} variants: not told apart ({numbers} >= {alpha:g}{how}"
        return Recommendation("undecided", None, f"{where}{line}; n {row.n})")
    low, high = row.ci_low, row.ci_high
    numbers = f"diff A - B {diff:+.3f}{_ci(low, high)}, {p_text}"
    if sign == 0:
        line = f"no decision between {a} and {b} ({numbers} >= {alpha:g}{how}; {_mde(row)})"
        if low is not None and high is not None and not _includes_zero(low, high):
            line += "; the 95% CI excludes 0 but the test does not reject"
        return Recommendation("undecided", None, where + line)
    winner, loser = (a, b) if sign > 0 else (b, a)
    caveat = (
        "; its 95% CI includes 0 (the more conservative here)" if _includes_zero(low, high) else ""
    )
    line = f"use {winner} over {loser} ({numbers} < {alpha:g}{how}){caveat}"
    return Recommendation("use", winner, where + line)


def for_sequential(row: Mapping[str, Any]) -> Recommendation:
    """A sequential comparison (`experiments.sweeps.sequential`): its own decision in words,
    with the estimate (the table's diff, A - B) and the interval it reached."""
    where, a, b = _where(row), str(row.get("a")), str(row.get("b"))
    decision, k = row.get("decision"), row.get("k")
    est, low, high, n = row.get("estimate"), row.get("ci_low"), row.get("ci_high"), row.get("n")
    level = f"level {row['alpha']:.4g}" if row.get("alpha") is not None else ""
    diff = "" if est is None else f"{'best - worst' if k else 'diff A - B'} {est:+.3f}"
    interval = _ci(low, high, "interval")[2:]
    numbers = ", ".join(x for x in (diff, interval, level) if x)
    if decision in ("A", "B"):
        winner, loser = (a, b) if decision == "A" else (b, a)
        # the group-sequential test's interval is approximate and may straddle 0 at a rejection
        caveat = (
            "; its approximate interval includes 0 (the decision is the test's)"
            if _includes_zero(low, high)
            else ""
        )
        line = f"use {winner} over {loser} ({numbers}, {n} rows){caveat}"
        return Recommendation("use", winner, where + line)
    if decision == "equivalent":
        line = f"{a} and {b} are equivalent within +-{row.get('delta')} ({numbers}, {n} rows)"
        return Recommendation("equivalent", None, f"{where}{line}: either will do")
    if decision == "best" and row.get("best_identified"):
        line = (
            f"use {a}: every other of the {k} variants was eliminated"
            if k and k > 2
            else f"use {a} over {b}"
        )
        return Recommendation("use", a, f"{where}{line} ({numbers}, {n} rows)")
    if decision == "best":  # best beats worst, but more than one arm is left
        tied = ", ".join(map(str, row.get("in_contention") or ()))
        line = f"no decision among {tied}, still in contention; {a} beats {b}, the worst"
        return Recommendation("undecided", None, f"{where}{line} ({numbers}, {n} rows)")
    if decision is None:  # stopped without a decision (a failed row)
        return Recommendation("undecided", None, f"{where}no decision: {row.get('status')}")
    among = f"among the {k} variants" if k and k > 2 else f"between {a} and {b}"
    inside = ": differences inside the interval cannot be ruled out"
    line = f"no decision {among} after {n} of {row.get('budget')} rows ({numbers})"
    return Recommendation("undecided", None, where + line + (inside if interval else ""))


def _direction(row: AcrossTaskTest) -> int:
    """The across-task test's direction when its statistic and the mean difference agree
    (+1: A, -1: B), else 0. The t and sign-flip statistics share the mean's sign; Wilcoxon's
    W+ points to A when above its null centre n(n+1)/4 (ties may make it and the mean differ)."""
    mean = row.mean_difference
    if mean is None or mean == 0:
        return 0
    sign = 1 if mean > 0 else -1
    stat, n = row.statistic, row.n_tasks
    if "Wilcoxon" in str(row.test) and stat is not None and n:
        w = float(stat) - n * (n + 1) / 4
        if w == 0 or (w > 0) != (sign > 0):
            return 0
    return sign


def for_across(row: AcrossTaskTest, alpha: float = ALPHA) -> Recommendation:
    """A declared across-task test (`experiments.analysis.compare.across_tasks`), with
    ``p_corrected`` set by `correct_across`."""
    where, a, b = f"across tasks ({row.model}): ", str(row.a), str(row.b)
    if row.p_value is None:
        why = f"not tested ({row.note or 'no p-value'})"
        return Recommendation("undecided", None, f"{where}no decision: {why}")
    family = row.family_size or 1
    p = float(row.p_corrected if row.p_corrected is not None else row.p_value)
    p_text = (
        f"p corr {_pv(p, alpha)} ({row.correction} over {family} across-task tests)"
        if family > 1
        else f"p {_pv(p, alpha)}"
    )
    cut = f"{' < ' if p < alpha else ' >= '}{alpha:g}"
    test = f"{row.test}, {row.n_tasks} tasks, {p_text}{cut}"
    if (a, b) == ("best", "worst"):  # Fisher's combination: no direction across tasks
        line = (
            f"the variants differ on at least one task ({test}): which variant to use is per task"
            if p < alpha
            else f"no decision: the variants are not shown to differ on any task ({test})"
        )
        return Recommendation("undecided", None, where + line)
    mean = row.mean_difference
    numbers = "" if mean is None else f"mean diff A - B {mean:+.3f}, "
    sign = _direction(row) if p < alpha else 0
    if sign:
        winner, loser = (a, b) if sign > 0 else (b, a)
        return Recommendation("use", winner, f"{where}use {winner} over {loser} ({numbers}{test})")
    why = (
        "; the test's direction and the mean difference disagree"
        if p < alpha
        else ": with few tasks only large, consistent differences are detected"
    )
    line = f"no decision between {a} and {b} ({numbers}{test}){why}"
    return Recommendation("undecided", None, where + line)


def correct_across(across: Sequence[AcrossTaskTest], method: str) -> list[AcrossTaskTest]:
    """`across` with its p-values adjusted over the sweep's across-task tests, by the sweep's
    correction: several pairs or models are several tests, as the per-task rows are."""
    tested = [i for i, r in enumerate(across) if r.p_value is not None]
    ps = [float(across[i].p_value or 0.0) for i in tested]
    adjusted = (stats.holm(ps) if method == "holm" else stats.benjamini_hochberg(ps)) if ps else []
    out = [replace(r, adjusted=AcrossCorrection()) for r in across]
    name = "Holm" if method == "holm" else "Benjamini-Hochberg"
    for i, p in zip(tested, adjusted, strict=True):
        out[i] = replace(across[i], adjusted=AcrossCorrection(p, name, len(tested)))
    return out


def annotate(
    table: Sequence[Comparison],
    across: Sequence[AcrossTaskTest],
    correction: str,
    final: bool = True,
) -> tuple[list[Comparison], list[AcrossTaskTest]]:
    """Every comparison and across-task row with its recommendation (the across-task rows
    corrected too); `table` is already corrected (`compare.correct`). `final` False: the
    sweep has incomplete trials, whose comparisons a rerun tests (`waiting`); the correction
    will then run over them too, so a call is made only where it holds whatever they give
    (`_worst_case`)."""
    waiting = [] if final else [r for r in table if _waiting(r)]
    worst = _worst_case(table, correction, len(waiting))
    rows = [
        replace(row, recommendation=_holds(for_pair(row), row, worst.get(i), len(waiting)))
        for i, row in enumerate(table)
    ]
    across = correct_across(across, correction)
    late: dict[tuple[Any, ...], list[str]] = {}
    for r in waiting:
        late.setdefault(_pair_key(r), []).append(str(r.task))
    on_time = [i for i, r in enumerate(across) if _pair_key(r) not in late]
    worst = _worst_case([across[i] for i in on_time], correction, len(across) - len(on_time))
    worst = {on_time[j]: p for j, p in worst.items()}
    n_late = len(across) - len(on_time)
    done = []
    for i, row in enumerate(across):
        tasks = late.get(_pair_key(row))
        rec = _late(row, tasks) if tasks is not None else _holds(
            for_across(row), row, worst.get(i), n_late
        )  # fmt: skip
        done.append(replace(row, recommendation=rec))
    return rows, done


def _waiting(row: Comparison) -> bool:
    """An untested comparison a rerun tests: an arm's trial is incomplete (not a variant the
    task skips, which no rerun runs)."""
    return row.p_value is None and not str(row.status or "").startswith(SKIPPED)


def _pair_key(row: Comparison | AcrossTaskTest) -> tuple[Any, ...]:
    """What a comparison row and its across-task row share (best_vs_worst: "best", "worst")."""
    return (row.model, row.a, row.b)


def _worst_case(rows: Sequence[Row], correction: str, waiting: int) -> dict[int, float]:
    """Each tested row's corrected p (by position in `rows`) when the `waiting` tests not run
    yet all give p = 1: Holm's and Benjamini-Hochberg's adjusted p-values only grow with any
    input p, so this bounds the corrected p the rerun can give (none without waiting tests)."""
    tested = [i for i, r in enumerate(rows) if r.p_value is not None]
    if not waiting or not tested:
        return {}
    ps = [float(rows[i].p_value or 0.0) for i in tested] + [1.0] * waiting
    adjusted = stats.holm(ps) if correction == "holm" else stats.benjamini_hochberg(ps)
    return dict(zip(tested, adjusted, strict=False))


def _holds(
    rec: Recommendation, row: Comparison | AcrossTaskTest, worst: float | None, waiting: int
) -> Recommendation:
    """A call of an incomplete sweep: kept, saying so, where it holds in the worst case
    (`worst`: its corrected p when every waiting test gives p = 1); else no decision yet
    (the corrected p the table shows is over the tests run so far)."""
    if rec.action != "use" or worst is None:
        return rec
    what = "comparison" if isinstance(row, Comparison) else "across-task test"
    p, n, s = worst, _count(waiting, what), "s" if waiting == 1 else ""
    if p < ALPHA:
        line = f"{rec.line}; holds whatever the {n} waiting for incomplete trials give{s}"
        return replace(rec, line=line)
    if isinstance(row, Comparison):
        where, now, _ = _where(row), *_p(row)[1:]
        label = "best - worst" if row.k else "diff A - B"
        diff = f"{label} {float(row.statistic or 0.0):+.3f}"
    else:  # an across-task row (called only with a mean difference and a corrected p)
        where, now = f"across tasks ({row.model}): ", f"p corr {_pv(float(row.p_corrected or 0))}"
        diff = f"mean diff A - B {float(row.mean_difference or 0.0):+.3f}"
    line = (
        f"{where}no decision yet between {row.a} and {row.b} ({diff}, {now} "
        f"over the tests run so far): {n} of this sweep wait{s} for incomplete trials, and "
        f"corrected over them too p may reach {_pv(p)}; rerun the same command"
    )
    return Recommendation("undecided", None, line)


def _late(row: AcrossTaskTest, tasks: list[str]) -> Recommendation:
    """An across-task test with tasks whose comparison waits for incomplete trials: the test
    declared is over every task, not over those scored so far."""
    line = (
        f"across tasks ({row.model}): no decision yet between {row.a} and "
        f"{row.b}: {', '.join(tasks)} wait{'s' if len(tasks) == 1 else ''} for "
        "incomplete trials, and the test is over every task; rerun the same command"
    )
    return Recommendation("undecided", None, line)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def annotate_sequential(rows: list[dict[str, Any]]) -> None:
    """Give every sequential comparison its recommendation (in place)."""
    for row in rows:
        row[KEY] = for_sequential(row).to_dict()


def fill(doc: dict[str, Any]) -> None:
    """Give the rows of a sweep's or import's document that have none their recommendation
    (in place): a document written before recommendations were recorded (`workbench report`
    of an older sweep) gets the same lines as a new one."""
    table = doc.get("comparisons") or []
    for row in doc.get("sequential") or []:
        row.setdefault(KEY, for_sequential(row).to_dict())
    across = doc.get("across_tasks") or []
    done = _annotated(
        [Comparison.from_dict(r) for r in table],
        [AcrossTaskTest.from_dict(r) for r in across],
        final=not doc.get("incomplete"),
    )
    if done is None:
        return
    rows, tests = done
    # the stored dicts gain what `annotate` adds, each key where a new row has it
    for d, row in zip(table, rows, strict=True):
        d[KEY] = _recommended(row).to_dict()
    for d, test in zip(across, tests, strict=True):
        d["p_corrected"], d["correction"] = test.p_corrected, test.correction
        d["family_size"], d[KEY] = test.family_size, _recommended(test).to_dict()


def _annotated(
    table: list[Comparison], across: list[AcrossTaskTest], final: bool
) -> tuple[list[Comparison], list[AcrossTaskTest]] | None:
    """The rows of a document where one lacks its recommendation (an older document),
    each given one as `annotate` does, with the correction the document used; None when
    every row has one."""
    if all(r.recommendation is not None for r in table) and all(
        r.recommendation is not None for r in across
    ):
        return None
    method = next((str(r.correction) for r in table if r.correction), "Holm")
    correction = "bh" if method.startswith("Benjamini") else "holm"
    return annotate(table, across, correction, final=final)


def lines(doc: Mapping[str, Any]) -> list[str]:
    """The decision lines a sweep, report or import prints last, one per comparison (its
    sequential comparisons, for a sequential sweep) and per across-task test, `doc` read
    once into records (`fill`: an older document's are worked out the same way)."""
    table = [Comparison.from_dict(r) for r in doc.get("comparisons") or ()]
    across = [AcrossTaskTest.from_dict(r) for r in doc.get("across_tasks") or ()]
    done = _annotated(table, across, final=not doc.get("incomplete"))
    if done is not None:
        table, across = done
    if doc.get("sequential") is not None:  # a sequential sweep's comparisons are its sequences'
        said = [
            str(r[KEY]["line"]) if KEY in r else for_sequential(r).line for r in doc["sequential"]
        ]
    else:
        said = [_recommended(r).line for r in table]
    # a sweep of one task has no across-task comparison: no line for it
    said += [_recommended(r).line for r in across if len({*r.tasks, *r.missing_tasks}) > 1]
    return [f"decision: {line}" for line in said]


def _recommended(row: Comparison | AcrossTaskTest) -> Recommendation:
    assert row.recommendation is not None  # `annotate` gives every row one
    return row.recommendation


def for_heldout(
    verdict: Mapping[str, Any], best: str, best_is_base: bool, alpha: float = ALPHA
) -> Recommendation:
    """`workbench optimize`'s verdict, the best variant vs the base prompt on held-out rows:
    "use" the best only when it beats the base there; else "keep" the base prompt (choice
    "base", its `--variant`). `verdict`: statistic (best - base), p_value (one test, nothing
    to correct), difference_ci_low and _high, mde_80, mde_unreliable, heldout.n, and
    ``sequential`` for that design (its decision: "A" the best, "B" the base)."""
    beats = "it beats the base prompt on held-out rows"
    keep = Recommendation("keep", "base", "")
    if best_is_base:
        line = "keep the base prompt: the search's best variant on dev is the base prompt itself"
        return replace(keep, line=line)
    seq = verdict.get("sequential")
    if seq is not None:
        low, high = seq.get("ci_low"), seq.get("ci_high")
        numbers = (
            f"best - base {seq['estimate']:+.3f}{_ci(low, high, 'anytime-valid interval')}, "
            f"level {seq.get('alpha', alpha):.4g}, {seq.get('n')} of {seq.get('planned')} rows"
        )
        sign = {"A": 1, "B": -1}.get(str(seq.get("decision")), 0)
        tail = f"({numbers})" if sign else f"({numbers}: not decided at that level)"
    elif verdict.get("p_value") is None or verdict.get("statistic") is None:
        return replace(keep, line=f"keep the base prompt: the best variant {best} was not tested")
    else:
        low, high = verdict.get("difference_ci_low"), verdict.get("difference_ci_high")
        d, p = float(verdict["statistic"]), float(verdict["p_value"])
        row = Comparison(
            a=best,
            b="base",
            status="tested",
            metric=None,
            statistic=d,
            p_value=p,
            n=(verdict.get("heldout") or {}).get("n"),
            mde_80=verdict.get("mde_80"),
            mde_unreliable=verdict.get("mde_unreliable"),
        )
        sign = called(row, alpha)
        numbers = f"best - base {d:+.3f}{_ci(low, high)}, p {_pv(p, alpha)}"
        caveat = "; its 95% CI includes 0" if sign > 0 and _includes_zero(low, high) else ""
        tail = (
            f"({numbers} < {alpha:g}){caveat}" if sign else f"({numbers} >= {alpha:g}; {_mde(row)})"
        )
    if sign > 0:
        return Recommendation("use", best, f"use the best variant {best}: {beats} {tail}")
    if sign < 0:
        line = f"keep the base prompt: it beats the best variant {best} on held-out rows {tail}"
        return replace(keep, line=line)
    line = f"keep the base prompt: the best variant {best} does not beat it on held-out rows {tail}"
    return replace(keep, line=line)
