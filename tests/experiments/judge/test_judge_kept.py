"""Judge scores live in the trial's folder (``runs/<trial id>/judge/``), which a rerun of the
trial and a grade import rewrite as a whole: they must survive both (issue 33)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from experiments.judge.rubrics import load_rubrics
from experiments.judge.run import judge_trial
from experiments.judge.store import judge_ids, load_judge_scores
from experiments.llm.scripted import LMDefaults
from experiments.llm.types import Completion, Decoding
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec, resolve_trial
from experiments.trials.store import save_trial
from promptlib import Catalog, parse_spec
from tests.experiments.judge.test_judge_run import AnswerLM, JudgeLM

pytestmark = pytest.mark.data


def test_a_rerun_of_the_trial_keeps_its_judge_scores(catalog: Catalog, tmp_path: Path) -> None:
    spec = TrialSpec(task="hearsay", variant=parse_spec("demos=none"), model=AnswerLM.name, limit=3)
    trial_dir = save_trial(run_trial(spec, catalog, AnswerLM()), tmp_path / "runs")
    run = judge_trial(trial_dir, JudgeLM(), load_rubrics("hearsay"), catalog=catalog,
                      scoring="generate")  # fmt: skip
    before = load_judge_scores(trial_dir, run.judge_id)
    assert save_trial(run_trial(spec, catalog, AnswerLM()), tmp_path / "runs") == trial_dir
    assert judge_ids(trial_dir) == [run.judge_id]
    assert load_judge_scores(trial_dir, run.judge_id) == before


class ProseLM(LMDefaults):
    name = "scripted/prose"
    mode = "completion"
    concurrency = 1

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        return Completion(f"Answer {len(prompt)}.", tokens_out=2)


def test_grade_import_and_a_rerun_keep_a_hand_graded_trials_judge_scores(
    lb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from experiments.tracking.grades import import_grades
    from experiments.trials.grading import export_csv, save_keeping_grades
    from promptlib import LocalSource
    from tests.experiments.trials.test_grading import _data

    monkeypatch.setenv("WORKBENCH_RUNS_DIR", str(tmp_path / "runs"))
    catalog = Catalog(LocalSource(_data(tmp_path, lb_dir)))
    lm = ProseLM()
    spec = TrialSpec(task="rule_qa", variant=parse_spec("base"), model=lm.name)
    resolved = resolve_trial(spec, catalog, lm, hand_graded=True)
    trial_dir, _ = save_keeping_grades(run_trial(resolved, catalog, lm))
    run = judge_trial(trial_dir, JudgeLM(), load_rubrics("rule_qa"), catalog=catalog,
                      scoring="generate")  # fmt: skip
    out = tmp_path / "grades.csv"
    export_csv(trial_dir, catalog, out)
    rows = list(csv.DictReader(out.open(encoding="utf-8", newline="")))
    for row in rows:
        row["grade"] = "1"
    with out.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    import_grades(out, track=False)  # used to refuse: "judge: not a file the workbench writes"
    assert (trial_dir / "grades.json").is_file() and judge_ids(trial_dir) == [run.judge_id]
    _, summary = save_keeping_grades(run_trial(resolved, catalog, lm))  # grades carried over
    assert "grades_dropped" not in summary and (trial_dir / "grades.json").is_file()
    assert judge_ids(trial_dir) == [run.judge_id]
