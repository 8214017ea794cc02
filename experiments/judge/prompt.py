"""The judge prompt and the grade in its reply.

The prompt gives the criterion's rubric (the task's rule and what the criterion asks), the
task's own input for the row (never the variant's prompt: the judge is blind to the variant),
the reference answer and the answer being graded, and asks for one digit. It ends with
``Grade:``, so the log-likelihood scoring compares the continuations `CONTINUATIONS`.

A reply is a grade only when it starts with it (`parse_grade`): anything else is *unparsed*,
kept and counted, never guessed from a digit somewhere in the text.
"""

from __future__ import annotations

import re

from experiments.judge.rubrics import Rubric

TEMPLATE_VERSION = "judge-prompt-v1"
"""Part of the judge id: a change of `TEMPLATE` below must change it."""

TEMPLATE = """\
You are a law-trained grader. Grade one answer to a legal question on one criterion only.

The rule that applies:
{rule}

The criterion, {criterion}:
{rubric}

The question:
{question}

The reference answer (the correct outcome):
{reference}

The answer to grade:
<answer>
{answer}
</answer>

Grade the answer on the criterion {criterion} only: 1 if it meets the criterion, 0 if it \
does not. Reply with the digit alone.
Grade:"""

CONTINUATIONS = (" 1", " 0")
"""What `--judge-scoring loglik` compares after the prompt: the grade 1, then the grade 0."""


def judge_prompt(rubric: Rubric, question: str, reference: str, answer: str) -> str:
    """The judge prompt for one (row, criterion)."""
    return TEMPLATE.format(
        rule=rubric.rule,
        criterion=rubric.criterion,
        rubric=rubric.text,
        question=question.strip(),
        reference=reference.strip(),
        answer=answer.strip(),
    )


# the grade opens the reply: "1", "0", "Grade: 1", "**0**", "(1)", "1 - the answer ...";
# not "10", "1.5", "1/2" nor a digit further on ("The answer is wrong: 0")
_GRADE = re.compile(r"^\W*(?:(?:grade|score)\s*[:=]?\s*)?\W*([01])(?![\d/]|[.,]\d)", re.IGNORECASE)


def parse_grade(reply: str | None) -> int | None:
    """The grade a reply opens with (1 or 0), or None (unparsed)."""
    if reply is None:
        return None
    m = _GRADE.match(reply.strip())
    return int(m.group(1)) if m else None


def loglik_grade(one: float, zero: float) -> int | None:
    """The grade of the log-likelihoods of " 1" and " 0": the likelier, None on a tie (or
    a non-number), which is unparsed, never a guess."""
    if not (one == one and zero == zero) or one == zero:  # NaN or a tie
        return None
    return 1 if one > zero else 0
