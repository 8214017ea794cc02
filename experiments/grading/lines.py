"""What `workbench grade sheet|add|agreement` print (plain text; `--json` prints the records).

Kept in the grading package, not in `experiments.output`, so the printed lines live beside
the records they print; each ends with what to do next.
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.grading.add import AddResult
from experiments.grading.agreement import PairAgreement
from experiments.grading.sheets import SheetResult


def sheet_lines(r: SheetResult) -> str:
    cut = (
        f" (a random {r.n_items} of {r.n_available} answered rows)"
        if r.n_items < r.n_available
        else ""
    )
    unanswered = (
        f"\n{r.unanswered} row(s) of these trials have no answer (failed) and are not on the "
        "sheet; rerun the trials to add them to a new sheet"
        if r.unanswered
        else ""
    )
    return (
        f"wrote {r.csv_path}: sheet {r.sheet}, {r.n_items} items of task {r.task} from "
        f"{r.n_trials} trial(s){cut}, shuffled with seed {r.seed}\n"
        f"guide: {r.guide_path}\nkey (do not share with graders): {r.key_path}{unanswered}\n"
        f"next: fill the {', '.join(r.criteria)} columns with 1/0 from the top down, then "
        f"workbench grade add {r.csv_path} --grader YOUR_NAME"
    )


def add_lines(r: AddResult) -> str:
    again = f", {r.unchanged} already stored unchanged (not counted again)" if r.unchanged else ""
    done = r.prefix == r.n_items
    nxt = (
        "every item is graded; another grader can grade the same sheet for agreement "
        "(workbench grade agreement)"
        if done
        else f"grade on from item {r.prefix + 1} (top down), then add the file again"
    )
    return (
        f"sheet {r.sheet}, grader {r.grader}: {r.cells} grade(s) on {r.graded_items} of "
        f"{r.n_items} items; {r.written} added{again}\n"
        f"graded from the top without a gap: {r.prefix} of {r.n_items} items\n"
        f"next: {nxt}"
    )


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def agreement_lines(rows: Sequence[PairAgreement], task: str | None) -> str:
    where = f" on task {task}" if task else ""
    if not rows:
        return (
            f"no two graders graded the same rows{where}; "
            "next: have a second grader grade a sheet already graded "
            "(workbench grade add SHEET.csv --grader OTHER_NAME)"
        )
    out = [f"inter-grader agreement{where} (Cohen's kappa, {rows[0].kappa.level:.0%} interval)"]
    out.append(f"{'criterion':<12} {'grader A':<16} {'grader B':<16} {'n':>5} {'agree':>6}  kappa")
    for r in rows:
        k = r.kappa
        if k.kappa is None:
            kappa = f"undefined: {k.reason}"
        elif k.low is None or k.high is None:
            kappa = f"{k.kappa:.2f} (no interval: {k.reason})"
        else:
            kappa = f"{k.kappa:.2f} [{k.low:.2f}, {k.high:.2f}]"
        out.append(
            f"{r.criterion:<12} {r.grader_a:<16} {r.grader_b:<16} {r.n:>5} "
            f"{_num(r.agreement):>6}  {kappa}"
        )
    out.append(f"method: {rows[0].kappa.method}")
    out.append(
        "next: where kappa is low, compare the graders' notes and the guide's wording, then "
        "re-grade (a re-grade is kept beside the first)"
    )
    return "\n".join(out)


__all__ = ["add_lines", "agreement_lines", "sheet_lines"]
