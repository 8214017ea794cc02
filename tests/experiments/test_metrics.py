"""LegalBench's metrics on hand-made cases, including the official code's edge cases.

Expected values are worked out by hand from the definitions in LegalBench's evaluation.py.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from experiments import metrics as m
from experiments.metrics import ManualEvaluationRequired, score


def test_normalize_strips_punctuation_space_and_case() -> None:
    assert m.normalize("  Yes.\n") == "yes"
    assert m.normalize("De-facto, merger!") == "defacto merger"
    assert m.normalize(None) == "none"
    assert m.normalize("authorized", stem=True) == "author"


def test_balanced_accuracy_hand_case() -> None:
    # class yes: 2 rows, 1 right; class no: 2 rows, 2 right -> (0.5 + 1.0) / 2
    gens = ["Yes", "no.", " No", "NO"]
    answers = ["Yes", "Yes", "No", "No"]
    assert score("hearsay", gens, answers) == pytest.approx(0.75)
    # empty and off-label generations are simply wrong
    assert score("hearsay", ["", "maybe"], ["Yes", "No"]) == 0.0


@given(
    st.lists(
        st.tuples(st.sampled_from(["Yes", "No", "x", ""]), st.sampled_from(["Yes", "No", "a"])),
        min_size=1,
        max_size=40,
    )
)
def test_balanced_accuracy_equals_sklearn(pairs: list[tuple[str, str]]) -> None:
    from sklearn.metrics import balanced_accuracy_score

    gens, answers = zip(*pairs, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = balanced_accuracy_score(
            [m.normalize(a) for a in answers], [m.normalize(g) for g in gens]
        )
    assert m.balanced_accuracy(gens, answers) == pytest.approx(expected)


_CLASSES = ["generic", "descriptive", "suggestive", "arbitrary", "fanciful", "B", "a", "Zed"]


@settings(deadline=None)  # the first case imports sklearn: no timing in a test
@given(
    st.lists(
        st.tuples(st.sampled_from([*_CLASSES, "none", ""]), st.sampled_from(_CLASSES)),
        min_size=1,
        max_size=60,
    )
)
@example(  # answers' order fanciful, descriptive, arbitrary: 0.7777777777777777 before
    list(
        zip(
            ["arbitrary", "fanciful", "descriptive", "arbitrary", "arbitrary"],
            ["fanciful", "fanciful", "descriptive", "arbitrary", "fanciful"],
            strict=True,
        )
    )
)
def test_balanced_accuracy_is_sklearn_s_to_the_last_bit(pairs: list[tuple[str, str]]) -> None:
    """Up to 8 classes: the mean of the recalls is summed in sklearn's (sorted) class order,
    so the score is LegalBench's exactly; in the answers' order 1 case in 10 differed by an
    ulp (the example: 7/9 as 0.7777777777777777, sklearn's 0.7777777777777778)."""
    from sklearn.metrics import balanced_accuracy_score

    gens, answers = zip(*pairs, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = balanced_accuracy_score(
            [m.normalize(a) for a in answers], [m.normalize(g) for g in gens]
        )
    assert m.balanced_accuracy(gens, answers) == float(expected)


def test_sara_numeric_edge_cases() -> None:
    # "$1,234" -> 1234 (commas dropped); "12.5" -> 125 (full stops dropped, not decimals)
    assert score("sara_numeric", ["The tax is $1,234."], ["$1234"]) == 1.0
    assert score("sara_numeric", ["12.5"], ["$125"]) == 1.0
    # 1100 / (1000 + 0.1) - 1 = 0.0999 < 0.1: exactly 10% over still counts, via the +0.1
    assert score("sara_numeric", ["$1,100"], ["$1000"]) == 1.0
    assert score("sara_numeric", ["$1,101"], ["$1000"]) == 0.0
    assert score("sara_numeric", ["no idea"], ["$5"]) == 0.0  # no number reads as 0
    # answer $0: the +0.1 in the denominator makes even a 0 prediction wrong, as in the code
    assert score("sara_numeric", ["0"], ["$0"]) == 0.0
    assert score("sara_numeric", ["first 7 then 100"], ["$100"]) == 0.0  # first number only


def test_successor_liability_code_vs_paper() -> None:
    gens = ["de facto merger, mere continuation", "fraudulent conveyance"]
    answers = ["de facto merger,mere continuation", "express agreement"]
    # code: exact-match balanced accuracy on the whole string (", " vs ",": no match)
    assert score("successor_liability", gens, answers) == 0.0
    # paper: F1 over exceptions. tp=2 (row 1); row 2: fp=1, fn=1 -> 4 / (4+1+1)
    assert score("successor_liability", gens, answers, "paper") == pytest.approx(4 / 6)
    # an empty generation names nothing: all answers are misses
    assert score("successor_liability", [""], ["mere continuation"], "paper") == 0.0


def test_citation_open_is_containment() -> None:
    gens = ["See Brown v. Board of Education, 347 U.S. 483", "Roe"]
    answers = ["Brown v. Board of Education", "Roe v. Wade"]
    assert score("citation_prediction_open", gens, answers) == 0.5


def test_definition_extraction_stemmed_multi_answer() -> None:
    gens = ["authorizes", "banana, Contract", ""]
    answers = ["authorize,authorized", "contracts", "term"]
    assert score("definition_extraction", gens, answers) == pytest.approx(2 / 3)


def test_ssla_counts_false_positives_like_the_official_code() -> None:
    # answers a,b ; generations "a, c": a hit (c left: fp+1), b miss (c left: fp+1)
    # tp=1 fp=2 fn=1 -> 2/(2+2+1)
    assert score("ssla_plaintiff", ["Alpha Corp, Charlie"], ["Alpha Corp,Bravo"]) == pytest.approx(
        2 / 5
    )
    # all found, yet not 1.0: after the first name "Y LLC" is still unused and adds an fp
    # before it is matched. tp=2 fp=1 fn=0 -> 4/5
    assert score("ssla_company_defendants", ["X Inc., Y LLC"], ["X Inc,Y LLC"]) == 0.8
    # empty generation: normalised "" contains no name -> misses, and "" stays as an fp
    assert score("ssla_individual_defendants", [""], ["John Doe"]) == 0.0


def test_rule_qa_needs_manual_grading() -> None:
    with pytest.raises(ManualEvaluationRequired, match="graded by hand"):
        score("rule_qa", ["x"], ["y"])


def test_class_report_and_parse_label() -> None:
    rep = m.class_report(["Yes", "no", "Maybe"], ["Yes", "No", "No"], ["Yes", "No"])
    assert rep.accuracy == pytest.approx(2 / 3)
    assert rep.recall == {"Yes": 1.0, "No": 0.5}
    assert rep.invalid_rate == pytest.approx(1 / 3)
    assert m.parse_label(" no.", ["Yes", "No"]) == "No"
    assert m.parse_label("No, because", ["Yes", "No"]) is None


# ---- the metrics a user task may declare (`workbench task new`) -------------------------------
def test_macro_f1_hand_case() -> None:
    # Yes: tp 1, fn 1 (row 2 says No), fp 0 -> F1 2/3; No: tp 2, fp 1 (row 2), fn 1 (row 5's
    # "maybe", no class: a miss of No and a false positive of nothing) -> F1 4/6
    gens = ["Yes", "No", "No", "No", "maybe"]
    answers = ["Yes", "Yes", "No", "No", "No"]
    assert m.macro_f1(gens, answers) == pytest.approx((2 / 3 + 2 / 3) / 2)
    assert m.macro_f1(["", ""], ["a", "b"]) == 0.0  # an empty reply is never right


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["Yes", "No", "maybe", "", "yes."]),
            st.sampled_from(["Yes", "No", "N/A"]),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_macro_f1_equals_sklearn_over_the_answer_classes(pairs: list[tuple[str, str]]) -> None:
    from sklearn.metrics import f1_score

    gens, answers = [g for g, _ in pairs], [a for _, a in pairs]
    y_true = [m.normalize(a) for a in answers]
    # sklearn counts an empty prediction as the class "" (never a gold class here)
    y_pred = [m.normalize(g) or "<empty>" for g in gens]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = f1_score(
            y_true, y_pred, labels=sorted(set(y_true)), average="macro", zero_division=0
        )
    assert m.macro_f1(gens, answers) == pytest.approx(want)


def test_exact_match_and_declared_metrics_score_by_name() -> None:
    assert m.exact_match(["Acme Ltd.", "acme", ""], ["acme ltd", "Acme Inc", ""]) == pytest.approx(
        1 / 3
    )
    # a declared metric overrides the one LegalBench's name gives; "manual" still refuses
    assert score("my_task", ["a", "b"], ["a", "c"], metric="exact_match") == 0.5
    assert score("my_task", ["Yes"], ["Yes"], metric="macro_f1") == 1.0
    with pytest.raises(ManualEvaluationRequired):
        score("my_task", ["x"], ["y"], metric="manual")
    assert {"exact_match", "macro_f1"} <= set(m.METRICS)
