"""The HTML report of a big sweep stays usable (issue 34, point 4): its size and its open time.

    python benchmarks/report_size.py [--variants 20] [--rows 2000] [--runs 3] [--keep DIR]

Synthesizes a sweep of VARIANTS prompt variants x ROWS hearsay-like rows (inputs of about 400
characters, made from the hearsay test rows of $LEGALBENCH_DIR, each made unique; prompts that
differ in their instruction text; model outputs of 100-300 characters), compared as a sweep
is: each variant against the first plus best vs worst, about 25% of rows disagreeing per
pair. The ReportDoc dict is built here by the JSON schema (not by the workbench's builder),
rows capped at 300 per comparison as the builder caps them. It is rendered, written, and
opened in headless Chromium RUNS times (alternating with a small sweep's report: 3 variants
x 40 rows); printed: file size, rows embedded, the time to render in Python, and Chromium's
open time (navigation start -> the page's `ready`, and -> the first frame painted after it),
medians. A first open of each page, not counted, warms the browser.
Goals: the big report opens in < 3 s; its size is stated (aim < 15 MB).
"""

from __future__ import annotations

import argparse
import base64
import csv
import difflib
import io
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from experiments.reports.html.render import render_html
from experiments.testing.chromium import Chromium

CAP = 300
INPUT_CHARS = 4000
OUTPUT_CHARS = 2000
CONTEXT = 8
ROW_INPUT = "⟨row input⟩"
BASE_INSTRUCTION = (
    "Hearsay is an out-of-court statement introduced to prove the truth of the matter "
    "asserted. In determining whether a piece of evidence meets the definition of hearsay, "
    "lawyers ask three questions: (1) was there a statement? (2) was it made outside of "
    "court? (3) is it being introduced to prove the truth of the matter asserted? "
    "Answer Yes if the evidence is hearsay and No if it is not."
)
EDITS = (
    ("Hearsay is", "By the Federal Rules of Evidence, hearsay is"),
    ("lawyers ask three questions", "courts ask three questions in turn"),
    ("Answer Yes", "Reply with a single word: Yes"),
    ("(1) was there a statement?", "(1) was there an assertion, verbal or not?"),
    ("outside of court?", "other than while testifying at the current trial?"),
    ("the truth of the matter asserted.", "that what the statement says is true."),
    ("In determining", "When deciding"),
    ("and No if it is not.", "and No otherwise. Think step by step first."),
)
OUTPUT_TAILS = (
    "The statement is offered to prove that what the declarant said is true, so it is {a}.",
    "Because the words were spoken out of court and are used for their truth, the answer is {a}.",
    "The conduct was not intended as an assertion, so this evidence is {a}.",
    "This is a statement made while testifying in court; therefore {a}.",
    "The statement is not introduced for its truth but for its effect on the listener: {a}.",
)


def hearsay_rows(lb_dir: Path) -> list[dict[str, str]]:
    path = lb_dir / "tasks" / "hearsay" / "test.tsv"
    if not path.exists():
        sys.exit(f"no {path}: set LEGALBENCH_DIR to the LegalBench data folder")
    with path.open(newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters)"


def word_diff(a: str, b: str, mask: str) -> list[list[str]]:
    """A word diff of two prompts with the row's input masked (the builder's rule, redone
    here so the benchmark depends only on the JSON schema)."""
    ta = re.findall(r"\s+|\S+", a.replace(mask, ROW_INPUT))
    tb = re.findall(r"\s+|\S+", b.replace(mask, ROW_INPUT))
    out: list[list[str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
        if op == "equal":
            run = ta[i1:i2]
            words = sum(1 for t in run if not t.isspace())
            if words > 2 * CONTEXT:
                head, tail = run[: 2 * CONTEXT], run[-2 * CONTEXT :]
                out += [["=", "".join(head)], ["~", f"… {words - 2 * CONTEXT} words the same …"]]
                out.append(["=", "".join(tail)])
            else:
                out.append(["=", "".join(run)])
        else:
            if i2 > i1:
                out.append(["-", "".join(ta[i1:i2])])
            if j2 > j1:
                out.append(["+", "".join(tb[j1:j2])])
    return out


def figure_png(n: int) -> str:
    """A forest-like PNG of n comparisons (the sweep's figures are of this kind and size)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.3 * n + 1.5), dpi=100)
    rng = random.Random(1)
    for i in range(n):
        d = rng.uniform(-0.1, 0.1)
        ax.errorbar(d, i, xerr=0.06, fmt="o", color="#0969da")
    ax.axvline(0, color="#656d76")
    ax.set_yticks(range(n), [f"variant {i + 1} vs variant 0" for i in range(n)])
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def synthetic_doc(n_variants: int, n_rows: int, *, seed: int = 0) -> dict[str, Any]:
    """The ReportDoc dict of a synthetic hearsay sweep (see the module's docstring)."""
    rng = random.Random(seed)
    lb = hearsay_rows(Path(os.environ.get("LEGALBENCH_DIR", "/work/shared/legalbench")))
    texts = [r["text"] for r in lb]
    inputs: dict[str, str] = {}
    labels: dict[str, str] = {}
    slices: dict[str, str] = {}
    for n in range(n_rows):
        src = lb[n % len(lb)]
        text = f"{src['text']} (Case {n}.)"
        j = n
        while len(text) < 380:  # grow to ~400 characters with other rows' fact patterns
            j = (j * 7 + 3) % len(texts)
            text += " Earlier, " + texts[j][0].lower() + texts[j][1:]
        inputs[str(n)] = cut(text[:420].rsplit(" ", 1)[0], INPUT_CHARS)
        labels[str(n)] = src["answer"]
        slices[str(n)] = src["slice"]
    variants = [f"instruction=v{v:02d}" for v in range(n_variants)]
    instructions = [BASE_INSTRUCTION]
    for v in range(1, n_variants):
        text = BASE_INSTRUCTION
        for k in range(1 + v % 3):
            old, new = EDITS[(v + 3 * k) % len(EDITS)]
            text = text.replace(old, new)
        instructions.append(text + f" (variant {v})")
    prompt = [f"{ins}\n\nEvidence: {{x}}\nHearsay? Answer:" for ins in instructions]
    # per-variant correctness: the first variant's draws, others disagree on ~25% of rows
    correct: list[dict[str, bool]] = [{i: rng.random() < 0.65 for i in inputs}]
    for _ in range(1, n_variants):
        correct.append({i: (not c) if rng.random() < 0.25 else c for i, c in correct[0].items()})
    unparsed = [{i for i in inputs if rng.random() < 0.03} for _ in variants]

    def arm(v: int, i: str) -> dict[str, Any]:
        gold = labels[i]
        if i in unparsed[v]:
            out = "The evidence is ambiguous; more facts would be needed to decide. " * 2
            return {"output": cut(out.strip(), OUTPUT_CHARS), "parsed": None, "correct": False}
        ans = gold if correct[v][i] else ("No" if gold == "Yes" else "Yes")
        tail = OUTPUT_TAILS[(int(i) + v) % len(OUTPUT_TAILS)].format(a=ans)
        out = f"{ans}. {tail}" + (" " + texts[int(i) % len(texts)] if int(i) % 2 else "")
        return {"output": cut(out, OUTPUT_CHARS), "parsed": ans, "correct": correct[v][i]}

    acc = [sum(c.values()) / n_rows for c in correct]
    best = max(range(n_variants), key=lambda v: acc[v])
    worst = min(range(n_variants), key=lambda v: acc[v])
    slice_names = sorted(set(slices.values()))
    pairs = [(0, v) for v in range(1, n_variants)] + [(best, worst)]
    comparisons: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    for k, (va, vb) in enumerate(pairs):
        rows: list[dict[str, Any]] = []
        counts = {"a_right": 0, "b_right": 0, "both_wrong": 0}
        diffs: list[list[list[str]]] = []
        seen: dict[str, int] = {}
        for i in inputs:
            a, b = arm(va, i), arm(vb, i)
            if a["correct"] == b["correct"] and a["parsed"] == b["parsed"]:
                continue
            outcome = "a_right" if a["correct"] else "b_right" if b["correct"] else "both_wrong"
            counts[outcome] += 1
            if len(rows) >= CAP:
                continue
            d = word_diff(
                prompt[va].replace("{x}", inputs[i]),
                prompt[vb].replace("{x}", inputs[i]),
                inputs[i],
            )
            key = repr(d)
            if key not in seen:
                seen[key] = len(diffs)
                diffs.append(d)
            rows.append({"index": i, "label": labels[i], "slice": slices[i], "sample_id": None,
                         "outcome": outcome, "a": a, "b": b, "diff": seen[key]})  # fmt: skip
        n_dis = sum(counts.values())
        diff = acc[va] - acc[vb]
        comparisons.append(
            _comparison_row(variants[va], variants[vb], n_rows, diff, rng, k == len(pairs) - 1)
        )
        samples.append({
            "key": f"c{k + 1}", "task": "hearsay", "model": "local/smollm2",
            "a": variants[va], "b": variants[vb], "metric": "balanced_accuracy",
            "a_run": f"{va:032x}", "b_run": f"{vb:032x}", "experiment_id": "1",
            "n_rows": n_rows, "n_disagree": n_dis, "n_shown": len(rows), "cap": CAP,
            "counts": counts, "diffs": diffs, "rows": rows,
            "slices": [_slice_table(variants[va], variants[vb], "slice", slice_names)],
            "classes": [_slice_table(variants[va], variants[vb], "class", ["No", "Yes"])],
        })  # fmt: skip
    return {
        "version": 1, "kind": "sweep", "title": f"Sweep bench ({n_variants} variants)",
        "name": "bench", "id": f"{seed:064x}", "created": "2026-12-06T00:00:00Z",
        "status": "complete", "ui_base": "http://127.0.0.1:5000",
        "notes": [f"rows where A and B disagree are capped at {CAP} per comparison"],
        "comparisons": comparisons,
        "figures": [{"name": "forest", "png_base64": figure_png(len(pairs))}],
        "inputs": {"hearsay": inputs}, "samples": samples, "sequential": [],
    }  # fmt: skip


def _comparison_row(
    a: str, b: str, n: int, diff: float, rng: random.Random, rng_row: bool
) -> dict[str, Any]:
    half = 0.06
    p = rng.uniform(0.001, 0.9)
    row: dict[str, Any] = {
        "model": "local/smollm2", "task": "hearsay", "a": a, "b": b, "status": "tested",
        "metric": "balanced_accuracy", "score_a": 0.6 + diff / 2, "score_b": 0.6 - diff / 2,
        "statistic": diff, "p_value": p,
        "test": "paired permutation test (per-example swaps of A and B)", "exact": False,
        "n_resamples": 2000, "n": n, "n_discordant": n // 4,
        "ci_low": diff - half, "ci_high": diff + half, "ci_note": None,
        "ci_method": "Bayesian: per-group Jeffreys Dirichlet(1/2 each) posteriors over both "
        "right / A only / B only / both wrong, equal-tailed 95% interval of 4000 draws",
        "ci_a_low": 0.55 + diff / 2, "ci_a_high": 0.65 + diff / 2, "ci_a_note": None,
        "ci_b_low": 0.55 - diff / 2, "ci_b_high": 0.65 - diff / 2, "ci_b_note": None,
        "mde_80": 0.05, "mde_note": "", "mde_method": "simulated: 2000 draws of the test",
        "mde_unreliable": False, "n_clusters": n, "clustered_by": "prompt", "cluster_note": None,
        "p_holm": min(1.0, p * 20), "p_bh": min(1.0, p * 5), "p_corrected": min(1.0, p * 20),
        "correction": "Holm", "family_size": 20,
        "recommendation": {"action": "undecided", "choice": None,
                           "line": f"hearsay (local/smollm2): no decision between {a} and {b}"},
    }  # fmt: skip
    if rng_row:
        row |= {"k": 20, "p_post_selection": p, "post_selection_test": "range permutation test"}
    return row


def _slice_table(a: str, b: str, by: str, groups: list[str]) -> dict[str, Any]:
    rows = [
        {"group": g, "n": 200 + 50 * i, "score_a": 0.6, "ci_a_low": 0.5, "ci_a_high": 0.7,
         "score_b": 0.62, "ci_b_low": 0.52, "ci_b_high": 0.72, "diff": -0.02, "ci_low": -0.1,
         "ci_high": 0.06, "p_value": 0.5, "p_adjusted": 1.0, "mde_80": 0.1, "small": False,
         "note": None}
        for i, g in enumerate(groups)
    ]  # fmt: skip
    return {
        "task": "hearsay", "model": "local/smollm2", "a": a, "b": b, "by": by,
        "column": "slice" if by == "slice" else "answer",
        "metric": "balanced_accuracy" if by == "slice" else "recall",
        "test": "paired permutation test (per-example swaps of A and B)",
        "correction": "Holm over the k slices of this comparison", "n_resamples": 2000,
        "alpha": 0.05, "small_below": 30, "rows": rows, "notes": [],
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", type=int, default=20)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="write the two pages here")
    args = ap.parse_args()
    out = args.keep or Path(tempfile.mkdtemp(prefix="report-size-"))
    out.mkdir(parents=True, exist_ok=True)
    cases = {"big": (args.variants, args.rows), "small": (3, 40)}
    info: dict[str, dict[str, Any]] = {}
    for name, (v, n) in cases.items():
        doc = synthetic_doc(v, n)
        t0 = time.perf_counter()
        page = render_html(doc)
        t_render = time.perf_counter() - t0
        path = out / f"{name}.html"
        path.write_text(page, encoding="utf-8")
        info[name] = {
            "path": path, "variants": v, "rows": n, "render_s": t_render,
            "mb": path.stat().st_size / 1e6, "embedded": sum(s["n_shown"] for s in doc["samples"]),
            "disagree": sum(s["n_disagree"] for s in doc["samples"]),
            "comparisons": len(doc["samples"]), "ready": [], "painted": [],
        }  # fmt: skip
    with Chromium(width=1400, height=900) as browser:
        for name in cases:  # warm-up, not counted
            browser.open("about:blank")
            browser.load_time(info[name]["path"])
        for _ in range(args.runs):
            for name in cases:
                browser.open("about:blank")
                t = browser.load_time(info[name]["path"])
                info[name]["ready"].append(t.ready_ms)
                info[name]["painted"].append(t.painted_ms)
    big, small = info["big"], info["small"]
    kept = f"pages in {out}" if args.keep else "pages removed; --keep DIR keeps them"
    print(f"report size and open time ({args.runs} runs, medians; {kept})")
    print(f"{'':34}{'big sweep':>18}{'small sweep':>18}")
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("variants x rows", lambda d: f"{d['variants']} x {d['rows']}"),
        ("comparisons", lambda d: str(d["comparisons"])),
        ("disagreeing rows (all)", lambda d: str(d["disagree"])),
        ("rows embedded (cap 300 per cmp)", lambda d: str(d["embedded"])),
        ("file size", lambda d: f"{d['mb']:.2f} MB"),
        ("render in Python", lambda d: f"{d['render_s']:.3f} s"),
        ("Chromium: navigation -> ready", lambda d: f"{statistics.median(d['ready']):.0f} ms"),
        ("Chromium: -> first paint after", lambda d: f"{statistics.median(d['painted']):.0f} ms"),
    ]
    for label, f in rows:
        print(f"{label:34}{f(big):>18}{f(small):>18}")
    for name in cases:
        runs = ", ".join(f"{r:.0f}" for r in info[name]["ready"])
        print(f"  {name}: ready per run (ms): {runs}")
    ok_time = statistics.median(big["painted"]) < 3000
    ok_size = big["mb"] < 15
    if args.keep is None:
        shutil.rmtree(out, ignore_errors=True)
    said = {True: "met", False: "MISSED"}
    print(f"goal open < 3 s: {said[ok_time]}; size < 15 MB: {said[ok_size]}")


if __name__ == "__main__":
    main()
