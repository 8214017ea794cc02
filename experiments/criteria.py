"""The paper's two hand-grading criteria and the grading guide's wording for each: one home,
read by hand grading (`experiments.grading`), the judge (`experiments.judge`) and the calibrated
comparison (`experiments.calibrated`).

Source: LegalBench (Guha et al., 2023), section "rule-application": an explanation is graded
for *correctness* (it contains no error of five kinds) and for *analysis* (it makes the
inferences the rule needs, rather than restating facts, rule and outcome). Both grades are
1/0.
"""

from __future__ import annotations

CORRECTNESS = "correctness"
ANALYSIS = "analysis"
CRITERIA: tuple[str, ...] = (CORRECTNESS, ANALYSIS)

GUIDE: dict[str, str] = {
    CORRECTNESS: (
        "1 if the answer contains no error, 0 if it contains any of these five: a misstatement "
        "of the legal rule; a misstatement of the facts; an incorrect legal outcome; a logic "
        "error; an arithmetic error. An answer that only restates the rule, the facts and a "
        "correct outcome is correct (it contains no error)."
    ),
    ANALYSIS: (
        "1 if the explanation makes the inferences from the facts that are relevant under the "
        "rule and shows how the conclusion is reached; 0 if it gives only a conclusion, or "
        "merely restates the facts and the rule (conclusory), even when it is correct."
    ),
}
"""What a grader reads for each criterion (the paper's wording, condensed)."""

SOURCE = (
    "LegalBench (Guha et al., 2023), section 'rule-application': explanations are graded "
    "for correctness and for analysis."
)
