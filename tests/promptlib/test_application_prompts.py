"""instruction=application: the paper's rule-application prompts rendered as variants."""

from __future__ import annotations

import re

import pytest

from promptlib import Catalog
from promptlib.errors import VariantError
from promptlib.leakage import evaluation_rows
from promptlib.render import compile_prompt
from promptlib.templates import fill
from promptlib.variants import APPLICATION_FILES, APPLICATION_TASKS, parse_spec

pytestmark = pytest.mark.data


@pytest.mark.parametrize("task", APPLICATION_TASKS)
@pytest.mark.parametrize("fmt", ["base", "claude"])
def test_every_application_task_renders_its_file_as_written(
    catalog: Catalog, task: str, fmt: str
) -> None:
    t = catalog.task(task)
    compiled = compile_prompt(parse_spec(f"instruction=application,format={fmt}"), t)
    raw = t.files.read_prompt(APPLICATION_FILES[fmt]).rstrip()
    assert compiled.template() == raw  # no reply list, no example tags, no demos added
    row = t.rows("test")[0]
    assert compiled.render(row) == fill(raw, row)
    assert re.search(r"[Ee]xplain|explanation", compiled.render(row))  # it asks for reasons


def test_format_claude_picks_the_claude_application_file(catalog: Catalog) -> None:
    t = catalog.task("abercrombie")
    base = compile_prompt(parse_spec("instruction=application"), t)
    claude = compile_prompt(parse_spec("instruction=application,format=claude"), t)
    assert base.query.endswith("What is the type of mark? Explain your reasoning step-by-step.\nA:")
    assert claude.query.endswith("Explain what the type of this mark would be.\nA:")
    assert "Reply with either" not in claude.template()
    assert claude.source == "abercrombie/claude_application_prompt.txt"


def test_existing_levels_are_untouched(catalog: Catalog) -> None:
    t = catalog.task("hearsay")
    base = compile_prompt(parse_spec("base"), t)
    assert "Explain" not in base.template() and base.demos  # the base prompt's parsed demos


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("instruction=application,register=plain", "register=plain"),
        ("instruction=application,register=technical", "register=technical"),
        ("instruction=application,demos=none", "demos=none"),
        ("instruction=application,demos=4,seed=0", "demos=4"),
        ("instruction=application,demos=icl:2", "demos=icl:2"),
        ("instruction=application,format=sep:dash", "format=sep:dash"),
        ("instruction=application,verbalizer=letters", "verbalizer=letters"),
        ("instruction=application,answer_hint=on", "answer_hint=on"),
        ("instruction=application,order=3", "order=3"),
    ],
)
def test_application_refuses_axes_its_file_cannot_take(spec: str, says: str) -> None:
    with pytest.raises(VariantError, match="instruction=application") as e:
        parse_spec(spec)
    assert says in str(e.value)


def test_a_task_without_application_files_names_the_tasks_that_have_them(
    catalog: Catalog,
) -> None:
    with pytest.raises(VariantError) as e:
        compile_prompt(parse_spec("instruction=application"), catalog.task("cuad_audit_rights"))
    msg = str(e.value)
    assert "'cuad_audit_rights'" in msg and "application_prompt.txt" in msg
    assert all(t in msg for t in APPLICATION_TASKS)


def test_the_file_demonstrations_are_held_out_by_content(catalog: Catalog) -> None:
    """The demonstrations are text inside the file: a row they show is never evaluated."""
    t = catalog.task("hearsay")
    v = parse_spec("instruction=application")
    rows, excluded = evaluation_rows(v, t, "train")
    shown = compile_prompt(v, t).instruction
    assert excluded and all(r["text"].strip() not in shown for r in rows)
    test_rows, test_excluded = evaluation_rows(v, t, "test")
    assert len(test_rows) == len(t.rows("test")) and test_excluded == []


def test_application_variant_label_and_id_are_new() -> None:
    v = parse_spec("instruction=application,format=claude")
    assert v.label == "instruction=application,format=claude"
    assert v.id != parse_spec("format=claude").id
