"""Parsing prompt files into instruction, demonstrations and query template."""

from __future__ import annotations

import pytest

from promptlib import TemplateError, parse_prompt
from promptlib.templates import fill, placeholders

HEARSAY_LIKE = """Hearsay is an out-of-court statement.

Q: On the issue of X, the fact that Y. Is there hearsay?
A: No

Q: Ann said "I was ill."
Twice. Is there hearsay?
A: Yes

Q: {{text}} Is there hearsay?
A:"""


def test_parses_instruction_demos_and_query() -> None:
    p = parse_prompt(HEARSAY_LIKE)
    assert p.instruction == "Hearsay is an out-of-court statement."
    assert p.query == "Q: {{text}} Is there hearsay?\nA:"
    assert [d.answer for d in p.demos] == ["No", "Yes"]
    assert p.demos[0].values == {"text": "On the issue of X, the fact that Y."}
    assert p.demos[1].values == {"text": 'Ann said "I was ill."\nTwice.'}  # multi-line field
    assert p.answer_prefix == "A:"


def test_multi_column_template_and_zero_shot_question_after_text() -> None:
    p = parse_prompt("Clause: {{text}}\n\nDoes it audit? Answer Yes or No\nAnswer:")
    assert p.instruction == "" and p.demos == ()
    assert placeholders(p.query) == ("text",)
    q = parse_prompt(
        "Decide.\n\nPolicy: P1\nClaim: C1\nLabel: A\n\nPolicy: {{policy}}\nClaim: {{claim}}\nLabel:"
    )
    assert q.demos[0].values == {"policy": "P1", "claim": "C1"}
    assert q.demos[0].answer == "A"


def test_instruction_joined_by_single_newline() -> None:
    p = parse_prompt("You are a lobbyist.\nDecide.\nTitle: {{title}}\nANSWER:")
    assert p.instruction == "You are a lobbyist.\nDecide."
    assert p.instruction_sep == "\n"
    assert p.demos == ()


def test_no_placeholder_is_an_error_naming_the_file() -> None:
    with pytest.raises(TemplateError, match=r"x/base_prompt\.txt: no"):
        parse_prompt("Just an instruction.\n", "x/base_prompt.txt")


def test_fill_names_the_missing_column() -> None:
    with pytest.raises(TemplateError, match=r"\{\{question\}\}.*no column 'question'"):
        fill("Q: {{question}}", {"text": "t"}, where="t/base_prompt.txt")
