"""The shipped rubrics (issue 33): one per application task and rule_qa, each with both
criteria, shipped in the wheel; a malformed rubric file names the file and the field."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest

from experiments.judge.rubrics import CRITERIA, RubricError, load_rubrics, shipped_tasks
from promptlib import Catalog

ROOT = Path(__file__).resolve().parents[3]
APPLICATION = (
    "abercrombie", "hearsay", "personal_jurisdiction", "successor_liability",
    "telemarketing_sales_rule", "ucc_v_common_law",
    *(f"diversity_{k}" for k in range(1, 7)),
)  # fmt: skip


def test_a_rubric_is_shipped_for_each_application_task_and_rule_qa() -> None:
    assert set(shipped_tasks()) == {*APPLICATION, "rule_qa"}
    shas = set()
    for task in shipped_tasks():
        rubrics = load_rubrics(task)
        assert rubrics.task == task and tuple(rubrics.rubrics) == CRITERIA
        for criterion in CRITERIA:
            shas.add(rubrics.of(criterion).sha256)
    assert len(shas) == 2 * len(shipped_tasks())  # every rubric its own identity


def test_pyproject_ships_the_rubrics() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["experiments.judge"]
    assert all(
        any(fnmatch.fnmatch(f"rubrics/{t}.yaml", p) for p in patterns) for t in shipped_tasks()
    )


@pytest.mark.data
def test_each_rubric_fills_from_its_tasks_rows(catalog: Catalog) -> None:
    for task in shipped_tasks():
        loaded = catalog.task(task)
        split = "test" if loaded.has_split("test") else "train"
        rows = loaded.rows(split) or [{"text": "Q?", "answer": "A.", "doctrine": "x"}]
        row = rows[0]  # rule_qa ships no rows here (its test split is held out)
        rubric = load_rubrics(task).of("correctness")
        assert row["answer"] == rubric.gold(row, task)
        question = rubric.question(row, task)
        assert question and "{{" not in question


GOOD = """\
task: hearsay
input: "{{text}}"
rule: The rule.
criteria:
  correctness: Right?
  analysis: Reasoned?
"""


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("- a list", "a mapping"),
        (GOOD.replace("rule: The rule.", "rule: ''"), "field 'rule'"),
        (GOOD.replace('input: "{{text}}"', "input: no column"), "field 'input'"),
        (GOOD.replace("  analysis: Reasoned?", "  style: Nice?"), "field 'criteria.style'"),
        (GOOD.replace("  analysis: Reasoned?", "  analysis: [1]"), "field 'criteria.analysis'"),
        (GOOD + "extra: 1\n", "unknown field(s) extra"),
        (GOOD.replace("task: hearsay", "task: abercrombie"), "field 'task'"),
        ("criteria: {\n", "my.yaml"),
    ],
)
def test_a_malformed_rubric_names_the_file_and_the_field(
    tmp_path: Path, text: str, field: str
) -> None:
    path = tmp_path / "my.yaml"
    path.write_text(text)
    with pytest.raises(RubricError, match=r"my\.yaml") as err:
        load_rubrics("hearsay", path)
    assert field in str(err.value)


def test_a_task_without_a_rubric_says_how_to_give_one(tmp_path: Path) -> None:
    with pytest.raises(RubricError, match=r"--rubric learned_hands_x=FILE"):
        load_rubrics("learned_hands_x")
    good = tmp_path / "ok.yaml"
    good.write_text(GOOD)
    only = load_rubrics("hearsay", good)
    assert only.of("analysis").text == "Reasoned?" and only.path == str(good)
    with pytest.raises(RubricError, match=r"missing\.yaml: cannot read"):
        load_rubrics("hearsay", tmp_path / "missing.yaml")
