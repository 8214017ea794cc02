"""A small ReportDoc dict built by hand (the JSON schema of issue 34's report), for the
renderer's tests: three comparisons, 42 disagreeing rows shown (one comparison over a page of
25 and capped), slices, per-class rows, a sequential row with looks, and rows whose texts try
to break out of the page (`<script>`, `</script>`, an `<img onerror>`)."""

from __future__ import annotations

import base64
from typing import Any

# a 1x1 PNG
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a1e5a1"
        "c40000000049454e44ae426082"
    )
).decode()

XSS_INPUT = 'On the issue <script>window.__xss = 1</script> of whether </script> "x" & y'
XSS_OUTPUT = '</script><img src=x onerror="window.__xss = 2">Yes'
SLICES = ("Non-assertive conduct", "Statement made in court", "Standard hearsay")
OUTCOMES = ("a_right", "b_right", "both_wrong")


def _arm(answer: str | None, correct: bool | None, text: str) -> dict[str, Any]:
    return {"output": text, "parsed": answer, "correct": correct}


def _row(
    index: int, label: str, outcome: str, labels: tuple[str, ...], slice_: str | None, diff: int
) -> dict[str, Any]:
    wrong = next(x for x in labels if x != label)
    other = next(x for x in labels if x not in (label, wrong)) if len(labels) > 2 else None
    if outcome == "a_right":
        a, b = _arm(label, True, f"Answer: {label}"), _arm(wrong, False, f"I think {wrong}.")
    elif outcome == "b_right":
        a, b = _arm(wrong, False, f"Answer: {wrong}"), _arm(label, True, f"It is {label}.")
    else:
        b_answer = other if other is not None else None
        a, b = _arm(wrong, False, f"Answer: {wrong}"), _arm(b_answer, False, "I cannot tell.")
    return {
        "index": str(index),
        "label": label,
        "slice": slice_,
        "sample_id": None,
        "outcome": outcome,
        "a": a,
        "b": b,
        "diff": diff,
    }


def _comparison(task: str, model: str, a: str, b: str, n: int, p: float) -> dict[str, Any]:
    return {
        "model": model, "task": task, "a": a, "b": b, "status": "tested",
        "metric": "balanced_accuracy", "score_a": 0.55, "score_b": 0.6, "statistic": -0.05,
        "p_value": p, "test": "paired permutation test (per-example swaps of A and B)",
        "exact": False, "n_resamples": 2000, "n": n, "n_discordant": 12,
        "ci_low": -0.12, "ci_high": 0.02, "ci_note": None,
        "ci_method": "Bayesian: per-group Jeffreys Dirichlet posteriors, 4000 draws",
        "ci_a_low": 0.45, "ci_a_high": 0.65, "ci_a_note": None,
        "ci_b_low": 0.5, "ci_b_high": 0.7, "ci_b_note": None,
        "mde_80": 0.2, "mde_note": "", "mde_method": "simulated", "mde_unreliable": False,
        "n_clusters": n, "clustered_by": "prompt", "cluster_note": None,
        "p_holm": min(1.0, 3 * p), "p_bh": min(1.0, 2 * p), "p_corrected": min(1.0, 3 * p),
        "correction": "Holm", "family_size": 3,
        "recommendation": {"action": "undecided", "choice": None,
                           "line": f"{task} ({model}): no decision between {a} and {b}"},
    }  # fmt: skip


def _slice_table(
    task: str, model: str, a: str, b: str, by: str, groups: tuple[str, ...]
) -> dict[str, Any]:
    rows = []
    for i, g in enumerate(groups):
        rows.append(
            {
                "group": g, "n": 10 + 7 * i, "score_a": 0.5, "ci_a_low": 0.3, "ci_a_high": 0.7,
                "score_b": 0.6, "ci_b_low": 0.4, "ci_b_high": 0.8, "diff": -0.1,
                "ci_low": -0.3, "ci_high": 0.1, "p_value": 0.31, "p_adjusted": 0.62,
                "mde_80": 0.4, "small": i == 0,
                "note": "small (10 rows < 30): not intended for rigorous statistical analysis (the paper)" if i == 0 else None,
            }
        )  # fmt: skip
    return {
        "task": task, "model": model, "a": a, "b": b, "by": by,
        "column": "slice" if by == "slice" else "answer",
        "metric": "balanced_accuracy" if by == "slice" else "recall",
        "test": "paired permutation test (per-example swaps of A and B)",
        "correction": "Holm over the k slices of this comparison", "n_resamples": 2000,
        "alpha": 0.05, "small_below": 30, "rows": rows, "notes": ["a note on slices"],
    }  # fmt: skip


def small_doc() -> dict[str, Any]:
    """The hand-built doc: c1 hearsay (30 rows shown of 34, cap 30, two pages), c2 abercrombie
    (7 rows, five labels), c3 hearsay on another model (5 rows, a different diff per row)."""
    yes_no = ("Yes", "No")
    marks = ("generic", "descriptive", "suggestive", "arbitrary", "fanciful")
    c1_rows = [
        _row(i * 3, yes_no[i % 2], OUTCOMES[(i * 7) % 3], yes_no, SLICES[i % 3], 0)
        for i in range(30)
    ]
    c2_rows = [_row(i, marks[i % 5], OUTCOMES[i % 3], marks, None, 0) for i in range(7)]
    c3_rows = [
        _row(i * 5, yes_no[i % 2], OUTCOMES[(i + 1) % 3], yes_no, SLICES[i % 3], i % 2)
        for i in range(5)
    ]
    c3_rows[0]["diff"] = None
    inputs: dict[str, dict[str, str]] = {"hearsay": {}, "abercrombie": {}}
    for r in c1_rows + c3_rows:
        inputs["hearsay"][r["index"]] = (
            f"On the issue of whether row {r['index']} is hearsay, the witness said so."
        )
    for r in c2_rows:
        inputs["abercrombie"][r["index"]] = f"The mark 'Mark{r['index']}' for shoes."
    # the untrusted texts
    inputs["hearsay"]["0"] = XSS_INPUT
    c1_rows[0]["b"]["output"] = XSS_OUTPUT

    def counts(rows: list[dict[str, Any]], extra: dict[str, int] | None = None) -> dict[str, int]:
        out = {k: sum(r["outcome"] == k for r in rows) for k in OUTCOMES}
        for k, v in (extra or {}).items():
            out[k] += v
        return out

    diff0 = [
        ["=", "Answer the question. "],
        ["-", "Hearsay is an out-of-court statement."],
        ["+", "Hearsay is a statement, other than one made at trial, offered for its truth."],
        ["=", " "],
        ["~", "… 40 words the same …"],
        ["=", " Text: ⟨row input⟩ Answer:"],
    ]
    diff1 = [["=", "Decide. "], ["-", "<b>Old</b>"], ["+", "</script>New"], ["=", " ⟨row input⟩"]]
    arms = ("instruction=reference", "instruction=description")
    samples = [
        {
            "key": "c1", "task": "hearsay", "model": "local/smollm2", "a": arms[0], "b": arms[1],
            "metric": "balanced_accuracy", "a_run": "run-a1", "b_run": "run-b1",
            "experiment_id": "7", "n_rows": 94, "n_disagree": 34, "n_shown": 30, "cap": 30,
            "counts": counts(c1_rows, {"a_right": 2, "both_wrong": 2}),
            "diffs": [diff0], "rows": c1_rows,
            "slices": [_slice_table("hearsay", "local/smollm2", *arms, "slice", SLICES)],
            "classes": [_slice_table("hearsay", "local/smollm2", *arms, "class", yes_no)],
        },
        {
            "key": "c2", "task": "abercrombie", "model": "local/smollm2", "a": arms[0], "b": arms[1],
            "metric": "balanced_accuracy", "a_run": None, "b_run": None, "experiment_id": None,
            "n_rows": 95, "n_disagree": 7, "n_shown": 7, "cap": 30, "counts": counts(c2_rows),
            "diffs": [diff0], "rows": c2_rows, "slices": [],
            "classes": [_slice_table("abercrombie", "local/smollm2", *arms, "class", marks)],
        },
        {
            "key": "c3", "task": "hearsay", "model": "local/gemma3-270m", "a": arms[0], "b": arms[1],
            "metric": "balanced_accuracy", "a_run": "run-a3", "b_run": "run-b3",
            "experiment_id": "7", "n_rows": 94, "n_disagree": 5, "n_shown": 5, "cap": 30,
            "counts": counts(c3_rows), "diffs": [diff0, diff1], "rows": c3_rows,
            "slices": [], "classes": [],
        },
    ]  # fmt: skip
    comparisons = [
        _comparison("hearsay", "local/smollm2", *arms, 94, 0.012),
        _comparison("abercrombie", "local/smollm2", *arms, 95, 0.3),
        _comparison("hearsay", "local/gemma3-270m", *arms, 94, 0.5),
    ]
    best = dict(comparisons[1], a="instruction=description", b="instruction=reference", k=4)
    best |= {"p_post_selection": 0.04, "post_selection_test": "range permutation test"}
    comparisons.append(best)
    sequential = [
        {
            "row": {
                "model": "local/smollm2", "task": "hearsay", "a": arms[0], "b": arms[1],
                "design": "sequential", "comparison": "pair", "method": "betting",
                "sequence": "betting confidence sequence", "metric": "accuracy", "alpha": 0.05,
                "family_alpha": 0.05, "delta": 0.05, "batch": 20, "budget": 94, "planned": 94,
                "looks": [20, 40, 60, 80], "n": 80, "decision": "B better", "estimate": -0.11,
                "ci_low": -0.2, "ci_high": -0.01, "clustered_by": "prompt", "n_clusters": 80,
                "score_a": 0.5, "score_b": 0.61, "status": "stopped",
                "rows_per_arm": {arms[0]: 80, arms[1]: 80},
            },
            "looks": [
                {"n": 20, "estimate": -0.1, "low": None, "high": None},
                {"n": 40, "estimate": -0.12, "low": -0.4, "high": 0.15},
                {"n": 60, "estimate": -0.1, "low": -0.28, "high": 0.04},
                {"n": 80, "estimate": -0.11, "low": -0.2, "high": -0.01},
            ],
        }
    ]  # fmt: skip
    return {
        "version": 1,
        "kind": "sweep",
        "title": "Sweep demo <b>bold?</b>",
        "name": "demo",
        "id": "f" * 64,
        "created": "2026-12-06T08:00:00Z",
        "status": "complete",
        "ui_base": "http://127.0.0.1:5000",
        "notes": ["rows per comparison are capped at 30", "<script>window.__xss = 3</script>"],
        "comparisons": comparisons,
        "figures": [{"name": "forest", "png_base64": PNG}],
        "inputs": inputs,
        "samples": samples,
        "sequential": sequential,
    }
