"""`workbench optimize`: the search space and the report with its winner's verdict."""

from __future__ import annotations

from typing import Any


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
