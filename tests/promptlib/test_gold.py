"""promptlib.gold (issue 30, defects 3 and 8): no template names the answer column, no slot
shows a row's own gold answer, and a gold answer is never empty; real LegalBench data trips
none of it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from experiments.generate.prompt import GenerateError, TaskBrief
from experiments.generate.provenance import refusal
from experiments.optimize.instructions import read_instruction_files
from experiments.sweeps.spec import SpecError, load_spec
from promptlib import Catalog, LocalSource, PromptVariant, compile_prompt, parse_spec
from promptlib.data import read_tsv
from promptlib.errors import (
    DataError,
    LeakageError,
    TemplateError,
    VariantError,
    VariantFileError,
    WorkbenchError,
)
from promptlib.gold import MIN_GOLD_CHARS, check_gold_not_shown, gold_shown
from promptlib.leakage import evaluation_rows
from promptlib.tasks import Task
from promptlib.templates import placeholders
from promptlib.variants import load_variant_file

LEAK = "Q: {{text}}\nGold: {{ answer }}\nA:"


def _task(root: Path, query: str, rows: list[tuple[str, str]], demos: str = "") -> Path:
    """A LegalBench layout with one binary task, `toy`, its base prompt and test rows."""
    d = root / "tasks" / "toy"
    d.mkdir(parents=True)
    (d / "README.md").write_text("# toy\n\n**Task type**: Binary classification\n")
    body = "\n".join(f"{i}\t{t}\t{a}" for i, (t, a) in enumerate(rows))
    (d / "train.tsv").write_text(f"index\ttext\tanswer\n{body}\n")
    (d / "test.tsv").write_text(f"index\ttext\tanswer\n{body}\n")
    (d / "base_prompt.txt").write_text(f"Classify the claim.\n\n{demos}{query}\n")
    return d


def _yaml(path: Path, text: str) -> str:
    path.write_text(json.dumps({"text": text}))  # JSON is YAML
    return str(path)


# ---- (a) templates naming the answer column ---------------------------------------------------
def _instruction_file(tmp: Path) -> None:
    parse_spec(f"instruction_file={_yaml(tmp / 'i.yaml', 'Say {{answer}}.')}")


def _register_file(tmp: Path) -> None:
    parse_spec(f"register_file={_yaml(tmp / 'r.yaml', LEAK)},demos=none")


def _variant_file(tmp: Path) -> None:
    doc = PromptVariant(register="plain").to_dict()
    doc.update(register="custom", register_text=LEAK)
    (tmp / "v.json").write_text(json.dumps(doc))
    load_variant_file(tmp / "v.json")


def _sweep_spec(tmp: Path) -> None:
    path = _yaml(tmp / "r.yaml", LEAK)
    (tmp / "s.yaml").write_text(
        f"name: x\ntasks: [hearsay]\naxes:\n  register_file: [none, {path}]\n"
    )
    load_spec(tmp / "s.yaml")


def _optimize_file(tmp: Path) -> None:
    read_instruction_files((_yaml(tmp / "i.yaml", "Answer {{answer}}."),))


def _prompt_file(tmp: Path) -> None:
    _task(tmp / "lb", "Text: {{text}} ({{answer}})\nLabel:", [("a", "Yes"), ("b", "No")])
    compile_prompt(PromptVariant(), Catalog(LocalSource(tmp / "lb")).task("toy"))


def _generation_brief(tmp: Path) -> None:
    _task(tmp / "lb", "Text: {{text}} ({{answer}})\nLabel:", [("a", "Yes"), ("b", "No")])
    TaskBrief.of(Catalog(LocalSource(tmp / "lb")).task("toy"))


READERS: dict[str, tuple[Callable[[Path], None], type[WorkbenchError], str]] = {
    "instruction_file": (_instruction_file, VariantError, "instruction_file {tmp}/i.yaml: its field 'text'"),
    "register_file": (_register_file, VariantError, "register_file {tmp}/r.yaml: its field 'text'"),
    "variant_file": (_variant_file, VariantFileError, "variant file {tmp}/v.json: register_text"),
    "sweep_spec": (_sweep_spec, SpecError, "register_file {tmp}/r.yaml: its field 'text'"),
    "optimize_file": (_optimize_file, WorkbenchError, "--instruction-file {tmp}/i.yaml: its field"),
    "prompt_file": (_prompt_file, TemplateError, "prompt file {tmp}/lb/tasks/toy/base_prompt.txt"),
    "generate": (_generation_brief, GenerateError, "prompt file {tmp}/lb/tasks/toy/base_prompt"),
}  # fmt: skip


@pytest.mark.parametrize("reader", list(READERS))
def test_a_template_naming_the_answer_is_refused_where_it_is_read(
    tmp_path: Path, reader: str
) -> None:
    read, error, where = READERS[reader]
    with pytest.raises(error) as e:
        read(tmp_path)
    msg = str(e.value)
    assert "\n" not in msg
    assert where.format(tmp=tmp_path) in msg
    assert "names {{answer}}, the column holding each row's gold answer" in msg
    assert "remove {{answer}}" in msg


def test_a_generated_text_naming_the_answer_is_refused_for_either_kind(catalog: Catalog) -> None:
    brief = TaskBrief.of(catalog.task("hearsay"))
    for key, text in (("instruction_file", "Say {{answer}}."), ("register_file", LEAK)):
        reason = refusal(brief, key, text)
        assert reason is not None and "names {{answer}}" in reason, key
    assert refusal(brief, "register_file", "Q: {{text}} Hearsay?\nA:") is None


def test_a_register_without_the_answer_still_runs(tmp_path: Path) -> None:
    """The refusal is about the answer column only: a template naming other columns, or
    the word 'answer' outside braces, is read as before."""
    path = _yaml(tmp_path / "r.yaml", "Q: {{text}} answer?\nA:")
    variant = parse_spec(f"register_file={path}")
    assert variant.register_text == "Q: {{text}} answer?\nA:"


# ---- (b) a slot showing the row's own gold answer --------------------------------------------
ROWS = [
    {"index": "1", "text": "a claim", "note": "Contract  claim.", "answer": "contract claim"},
    {"index": "2", "text": "a tort", "note": "other", "answer": "tort claim"},
    {"index": "3", "text": "x", "note": "Yes", "answer": "Yes"},  # too short to look for
    {"index": "4", "text": "it is a tort claim here", "note": "", "answer": "tort claim"},
]


def test_a_slot_whose_whole_value_is_the_answer_is_shown_gold() -> None:
    hit = gold_shown(["text", "note"], ROWS)
    assert hit is not None and hit.column == "note" and hit.rows == ("1",)
    assert hit.checked == 3  # rows 1, 2 and 4: 'Yes' is shorter than MIN_GOLD_CHARS
    assert len("yes") < MIN_GOLD_CHARS <= len("true")
    # the passage of row 4 contains its answer: input (an extraction task's text), not a copy
    assert gold_shown(["text"], ROWS) is None


def test_a_column_copying_short_answers_on_every_row_is_shown_gold() -> None:
    """Yes/No (and A-E) answers are too short to count one row at a time, but a column that
    equals the answer on every evaluated row, across more than one label, is a copy of the
    answer column (a model copying it scores 1.0): refused. A column equal on some rows
    only, or a constant column where every answer is the same, is not."""
    answers = ["Yes", "No", "No", "Yes", "No"]
    rows = [
        {"index": str(i), "text": f"fact {i}", "label": f" {a.lower()}.", "same": "Yes",
         "flag": "Yes", "answer": a}
        for i, a in enumerate(answers)
    ]  # fmt: skip
    hit = gold_shown(["text", "label"], rows)
    assert hit is not None and hit.column == "label" and hit.rows == ("0", "1", "2", "3", "4")
    with pytest.raises(LeakageError, match=r"shows \{\{label\}\}"):
        check_gold_not_shown("toy", "{{text}} [{{label}}]", "toy/r", rows, "test.tsv")
    assert gold_shown(["text", "flag"], rows) is None  # equal on the 'Yes' rows only
    rows[4]["label"] = "Yes"  # one row differs: not a copy
    assert gold_shown(["label"], rows) is None
    yes = [{**r, "answer": "Yes"} for r in rows]  # one label: a constant column says nothing
    assert gold_shown(["same"], yes) is None
    assert gold_shown(["label"], rows[:1]) is None  # one row: cannot tell


def test_the_refusal_names_the_template_column_file_and_first_rows() -> None:
    rows = [
        {"index": str(i), "text": "t", "gold": "tort claim", "answer": "tort claim"}
        for i in range(7)
    ]
    with pytest.raises(LeakageError) as e:
        check_gold_not_shown("toy", "T: {{text}}\nG: {{gold}}\nA:", "toy/r", rows, "test.tsv")
    msg = str(e.value)
    assert "task 'toy': the query template (toy/r) shows {{gold}}" in msg
    assert "in test.tsv (index 0, 1, 2 and 4 more: 7 of 7 rows checked)" in msg
    assert "remove {{gold}} from the template, or the column 'gold' from the data" in msg
    check_gold_not_shown("toy", "T: {{text}}\nA:", "toy/r", rows, "test.tsv")  # not shown


def test_demonstrations_showing_the_same_answer_are_not_a_leak(tmp_path: Path) -> None:
    """A demonstration shows its own answer, which is often the evaluated row's too: only
    the evaluated row's slots count."""
    demo = "Text: an earlier contract claim\nLabel: contract claim\n\n"
    rows = [(f"claim {i}", "contract claim" if i % 2 else "tort claim") for i in range(6)]
    _task(tmp_path, "Text: {{text}}\nLabel:", rows, demos=demo)
    task = Catalog(LocalSource(tmp_path)).task("toy")
    compiled = compile_prompt(PromptVariant(), task)
    assert compiled.demos and compiled.demos[0].answer == "contract claim"
    evaluated = evaluation_rows(compiled.variant, task, "test")[0]
    assert any("contract claim" in compiled.render(r) for r in evaluated)
    check_gold_not_shown("toy", compiled.query, compiled.source, evaluated, "test.tsv")


BUILT_IN = (
    "base",
    "demos=none",
    "instruction=reference",
    "instruction=description",
    "register=plain",
    "register=technical",
    "format=claude",
)


@pytest.mark.data
def test_no_real_legalbench_row_shows_its_gold_answer(catalog: Catalog) -> None:
    """Every task, split and built-in level of the shipped data: nothing is flagged, also
    without the length gate (so the gate is not what keeps real data clear)."""
    checked = 0
    for name in catalog.names():
        task = catalog.task(name)
        for split in ("train", "test"):
            if not task.has_split(split):
                continue
            for level in BUILT_IN:
                try:
                    compiled = compile_prompt(parse_spec(level), task, split)
                    rows = evaluation_rows(compiled.variant, task, split)[0]
                except WorkbenchError:
                    continue  # a level the task has no prompt file for
                cols = placeholders(compiled.query)
                assert gold_shown(cols, rows) is None, (name, split, level)
                checked += len(rows)
    assert checked > 70_000


# ---- defect 8: an empty gold answer ------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("index\ttext\tanswer\n0\ta\tYes\n1\tb\t \n2\tc\tNo\n", ": 1 row of 3 has an empty answer"),
        ("index\ttext\tanswer\n0\ta\t.\n1\tb\t\n", ": 2 rows of 2 have an empty answer"),
        ("text\tanswer\na\tYes\nb\t?!\n", "index 1 (line 3);"),  # numbered when it has no index
    ],
    ids=["blank", "punctuation", "no-index"],
)
def test_an_empty_gold_answer_is_refused_when_read(tmp_path: Path, body: str, needle: str) -> None:
    path = tmp_path / "test.tsv"
    path.write_text(body)
    with pytest.raises(DataError) as e:
        read_tsv(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: ") and needle in msg
    assert "fill in each answer or remove those rows" in msg


def test_a_multi_label_answer_with_an_empty_part_adds_no_empty_label(tmp_path: Path) -> None:
    d = tmp_path / "tasks" / "toy"
    d.mkdir(parents=True)
    (d / "README.md").write_text("# toy\n")
    (d / "test.tsv").write_text(
        "index\ttext\tanswer\n0\ta\tde facto merger,\n1\tb\tmere continuation\n"
    )
    task = Task(LocalSource(tmp_path).task("toy"))
    labels, _ = task._labels([("test", task.table("test"))], None, True, [])
    assert labels == ("de facto merger", "mere continuation")
