"""The HTML report of a big sweep stays usable (issue 34, point 4): its build time, its size
and its open time, measured on the product's own path.

    python benchmarks/report_size.py [--variants 20] [--rows 2000] [--runs 3] [--keep DIR]

Synthesizes the trials of a hearsay sweep, VARIANTS prompt variants x ROWS rows, as a sweep
would hold them, then makes its report exactly as the sweep does:

- rows: the hearsay test rows of $LEGALBENCH_DIR, each varied (names, an exhibit number) into
  ROWS distinct inputs, with their gold Yes/No answer and their `slice` column (5 slices);
- prompts: hearsay's base prompt (its 5 demonstrations) compiled by promptlib
  (`compile_prompt`) with a custom instruction per variant (one to three edits of the
  base's); trials resolved as `trials.spec.ResolvedTrial` (their real trial ids), each row's
  prompt hash that of its rendered prompt;
- answers: the base variant right on ~65% of rows; every other variant disagrees with it on
  ~25% of rows, its score within +-0.08 of the base's; replies are bare labels as a
  few-shot completion gives them (~3% of wrong ones ramble: no label), or, in a second big
  sweep ("explained"), explanations restating the row's facts (~250 characters), scored on
  the conclusion `promptlib.conclusions.parse_conclusion` reads, as an application trial's;
- comparisons: each variant against the base (VARIANTS - 1 declared pairs), run by the
  sweep's `analysis.plan.run_plan` (paired permutation tests, intervals, MDEs, Holm); the
  figure by `analysis.figures.pair_figure`;
- the report: `reports.html.build.build_sweep_report` (disagreeing rows capped per
  comparison, prompt word diffs, per-slice and per-class tables), `render_html`, and the
  sweep's writer (`sweeps.report._write_report`) into reports/<sweep>/<sweep id>/.

Printed, for the two big sweeps and a small one (3 variants x 40 rows) side by side: the Python
times (the comparisons; the report's per-slice/per-class tables; the rest of the build;
rendering), the page's size and rows embedded, and Chromium's open time (navigation start ->
the page's `ready`, and -> the first frame painted after it), medians of RUNS opens after a
warm-up open of each page. Goals: the big report opens in < 3 s and stays < 15 MB.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import ids
from experiments.analysis.figures import pair_figure
from experiments.analysis.plan import ComparisonPlan, run_plan
from experiments.analysis.slices import slice_table
from experiments.metrics import rule_conclusion_metric, same_label, score
from experiments.reports.files import report_files
from experiments.reports.folders import INDEX
from experiments.reports.html.build import build_sweep_report
from experiments.reports.html.model import ROWS_CAP, ReportDoc
from experiments.reports.html.render import render_html
from experiments.sweeps.report import _write_report
from experiments.testing.chromium import Chromium
from experiments.trials.record import Prediction, TrialRecord, TrialStatus
from experiments.trials.spec import ResolvedTrial, TrialSpec
from promptlib.conclusions import parse_conclusion
from promptlib.data import LocalSource
from promptlib.render import CompiledPrompt, compile_prompt
from promptlib.tasks import Catalog
from promptlib.variants.variant import PromptVariant

TASK = "hearsay"
MODEL = "local/smollm2"
METRIC = "balanced_accuracy"
N_RESAMPLES = 1000  # a sweep spec's default
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
    ("and No if it is not.", "and No otherwise."),
)
NAMES = ("Alex", "Blair", "Casey", "Dana", "Emery", "Finley", "Harper", "Jordan", "Kai", "Logan")
REASONS = {
    "Yes": (
        "The statement was made out of court and is offered to prove that what it asserts is "
        "true, so this is hearsay.",
        "The declarant's words are used for their truth and were not spoken while testifying "
        "at this trial, so it is hearsay.",
        "The conduct was meant as an assertion and is offered for its truth, so it is hearsay.",
    ),
    "No": (
        "The conduct was not intended as an assertion, so it is not hearsay.",
        "The statement is offered for its effect on the listener, not for its truth, so it is "
        "not hearsay.",
        "The witness said it while testifying at the current trial, so it is not hearsay.",
    ),
}
RAMBLE = (
    "The evidence is ambiguous: it depends on whether the declarant meant to assert "
    "anything, and on what the statement is offered to prove; more facts are needed."
)


@dataclass(frozen=True)
class Sweep:
    """A synthetic sweep's trials as the sweep's report step gets them."""

    name: str
    sweep_id: str
    records: tuple[TrialRecord, ...]
    resolved: tuple[ResolvedTrial, ...]
    doc: dict[str, Any]  # the comparisons document (comparisons.json)
    figures: dict[str, Any]  # file name -> matplotlib figure
    compare_s: float  # run_plan + the figure


def hearsay_rows(lb_dir: Path) -> list[dict[str, str]]:
    path = lb_dir / "tasks" / TASK / "test.tsv"
    if not path.exists():
        sys.exit(f"no {path}: set LEGALBENCH_DIR to the LegalBench data folder")
    with path.open(newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def varied_rows(lb: Sequence[Mapping[str, str]], n_rows: int) -> list[dict[str, str]]:
    """`n_rows` distinct hearsay rows: the test rows in turn, the first name of each swapped
    for another (a pass over the test rows each) and an exhibit number added."""
    names = sorted({w for r in lb for w in r["text"].split() if w.istitle() and w.isalpha()})
    out = []
    for n in range(n_rows):
        src, turn = lb[n % len(lb)], n // len(lb)
        text = src["text"]
        first = next((w for w in text.split() if w in names and w not in ("On", "To")), None)
        if first is not None and turn:
            text = text.replace(first, NAMES[turn % len(NAMES)])
        text = text.rstrip(".") + f" (exhibit {turn + 1})."
        out.append({"index": str(n), "answer": src["answer"], "text": text, "slice": src["slice"]})
    assert len({r["text"] for r in out}) == n_rows, "the varied inputs must be distinct"
    return out


def instruction(v: int) -> str:
    text = BASE_INSTRUCTION
    for k in range(v and 1 + v % 3):
        old, new = EDITS[(v + 3 * k) % len(EDITS)]
        text = text.replace(old, new)
    return text if v == 0 else f"{text} (variant {v})"


def reply(
    row: Mapping[str, str], ok: bool, compiled: CompiledPrompt, rng: random.Random, explained: bool
) -> Prediction:
    """One row's prediction, right or wrong as drawn, scored as the runner scores it: a bare
    label (~3% of wrong replies ramble instead), or with `explained` an explanation restating
    the facts whose conclusion `parse_conclusion` reads (as an application trial's)."""
    gold, prompt = row["answer"], compiled.render(row)
    ans = gold if ok else ("No" if gold == "Yes" else "Yes")
    ramble = not ok and rng.random() < 0.03
    if not explained:
        gen = RAMBLE if ramble else ans
        return Prediction(
            index=row["index"], prompt_hash=ids.prompt_hash(prompt), answer=gold,
            generation=gen, parsed=None if ramble else gen, correct=same_label(gen, gold),
            tokens_in=300, tokens_out=40 if ramble else 1,
        )  # fmt: skip
    facts = row["text"][0].lower() + row["text"][1:].rstrip(".")
    why = REASONS[ans][int(row["index"]) % len(REASONS[ans])]
    gen = f"The evidence: {facts}. {why}" if not ramble else f"The evidence: {facts}. {RAMBLE}"
    c = parse_conclusion(gen, compiled.labels or (), TASK, next_question=None)
    scored = c.scored(gold, False)
    return Prediction(
        index=row["index"], prompt_hash=ids.prompt_hash(prompt), answer=gold, generation=gen,
        parsed=c.label, correct=same_label(scored, gold), tokens_in=300, tokens_out=90,
        scored=scored,
    )  # fmt: skip


def synth_sweep(
    n_variants: int, n_rows: int, lb_dir: Path, *, seed: int = 0, explained: bool = False
) -> Sweep:
    """The sweep's records, resolved trials, comparisons document and figures (`explained`:
    the replies are explanations, scored on their conclusions as an application trial's)."""
    metric = rule_conclusion_metric(METRIC) if explained else METRIC
    rng = random.Random(seed)
    catalog = Catalog(LocalSource(lb_dir))
    task = catalog.task(TASK)
    rows = varied_rows(hearsay_rows(lb_dir), n_rows)
    index = tuple(r["index"] for r in rows)
    variants = [f"instruction=i{v:02d}" for v in range(n_variants)]
    # the base right on ~65% of rows; variant v flips base-right rows w.p. f1 and base-wrong
    # rows w.p. f0, so that ~25% of rows flip and its accuracy moves by `delta`
    base_right = [rng.random() < 0.65 for _ in rows]
    right = [base_right]
    for _ in range(1, n_variants):
        delta = rng.uniform(-0.08, 0.08)
        f1, f0 = (0.25 - delta) / 1.3, (0.25 + delta) / 0.7
        right.append([(rng.random() >= (f1 if c else f0)) == c for c in base_right])
    records: list[TrialRecord] = []
    resolved: list[ResolvedTrial] = []
    for v, name in enumerate(variants):
        pv = PromptVariant(instruction="custom", instruction_text=instruction(v))
        compiled: CompiledPrompt = compile_prompt(pv, task)
        rt = ResolvedTrial(
            spec=TrialSpec(task=TASK, variant=pv, model=MODEL, rows=index),
            compiled=compiled, rows=rows, excluded=[], metric=metric,
            lm_identity={"model": MODEL}, decoding={"temperature": 0.0, "max_tokens": 64},
        )  # fmt: skip
        preds = [
            reply(r, ok, compiled, rng, explained) for r, ok in zip(rows, right[v], strict=True)
        ]
        s = score(TASK, [p.scored_text or "" for p in preds], [p.answer for p in preds],
                  metric=metric)  # fmt: skip
        records.append(TrialRecord(
            task=TASK, model=MODEL, variant=name, metric=metric, status=TrialStatus.COMPLETE,
            score=s, rows=tuple(preds), trial_id=rt.id, run_id=f"{v + 1:032x}",
        ))  # fmt: skip
        resolved.append(rt)
    sweep = f"bench{n_variants}x{n_rows}" + ("_explained" if explained else "")
    plan = ComparisonPlan(
        name=sweep, tasks=(TASK,), models=(MODEL,), variants=tuple(variants),
        comparisons=tuple((variants[0], b) for b in variants[1:]), n_resamples=N_RESAMPLES,
        correction="holm", across_tasks="permutation",
    )  # fmt: skip
    t0 = time.perf_counter()
    table, across = run_plan(plan, records)
    figures = {f"{sweep}.png": pair_figure(sweep, MODEL, records, table, {TASK: 0.5})}
    compare_s = time.perf_counter() - t0
    doc: dict[str, Any] = {
        "comparisons": [r.to_dict() for r in table],
        "across_tasks": [r.to_dict() for r in across],
        "incomplete": [],
        "sensitivity": {"per_task": [], "notes": []},
    }
    sid = ids.text_sha256(f"{sweep}/{seed}")
    return Sweep(sweep, sid, tuple(records), tuple(resolved), doc, figures, compare_s)


@dataclass
class Timed:
    """`slice_table` with the time spent in it, by table kind."""

    seconds: dict[str, float]
    calls: dict[str, int]

    def __call__(self, *args: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return slice_table(*args, **kw)
        finally:
            by = str(kw.get("by"))
            self.seconds[by] = self.seconds.get(by, 0.0) + time.perf_counter() - t0
            self.calls[by] = self.calls.get(by, 0) + 1


@dataclass(frozen=True)
class Made:
    """A sweep's report as written: where, its Python times (seconds) and what it holds."""

    path: Path
    variants: int
    rows: int
    compare_s: float  # run_plan + the figure (before the report)
    tables_s: float  # the builder's per-slice and per-class tables
    tables: str  # how many: "by class + by slice"
    rest_s: float  # the rest of `build_sweep_report`
    render_s: float  # `render_html`
    mb: float
    embedded: int  # disagreeing rows in the page
    disagree: int  # disagreeing rows in all
    comparisons: int
    diffs: int


def make_report(sweep: Sweep, reports_dir: Path) -> Made:
    """Build, render and write the sweep's report as the sweep does; the times and sizes."""
    timed = Timed({}, {})
    files = report_files(sweep.doc, sweep.figures)  # the figures' PNGs, as the sweep has them
    pngs = {n: v for n, v in files.items() if n.endswith(".png") and isinstance(v, bytes)}
    t0 = time.perf_counter()
    report: ReportDoc = build_sweep_report(
        name=sweep.name, sweep_id=sweep.sweep_id, records=sweep.records, doc=sweep.doc,
        figures=pngs, resolved=sweep.resolved, ui_base="http://127.0.0.1:5000",
        experiment_id="1", n_resamples=N_RESAMPLES, slice_tables=timed,
    )  # fmt: skip
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    page = render_html(report.to_dict())
    t_render = time.perf_counter() - t0
    files[INDEX] = page
    written = _write_report(reports_dir, sweep.name, sweep.sweep_id, files)
    path = written.path / INDEX
    samples = report.samples
    return Made(
        path=path,
        variants=len(sweep.records),
        rows=sweep.records[0].n,
        compare_s=sweep.compare_s,
        tables_s=sum(timed.seconds.values()),
        tables=" + ".join(str(timed.calls[k]) for k in sorted(timed.calls)),
        rest_s=t_build - sum(timed.seconds.values()),
        render_s=t_render,
        mb=path.stat().st_size / 1e6,
        embedded=sum(s.n_shown for s in samples),
        disagree=sum(s.n_disagree for s in samples),
        comparisons=len(samples),
        diffs=sum(len(s.diffs) for s in samples),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--variants", type=int, default=20)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="write the reports here")
    args = ap.parse_args()
    lb_dir = Path(os.environ.get("LEGALBENCH_DIR", "/work/shared/legalbench"))
    out = args.keep or Path(tempfile.mkdtemp(prefix="report-size-"))
    out.mkdir(parents=True, exist_ok=True)
    cases = {
        "big sweep": (args.variants, args.rows, False),
        "big, explained": (args.variants, args.rows, True),
        "small sweep": (3, 40, False),
    }
    info: dict[str, Made] = {}
    ready: dict[str, list[float]] = {name: [] for name in cases}
    painted: dict[str, list[float]] = {name: [] for name in cases}
    for name, (v, n, explained) in cases.items():
        t0 = time.perf_counter()
        sweep = synth_sweep(v, n, lb_dir, explained=explained)
        info[name] = make_report(sweep, out)
        print(f"{name}: made in {time.perf_counter() - t0:.1f} s", flush=True)
    with Chromium(width=1400, height=900) as browser:
        for name in cases:  # warm-up, not counted
            browser.open("about:blank")
            browser.load_time(info[name].path)
        for _ in range(args.runs):
            for name in cases:
                browser.open("about:blank")
                t = browser.load_time(info[name].path)
                ready[name].append(t.ready_ms)
                painted[name].append(t.painted_ms)
    kept = f"reports in {out}" if args.keep else "reports removed; --keep DIR keeps them"
    print(f"sweep report: build, size, open time ({args.runs} opens, medians; {kept})")
    print(f"{'':34}" + "".join(f"{name:>20}" for name in cases))
    rows: list[tuple[str, Callable[[str, Made], str]]] = [
        ("variants x rows", lambda _, d: f"{d.variants} x {d.rows}"),
        ("comparisons (each vs the base)", lambda _, d: str(d.comparisons)),
        ("disagreeing rows (all)", lambda _, d: str(d.disagree)),
        (f"rows embedded (cap {ROWS_CAP} per cmp)", lambda _, d: str(d.embedded)),
        ("prompt diffs embedded", lambda _, d: str(d.diffs)),
        ("Python: comparisons + figure", lambda _, d: f"{d.compare_s:.1f} s"),
        ("Python: slice/class tables", lambda _, d: f"{d.tables_s:.1f} s"),
        ("  tables (by class, by slice)", lambda _, d: d.tables),
        ("Python: rest of the build", lambda _, d: f"{d.rest_s:.2f} s"),
        ("Python: render_html", lambda _, d: f"{d.render_s:.2f} s"),
        ("file size (index.html)", lambda _, d: f"{d.mb:.2f} MB"),
        ("Chromium: navigation -> ready", lambda n, _: f"{statistics.median(ready[n]):.0f} ms"),
        ("Chromium: -> first paint after", lambda n, _: f"{statistics.median(painted[n]):.0f} ms"),
    ]
    for label, f in rows:
        print(f"{label:34}" + "".join(f"{f(name, info[name]):>20}" for name in cases))
    for name in cases:
        runs = ", ".join(f"{r:.0f}" for r in ready[name])
        print(f"  {name}: ready per open (ms): {runs}")
    big = [name for name in cases if name.startswith("big")]
    ok_time = all(statistics.median(painted[name]) < 3000 for name in big)
    ok_size = all(info[name].mb < 15 for name in big)
    if args.keep is None:
        shutil.rmtree(out, ignore_errors=True)
    said = {True: "met", False: "MISSED"}
    print(f"goals (big sweeps): open < 3 s {said[ok_time]}; size < 15 MB {said[ok_size]}")


if __name__ == "__main__":
    main()
