"""`promptlib.usertasks`: a user's rows become a task the catalog reads like LegalBench's, and
every bad input is refused with the file, the column and what to do, nothing written."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import random
import re
from pathlib import Path

import pytest

from promptlib.data import TaskFiles, read_tsv
from promptlib.errors import DataError, UnknownTaskError
from promptlib.leakage import evaluation_rows
from promptlib.render import compile_prompt
from promptlib.taskmeta import DEFAULT_TASKS_DIR, META_FILE, read_meta
from promptlib.tasks import Catalog
from promptlib.usertasks.build import TaskDraft, TaskRequest, draft_task
from promptlib.usertasks.check import check_draft
from promptlib.usertasks.infer import parse_labels
from promptlib.usertasks.read import read_rows
from promptlib.usertasks.source import CombinedSource, UserTaskSource
from promptlib.usertasks.write import write_task
from promptlib.variants import PromptVariant, parse_spec
from tests.usertask_data import clauses, write_csv, write_jsonl, write_parquet

LEGALBENCH = ("hearsay", "abercrombie")
QUESTION = "Does the clause restrict disclosure to third parties?"


def _request(source: Path | str, **kw: object) -> TaskRequest:
    args: dict[str, object] = {
        "name": "my_clauses",
        "source": str(source),
        "inputs": ("clause_text",),
        "answer": "restricts",
        "instruction": QUESTION,
        "slice_column": "kind",
    }
    args.update(kw)
    return TaskRequest(**args)  # type: ignore[arg-type]


def _make(tmp_path: Path, request: TaskRequest, force: bool = False) -> Path:
    draft = draft_task(request, LEGALBENCH)
    return write_task(tmp_path / "tasks", request.name, draft.files, force, check_draft(draft))


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    return write_csv(tmp_path / "clauses.csv", clauses(60))


# ---- a CSV becomes a task ------------------------------------------------------------------
def test_a_csv_becomes_a_task_the_catalog_reads(tmp_path: Path, csv_file: Path) -> None:
    draft = draft_task(_request(csv_file), LEGALBENCH)
    assert draft.inferred.task_type == "binary" and draft.inferred.labels == ("Yes", "No")
    line = draft.inferred.line(draft.n_rows)
    assert line.startswith("binary: labels Yes, No (") and "from 60 rows" in line
    folder = write_task(tmp_path / "tasks", "my_clauses", draft.files, False, check_draft(draft))
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["train.tsv", "test.tsv", "base_prompt.txt", "README.md", META_FILE]
    )
    assert "**Task type**: Binary classification" in (folder / "README.md").read_text()
    catalog = Catalog(UserTaskSource(tmp_path / "tasks"))
    assert catalog.names() == ("my_clauses",)
    task = catalog.task("my_clauses")
    spec = task.spec
    assert (spec.task_type, spec.labels, spec.metric) == (
        "binary",
        ("Yes", "No"),
        "balanced_accuracy",
    )
    assert (spec.n_train, spec.n_test, spec.user_task, spec.slice_column) == (4, 56, True, "kind")
    assert spec.to_json()["user_task"] is True
    # the base prompt: the instruction, 4 demonstrations (2 per label), the query template
    compiled = compile_prompt(PromptVariant(), task, "test")
    assert compiled.instruction == QUESTION
    assert sorted(d.answer for d in compiled.demos) == ["No", "No", "Yes", "Yes"]
    assert compiled.query == "Clause text: {{clause_text}}\nA:"
    rows, excluded = evaluation_rows(compiled.variant, task, "test")
    assert len(rows) == 56 and excluded == []
    # every row of the file is in one split, its text and answer unchanged
    source = {r["clause_text"]: r for r in clauses(60)}
    split_rows = task.rows("train") + task.rows("test")
    assert sorted(r["clause_text"] for r in split_rows) == sorted(source)
    assert all(r["answer"] == source[r["clause_text"]]["restricts"] for r in split_rows)
    assert all(r["kind"] == source[r["clause_text"]]["kind"] for r in split_rows)
    assert compiled.render(rows[0]).endswith(f"Clause text: {rows[0]['clause_text']}\nA:")


def test_every_axis_compiles_on_a_user_task(tmp_path: Path, csv_file: Path) -> None:
    _make(tmp_path, _request(csv_file))
    task = Catalog(UserTaskSource(tmp_path / "tasks")).task("my_clauses")
    instruction = tmp_path / "other.yaml"
    instruction.write_text("text: Is sharing with outsiders limited by this clause?\n")
    register = tmp_path / "register.yaml"
    register.write_text("text: |\n  Contract clause: {{clause_text}}\n  Restricts disclosure?\n")
    for variant in (
        "format=sep:colon_newline,case:upper",
        "format=claude",
        "verbalizer=true_false",
        "verbalizer=letters",
        "demos=none",
        "demos=2,seed=1",
        "order=3",
        f"instruction_file={instruction}",
        f"register_file={register}",
        "answer_hint=on",
    ):
        compiled = compile_prompt(parse_spec(variant), task, "test")
        rows, _ = evaluation_rows(compiled.variant, task, "test")
        assert compiled.render(rows[0]), variant
    letters = compile_prompt(parse_spec("verbalizer=letters"), task, "test")
    assert letters.answer_labels == ("A", "B")
    assert [d.answer for d in letters.demos if d.answer not in ("A", "B")] == []


@pytest.mark.parametrize("writer", [write_jsonl, write_parquet], ids=["jsonl", "parquet"])
def test_jsonl_and_parquet_give_the_csvs_task(tmp_path: Path, csv_file: Path, writer) -> None:  # type: ignore[no-untyped-def]
    other = writer(tmp_path / f"clauses.{writer.__name__.split('_')[1]}", clauses(60))
    a = draft_task(_request(csv_file), LEGALBENCH)
    b = draft_task(_request(other), LEGALBENCH)
    for name in ("train.tsv", "test.tsv", "base_prompt.txt"):
        assert a.text(name) == b.text(name), name


def test_values_are_text_as_written(tmp_path: Path) -> None:
    """CSV cells are never numbers or NA: '007' stays '007', 'NA' is a label like another."""
    rows = [{"code": f"{i:03d}", "label": "NA" if i % 2 else "OK", "k": "x"} for i in range(12)]
    path = write_csv(tmp_path / "codes.csv", rows)
    raw = read_rows(str(path))
    assert raw.rows[7] == {"code": "007", "label": "NA", "k": "x"}
    draft = draft_task(
        _request(path, inputs=("code",), answer="label", slice_column=None, demos=2), LEGALBENCH
    )
    assert draft.inferred.labels == ("NA", "OK")
    # JSON values that are not strings are their JSON text; a null is missing
    jpath = write_jsonl(tmp_path / "j.jsonl", [{"a": 1, "b": True}, {"a": 2, "b": None}])
    assert list(read_rows(str(jpath)).rows) == [{"a": "1", "b": "true"}, {"a": "2", "b": None}]


def test_whole_numbers_stored_as_floats_are_whole_numbers(tmp_path: Path) -> None:
    """A Parquet label column of 1.0 and 0.0 (pandas stores 0/1 so once a value was missing)
    made the labels '1.0' and '0.0', which the comparison reads as '10' and '00': a reply
    '1' was scored wrong on every row."""
    rows = [{"t": f"clause number {i}", "a": float(i % 2)} for i in range(20)]
    draft = draft_task(
        _request(write_parquet(tmp_path / "f.parquet", rows), inputs=("t",), answer="a",
                 slice_column=None, demos=0), LEGALBENCH,
    )  # fmt: skip
    assert draft.inferred.labels == ("0", "1")
    mixed = write_jsonl(tmp_path / "m.jsonl", [{"a": 2}, {"a": 0.5}, {"a": 3.0}])
    assert [r["a"] for r in read_rows(str(mixed)).rows] == ["2", "0.5", "3"]


def test_tsvs_keep_tabs_quotes_and_newlines(tmp_path: Path) -> None:
    rows = clauses(20)
    rows[3]["clause_text"] = 'He said "stop"\tthen\nleft; the Recipient shall not tell anyone.'
    path = write_csv(tmp_path / "odd.csv", rows)
    folder = _make(tmp_path, _request(path, demos=0))
    texts = {
        r["clause_text"] for s in ("train", "test") for r in read_tsv(folder / f"{s}.tsv").rows
    }
    assert rows[3]["clause_text"] in texts


def test_tsvs_keep_a_carriage_return(tmp_path: Path) -> None:
    """A lone '\r' in a cell (JSON "\r", an old Mac export) was written unquoted and read
    back as a line end: the task was refused as 'does not read back as written'."""
    rows = clauses(20)
    rows[5]["clause_text"] = "The Recipient shall not\rdisclose the pricing schedule."
    rows[6]["kind"] = "nda\r"  # the last column: read back as 'nda', silently
    path = write_jsonl(tmp_path / "cr.jsonl", rows)
    folder = _make(tmp_path, _request(path, demos=0))
    back = [r for s in ("train", "test") for r in read_tsv(folder / f"{s}.tsv").rows]
    assert {r["clause_text"] for r in back} == {r["clause_text"] for r in rows}
    assert {r["kind"] for r in back} == {r["kind"] for r in rows}


# ---- inference ---------------------------------------------------------------------------------
def test_multi_class_extraction_and_generation_are_inferred(tmp_path: Path) -> None:
    multi = [
        {"t": f"clause number {i}", "a": ["nda", "lease", "loan"][i % 3], "k": "x"}
        for i in range(30)
    ]
    draft = draft_task(
        _request(write_csv(tmp_path / "m.csv", multi), inputs=("t",), answer="a",
                 slice_column=None, demos=3), LEGALBENCH,
    )  # fmt: skip
    assert (draft.inferred.task_type, draft.inferred.labels) == (
        "multi-class",
        ("lease", "loan", "nda"),
    )
    assert "-way classification" in draft.text("README.md") and "3-way" in draft.text("README.md")
    spans = [
        {"t": f"The party named Acme{i} Ltd shall pay on time.", "a": f"Acme{i} Ltd"}
        for i in range(30)
    ]
    ext = draft_task(
        _request(write_csv(tmp_path / "e.csv", spans), inputs=("t",), answer="a",
                 slice_column=None, demos=2), LEGALBENCH,
    )  # fmt: skip
    assert (ext.inferred.task_type, ext.inferred.labels, ext.meta.metric) == (
        "extraction", None, "exact_match",
    )  # fmt: skip
    free = [{"t": f"clause {i}", "a": f"a summary number {i * 7}"} for i in range(30)]
    gen = draft_task(
        _request(write_csv(tmp_path / "g.csv", free), inputs=("t",), answer="a",
                 slice_column=None, demos=0), LEGALBENCH,
    )  # fmt: skip
    assert (gen.inferred.task_type, gen.inferred.labels) == ("generation", None)


def test_a_task_without_labels_warns_on_every_compile(tmp_path: Path) -> None:
    spans = [
        {"t": f"The party named Acme{i} Ltd shall pay on time.", "a": f"Acme{i} Ltd"}
        for i in range(20)
    ]
    path = write_csv(tmp_path / "e.csv", spans)
    _make(tmp_path, _request(path, inputs=("t",), answer="a", slice_column=None, demos=2))
    task = Catalog(UserTaskSource(tmp_path / "tasks")).task("my_clauses")
    assert task.spec.labels is None and task.spec.task_type == "extraction"
    compiled = compile_prompt(PromptVariant(), task, "test")
    assert any("cannot be detected" in n for n in compiled.notes)


def test_stated_labels_are_kept_and_checked(tmp_path: Path, csv_file: Path) -> None:
    draft = draft_task(_request(csv_file, labels=parse_labels("No, Yes, Unclear")), LEGALBENCH)
    assert (draft.inferred.task_type, draft.inferred.labels) == (
        "multi-class",
        ("No", "Yes", "Unclear"),
    )
    with pytest.raises(DataError, match=r"not in --labels \(Yes, Maybe\).*'No'"):
        draft_task(_request(csv_file, labels=parse_labels("Yes,Maybe")), LEGALBENCH)
    with pytest.raises(DataError, match="one label once case and punctuation"):
        parse_labels("Yes,yes.")
    with pytest.raises(DataError, match="needs a label set"):
        draft_task(_request(csv_file, metric="f1", task_type="generation"), LEGALBENCH)


def _scored(answers: list[str], tmp_path: Path, **kw: object) -> TaskRequest:
    rows = [{"t": f"clause number {i}", "a": answers[i % len(answers)]} for i in range(30)]
    path = write_csv(tmp_path / "scored.csv", rows)
    return _request(
        path, **{"inputs": ("t",), "answer": "a", "slice_column": None, "demos": 0, **kw}
    )


@pytest.mark.parametrize(
    ("answers", "pair", "given"),
    [(["-1", "0", "1"], "'-1' and '1'", "1,0"), (["A+", "A", "B"], "'A+' and 'A'", "A,B"),
     (["1.5", "15", "2"], "'1.5' and '15'", "15,2")],
)  # fmt: skip
def test_labels_the_comparison_cannot_tell_apart_are_refused(
    tmp_path: Path, answers: list[str], pair: str, given: str
) -> None:
    """'-1', '0' and '1' became a binary task ('-1', '0'): every '1' row was scored as '-1',
    and a reply '1' counted right on a '-1' row (punctuation is dropped before comparing)."""
    with pytest.raises(DataError, match=re.escape(f"answers {pair} are one label once punct")):
        draft_task(_scored(answers, tmp_path), LEGALBENCH)
    with pytest.raises(DataError, match="one label once punctuation"):
        draft_task(_scored(answers, tmp_path, labels=parse_labels(given)), LEGALBENCH)
    # free text is not a label set: exact match compares them as LegalBench does, no refusal
    ext = draft_task(_scored(answers, tmp_path, task_type="generation"), LEGALBENCH)
    assert ext.inferred.labels is None


def test_a_label_with_a_doubled_or_non_breaking_space_is_the_same_label(tmp_path: Path) -> None:
    """'Not applicable' with a non-breaking space (copied from a web page) or a doubled one
    was another label: a binary task became 4-way, with three labels that look alike, and a
    reply 'Not applicable' was wrong on those rows."""
    answers = ["Applicable", "Not applicable", "Not\xa0applicable", "Not  applicable"]
    draft = draft_task(_scored(answers * 2, tmp_path), LEGALBENCH)
    assert (draft.inferred.task_type, draft.inferred.labels) == (
        "binary",
        ("Applicable", "Not applicable"),
    )
    rows = _tsv_rows(draft.text("test.tsv"))
    assert {r["answer"] for r in rows} == {"Applicable", "Not applicable"}


def _tsv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text), delimiter="\t"))


def test_a_label_written_two_ways_is_one_label_spelled_one_way(tmp_path: Path) -> None:
    """'yes.' and 'YES' are the label 'Yes': the TSVs and the demonstrations spell it so (a
    class-balanced draw grouped them as three classes)."""
    draft = draft_task(
        _scored(["Yes", "No", "Yes", "No", "yes.", " NO"], tmp_path, demos=4), LEGALBENCH
    )
    assert draft.inferred.labels == ("Yes", "No")
    answers = {r.split("\t")[-1] for r in draft.text("test.tsv").splitlines()[1:]}
    assert answers == {"Yes", "No"}
    shown = [line for line in draft.text("base_prompt.txt").splitlines() if line.startswith("A: ")]
    assert sorted(shown) == ["A: No", "A: No", "A: Yes", "A: Yes"]


def _split_content(draft: TaskDraft) -> tuple[set[str], set[str], str]:
    """(test texts, train texts, the demonstrations' block of base_prompt.txt)."""
    texts = {
        s: {r["clause_text"] for r in csv.DictReader(io.StringIO(draft.text(f"{s}.tsv")),
                                                      delimiter="\t")}
        for s in ("test", "train")
    }  # fmt: skip
    return texts["test"], texts["train"], draft.text("base_prompt.txt")


@pytest.mark.parametrize("how", ["fraction", "demos only", "train file"])
def test_the_split_and_demonstrations_do_not_depend_on_row_order(tmp_path: Path, how: str) -> None:
    """The same rows sorted another way (by the spreadsheet, say) gave another test set and
    other demonstrations for the same seed: a task's score depended on the file's order."""
    rows = clauses(60)
    shuffled = rows[:]
    random.Random(5).shuffle(shuffled)
    drafts = []
    for n, order in enumerate((rows, shuffled)):
        if how == "train file":  # the test file as it is, the train file in either order
            main = write_csv(tmp_path / f"test{n}.csv", rows[:40])
            train = write_csv(tmp_path / f"train{n}.csv", [r for r in order if r in rows[40:]])
            request = _request(main, train_source=str(train))
        else:
            fraction = 0.3 if how == "fraction" else None
            request = _request(write_csv(tmp_path / f"rows{n}.csv", order), train_fraction=fraction)
        drafts.append(draft_task(request, LEGALBENCH))
    assert _split_content(drafts[0]) == _split_content(drafts[1])


# ---- refusals ----------------------------------------------------------------------------------
def _refused(tmp_path: Path, request: TaskRequest, match: str) -> str:
    with pytest.raises(DataError, match=match) as e:
        _make(tmp_path, request)
    assert not (tmp_path / "tasks").exists() or not any((tmp_path / "tasks").iterdir())
    return str(e.value)


def test_refuses_an_empty_answer_column(tmp_path: Path) -> None:
    rows = [{**r, "restricts": ""} for r in clauses(20)]
    path = write_csv(tmp_path / "empty.csv", rows)
    msg = _refused(
        tmp_path, _request(path), r"column 'restricts' is empty \(no row has an answer\)"
    )
    assert str(path) in msg and "--answer" in msg


def test_refuses_a_constant_answer_column(tmp_path: Path) -> None:
    rows = [{**r, "restricts": "Yes"} for r in clauses(20)]
    path = write_csv(tmp_path / "const.csv", rows)
    msg = _refused(tmp_path, _request(path), r"every answer in column 'restricts' is 'Yes'")
    assert str(path) in msg


def test_refuses_missing_answers_naming_the_rows(tmp_path: Path) -> None:
    rows = clauses(20)
    rows[4]["restricts"] = ""
    rows[9]["restricts"] = " ? "
    path = write_csv(tmp_path / "holes.csv", rows)
    msg = _refused(
        tmp_path, _request(path), r"2 row\(s\) of 20 have no answer in column 'restricts'"
    )
    assert "rows 5 and 10" in msg and "fill in each answer or remove those rows" in msg
    jpath = write_jsonl(tmp_path / "holes.jsonl", [{**r, "restricts": None} if i == 2 else r
                                                    for i, r in enumerate(clauses(20))])  # fmt: skip
    _refused(tmp_path, _request(jpath), r"1 row\(s\) of 20 have no answer.*rows 3 ")


def test_refuses_rows_in_both_train_and_test(tmp_path: Path) -> None:
    rows = clauses(40)
    test = write_csv(tmp_path / "test.csv", rows[:30])
    train_rows = [*rows[30:], {**rows[7], "clause_text": "  " + rows[7]["clause_text"] + " "}]
    train = write_csv(tmp_path / "train.csv", train_rows)
    msg = _refused(
        tmp_path, _request(test, train_source=str(train)), r"1 row\(s\) are in both train"
    )
    assert "test row 8 = train row 11" in msg and str(train) in msg and str(test) in msg
    # one file the command splits: a repeated input could land on both sides
    dup = write_csv(tmp_path / "dup.csv", [*rows[:20], rows[3]])
    _refused(tmp_path, _request(dup), r"repeat another row's input \(rows 4 and 21")
    _refused(tmp_path, _request(dup, train_fraction=0.3), r"repeat another row's input")


def test_rows_differing_only_in_case_are_one_input(tmp_path: Path) -> None:
    """A demonstration 'THE RECIPIENT SHALL NOT...' answers the test row 'The Recipient shall
    not...': case-only repeats passed both checks, a leak the model is then asked about."""
    rows = clauses(40)
    loud = {**rows[7], "clause_text": rows[7]["clause_text"].upper()}
    test = write_csv(tmp_path / "test.csv", rows[:30])
    train = write_csv(tmp_path / "train.csv", [*rows[30:], loud])
    msg = _refused(
        tmp_path, _request(test, train_source=str(train)), r"1 row\(s\) are in both train"
    )
    assert "test row 8 = train row 11" in msg and "case and spaces ignored" in msg
    dup = write_csv(tmp_path / "dup.csv", [*rows[:20], {**rows[3], "clause_text": rows[3][
        "clause_text"].lower()}])  # fmt: skip
    _refused(tmp_path, _request(dup), r"repeat another row's input \(rows 4 and 21")


def test_refuses_a_legalbench_name(tmp_path: Path, csv_file: Path) -> None:
    _refused(tmp_path, _request(csv_file, name="hearsay"), "is a LegalBench task already")
    _refused(tmp_path, _request(csv_file, name="../evil"), "use letters, digits")
    _refused(tmp_path, _request(csv_file, name=".hidden"), "use letters, digits")


def test_refuses_too_few_rows_for_the_demonstrations(tmp_path: Path) -> None:
    rows = clauses(40)
    test = write_csv(tmp_path / "test.csv", rows[:25])
    train = write_csv(tmp_path / "train.csv", rows[25:28])
    msg = _refused(
        tmp_path, _request(test, train_source=str(train), demos=5),
        r"--demos 5 asks for 5 demonstrations but only 3 train row\(s\)",
    )  # fmt: skip
    assert "lower --demos" in msg
    spare = rows[28:]
    lopsided = [r for r in spare if r["restricts"] == "Yes"][:3] + [
        r for r in spare if r["restricts"] == "No"
    ][:1]
    train2 = write_csv(tmp_path / "train2.csv", lopsided)
    _refused(
        tmp_path, _request(test, train_source=str(train2), demos=4),
        r"too few rows for the demonstrations asked: --demos 4 .*\(No: 1, Yes: 3\)",
    )  # fmt: skip
    two_each = [r for r in rows if r["restricts"] == "Yes"][:2] + [
        r for r in rows if r["restricts"] == "No"
    ][:2]
    small = write_csv(tmp_path / "small.csv", two_each)
    _refused(tmp_path, _request(small, demos=4), "no rows are left for test")


def test_refuses_unknown_columns_with_did_you_mean(tmp_path: Path, csv_file: Path) -> None:
    msg = _refused(
        tmp_path, _request(csv_file, answer="restrict"),
        r"has no column 'restrict' — did you mean 'restricts'\?",
    )  # fmt: skip
    assert "columns: clause_text, restricts, kind" in msg
    _refused(tmp_path, _request(csv_file, inputs=("clause",)), "did you mean 'clause_text'")
    _refused(tmp_path, _request(csv_file, slice_column="kinds"), "did you mean 'kind'")
    _refused(tmp_path, _request(csv_file, inputs=("restricts",)), "given two roles")


@pytest.mark.parametrize("column", ["{{x}}", "a}b", " padded ", "two\nlines"])
def test_refuses_an_input_column_no_template_can_name(tmp_path: Path, column: str) -> None:
    """A column named '{{x}}' became the query's '{{{{x}}}}': refused only after writing, as
    'does not read back as written ... please report this'."""
    rows = [{column: r["clause_text"], "restricts": r["restricts"]} for r in clauses(20)]
    path = write_jsonl(tmp_path / "odd.jsonl", rows)
    _refused(
        tmp_path, _request(path, inputs=(column,), slice_column=None),
        f"input column {re.escape(repr(column))} cannot be a {{{{column}}}} of the prompt",
    )  # fmt: skip


def test_refuses_an_input_that_is_the_answer(tmp_path: Path) -> None:
    rows = [{**r, "copy": r["restricts"]} for r in clauses(20)]
    path = write_csv(tmp_path / "copy.csv", rows)
    _refused(
        tmp_path, _request(path, inputs=("clause_text", "copy")),
        "input column 'copy' equals the answer column",
    )  # fmt: skip


def test_refuses_unreadable_and_unknown_files(tmp_path: Path) -> None:
    _refused(tmp_path, _request(tmp_path / "nope.csv"), "does not exist")
    (tmp_path / "x.xlsx").write_text("x")
    _refused(tmp_path, _request(tmp_path / "x.xlsx"), "cannot tell the format")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\n{not json\n')
    _refused(tmp_path, _request(bad, inputs=("a",), answer="a"), "cannot be read as JSON")


@pytest.mark.slow
def test_a_hub_dataset_offline_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def offline(name: str, split: str) -> object:
        raise ConnectionError(f"Couldn't reach '{name}' on the Hub (LocalEntryNotFoundError)")

    with pytest.raises(DataError, match="cannot load the Hugging Face dataset 'someone/clauses'"
                       r".*check the network.*--from data.csv"):  # fmt: skip
        read_rows("hf:someone/clauses", hub=offline)
    # the real `datasets` path, offline (no network here: HF_HUB_OFFLINE fails at once)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(DataError, match="cannot load the Hugging Face dataset"):
        read_rows("hf:someone/clauses-that-do-not-exist")
    # a hub dataset that loads becomes a task like a file
    import datasets

    rows = clauses(30)
    hub = lambda name, split: datasets.Dataset.from_list(rows)  # noqa: E731
    draft = draft_task(_request("hf:someone/clauses"), LEGALBENCH, hub=hub)
    assert draft.inferred.labels == ("Yes", "No") and draft.meta.source == "hf:someone/clauses"


# ---- writing -----------------------------------------------------------------------------------
def test_an_existing_task_is_replaced_only_with_force(tmp_path: Path, csv_file: Path) -> None:
    folder = _make(tmp_path, _request(csv_file))
    before = (folder / "test.tsv").read_text()
    with pytest.raises(DataError, match=r"exists already .*--force"):
        _make(tmp_path, _request(csv_file, seed=5))
    assert (folder / "test.tsv").read_text() == before
    _make(tmp_path, _request(csv_file, seed=5), force=True)
    assert (folder / "test.tsv").read_text() != before
    assert [p.name for p in (tmp_path / "tasks").iterdir()] == ["my_clauses"]  # no leftovers


def test_a_failed_check_writes_nothing(tmp_path: Path, csv_file: Path) -> None:
    draft = draft_task(_request(csv_file), LEGALBENCH)

    def broken(folder: Path) -> None:
        assert (folder / "test.tsv").is_file()  # everything was written there first
        raise DataError("read back wrong")

    with pytest.raises(DataError, match="read back wrong"):
        write_task(tmp_path / "tasks", "my_clauses", draft.files, False, broken)
    assert list((tmp_path / "tasks").iterdir()) == []


def test_the_source_ignores_half_written_folders_and_refuses_clashes(
    tmp_path: Path, csv_file: Path
) -> None:
    _make(tmp_path, _request(csv_file))
    tasks = tmp_path / "tasks"
    (tasks / ".new-other-x1y2").mkdir()
    (tasks / ".new-other-x1y2" / "test.tsv").write_text("index\tanswer\n")
    user = UserTaskSource(tasks)
    assert user.names() == ("my_clauses",)
    assert UserTaskSource(tmp_path / "absent").names() == ()

    class Base(UserTaskSource):  # stands for LegalBench's source
        pass

    base = Base(tmp_path / "lb")
    base._names = ("hearsay", "my_clauses")
    with pytest.raises(DataError, match="named like LegalBench's task 'my_clauses'"):
        CombinedSource(base, user)
    base._names = ("hearsay",)
    both = CombinedSource(base, user)
    assert both.names() == ("hearsay", "my_clauses")
    assert both.task("my_clauses").meta is not None
    with pytest.raises(UnknownTaskError, match="did you mean 'my_clauses'"):
        both.task("my_clause")
    with pytest.raises(UnknownTaskError, match=r"is a data file, not a task: .*task new"):
        both.task("my.csv")


def test_a_hand_made_folder_or_edited_rows_are_named(tmp_path: Path, csv_file: Path) -> None:
    folder = _make(tmp_path, _request(csv_file))
    meta = read_meta(folder / META_FILE)
    assert meta.labels == ("Yes", "No")
    test = folder / "test.tsv"
    test.write_text(test.read_text().replace("\tNo\t", "\tMaybe\t", 1))
    catalog = Catalog(UserTaskSource(tmp_path / "tasks"))
    with pytest.raises(DataError, match=r"'Maybe'.* not in the label set"):
        _ = catalog.task("my_clauses").spec
    (tmp_path / "tasks" / "by_hand").mkdir()
    (tmp_path / "tasks" / "by_hand" / "test.tsv").write_text("index\tanswer\n0\tYes\n")
    problems = Catalog(UserTaskSource(tmp_path / "tasks")).survey()
    assert "has no task.json" in str(problems[0])
    doc = json.loads((folder / META_FILE).read_text())
    (folder / META_FILE).write_text(json.dumps({**doc, "metric": "accuracy"}))
    with pytest.raises(DataError, match="metric 'accuracy' is none of"):
        read_meta(folder / META_FILE)


def test_task_files_of_legalbench_carry_no_meta() -> None:
    files = TaskFiles("x", Path("/nowhere"), None)
    assert files.meta is None
    assert dataclasses.replace(files, meta=None) == files


def test_the_default_folder_is_documented() -> None:
    assert DEFAULT_TASKS_DIR == "~/.local/share/workbench/tasks"


def test_force_without_an_atomic_swap_still_replaces_whole(
    tmp_path: Path, csv_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where renameat2 cannot swap (another OS or file system), the old task is moved aside,
    the new one renamed in, and the old one removed: no mixed folder, no leftovers."""
    import promptlib.usertasks.write as write

    folder = _make(tmp_path, _request(csv_file))
    monkeypatch.setattr(write, "_exchange", lambda a, b: False)
    _make(tmp_path, _request(csv_file, seed=9, demos=2), force=True)
    assert read_meta(folder / META_FILE).labels == ("Yes", "No")
    assert len(read_tsv(folder / "train.tsv").rows) == 2  # the new task, whole
    assert [p.name for p in (tmp_path / "tasks").iterdir()] == ["my_clauses"]
