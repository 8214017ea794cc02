"""The format grammar (issue 21): distinct prompts, content kept, stable canonical ids."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from promptlib import Catalog, PromptVariant, Task, VariantError, compile_prompt, parse_spec
from promptlib.formats import (
    DIMENSIONS,
    GRAMMAR,
    canonical_format,
    draw_formats,
    grammar_size,
    layout,
    strip_formatting,
)
from promptlib.leakage import evaluation_rows
from promptlib.templates import Demo, fill

REPO = Path(__file__).resolve().parents[2]
#: overruling has neither rule (reference/description) nor register (plain/technical) files
PLAIN_TASK = "overruling"
RULE_AND_REGISTER_FILES = {
    "rule_reference_prompt.txt",
    "rule_description_prompt.txt",
    "zero_shot_simple.txt",
    "zero_shot_jargon.txt",
}
# (task, split): one without rule or register files, hearsay, two multi-field tasks (one
# with demonstrations, one with three fields); the local data holds few rows of some splits
TASKS = [
    (PLAIN_TASK, "test"),
    ("hearsay", "test"),
    ("citation_prediction_open", "train"),
    ("sara_numeric", "test"),
]


def _rows(task: Task, split: str, n: int = 3) -> list[dict[str, str]]:
    return evaluation_rows(PromptVariant(), task, split)[0][:n]


# ---- grammar and spec syntax (no data) ----------------------------------------------------
def test_spec_syntax_canonicalises_and_labels() -> None:
    a = parse_spec("format=case:upper,sep:colon_newline,demos=none")
    b = parse_spec("demos=none,format=sep:colon_newline,case:upper")
    assert a.format == b.format == "sep:colon_newline,case:upper"
    assert a.id == b.id
    assert a.label == "demos=none,format=sep:colon_newline,case:upper"
    assert parse_spec(a.label) == a  # the label reads back as the same variant
    # every dimension asis is the as-written prompt: the base variant, with its id
    assert parse_spec("format=sep:asis,case:asis") == PromptVariant()
    assert parse_spec("format=base").id == PromptVariant().id
    assert PromptVariant().with_format("answer:A,sep:dash").format == "sep:dash,answer:A"


def test_non_canonical_format_in_the_constructor_names_the_canonical_form() -> None:
    with pytest.raises(VariantError, match=r"write 'sep:dash,case:upper'"):
        PromptVariant(format="case:upper,sep:dash")
    with pytest.raises(VariantError, match=r"write 'base'"):
        PromptVariant(format="sep:asis")
    PromptVariant(format="sep:dash,case:upper")  # canonical: fine


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("format=sepp:dash", r"unknown format dimension 'sepp' — did you mean 'sep'"),
        ("format=sep:dahs", r"unknown format sep 'dahs' — did you mean 'dash'.*values: asis"),
        ("format=case:upper,case:lower", r"'case' given twice"),
        ("format=sep:dash,upper", r"'upper' is not key=value"),
        ("format=base,case:upper", r"'case:upper' is not key=value"),
        ("format=basee", r"unknown format level 'basee' — did you mean 'base'"),
        ("demos=none,format=claude,sep:dash", r"'sep:dash' is not key=value"),
    ],
)
def test_format_spec_errors(spec: str, message: str) -> None:
    with pytest.raises(VariantError, match=message):
        parse_spec(spec)


def test_existing_spec_errors_unchanged() -> None:
    with pytest.raises(VariantError, match=r"variant spec item 'demos' is not key=value"):
        parse_spec("format=base,demos")
    with pytest.raises(VariantError, match=r"variant key 'format' given twice"):
        parse_spec("format=sep:dash,format=case:upper")


def test_draw_formats_distinct_canonical_and_seeded() -> None:
    drawn = draw_formats(50, 7)
    assert len(set(drawn)) == 50 and "base" not in drawn
    assert all(canonical_format(p) == p for p in drawn)
    assert draw_formats(50, 7) == drawn and draw_formats(50, 8) != drawn
    assert draw_formats(10, 7) == drawn[:10]  # a longer draw extends a shorter one
    # pinned: the draw must not change across versions (random.Random's raw bits only)
    assert draw_formats(2, 0) == PINNED_DRAW
    assert grammar_size() == 7 * 4 * 6 * 5 * 3 * 4
    assert len(draw_formats(grammar_size() - 1, 0)) == grammar_size() - 1  # all but base
    with pytest.raises(VariantError, match="1 <= k <= "):
        draw_formats(grammar_size(), 0)


PINNED_DRAW = (
    "sep:equals,case:title,join:space,demo_join:blank_line,answer:Answer,instruction:header",
    "sep:dash,demo_join:newline,answer:A,instruction:header",
)


def test_field_detection_on_templates() -> None:
    lay = layout(
        "Q: {{text}} Is there hearsay?\nA:", " ", "\n\n", "sep:dash,case:upper,answer:Answer"
    )
    assert lay.template == "Q - {{text}} Is there hearsay?\nANSWER -"
    assert lay.answer_join == " "
    lay = layout(
        "{{contract}}\n\nQuestion: {{q}}\nChoices:\n0: {{c0}}\nSupportive?",
        " ",
        "\n\n",
        "sep:colon_newline,case:upper,join:space",
    )
    # unnamed lines, 'Choices:' heading a list, enumerators and a last line without a name
    assert lay.template == "{{contract}} QUESTION:\n{{q}} Choices: 0: {{c0}} Supportive?"
    # a newline after the answer field's name ends the query itself (the review's fix)
    lay = layout("Clause: {{text}}\nLabel:", " ", "\n\n", "sep:colon_newline")
    assert lay.answer_join == "" and lay.template == "Clause:\n{{text}}\nLabel:\n"


# ---- on real prompts ------------------------------------------------------------------------
@pytest.mark.data
def test_plain_task_has_neither_rule_nor_register_files(catalog: Catalog) -> None:
    assert not RULE_AND_REGISTER_FILES & set(catalog.task(PLAIN_TASK).spec.prompt_files)


@pytest.mark.data
@pytest.mark.parametrize(("name", "split"), TASKS)
def test_points_render_distinct_prompts_and_keep_content(
    catalog: Catalog, name: str, split: str
) -> None:
    task = catalog.task(name)
    rows = _rows(task, split)
    base = compile_prompt(PromptVariant(), task, split)
    points = (
        *draw_formats(20, 0),
        "sep:colon_newline,case:upper",
        "answer:Answer,instruction:tags",
    )
    seen: dict[str, str] = {base.render(rows[0]): "base"}
    for point in points:
        compiled = compile_prompt(parse_spec(f"format={point}"), task, split)
        for row in rows:
            segs = compiled.segments(row)
            assert "".join(t for _, t in segs) == compiled.render(row)
            # the acceptance: strip the formatting and the text is identical
            assert strip_formatting(segs) == strip_formatting(base.segments(row))
            assert [t for k, t in segs if k == "content"] == [
                t for k, t in base.segments(row) if k == "content"
            ]
        text = compiled.render(rows[0])
        assert text not in seen, f"{point} renders as {seen.get(text)}"
        seen[text] = point


def _assert_in_order(text: str, parts: list[str]) -> None:
    pos = 0
    for part in parts:
        found = text.find(part, pos)
        assert found >= 0, f"{part[:60]!r} missing (or out of order) after position {pos}"
        pos = found + len(part)


@pytest.mark.data
@pytest.mark.parametrize(("name", "split"), TASKS)
def test_rendered_text_holds_every_value_answer_and_instruction_in_order(
    catalog: Catalog, name: str, split: str
) -> None:
    """Independent of `segments`: search the rendered text for each content piece in turn."""
    task = catalog.task(name)
    row = _rows(task, split)[0]
    parsed = task.prompt("base_prompt.txt")
    cols = parsed.columns

    def values(d: Demo | dict[str, str]) -> list[str]:
        v = d.values if isinstance(d, Demo) else d
        return [str(v[c]) for c in cols]

    expected = [parsed.instruction] if parsed.instruction else []
    for demo in parsed.demos:
        expected += [*values(demo), demo.answer]
    expected += values(row)
    for point in draw_formats(30, 3):
        _assert_in_order(
            compile_prompt(parse_spec(f"format={point}"), task, split).render(row), expected
        )


@pytest.mark.data
def test_point_changes_what_it_names_on_hearsay(catalog: Catalog) -> None:
    task = catalog.task("hearsay")
    row = task.rows("test")[0]
    v = parse_spec(
        "format=sep:colon_newline,case:upper,demo_join:rule,answer:Answer,instruction:tags"
    )
    out = compile_prompt(v, task).render(row)
    assert out.startswith("<instructions>\nHearsay is an out-of-court statement")
    assert "</instructions>\n\nQ:\nOn the issue of whether David is fast" in out
    assert "Is there hearsay?\nANSWER:\nNo\n---\nQ:\n" in out
    assert out.endswith(f"Q:\n{row['text']} Is there hearsay?\nANSWER:\n")  # ends with the sep


@pytest.mark.data
def test_claude_has_no_segments_and_grammar_is_base_style(catalog: Catalog) -> None:
    task = catalog.task("hearsay")
    with pytest.raises(VariantError, match="base-style"):
        compile_prompt(parse_spec("format=claude"), task).segments(task.rows("test")[0])


_ID_SCRIPT = """
import json, sys
from promptlib import parse_spec
from promptlib.formats import draw_formats
print(json.dumps([parse_spec("format=" + p + ",demos=none").id for p in draw_formats(25, 11)]))
"""


def test_ids_stable_across_processes() -> None:
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", _ID_SCRIPT], capture_output=True, text=True, env=env, check=True
    )
    here = [parse_spec("format=" + p + ",demos=none").id for p in draw_formats(25, 11)]
    assert json.loads(out.stdout) == here


# ---- the fast render path -------------------------------------------------------------------
@pytest.mark.data
@pytest.mark.parametrize(
    "name",
    ["hearsay", PLAIN_TASK, "abercrombie", "consumer_contracts_qa", "corporate_lobbying", "proa"],
)
def test_base_render_equals_the_old_path(catalog: Catalog, name: str) -> None:
    """Prefix plus fill() of the template, as render did before it was precomputed."""
    task = catalog.task(name)
    split = "test" if task.has_split("test") else "train"
    for spec in ("base", "demos=none", "format=claude", "answer_hint=on"):
        if spec == "format=claude" and not task.spec.labels:
            continue
        compiled = compile_prompt(parse_spec(spec), task, split)
        for row in _rows(task, split, 5):
            old = compiled.prefix() + fill(compiled._query(), row, where=compiled.source)
            assert compiled.render(row) == old
        parsed = task.prompt("base_prompt.txt")
        if spec == "base" and parsed.demos:  # the file itself, for the base prompt
            row = _rows(task, split, 1)[0]
            raw = task.files.read_prompt("base_prompt.txt").rstrip()
            assert compiled.render(row) == fill(raw, row)


@pytest.mark.data
def test_fast_render_keeps_the_leak_and_missing_column_errors(catalog: Catalog) -> None:
    from promptlib import LeakageError, TemplateError, heldout_guard

    task = catalog.task("hearsay")
    compiled = compile_prompt(parse_spec("format=sep:dash"), task)
    demo = dict(task.prompt("base_prompt.txt").demos[0].values)
    with pytest.raises(LeakageError, match="one of the prompt's demonstrations"):
        compiled.render({"index": "x", **demo, "text": "  " + demo["text"].replace(" ", "  ")})
    with pytest.raises(TemplateError, match=r"\{\{text\}\}"):
        compiled.render({"index": "1"})
    row = task.rows("test")[0]
    with heldout_guard("hearsay", [row]), pytest.raises(LeakageError, match="held-out"):
        compiled.render(row)
    with heldout_guard("hearsay", [demo]), pytest.raises(LeakageError, match="held-out"):
        compiled.render(row)  # a guarded demonstration is caught too
    assert compiled.render(row)


def test_dimensions_listed_in_order() -> None:
    assert DIMENSIONS == ("sep", "case", "join", "demo_join", "answer", "instruction")
    assert all(next(iter(v)) == "asis" for v in GRAMMAR.values())


def test_a_separator_ending_in_a_newline_ends_the_prompt_with_it(catalog: Catalog) -> None:
    """sep:colon_newline: demos show 'Label:\\nYes'; the prompt must end 'Label:\\n', or a model
    that follows them starts with the newline generation stops at (an empty reply)."""
    from promptlib import compile_prompt, parse_spec

    task = catalog.task("overruling")
    cp = compile_prompt(parse_spec("format=sep:colon_newline"), task)
    text = cp.render(task.rows("test")[0])
    assert text.endswith("\nLabel:\n") and cp.answer_join == ""
    assert "\nLabel:\nYes\n" in text or "\nLabel:\nNo\n" in text
    assert cp.answer_join + "Yes" == "Yes"  # the loglik continuation follows the newline


def test_the_answer_name_renames_only_an_answer_field_without_a_value() -> None:
    from promptlib.formats import layout

    assert layout("Clause: {{text}}", " ", "\n\n", "answer:Answer,case:upper").template == (
        "CLAUSE: {{text}}"
    )
    assert layout("Clause: {{text}}\nLabel:", " ", "\n\n", "answer:Answer").template == (
        "Clause: {{text}}\nAnswer:"
    )
