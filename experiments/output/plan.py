"""Plans: `workbench sweep --dry-run`'s trials and costs, `workbench plan`'s table, and
the time lines of local models measured on this machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.output.common import note_lines
from experiments.output.comparisons import _names


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
