"""Rendering across axes on real tasks: custom text, Claude format, register x demos, chat."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from promptlib import Catalog, TemplateError, compile_prompt, parse_spec

pytestmark = pytest.mark.data
REPO = Path(__file__).resolve().parents[2]


def test_user_instruction_from_ablations_yaml(catalog: Catalog) -> None:
    f = REPO / "ablations" / "instructions" / "hearsay_three_questions.yaml"
    task = catalog.task("hearsay")
    compiled = compile_prompt(parse_spec(f"instruction_file={f},demos=none"), task)
    out = compiled.render(task.rows("test")[0])
    assert out.startswith("Evidence is hearsay if (1) it is a statement")
    assert out.endswith("Is there hearsay?\nA:")  # base query template kept
    assert "Q: On the issue of whether David is fast" not in out  # demos=none


def test_claude_format_reproduces_hearsay_claude_prompt(catalog: Catalog) -> None:
    task = catalog.task("hearsay")
    raw = task.files.read_prompt("claude_prompt.txt")
    row = task.rows("test")[0]
    out = compile_prompt(parse_spec("format=claude"), task).render(row)
    assert out.rstrip() == raw.replace("{{text}}", row["text"]).rstrip()
    assert out.count("<example>") == 5


def test_plain_register_with_base_demos_rerenders_demos(catalog: Catalog) -> None:
    task = catalog.task("cuad_audit_rights")
    compiled = compile_prompt(parse_spec("register=plain"), task)
    out = compiled.render(task.rows("test")[0])
    question = "Does the clause discuss one party's right to audit the other?"
    # every base demo, and the query, now ask the plain-language question
    assert out.count(question) == len(task.prompt("base_prompt.txt").demos) + 1
    assert re.search(r"Answer: (Yes|No)\n\nClause:", out)


def test_custom_register_template_and_its_columns(catalog: Catalog, tmp_path: Path) -> None:
    task = catalog.task("hearsay")
    good = tmp_path / "plain.yaml"
    good.write_text('text: "Story: {{text}}\\nIs this hearsay, yes or no?\\nAnswer:"\n')
    out = compile_prompt(parse_spec(f"register_file={good},demos=none"), task).render(
        task.rows("test")[0]
    )
    assert out.endswith("Is this hearsay, yes or no?\nAnswer:") and "Story: On the issue" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text('text: "Facts: {{facts}}\\nAnswer:"\n')
    with pytest.raises(TemplateError, match=r"\{\{facts\}\}"):
        compile_prompt(parse_spec(f"register_file={bad}"), task)


def test_messages_and_shared_prefix(catalog: Catalog) -> None:
    task = catalog.task("hearsay")
    compiled = compile_prompt(parse_spec("base"), task)
    rows = task.rows("test")[:3]
    msgs = compiled.messages(rows[0])
    assert msgs == [{"role": "user", "content": compiled.render(rows[0])}]
    assert all(compiled.render(r).startswith(compiled.prefix()) for r in rows)
