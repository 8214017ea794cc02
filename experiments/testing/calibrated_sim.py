"""The calibrated comparison measured through the real path, on answers whose truth is set.

One simulated *set* (a task's first `n` rows, two variants) goes through what a user does:

- the trials: `SetCorrectLM`, one per variant, answers each rendered prompt right with the
  variant's probability (decided by a hash of the seed, the variant and the prompt), run by
  the trial runner and saved (`trials.run.run_trial`, `trials.store.save_trial`); the answer
  says whether it is right (``(sim: right)``), and variant A's answers carry a style mark
  (``(sim style: A)``), the kind of surface a judge can be biased by;
- the judge: `SimJudgeLM` through `judge.run.judge_trial` (a rubric of the task's), agreeing
  with the truth on `agree` of the rows (so its A − B is the true one times 2 agree − 1)
  and biased toward A's style by `bias`: `bias` is added to A's expected judge score (a
  judge score of 0 on an A row turns 1 with the probability that adds exactly that); one
  judge run per bias, side by side in the trials' folders;
- the hand grades: a blind sheet of both trials (`grading.sheets.make_sheet`), its first
  rows filled from the truth in the answer (a prefix of the shuffled order: a random subset),
  added with `grading.add.add_grades`, a longer prefix for a larger share;
- the report: `calibrated.calibrated_report`, the cell's one comparison read back.

`run_set` returns one `Outcome` per (share, bias) of the set; `benchmarks/calibrated_path.py`
runs the acceptance grid with it, `tests/experiments/calibrated/test_calibrated_path.py` a
small grid.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import ids, output
from experiments.calibrated import Arm, CalibratedComparison, calibrated_report
from experiments.grading.add import add_grades
from experiments.grading.sheets import SheetResult, make_sheet
from experiments.judge.rubrics import parse_rubrics
from experiments.judge.run import judge_trial
from experiments.llm.types import Completion, Decoding, InGivenOrder
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec
from experiments.trials.store import save_trial
from promptlib import parse_spec
from promptlib.tasks import Catalog

TASK = "overruling"  # 2,385 test rows: room for n = 400
MODEL = "sim/set-correctness"
VARIANTS = ("demos=none,format=base", "demos=none,format=claude")
CRITERION = "correctness"
RIGHT, WRONG, STYLE = "(sim: right)", "(sim: wrong)", "(sim style: A)"

RUBRIC = f"""task: {TASK}
input: "{{{{text}}}}"
reference: "{{{{answer}}}}"
rule: |
  A sentence overrules a prior case when it nullifies a previous case decision as precedent.
criteria:
  correctness: |
    Grade 1 only if the answer contains no error and reaches the reference answer.
  analysis: |
    Grade 1 only if the explanation shows how the rule applies to the sentence.
"""


class SetCorrectLM(InGivenOrder):
    """One variant's model: right on a prompt with probability `p` (hashed, reproducible)."""

    name = MODEL
    mode = "completion"
    concurrency = 1

    def __init__(self, variant: str, p: float, seed: int, styled: bool) -> None:
        self.variant, self.p, self.seed, self.styled = variant, p, seed, styled

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name, "variant": self.variant, "p": self.p, "seed": self.seed}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        right = ids.seed_uniform(self.seed, "answer", self.variant, prompt) < self.p
        style = f" {STYLE}" if self.styled else ""
        text = f" Yes. The sentence is read under the rule{style} {RIGHT if right else WRONG}."
        return Completion(text, tokens_in=len(prompt) // 4, tokens_out=16)

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        raise NotImplementedError("the simulated model only generates")


class SimJudgeLM(InGivenOrder):
    """A judge that reads the truth off the answer, agrees with it on `agree` of the rows and
    adds `bias` to A's mean score (A's style: `STYLE`). `p_a`: A's rate of right answers,
    which sets the flip probability that adds exactly `bias`."""

    name = "sim/judge"
    mode = "chat"
    concurrency = 1

    def __init__(self, agree: float, bias: float, p_a: float, seed: int) -> None:
        self.agree, self.bias, self.seed = agree, bias, seed
        zero = p_a * (1 - agree) + (1 - p_a) * agree  # P(judge says 0 on an A row)
        self.flip = min(1.0, bias / zero) if zero > 0 else 0.0

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name, "agree": self.agree, "bias": self.bias, "seed": self.seed}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        answer = prompt.rsplit(RIGHT if RIGHT in prompt else WRONG, 1)[0]
        truth = int(RIGHT in prompt)
        agrees = ids.seed_uniform(self.seed, "agree", prompt) < self.agree
        score = truth if agrees else 1 - truth
        if (
            score == 0
            and STYLE in answer
            and ids.seed_uniform(self.seed, "bias", prompt) < self.flip
        ):
            score = 1
        return Completion(str(score), tokens_in=len(prompt) // 4, tokens_out=1)

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        raise NotImplementedError("the simulated judge only generates (scoring='generate')")


@dataclass(frozen=True)
class Outcome:
    """One (set, share, bias): the comparison as reported, the true A − B, the report text."""

    n: int
    share: float
    bias: float
    truth: float
    row: CalibratedComparison
    text: str

    @property
    def covered(self) -> bool | None:
        """Whether the PPI interval holds the truth (None where the report says not valid)."""
        if not self.row.valid or self.row.low is None or self.row.high is None:
            return None
        return self.row.low <= self.truth <= self.row.high

    @property
    def judge_covered(self) -> bool | None:
        if self.row.judge_low is None or self.row.judge_high is None:
            return None
        return self.row.judge_low <= self.truth <= self.row.judge_high

    @property
    def hand_over_ppi(self) -> float | None:
        """The hand-only interval's width over the PPI interval's (above 1: the judge helped)."""
        r = self.row.width_ratio
        return None if r is None or r <= 0 else 1 / r


def fill_prefix(sheet: Path, start: int, stop: int, out: Path) -> int:
    """Write `sheet` to `out` with items [start, stop) of its order graded from the truth in
    their answers (the rest blank); how many were graded."""
    rows = list(csv.DictReader(io.StringIO(sheet.read_text(encoding="utf-8"))))
    if not rows:
        return 0
    graded = 0
    for k, row in enumerate(rows):
        if start <= k < stop:
            row[CRITERION] = "1" if RIGHT in row["answer"] else "0"
            graded += 1
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    out.write_text(buf.getvalue(), encoding="utf-8")
    return graded


@dataclass(frozen=True)
class SimSet:
    """A simulated set on disk: its two arms (A, B), their trial folders, a judge run per
    bias (bias -> judge id), the blind sheet of both trials, the runs/ and grades/ roots."""

    arms: tuple[Arm, Arm]
    dirs: tuple[Path, Path]
    judges: dict[float, str]
    sheet: SheetResult
    runs: Path
    grades: Path

    @property
    def pairs(self) -> dict[tuple[str, str], list[tuple[str, str]]]:
        return {(TASK, MODEL): [(self.arms[0].variant, self.arms[1].variant)]}


def prepare_set(
    catalog: Catalog,
    root: Path,
    *,
    n: int,
    p: tuple[float, float],
    biases: Sequence[float],
    seed: int,
    agree: float = 0.8,
) -> SimSet:
    """The trials of `n` rows per variant run and saved under `root`, judged once per bias,
    and a blind sheet of both (nothing graded yet)."""
    runs, grades = root / "runs", root / "grades"
    arms: list[Arm] = []
    dirs = []
    for k, (v, pv) in enumerate(zip(VARIANTS, p, strict=True)):
        spec = TrialSpec(task=TASK, variant=parse_spec(v), model=MODEL, limit=n)
        result = run_trial(spec, catalog, SetCorrectLM(v, pv, seed, styled=k == 0))
        dirs.append(save_trial(result, runs))
        arms.append(Arm(result.trial_id, TASK, MODEL, v))
    rubrics = parse_rubrics(RUBRIC, "calibrated_sim", TASK)
    judges = {}
    for b in biases:
        lm = SimJudgeLM(agree, b, p[0], seed)
        for d in dirs:
            run = judge_trial(d, lm, rubrics, (CRITERION,), catalog=catalog, scoring="generate")
        judges[b] = run.judge_id
    sheet = make_sheet(dirs, catalog, seed=seed, out=root / "sheet.csv", criteria=(CRITERION,),
                       root=grades)  # fmt: skip
    return SimSet((arms[0], arms[1]), (dirs[0], dirs[1]), judges, sheet, runs, grades)


def grade_rows(s: SimSet, sheet_csv: Path, start: int, stop: int) -> int:
    """Grade items [start, stop) of a sheet's order from the truth and add them (grader
    "sim"); how many were graded."""
    filled = sheet_csv.with_name(f"{sheet_csv.stem}-filled-{start}-{stop}.csv")
    graded = fill_prefix(sheet_csv, start, stop, filled)
    if graded:
        add_grades(filled, "sim", root=s.grades, runs_root=s.runs)
    return graded


def run_set(
    catalog: Catalog,
    root: Path,
    *,
    n: int,
    p: tuple[float, float],
    shares: Sequence[float],
    biases: Sequence[float],
    seed: int,
    agree: float = 0.8,
) -> list[Outcome]:
    """One set of `n` rows per variant under `root` (a fresh folder): the trials once, a judge
    run per bias, hand grades on growing prefixes of one sheet (`shares` ascending), the
    report per (share, bias)."""
    s = prepare_set(catalog, root, n=n, p=p, biases=biases, seed=seed, agree=agree)
    out: list[Outcome] = []
    done = 0
    for share in sorted(shares):
        stop = round(share * s.sheet.n_items)
        if stop > done:
            grade_rows(s, s.sheet.csv_path, done, stop)
            done = stop
        for b in biases:
            report = calibrated_report(
                "sim", s.arms, s.pairs, judge=s.judges[b], criteria=(CRITERION,),
                runs_root=s.runs, grades_root=s.grades,
            )  # fmt: skip
            row = report.cells[0].comparisons[0]
            text = output.calibrated_table(report)
            out.append(Outcome(n, share, b, p[0] - p[1], row, text))
    return out
