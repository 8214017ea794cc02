"""`workbench report NAME --by slice|class`: one table per comparison, a row per slice (or
gold class), with its footer of test, metric, resamples, clusters, correction and alpha.

Takes the dicts of `sweeps.by_slice.SliceReport.to_dict()` (`SliceTable.to_dict()` each), so
printing imports no analysis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from experiments.output.common import _f

EXPLAIN = (
    "Method. Each comparison the sweep tested (A vs B on one task and model) is split by the "
    "rows' value of the column (--by slice) or by the gold answer (--by class); both arms "
    "answered every row. Per group: each arm's score (by slice: the task's official metric "
    "on the group's rows; a slice with one answer class gets that class's recall, which is "
    "what LegalBench's sklearn balanced_accuracy_score returns; by class: recall, the share "
    "of the class's rows answered right) with the interval the sweep reports for a score, "
    "the difference A - B with its interval, and the sweep's paired permutation test on the "
    "group's rows alone: A's and B's answers swapped per cluster of rows that cannot vary "
    "apart (the sweep's clustering, restricted to the group), exact over every swap pattern "
    "when few units differ, else Monte Carlo with the sweep's resamples, p = (b + 1) / "
    "(R + 1). Holm's correction runs over the tested groups of that one comparison (not "
    "over the sweep's other comparisons). Groups under the small mark are too small for a "
    "verdict: the paper says LegalBench's slices are not intended for rigorous statistical "
    "analysis; their MDE (the smallest true difference the test finds with 80% power, "
    "simulated as the sweep's MDE is) says what they could have shown."
)


def _ci(low: Any, high: Any) -> str:
    if low is None or high is None:
        return ""
    return f"[{low:+.2f}, {high:+.2f}]"


def _p(x: Any) -> str:
    """A p-value in the table's 3 decimals; one below 0.0005 as "<.001", never "0.000" (no
    permutation p is 0)."""
    return "-" if x is None else "<.001" if x < 0.0005 else f"{x:.3f}"


def _signed(x: Any) -> str:
    return "-" if x is None else f"{x:+.3f}"


def slice_table_text(t: Mapping[str, Any]) -> str:
    """One comparison's groups as a table, then its footer."""
    head = f"{t['task']} · {t['model']}: {t['a']} (A) vs {t['b']} (B), by {t['by']}" + (
        f" (column {t['column']})" if t["by"] == "slice" else " (gold answer)"
    )
    rows: Sequence[Mapping[str, Any]] = t.get("rows") or ()
    width = max([len("class" if t["by"] == "class" else "slice"),
                 *(len(str(r["group"])) for r in rows)])  # fmt: skip
    width = min(width, 40)
    cols = (
        f"  {('class' if t['by'] == 'class' else 'slice'):<{width}} {'n':>5} {'A':>6} {'B':>6} "
        f"{'A-B':>7} {'95% interval':<16} {'p':>6} {'Holm p':>7} {'MDE':>5}"
    )
    lines = [head, cols]
    for r in rows:
        name = str(r["group"])
        name = name if len(name) <= width else name[: width - 1] + "…"
        lines.append(
            f"  {name:<{width}} {r['n']:>5} {_f(r['score_a'], '.3f'):>6} "
            f"{_f(r['score_b'], '.3f'):>6} {_signed(r['diff']):>7} "
            f"{_ci(r['ci_low'], r['ci_high']):<16} {_p(r['p_value']):>6} "
            f"{_p(r['p_adjusted']):>7} {_f(r['mde_80'], '.2f'):>5}"
            + ("  small" if r.get("small") else "")
        )
    if not rows:
        lines.append("  (no groups)")
    lines += _footer(t)
    return "\n".join(lines)


def _footer(t: Mapping[str, Any]) -> list[str]:
    rows = t.get("rows") or ()
    out = [
        f"  test: {t['test']}; {t['n_resamples']} resamples; metric: {t['metric']}; "
        f"{t['correction']}; alpha {t['alpha']:g}",
    ]
    out += [f"  {n}" for n in t.get("notes") or ()]
    if any(r.get("small") for r in rows):
        out.append(
            f"  small: n < {t['small_below']}: \"LegalBench's slices are not intended for "
            'rigorous statistical analysis" (the paper); MDE = smallest difference found '
            "with 80% power"
        )
    none = [str(r["group"]) for r in rows if "no difference reaches" in str(r.get("note") or "")]
    if none:
        out.append(f"  MDE -: no difference reaches 80% power on these rows in: {', '.join(none)}")
    for r in rows:
        extra = [x for x in str(r.get("note") or "").split("; ") if x and not x.startswith(
            ("small (", "MDE at", "no difference reaches"))]  # fmt: skip
        if extra:
            out.append(f"  {r['group']}: {'; '.join(extra)}")
    return out


def slice_report(report: Mapping[str, Any], sweep: str, explain: bool = False) -> str:
    """Every comparison's table, the report's notes, and the method with `explain`."""
    tables = report.get("tables") or ()
    what = "slice" if report.get("by") == "slice" else "class"
    parts = [f"sweep {sweep}: comparisons by {what}"]
    parts += [slice_table_text(t) for t in tables]
    if not tables:
        parts.append("no tested comparison to split")
    notes = list(report.get("notes") or ())
    if notes:
        parts.append("\n".join(["notes:", *(f"  {n}" for n in notes)]))
    if explain:
        parts.append(EXPLAIN)
    return "\n\n".join(parts)
