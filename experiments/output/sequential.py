"""The table of a sequential sweep: one row per sequence, its legend and `--explain` text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.output.common import _f
from experiments.output.comparisons import _names


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
