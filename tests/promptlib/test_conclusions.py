"""The conclusion parser of application answers: realistic and adversarial explanations."""

from __future__ import annotations

import pytest

from promptlib.conclusions import NO_CONCLUSION, parse_conclusion, question_start

YES_NO = ("Yes", "No")
MARKS = ("generic", "descriptive", "suggestive", "arbitrary", "fanciful")
EXCEPTIONS = ("de facto merger", "express agreement", "fraudulent conveyance", "mere continuation")


@pytest.mark.parametrize(
    ("text", "task", "label"),
    [
        (
            "No. The statement is offered to show that Bob had notice, not its truth.",
            "hearsay",
            "No",
        ),
        (
            "Yes, the statement was made out of court and is offered for its truth.",
            "hearsay",
            "Yes",
        ),
        # "hearsay" is named but denied: No, never Yes
        (
            "It is not hearsay because it is offered to show the listener's state of mind.",
            "hearsay",
            "No",
        ),
        ("The statement isn't hearsay: it is a verbal act.", "hearsay", "No"),
        (
            "Hearsay is an out-of-court statement introduced to prove the truth of the matter "
            "asserted. Here Rebecca's words are offered to prove she was ill. Therefore, it is "
            "hearsay.",
            "hearsay",
            "Yes",
        ),
        # a leading No, and a later incidental "Yes," that concludes nothing
        (
            "No. The statement is not hearsay. Yes, it was made out of court, but it is not "
            "offered for its truth.",
            "hearsay",
            "No",
        ),
        ("Answer: No\nThe parties are both from Ohio.", "diversity_1", "No"),
        (
            "Step 1: Alice is from Texas and Bob is from Ohio, so the parties are diverse. "
            "Step 2: The amount is $80,000, which is more than $75,000. Therefore, there is "
            "diversity jurisdiction.",
            "diversity_1",
            "Yes",
        ),
        (
            "The plaintiff and a defendant are both from Ohio. Since there is no complete "
            "diversity, there is no diversity jurisdiction.",
            "diversity_3",
            "No",
        ),
        (
            "Acme did not disclose the total cost. This is a violation of the Telemarketing "
            "Sales Rule.",
            "telemarketing_sales_rule",
            "Yes",
        ),
        ("No one saw Bob say it. It is hearsay.", "hearsay", "Yes"),  # "No one" is no answer
    ],
)
def test_yes_no_conclusions(text: str, task: str, label: str) -> None:
    assert parse_conclusion(text, YES_NO, task).label == label


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("Descriptive. The mark describes a quality of the bread.", "descriptive"),
        ("The answer is: suggestive.", "suggestive"),
        # the rule restated (a condition) names every class; the claim decides
        (
            'A mark is generic if it is the common name for the product. The mark "Tasty" '
            "describes a quality of bread, so it is descriptive, not suggestive.",
            "descriptive",
        ),
        ("The mark is more descriptive than suggestive.", "descriptive"),
        ("Apple is a real word unrelated to computers, so the mark is arbitrary.", "arbitrary"),
    ],
)
def test_abercrombie_conclusions(text: str, label: str) -> None:
    assert parse_conclusion(text, MARKS, "abercrombie").label == label


@pytest.mark.parametrize(
    ("text", "labels", "task"),
    [
        ("No. Alice spoke out of court. Therefore, there is hearsay.", YES_NO, "hearsay"),
        ("Yes. Therefore, it is not hearsay.", YES_NO, "hearsay"),
        ("The mark could be descriptive or suggestive.", MARKS, "abercrombie"),
        ("I am not sure what the answer should be here.", YES_NO, "hearsay"),
        ("", YES_NO, "hearsay"),
        # the rule alone, restated: no claim about these facts
        (
            "Hearsay is an out-of-court statement introduced to prove the truth of the matter "
            "asserted.",
            YES_NO,
            "hearsay",
        ),
        ("A mark is generic if it is the common name for the product.", MARKS, "abercrombie"),
    ],
)
def test_no_or_conflicting_conclusions_are_unparsed(
    text: str, labels: tuple[str, ...], task: str
) -> None:
    c = parse_conclusion(text, labels, task)
    assert c.label is None and not c.parsed
    assert c.scored(labels[0]) == NO_CONCLUSION  # scored as no label: wrong, invalid


def test_a_conflict_lists_both_conclusions() -> None:
    c = parse_conclusion("No. Thus, it is hearsay.", YES_NO, "hearsay")
    assert (c.rule, set(c.found)) == ("conflict", {"Yes", "No"})


def test_a_yes_no_task_without_a_known_subject_needs_a_stated_answer() -> None:
    assert parse_conclusion("Yes. It applies.", YES_NO, "some_user_task").label == "Yes"
    # no subject to read the claim by: the word "no" inside a sentence is no answer
    assert parse_conclusion("There is no doubt it applies.", YES_NO, "some_user_task").label is None


def test_multi_label_conclusions_are_sets() -> None:
    text = (
        "Big Pharma bought all the assets and kept the officers. Therefore, the de facto "
        "merger and mere continuation exceptions apply."
    )
    c = parse_conclusion(text, EXCEPTIONS, "successor_liability", multi_label=True)
    assert c.label == "de facto merger,mere continuation"  # in the task's label order
    # the same set in the answer's order is the answer; another set is not
    assert (
        c.scored("mere continuation,de facto merger", True) == "mere continuation,de facto merger"
    )
    assert c.scored("mere continuation", True) == "de facto merger,mere continuation"


def test_parsing_is_deterministic() -> None:
    text = "Yes. The statement is offered for its truth, so it is hearsay."
    assert {parse_conclusion(text, YES_NO, "hearsay") for _ in range(5)} == {
        parse_conclusion(text, YES_NO, "hearsay")
    }


def test_an_answer_ends_where_the_model_writes_the_next_question() -> None:
    """A completion model that goes on to invent the next question (and answer it) has
    answered before it: "Q: ... A: Yes. Therefore, it is hearsay." below is not its answer."""
    text = (
        " No. The statement is not offered for its truth.\n\nQ: On the issue of whether Ann "
        "lied, the fact that Ann said so. Is there hearsay?\nA: Yes. Therefore, it is hearsay."
    )
    assert parse_conclusion(text, YES_NO, "hearsay").label is None  # read whole: a conflict
    assert parse_conclusion(text, YES_NO, "hearsay", next_question="Q:").label == "No"
    assert question_start("Q: {{text}} Is there hearsay? Explain.\nA:") == "Q:"
    assert question_start("Contract: {{contract}} Provide an explanation.") == "Contract:"
    assert question_start("{{text}}\nLabel:") is None
