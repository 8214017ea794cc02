"""The prompt-sensitivity section of `workbench report` as text (`format_sensitivity`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.analysis.contrast import Contrast
from experiments.analysis.sensitivity.coverage import COVERAGE_FLOOR
from experiments.trials.labels import display_name


def _fmt(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def format_sensitivity(report: dict[str, Any], folders: Sequence[str] = ()) -> str:
    """The sensitivity section of `workbench report` (plain text); a text file's path in a
    variant's name shown relative to here or to `folders` (the spec's) when shorter."""
    lines = ["Prompt sensitivity", "=================="]
    lines += _per_task_lines(report, folders)
    lines += _variance_lines(report)
    lines += _meta_lines(report, folders)
    lines += _rank_lines(report)
    for n in report.get("notes", []):
        lines.append(f"note: {n}")
    return "\n".join(lines)


def _per_task_lines(report: dict[str, Any], folders: Sequence[str] = ()) -> list[str]:
    """Each (task, model)'s measures, their CI method, units and unreliable CIs."""
    lines: list[str] = []
    if not report.get("per_task"):
        lines.append("no (task, model) with at least 2 complete variants")
    else:
        lines.append(
            f"{'task':<28} {'model':<16} {'k':>2} {'spread':>6} {'p':>6} "
            f"{'MaxP':>6} {'AvgP [95% CI]':<21} {'SensiScore [CI]':<21} {'dep.rows [CI]':<21}"
        )
        for r in report["per_task"]:
            sp = _fmt(r["spread"])
            av = f"{_fmt(r['avgp'])} [{_fmt(r['avgp_ci'][0])}, {_fmt(r['avgp_ci'][1])}]"
            dp = (
                f"{_fmt(r['share_prompt_dependent'])} [{_fmt(r['share_prompt_dependent_ci'][0])}"
                f", {_fmt(r['share_prompt_dependent_ci'][1])}]"
            )
            ss = (
                f"{_fmt(r['sensitiscore'])} [{_fmt(r['sensitiscore_ci'][0])}, "
                f"{_fmt(r['sensitiscore_ci'][1])}]"
            )
            flag = "!" if r.get("ci_unreliable") else " "
            lines.append(
                f"{r['task'][:27] + flag:<28} {r['model'][:16]:<16} {r['n_variants']:>2} {sp:>6} "
                f"{_fmt(r['spread_p_value']):>6} {_fmt(r['maxp']):>6} {av:<21} "
                f"{ss:<21} {dp:<21}"
            )
            if len(r["best"]) > 1 or len(r["worst"]) > 1:
                best, worst = ([display_name(v, folders) for v in r[k]] for k in ("best", "worst"))
                lines.append(f"  tied: best {', '.join(best)}; worst {', '.join(worst)}")
        lines.append(
            f"(metric: each task's official metric; CIs: {report['per_task'][0]['ci_method']}; "
            "spread and MaxP have no CI: a bootstrap of a max or of max - min does not cover; "
            "p: range permutation test of the spread, its inference)"
        )
        for r in report["per_task"]:
            lines.append(
                f"  {r['task']} ({r['model']}): {r['n_rows']} rows, {r['n_clusters']} clusters "
                f"of identical prompts ({r['clustering']})"
            )
        if any(r.get("ci_unreliable") for r in report["per_task"]):
            lines.append("! CIs unreliable (measured coverage below "
                         f"{COVERAGE_FLOOR}, or a design outside the measured grid):")  # fmt: skip
            for r in report["per_task"]:
                if r.get("ci_unreliable"):
                    lines.append(f"  {r['task']} ({r['model']}): {r['note']}")
    return lines


def _variance_lines(report: dict[str, Any]) -> list[str]:
    """Each model's variance shares of per-row correctness."""
    lines: list[str] = []
    for model, v in report.get("variance_shares", {}).items():
        lines.append("")
        flag = (
            " (! marks a CI whose measured coverage is low: see the note)"
            if v.get("unreliable")
            else ""
        )
        sizes = ", ".join(
            f"{t} {v['n_rows'][t]} rows / {v['n_clusters'][t]} clusters"
            for t in v.get("tasks", [])
            if t in v.get("n_rows", {})
        )
        lines.append(
            f"Variance of per-row correctness, {model} ({v['n_observations']} obs.; {sizes}; "
            f"variance components){flag}"
        )
        lines.append(f"  ({v['method']})")
        if v.get("sum_of_shares") is None:
            lines.append(f"  {v.get('note')}")
            continue
        for f, s in sorted(v["shares"].items(), key=lambda kv: -kv[1]):
            lo, hi = v["ci"][f]
            mark = "  (set to 0: estimated below its noise)" if f in v.get("truncated", []) else ""
            bang = "!" if f in v.get("unreliable_factors", []) else " "
            lines.append(f"  {f:<40} {s:6.1%}  [{lo:6.1%}, {hi:6.1%}]{bang}{mark}")
        if v.get("note"):
            lines.append(f"  note: {v['note']}")
    return lines


def _meta_lines(report: dict[str, Any], folders: Sequence[str] = ()) -> list[str]:
    """The pooled effects across tasks, each of A − B as its row names them (the sign of the
    comparisons table, `analysis.contrast`)."""
    lines: list[str] = []
    if report.get("meta_analysis"):
        lines.append("")
        lines.append(
            "Pooled effect A − B across tasks (random effects, Hartung-Knapp-Sidik-Jonkman 95% "
            "CI; within one metric) | paired t-test"
        )
        for m in report["meta_analysis"]:
            ab = Contrast(display_name(m["a"], folders), display_name(m["b"], folders))
            head = f"  {m['model']}: {ab.label} ({m['metric']}) over {len(m['tasks'])} tasks: "
            if m.get("pooled") is None:
                lines.append(head + f"not pooled ({m['note']})")
                continue
            t = m["paired_t"]
            lines.append(
                head + f"{m['pooled']:+.3f} [{m['ci'][0]:+.3f}, {m['ci'][1]:+.3f}] "
                f"p={_fmt(m['p_value'])} tau2={m['tau2']:.4f} I2={m['i2']:.0%} | "
                f"t p={_fmt(t['p_value'])}"
            )
    return lines


def _rank_lines(report: dict[str, Any]) -> list[str]:
    """The rank stability of models across prompts."""
    lines: list[str] = []
    if report.get("rank_stability"):
        lines.append("")
        lines.append("Rank stability of models across prompts")
        for r in report["rank_stability"]:
            lines.append(
                f"  {r['task']}: mean Kendall tau {_fmt(r['mean_kendall_tau'], 2)} over "
                f"{r['n_pairs']} variant pairs; best model changes in "
                f"{r['share_best_changes']:.0%} of variants (best on average: "
                f"{', '.join(r['best_model_mean'])}; variants with tied best: "
                f"{r['n_variants_with_tied_best']})"
            )
    return lines
