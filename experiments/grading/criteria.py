"""The paper's two hand-grading criteria and the grading guide's wording for each.

Source: LegalBench (Guha et al., 2023), section "rule-application": an explanation is graded
for *correctness* (it contains no error of five kinds) and for *analysis* (it makes the
inferences the rule needs, rather than restating facts, rule and outcome). Both grades are
1/0. A per-task note (the rule, as the task's README states it) is added by `task_note`.
"""

from __future__ import annotations

import re
from pathlib import Path

from experiments.criteria import ANALYSIS as ANALYSIS  # re-exported: home is criteria
from experiments.criteria import CORRECTNESS as CORRECTNESS
from experiments.criteria import CRITERIA as CRITERIA
from experiments.criteria import GUIDE as GUIDE
from experiments.criteria import SOURCE as SOURCE

_SECTION = re.compile(r"^##\s+Task description\s*$", re.MULTILINE | re.IGNORECASE)
_NEXT = re.compile(r"^##\s+", re.MULTILINE)
NOTE_CHARS = 6000  # a README's task description beyond this is cut (the guide stays readable)


def task_note(readme: str | None) -> str | None:
    """The rule as the task's README states it (its "Task description" section), or None.

    Why: the paper graded against a per-task answer guide; the README's description of the
    rule is the part of it that ships with the data. It is the same for every variant, so
    it reveals none.
    """
    if not readme:
        return None
    m = _SECTION.search(readme)
    if m is None:
        return None
    rest = readme[m.end() :]
    end = _NEXT.search(rest)
    text = (rest[: end.start()] if end else rest).strip()
    if not text:
        return None
    return text if len(text) <= NOTE_CHARS else text[:NOTE_CHARS].rstrip() + " [...]"


def readme_note(readme_path: Path) -> str | None:
    """`task_note` of a README file (None when it cannot be read)."""
    try:
        return task_note(readme_path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


__all__ = ["ANALYSIS", "CORRECTNESS", "CRITERIA", "GUIDE", "SOURCE", "readme_note", "task_note"]
