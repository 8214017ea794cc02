"""The conclusion of an explanation: which label a rule-application answer reaches.

An application prompt (``instruction=application``) asks for an explanation ("Explain your
reasoning step-by-step"), not a label; its rule-conclusion score (`experiments.metrics`)
scores the conclusion alone. `parse_conclusion` finds it, deterministically, from three kinds
of evidence, in this order of strength:

1. *Stated*: a leading answer (the reply opens with a label: ``"No. The statement ..."``,
   ``"Yes, there is ..."``, ``"Generic: ..."``) or an explicit one (``"Answer: X"``,
   ``"the answer is X"``, ``"the mark is (likely) X"``, a "Therefore / Thus / In conclusion
   ..." sentence). Every stated conclusion is gathered; they must agree.
2. *Claimed* (only when nothing is stated): the sentences of the reply that claim a label and
   are no statement of the rule (no ``if``/``when``/``unless`` condition, no sentence that
   opens with the question's subject: "Hearsay is an out-of-court statement ...").
   They must agree too.

A label inside a sentence counts only where it is affirmed: a negation before it in its
clause (``not``, ``no``, ``n't``, ``never``, ``neither``, ``nor``, ``rather than``,
``instead of``, ``lacks``) makes it a denial, so "It is not hearsay" is no "hearsay" claim.
For a Yes/No task the question's subject (`CLAIMS`: hearsay, diversity jurisdiction,
personal jurisdiction, a violation of the rule) stands for the answer: "there is no diversity
jurisdiction" concludes No, "the statement is hearsay" Yes; a bare yes or no counts only as a
leading or explicit answer (the word "no" inside a sentence is a negation, not an answer).

A reply with no conclusion, or with two that disagree (``"No. ... Therefore, there is
hearsay."``), is *unparsed*: `Conclusion.label` is None, and the trial counts it wrong and
invalid, as LegalBench's metric counts an answer that is no label. Multi-label tasks
(successor_liability) conclude a set: every label affirmed in the stated conclusions (or, if
none, in the claims), joined in the task's label order.

Deterministic and pure (text and labels in, a `Conclusion` out): the same reply always
parses the same way, so a re-scored trial gives the same number.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

PARSER_VERSION = 1
"""Part of an application trial's id (`experiments.trials.spec`): a change to the rules
above that can parse a reply differently must bump it, so no trial resumes a stored parse."""

NO_CONCLUSION = "(no conclusion: none found, or two that disagree)"
"""What the metric scores for an unparsed explanation: no label, so wrong and invalid."""

Rule = Literal["leading", "stated", "claimed", "none", "conflict"]

#: For a task whose labels are Yes and No: what its question asks whether there is (a
#: pattern), so a sentence affirming or denying it concludes Yes or No.
CLAIMS: dict[str, str] = {
    "hearsay": r"hearsay",
    "personal_jurisdiction": r"(?:personal )?jurisdiction",
    "telemarketing_sales_rule": r"(?:a )?violat\w*",
    **{
        f"diversity_{i}": r"(?:diversity(?: of citizenship)?|federal) jurisdiction"
        for i in range(1, 7)
    },
}

_NEGATION = re.compile(
    r"\b(?:not|no|never|neither|nor|cannot|lacks?|lacking|without|rather than|instead of|"
    r"other than|none)\b|n't\b",
    re.IGNORECASE,
)
# a class named after "than" is the one compared against ("more descriptive than suggestive");
# not for a Yes/No claim ("more than $75,000, so there is diversity jurisdiction")
_LABEL_NEGATION = re.compile(_NEGATION.pattern + r"|\bthan\b", re.IGNORECASE)
_CONDITION = re.compile(r"\b(?:if|when|whenever|unless|where)\b", re.IGNORECASE)
_CONCLUDING = re.compile(
    r"^\W*(?:therefore|thus|hence|so|accordingly|consequently|in conclusion|in sum|"
    r"in summary|overall|ultimately|as a result|for these reasons|for this reason|"
    r"conclusion|final answer|answer)\b",
    re.IGNORECASE,
)
_EXPLICIT = re.compile(
    r"\b(?:the )?(?:final )?answer(?: is|:)\s*|\bconclusion:\s*|\blabel:\s*",
    re.IGNORECASE,
)
# clause boundaries: a negation in one clause does not deny a label in the next
_CLAUSE = re.compile(r"[,;:()]|\b(?:but|because|since|although|though|while|whereas|and so)\b")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True)
class Conclusion:
    """The label an explanation concludes (None: unparsed), and how it was found."""

    label: str | None
    rule: Rule
    found: tuple[str, ...] = ()  # every distinct conclusion seen (two or more: conflict)

    @property
    def parsed(self) -> bool:
        return self.label is not None

    def scored(self, answer: str, multi_label: bool = False) -> str:
        """The text the task's metric scores for this conclusion against `answer`: its label,
        or `NO_CONCLUSION`. A multi-label conclusion is a set, so one naming exactly the
        answer's labels is scored as the answer's own string (LegalBench's exact match
        would count the same set in another order wrong)."""
        if self.label is None:
            return NO_CONCLUSION
        if multi_label:
            mine = {x.strip().lower() for x in self.label.split(",")}
            if mine == {x.strip().lower() for x in answer.split(",")}:
                return answer
        return self.label


def parse_conclusion(
    text: str,
    labels: Sequence[str],
    task: str | None = None,
    *,
    multi_label: bool = False,
    next_question: str | None = None,
) -> Conclusion:
    """The conclusion of `text` among `labels` (see the module doc for the rules).

    `next_question`: how the prompt's question line starts (``Q:``, `question_start`). A
    completion model often goes on past its answer to write the next question and answer it
    too ("No\n\nQ: ... A: Yes"); its answer ends where such a line starts, and what follows
    is no part of its conclusion."""
    labels = tuple(labels)
    if next_question:
        m = re.search(r"\n[ \t]*" + re.escape(next_question), text)
        if m is not None:
            text = text[: m.start()]
    yes_no = _yes_no(labels)
    claim = CLAIMS.get(task or "") if yes_no else None
    sentences = [s.strip() for s in _SENTENCE.split(text.strip()) if s.strip()]
    if not sentences:
        return Conclusion(None, "none")
    stated: list[str] = []
    rule: Rule = "stated"
    leading = _leading(sentences[0], labels)
    if leading is not None:
        stated.append(leading)
        rule = "leading"
    for sentence in sentences:
        explicit = _EXPLICIT.search(sentence)
        if explicit is not None:
            tail = sentence[explicit.end() :]
            lead = _leading(tail, labels)
            stated += [lead] if lead is not None else _affirmed(tail, labels, claim, yes_no)
        elif _CONCLUDING.search(sentence):
            body = _CONCLUDING.sub("", sentence, count=1)
            lead = _leading(body, labels) if yes_no else None
            stated += [lead] if lead is not None else _affirmed(body, labels, claim, yes_no)
    if stated:
        return _decide(stated, labels, rule if len(set(stated)) == 1 else "stated", multi_label)
    claimed: list[str] = []
    for sentence in sentences:
        if not _CONDITION.search(sentence) and not _defines(sentence, claim):
            claimed += _affirmed(sentence, labels, claim, yes_no)
    if claimed:
        return _decide(claimed, labels, "claimed", multi_label)
    return Conclusion(None, "none")


def question_start(query: str) -> str | None:
    """The text a query template's question line opens with before its first placeholder
    (``Q:`` of ``Q: {{text}} Is there hearsay?``), or None when it opens with one."""
    first = query.lstrip().split("\n", 1)[0]
    head = first.split("{{", 1)[0].strip()
    return head or None


def _defines(sentence: str, claim: str | None) -> bool:
    """Whether a sentence opens with the question's subject ("Hearsay is an out-of-court
    statement ..."): the rule restated, no claim about these facts."""
    return (
        claim is not None and re.match(r"\W*" + claim + r"\b", sentence, re.IGNORECASE) is not None
    )


def _decide(found: list[str], labels: tuple[str, ...], rule: Rule, multi: bool) -> Conclusion:
    distinct = tuple(dict.fromkeys(found))
    if multi:
        return Conclusion(",".join(x for x in labels if x in distinct), rule, distinct)
    if len(distinct) == 1:
        return Conclusion(distinct[0], rule, distinct)
    return Conclusion(None, "conflict", distinct)


def _yes_no(labels: tuple[str, ...]) -> bool:
    return {x.lower() for x in labels} == {"yes", "no"}


def _label_pattern(label: str) -> str:
    words = [re.escape(w) for w in label.split()]
    return r"\b" + r"\s+".join(words) + r"\b"


def _leading(text: str, labels: tuple[str, ...]) -> str | None:
    """The label `text` opens with, followed by punctuation, a line end or its end (so
    "No one saw it" is no answer, "No, ..." and "Generic." are)."""
    head = text.lstrip(" \t*#>\"'`-")
    for label in sorted(labels, key=len, reverse=True):
        m = re.match(_label_pattern(label) + r"(?=\s*(?:[.,;:!)\-—]|\n|$))", head, re.IGNORECASE)
        if m is not None:
            return label
    return None


def _affirmed(sentence: str, labels: tuple[str, ...], claim: str | None, yes_no: bool) -> list[str]:
    """The labels a sentence affirms (each clause on its own; a negated mention is none)."""
    out: list[str] = []
    for clause in _CLAUSE.split(sentence):
        if yes_no:
            if claim is None:
                continue
            for m in re.finditer(r"\b" + claim + r"\b", clause, re.IGNORECASE):
                negated = _NEGATION.search(clause[: m.start()]) is not None
                out.append(_yes_no_label(labels, not negated))
            continue
        for label in labels:
            for m in re.finditer(_label_pattern(label), clause, re.IGNORECASE):
                if _LABEL_NEGATION.search(clause[: m.start()]) is None:
                    out.append(label)
    return out


def _yes_no_label(labels: tuple[str, ...], yes: bool) -> str:
    want = "yes" if yes else "no"
    return next(x for x in labels if x.lower() == want)
